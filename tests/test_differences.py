"""Every deviation from JAX listed in docs/differences.md, asserted against jax itself.

If JAX changes, or ftrans does, one of these fails and the document must be
updated with it.
"""

import warnings

import jax
import jax.lax as jlax
import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
import ftrans.lax as flax
import ftrans.numpy as fnp
from ftrans import errors
from tests.backend_util import host_oracle

JAX_012 = jax.__version_info__ >= (0, 12)  # the oracle: what jax 0.12 changed (docs/differences.md)

X = np.arange(5, dtype=np.float32)


# ---------------------------------------------------------------- arrays
def test_subnormals_are_kept():
    tiny = np.float32(1e-45)
    if jax.default_backend() == "cpu":
        assert float(jnp.asarray(tiny) * 1.0) == 0.0  # XLA on CPU flushes to zero
    assert float(fnp.asarray(tiny) * 1.0) == float(tiny)


def test_expensive_eager_composites_switch_to_xla_bits_after_their_rent(monkeypatch):
    """An eager library function with loops answers from the host first and from XLA once its host time has
    paid for a compile: the last bits change (to jit's); under config.deterministic they never do."""
    import threading

    import ftrans.scipy.special as fsp
    from ftrans.core import eager_programs as ep

    monkeypatch.setattr(ep, "RENT_SECONDS", 0.0)
    ep.clear()
    x = fnp.asarray(np.linspace(0.3, 4.0, 16).astype(np.float32))
    host = np.asarray(fsp.expi(x))
    for _ in range(ep._PROBE_RUNS):  # the compile starts at the last probe run (none of its runs is timed yet)
        fsp.expi(x)
    for t in threading.enumerate():
        if t.name == "ftrans-compile-eager-program":
            t.join(120)
    after = np.asarray(fsp.expi(x))
    np.testing.assert_array_equal(after, np.asarray(ftrans.jit(fsp.expi)(x)))
    np.testing.assert_allclose(after, host, rtol=2e-6)
    np.testing.assert_allclose(after, np.asarray(jax.scipy.special.expi(np.asarray(x))), rtol=2e-6)
    ep.clear()


def test_extended_dtype_arrays_exist_only_under_jit():
    import dataclasses

    from jax._src import core as jcore
    from jax._src import dtypes as jdtypes
    from jax._src import earray
    from jax._src.interpreters import pxla

    class foo(jdtypes.extended):
        pass

    class JaxRules:  # as JAX's own test of extended dtypes at rest
        allow_conversion = True

        @staticmethod
        def physical_element_aval(d):
            return jcore.ShapedArray((), np.dtype("float32"))

        @staticmethod
        def global_sharded_result_handler(aval, out_sharding, committed):
            handler = pxla.global_result_handlers[jcore.ShapedArray](jcore.physical_aval(aval), out_sharding, committed)
            return handler.wrap(lambda arr: earray.EArray(aval, arr))

    @dataclasses.dataclass(frozen=True)
    class JFoo(jdtypes.ExtendedDType):
        name: str = "foo"
        type: type = foo
        _rules: type = JaxRules

    class ffoo(ftrans.dtypes.extended):
        pass

    class FRules:
        allow_conversion = True

        @staticmethod
        def physical_element_aval(d):
            return ftrans.core.ShapedArray((), np.dtype("float32"))

    @dataclasses.dataclass(frozen=True)
    class FFoo(ftrans.dtypes.ExtendedDType):
        name: str = "foo"
        type: type = ffoo
        _rules: type = FRules

    assert isinstance(jlax.convert_element_type(jnp.arange(3.0), JFoo()).dtype, JFoo)  # JAX: eagerly too
    with pytest.raises(NotImplementedError, match="only inside jit"):
        flax.convert_element_type(fnp.arange(3.0), FFoo())
    assert isinstance(ftrans.jit(lambda x: flax.convert_element_type(x, FFoo()))(X).dtype, FFoo)


def test_buffer_protocol_needs_python_312():
    import sys

    y = ftrans.device_put(np.arange(6, dtype=np.float32))
    if jax.default_backend() != "cpu":  # only a CPU buffer has jax's buffer protocol; ftrans's reads the host
        with pytest.raises((BufferError, TypeError)):  # value (copied from the device where need be)
            memoryview(jax.device_put(np.arange(6, dtype=np.float32)))
        z = ftrans.device_put(np.arange(6, dtype=np.float32), ftrans.devices()[0]) * 1
        for a in (y, z) if sys.version_info >= (3, 12) else ():
            assert memoryview(a).tobytes() == np.arange(6, dtype=np.float32).tobytes()
        return
    assert memoryview(jax.device_put(np.arange(6, dtype=np.float32))).tobytes() == np.arange(6, dtype=np.float32).tobytes()
    if sys.version_info < (3, 12):
        with pytest.raises(TypeError):
            memoryview(y)
    else:
        assert memoryview(y).tobytes() == np.arange(6, dtype=np.float32).tobytes()


@pytest.mark.skipif(not hasattr(np.dtypes, "StringDType"), reason="needs NumPy 2's StringDType")
def test_string_arrays_empty_and_arithmetic():
    empty = np.array([], dtype=np.dtypes.StringDType())
    with pytest.raises(RuntimeError, match="empty numpy array"):  # JAX's runtime: no empty string transfer
        jax.device_put(empty, jax.devices("cpu")[0])
    got = ftrans.device_put(empty, ftrans.devices("cpu")[0])
    assert got.shape == (0,) and got.dtype == empty.dtype
    words = np.array(["ab", "cd"], dtype=np.dtypes.StringDType())
    jmesh = jax.sharding.Mesh(np.array(jax.devices("cpu")[:2]), ("x",))
    with pytest.raises(RuntimeError, match="Number of buffers: 1 does not match"):  # replicated: JAX's fails
        jax.device_put(words, jax.sharding.NamedSharding(jmesh, jax.sharding.PartitionSpec())).block_until_ready()
    fmesh = ftrans.sharding.Mesh(np.array(ftrans.devices("cpu")[:2]), ("x",))
    rep = ftrans.device_put(words, ftrans.sharding.NamedSharding(fmesh, ftrans.sharding.PartitionSpec()))
    assert len(rep.addressable_shards) == 2 and (np.asarray(rep) == words).all()
    import pickle

    pickled = pickle.dumps(jax.device_put(words, jax.devices("cpu")[0]))
    with pytest.raises(TypeError, match="String arrays can only be sharded to CPU devices"):
        pickle.loads(pickled)  # JAX's unpickling places the value with no target, which it refuses
    back = pickle.loads(pickle.dumps(ftrans.device_put(words, ftrans.devices("cpu")[1])))
    assert back.devices() == {ftrans.devices("cpu")[1]} and (np.asarray(back) == words).all()
    with pytest.raises(ValueError, match="not a valid dtype for JAX type promotion"):
        jax.device_put(words, jax.devices("cpu")[0]) + 1
    with pytest.raises(TypeError, match="is not a valid JAX type"):
        ftrans.device_put(words, ftrans.devices("cpu")[0]) + 1


def test_host_array_has_no_traceback():
    assert jnp.asarray(X).traceback is not None  # jax records where each array was made
    assert fnp.asarray(X).traceback is None  # held on the host: no device buffer
    assert ftrans.device_put(X).traceback is None or "device_put" in str(ftrans.device_put(X).traceback)


def test_bool_times_nan_is_nan():
    b = np.array([True, False])
    assert np.asarray(jnp.asarray(b) * np.float32(np.nan)).tolist()[1] == 0.0
    got = np.asarray(fnp.asarray(b) * np.float32(np.nan))
    assert np.isnan(got).all()


@pytest.mark.parametrize("name, z, ftrans_value, jax_value", [
    ("exp", complex(-np.inf, np.inf), 0j, complex(np.nan, np.nan)),
    ("sqrt", complex(np.nan, np.inf), complex(np.inf, np.inf), complex(np.nan, np.nan)),
    ("abs", complex(np.inf, np.nan), np.inf, np.nan),
    ("reciprocal", complex(np.inf, np.inf), complex(np.nan, np.nan), 0j),
    ("exp2", complex(np.inf, 0), complex(np.inf, 0), complex(np.nan, np.nan)),
])
def test_complex_infinities_follow_c99(name, z, ftrans_value, jax_value):
    v = np.array([z], np.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = np.asarray(getattr(fnp, name)(fnp.asarray(v)))[0]
    want = np.asarray(getattr(jnp, name)(jnp.asarray(v)))[0]
    np.testing.assert_equal(got, np.asarray(ftrans_value, got.dtype))
    if JAX_012 and name == "abs":  # jax 0.12's abs follows C99 too
        jax_value = ftrans_value
    np.testing.assert_equal(want, np.asarray(jax_value, want.dtype))


@pytest.mark.parametrize("fn", ["dot", "matmul"])
def test_precision_accepted_and_ignored_eagerly(fn):
    a = np.linspace(0, 1, 4, dtype=np.float32).reshape(2, 2)
    plain = np.asarray(getattr(fnp, fn)(a, a))
    for p in ("highest", "default", jax.lax.Precision.HIGHEST):
        got = np.asarray(getattr(fnp, fn)(a, a, precision=p))
        assert got.tobytes() == plain.tobytes()
    assert np.asarray(fnp.einsum("ij,jk", a, a, precision="highest")).tobytes() == plain.tobytes()


def test_accuracy_accepted_and_ignored():
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    for name in ("exp", "tanh", "logistic", "sin"):
        plain = np.asarray(getattr(flax, name)(x))
        for acc in (flax.AccuracyMode.HIGHEST, jlax.AccuracyMode.DEFAULT, flax.Tolerance(atol=1e-3)):
            assert np.asarray(getattr(flax, name)(x, accuracy=acc)).tobytes() == plain.tobytes()
        text = ftrans.jit(lambda a, n=name: getattr(flax, n)(a, accuracy=flax.AccuracyMode.HIGHEST)).lower(x).as_text()
        assert "result_accuracy" not in text
        jtext = jax.jit(lambda a, n=name: getattr(jlax, n)(a, accuracy=jlax.AccuracyMode.HIGHEST)).lower(x).as_text()
        assert ("result_accuracy" in jtext) == (name != "logistic")  # JAX spells logistic out with exp
    with pytest.raises(NotImplementedError):
        jlax.exp(x, accuracy="highest")
    with pytest.raises(NotImplementedError, match="accuracy"):
        flax.exp(x, accuracy="highest")


# ---------------------------------------------------------------- indexing and shapes
@pytest.mark.parametrize("i", [10, -10])
def test_static_out_of_range_index_raises(i):
    assert float(jnp.asarray(X)[i]) == (4.0 if i > 0 else 0.0)  # jax clamps
    with pytest.raises(IndexError, match="out of bounds"):
        fnp.asarray(X)[i]
    # The explicit way to get JAX's behaviour, and traced indices, clamp.
    assert float(fnp.asarray(X).at[i].get(mode="clip")) == (4.0 if i > 0 else 0.0)
    closed = ftrans.make_jaxpr(lambda x, j: x[j])(X, np.int32(0))
    (out,) = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, X, np.int32(i))
    assert float(out) == float(jnp.asarray(X)[jnp.int32(i)])


def test_broadcast_mismatch_is_type_and_value_error():
    assert issubclass(errors.FtransShapeError, TypeError)
    assert issubclass(errors.FtransShapeError, ValueError)
    with pytest.raises(TypeError):
        jnp.ones(3) + jnp.ones(4)
    for f in (lambda: fnp.ones(3) + fnp.ones(4), lambda: fnp.add(fnp.ones(3), fnp.ones(4))):
        with pytest.raises(errors.FtransShapeError, match="incompatible shapes"):
            f()


# ---------------------------------------------------------------- unsupported arguments
def test_unique_axis_supported():
    m = np.array([[1, 2], [1, 2], [0, 1]])
    np.testing.assert_array_equal(np.asarray(fnp.unique(fnp.asarray(m), axis=0)),
                                  np.asarray(jnp.unique(jnp.asarray(m), axis=0)))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
def test_pad_modes_supported(mode):
    np.testing.assert_array_equal(np.asarray(fnp.pad(fnp.asarray(X), 2, mode=mode)),
                                  np.asarray(jnp.pad(jnp.asarray(X), 2, mode=mode)))


# ---------------------------------------------------------------- error types
def test_arange_step_zero():
    with pytest.raises(ZeroDivisionError):
        jnp.arange(0, 5, 0)
    with pytest.raises(ValueError, match="step"):
        fnp.arange(0, 5, 0)


def test_split_zero_sections():
    with pytest.raises(ZeroDivisionError):
        jnp.split(jnp.asarray(X), 0)
    with pytest.raises(ValueError, match="sections"):
        fnp.split(fnp.asarray(X), 0)


def test_lax_slice_out_of_range_limit():
    with pytest.raises(TypeError):
        jlax.slice(jnp.asarray(X), (0,), (10,))
    with pytest.raises(errors.FtransValueError, match="slice"):
        flax.slice(fnp.asarray(X), (0,), (10,))


# ---------------------------------------------------------------- autodiff
def test_i0_derivative_overflows_to_inf():
    # I0'(x) = I1(x) overflows float32 beyond |x| ~ 88.7: ftrans says +-inf (as jax 0.11 does), jax 0.10's
    # product rule NaN.
    x = np.array([100.0, -100.0], np.float32)
    ours = np.asarray(ftrans.vmap(ftrans.grad(fnp.i0))(x))
    theirs = np.asarray(jax.vmap(jax.grad(jnp.i0))(x))
    np.testing.assert_array_equal(ours, [np.inf, -np.inf])
    assert np.isnan(theirs).all() or (theirs == ours).all()
    # Where I1 is finite both agree (derivative 0 at 0); the second derivative at 0 is I1'(0) = 1/2 in ftrans
    # and jax 0.11 (jax 0.10's rule, which set I0' to 0 at 0, gives 0).
    y = np.array([0.0, 1.0, 30.0], np.float32)
    np.testing.assert_allclose(np.asarray(ftrans.vmap(ftrans.grad(fnp.i0))(y)),
                               np.asarray(jax.vmap(jax.grad(jnp.i0))(y)), rtol=1e-5)
    assert float(ftrans.grad(ftrans.grad(fnp.i0))(0.0)) == 0.5
    assert float(jax.grad(jax.grad(jnp.i0))(0.0)) in (0.0, 0.5)


# ---------------------------------------------------------------- not deviations (kept out of the doc)
def test_not_deviations():
    """Checked and found identical to jax 0.10.2, so not listed: lax on Python scalars, -0.0 in sort."""
    r = flax.add(1.0, 2.0)
    j = jlax.add(1.0, 2.0)
    assert (r.dtype, r.weak_type, float(r)) == (j.dtype, j.aval.weak_type, float(j))
    with pytest.raises(TypeError):
        jlax.add(1, 2.0)
    with pytest.raises(TypeError):
        flax.add(1, 2.0)
    v = np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0], np.float32)
    assert np.signbit(np.asarray(fnp.sort(v))).tolist() == np.signbit(np.asarray(jnp.sort(v))).tolist()
    assert np.asarray(fnp.argsort(v)).tolist() == np.asarray(jnp.argsort(v)).tolist()


# ---------------------------------------------------------------- random, nn, example libraries
def test_key_is_a_typed_key_array_with_jax_bits():
    import jax.random as jr

    import ftrans.random as fr

    ours, theirs = fr.key(7), jr.key(7)
    assert str(ours.dtype) == str(theirs.dtype) == "key<fry>" and ours.shape == theirs.shape == ()
    assert ftrans.dtypes.issubdtype(ours.dtype, ftrans.dtypes.prng_key)
    assert isinstance(ours, ftrans.Array) and isinstance(theirs, jax.Array)  # key arrays are arrays
    # a key array is one pytree leaf, as JAX's (programs carry its uint32 data: the difference)
    assert jax.tree.leaves(theirs)[0] is theirs and jax.tree.leaves(ours)[0] is ours
    np.testing.assert_array_equal(np.asarray(fr.key_data(ours)), np.asarray(jr.key_data(theirs)))
    np.testing.assert_array_equal(np.asarray(fr.uniform(ours, (4,))), np.asarray(jr.uniform(theirs, (4,))))


def test_randint_empty_range_raises():
    import jax.random as jr

    import ftrans.random as fr

    assert np.all(np.asarray(jr.randint(jr.PRNGKey(0), (3,), 5, 2)) == 5)
    with pytest.raises(errors.FtransValueError, match="minval=5 and maxval=2"):
        fr.randint(fr.PRNGKey(0), (3,), 5, 2)


def test_key_impl_and_key_dtype_describe_raw_keys():
    import jax.random as jr

    import ftrans.random as fr

    assert fr.key_dtype() == fr.key(0).dtype and str(fr.key_dtype()) == "key<fry>" == str(jr.key_dtype())
    assert fr.key_impl(fr.PRNGKey(0)) == "threefry2x32" == str(jr.key_impl(jr.key(0)))
    assert fr.random_gamma_p.name == jr.random_gamma_p.name == "random_gamma"


def test_stax_parallel_init_returns_a_tuple():
    from jax.example_libraries import stax as jstax

    from ftrans.example_libraries import stax as fstax

    ours = fstax.parallel(fstax.Relu, fstax.Relu)[0](ftrans.random.PRNGKey(0), ((2, 3), (2, 4)))
    theirs = jstax.parallel(jstax.Relu, jstax.Relu)[0](jax.random.PRNGKey(0), ((2, 3), (2, 4)))
    assert isinstance(ours, tuple) and not isinstance(theirs, tuple)
    assert ours[0] == tuple(next(iter(theirs))) == ((2, 3), (2, 4))


def test_device_put_donation_deletes_on_every_backend():
    x = jax.device_put(jnp.ones(3), jax.devices()[0])
    jax.device_put(x, jax.devices()[0], donate=True)
    assert not x.is_deleted()  # JAX on the CPU: best effort, nothing donated
    y = ftrans.device_put(fnp.ones(3), ftrans.devices()[0])
    ftrans.device_put(y, ftrans.devices()[0], donate=True)
    assert y.is_deleted()


def test_qr_raw_mode_agrees_to_rounding():
    a = np.arange(12.0, dtype=np.float32).reshape(4, 3) ** 1.5
    for f, j in zip(fnp.linalg.qr(a, mode="raw"), jnp.linalg.qr(a, mode="raw")):
        assert f.shape == j.shape
        np.testing.assert_allclose(np.asarray(f), np.asarray(j), rtol=1e-5, atol=1e-5)
    assert len(jlax.linalg.qr(a, pivoting=True)) == 3
    assert len(flax.linalg.qr(a, pivoting=True)) == 3  # LAPACK's geqp3, as JAX (tests/test_lax_linalg_more.py)


def test_lowering_platforms_is_one_known_platform():
    a = np.eye(3, dtype=np.float32)
    text = jax.jit(jnp.sin).trace(a).lower(lowering_platforms=("cuda", "cpu")).as_text()
    assert "_platform_index" in text  # jax: one module for both
    with pytest.raises(errors.FtransValueError, match="one platform at a time"):
        ftrans.jit(fnp.sin).trace(a).lower(lowering_platforms=("cuda", "cpu"))
    assert "stablehlo.sine" in jax.jit(jnp.sin).trace(a).lower(lowering_platforms=("vulkan",)).as_text()
    with pytest.raises(errors.FtransValueError, match="unknown platform"):
        ftrans.jit(fnp.sin).trace(a).lower(lowering_platforms=("vulkan",))


def test_compiling_a_module_lowered_for_another_platform_is_refused():
    a = np.eye(3, dtype=np.float32)
    other = "cuda" if jax.default_backend() == "cpu" else "cpu"
    jax.jit(jnp.sin).trace(a).lower(lowering_platforms=(other,)).compile()  # jax compiles it for the device here
    with pytest.raises(errors.FtransValueError, match=f"lowered for {other}"):
        ftrans.jit(fnp.sin).trace(a).lower(lowering_platforms=(other,)).compile()


def test_tpu_lowers_only_the_xla_linalg_ops():
    a = np.eye(3, dtype=np.float32)
    assert "LuDecomposition" in jax.jit(jlax.linalg.lu).trace(a).lower(lowering_platforms=("tpu",)).as_text()
    with pytest.raises(errors.FtransValueError, match="not for tpu"):
        ftrans.jit(flax.linalg.lu).trace(a).lower(lowering_platforms=("tpu",))


# ---------------------------------------------------------------- pmap
_needs_devices = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (conftest)")


@_needs_devices
def test_pmap_inside_jit_runs_but_is_not_one_module():
    x = np.ones((4, 2), np.float32)
    np.testing.assert_array_equal(np.asarray(ftrans.jit(ftrans.pmap(lambda a: a * 2))(x)),
                                  np.asarray(jax.jit(jax.pmap(lambda a: a * 2))(x)))
    assert "stablehlo" in jax.jit(jax.pmap(lambda a: a * 2)).lower(x).as_text()
    with pytest.raises(NotImplementedError, match="inside a jitted function"):
        ftrans.jit(ftrans.pmap(lambda a: a * 2)).lower(x)


@_needs_devices
def test_jit_closing_over_a_spread_array_runs_over_its_devices():
    x = np.arange(8, dtype=np.float32)
    fy, jy = ftrans.pmap(lambda v: v * 2)(x), jax.pmap(lambda v: v * 2)(x)
    fo, jo = ftrans.jit(lambda z: z + fy)(1.0), jax.jit(lambda z: z + jy)(1.0)
    np.testing.assert_array_equal(np.asarray(fo), np.asarray(jo))
    assert len(jo.devices()) == 1 and len(fo.devices()) == 8


@_needs_devices
def test_pmap_axis_size_without_mapped_arguments():
    with pytest.raises(ValueError, match="at least one argument with a mapped axis"):
        jax.pmap(lambda: jlax.axis_index("i"), axis_name="i", axis_size=4)()
    got = ftrans.pmap(lambda: flax.axis_index("i"), axis_name="i", axis_size=4)()
    assert np.asarray(got).tolist() == [0, 1, 2, 3]


@_needs_devices
def test_nested_pmap_runs():
    x = np.ones((2, 4), np.float32)
    with pytest.raises(ValueError, match="mesh"):
        jax.pmap(jax.pmap(lambda a: jlax.psum(a, "j"), axis_name="j"), axis_name="i")(x)
    got = ftrans.pmap(ftrans.pmap(lambda a: flax.psum(a, "j"), axis_name="j"), axis_name="i")(x)
    assert np.asarray(got).tolist() == [[4.0] * 4] * 2


@_needs_devices
def test_grad_of_pmap_gives_host_arrays():
    x = np.ones((4, 2), np.float32)
    g_j = jax.grad(lambda x: jax.pmap(lambda a: a ** 2)(x).sum())(x)
    g_f = ftrans.grad(lambda x: ftrans.pmap(lambda a: a ** 2)(x).sum())(x)
    np.testing.assert_allclose(np.asarray(g_f), np.asarray(g_j))
    assert len(g_f.devices()) == 1


def test_device_put_sharded_and_replicated_are_kept():
    for name in ("device_put_sharded", "device_put_replicated"):
        with pytest.raises(AttributeError, match="deprecated"):
            getattr(jax, name)
    devs = ftrans.devices()[:1]
    got = ftrans.device_put_replicated(np.arange(3, dtype=np.float32), devs)
    assert np.asarray(got).tolist() == [[0.0, 1.0, 2.0]]
    got = ftrans.device_put_sharded([np.arange(3, dtype=np.float32)], devs)
    assert np.asarray(got).tolist() == [[0.0, 1.0, 2.0]]


# ---------------------------------------------------------------- interop
class _OnlyArray:
    def __array__(self, dtype=None, copy=None):
        return np.array(X, dtype=dtype, copy=True)


class _OnlyDlpack:
    def __dlpack__(self, **kwargs):
        return X.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return X.__dlpack_device__()


def test_array_like_objects_are_operands():
    for obj in (_OnlyArray(), _OnlyDlpack()):
        with pytest.raises(TypeError):
            jnp.sin(obj)
        np.testing.assert_allclose(np.asarray(fnp.sin(obj)), np.sin(X), rtol=1e-6)
    with pytest.raises(TypeError):
        jnp.asarray(_OnlyDlpack())
    np.testing.assert_array_equal(np.asarray(fnp.asarray(_OnlyDlpack())), X)


class _JaxArrayProtocol:
    def __init__(self, xp):
        self.xp = xp

    def __jax_array__(self):
        return self.xp.asarray(X)


def test_jax_array_protocol_objects_are_eager_operands():
    with pytest.raises(ValueError, match="during abstractification"):
        jnp.multiply(_JaxArrayProtocol(jnp), 2)
    np.testing.assert_array_equal(np.asarray(jnp.reshape(_JaxArrayProtocol(jnp), (5,))), X)
    np.testing.assert_array_equal(np.asarray(fnp.multiply(_JaxArrayProtocol(fnp), 2)), X * 2)
    for lib, m in ((jax, jnp), (ftrans, fnp)):
        with pytest.raises(ValueError, match="during abstractification"):
            lib.jit(lambda a: a)(_JaxArrayProtocol(m))


def test_from_dlpack_reads_read_only_host_arrays():
    ro = X.copy()
    ro.flags.writeable = False
    if JAX_012:  # jax 0.12 imports it too
        np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(ro)), X)
    else:
        with pytest.raises(BufferError):
            jnp.from_dlpack(ro)
    np.testing.assert_array_equal(np.asarray(fnp.from_dlpack(ro)), X)


def test_full_with_big_python_int_raises():
    assert np.asarray(jnp.full(3, 2**40)).tolist() == [0, 0, 0]  # JAX wraps silently
    with pytest.raises(OverflowError):
        fnp.full(3, 2**40)
    assert np.asarray(fnp.full(3, 2**40, np.float32)).tolist() == [2.0**40] * 3


# ---------------------------------------------------------------- convolutions
def test_signal_fft_method_is_the_direct_convolution():
    import jax.scipy.signal as jsignal

    import ftrans.scipy.signal as fsignal

    a = np.random.default_rng(0).standard_normal(50).astype(np.float32)
    v = np.random.default_rng(1).standard_normal(9).astype(np.float32)
    ours_fft, ours_direct = fsignal.convolve(a, v, method="fft"), fsignal.convolve(a, v, method="direct")
    np.testing.assert_array_equal(np.asarray(ours_fft), np.asarray(ours_direct))
    theirs_fft, theirs_direct = jsignal.convolve(a, v, method="fft"), jsignal.convolve(a, v, method="direct")
    assert not np.array_equal(np.asarray(theirs_fft), np.asarray(theirs_direct))  # JAX really uses FFTs
    np.testing.assert_allclose(np.asarray(ours_fft), np.asarray(theirs_fft), rtol=1e-4, atol=1e-4)


def test_eager_fft_is_pocketfft_and_jitted_fft_is_xla():
    import jax.numpy as jjnp

    x = np.random.default_rng(3).standard_normal((16, 8, 4, 8)).astype(np.float32)
    eager, jitted = np.asarray(fnp.fft.rfft2(x)), np.asarray(ftrans.jit(fnp.fft.rfft2)(x))
    np.testing.assert_array_equal(eager, np.fft.rfft2(x))  # NumPy's pocketfft, single precision kept
    np.testing.assert_array_equal(jitted, np.asarray(jax.jit(jjnp.fft.rfft2)(x)))  # XLA's
    np.testing.assert_array_equal(np.asarray(jjnp.fft.rfft2(x)), jitted)  # JAX's eager FFT is XLA's too
    assert not np.array_equal(eager, jitted)
    np.testing.assert_allclose(eager, jitted, rtol=1e-4, atol=1e-4)


def test_dctn_goes_axis_by_axis_and_checks_s_against_axes():
    import jax.scipy.fft as jfft

    import ftrans.scipy.fft as ffft

    x = np.random.default_rng(0).standard_normal((4, 6, 5)).astype(np.float32)
    for fn in ("dctn", "idctn"):
        want = jax.jit(lambda v, fn=fn: getattr(jfft, fn)(v, s=(3, 7), axes=(0, 2)))(x)  # eager jax: op by op
        np.testing.assert_allclose(np.asarray(getattr(ffft, fn)(x, s=(3, 7), axes=(0, 2))), np.asarray(want),
                                   rtol=1e-4, atol=1e-4)
        assert jax.eval_shape(lambda v, fn=fn: getattr(jfft, fn)(v, s=(3, 7), axes=(0,)), x).shape == (3, 6, 5)
        # (JAX drops the extra length)
        with pytest.raises(errors.FtransValueError, match="s and axes must have the same length"):
            getattr(ffft, fn)(x, s=(3, 7), axes=(0,))


# ----------------------------------------------------------------------------
# Sharding (docs/differences.md, "Sharding")


@pytest.mark.skipif(jax.local_device_count() < 4, reason="needs 4 host devices (tests/conftest.py)")
def test_shard_map_partial_auto_untyped_over_auto_axes_and_own_params():
    from ftrans.sharding import PartitionSpec as P

    x = np.arange(16.0, dtype=np.float32).reshape(4, 4)
    Auto = ftrans.sharding.AxisType.Auto
    am = ftrans.make_mesh((2, 2), ("x", "y"), axis_types=(Auto, Auto))
    g = ftrans.shard_map(lambda a: a * 2, mesh=am, in_specs=P("x"), out_specs=P("x"), axis_names={"x"})
    assert 'manual_axes={"x"}' in ftrans.jit(g).lower(x).as_text()  # (as JAX's)
    body_aval = ftrans.make_jaxpr(g)(x).jaxpr.eqns[0].params["jaxpr"].in_avals[0]
    assert body_aval.typed_sharding is None  # no type over an all-Auto mesh
    assert body_aval.sharding.mesh.empty  # read later: the mesh in context (JAX's keeps the Manual/Auto mesh)
    eqn = ftrans.make_jaxpr(g)(x).jaxpr.eqns[0]
    assert eqn.params["in_specs"] == (P("x"),) and eqn.params["newly_manual_axes"] == {"x"}
    assert "in_names" in eqn.params
    jeqn = jax.make_jaxpr(jax.shard_map(lambda a: a * 2, mesh=jax.make_mesh((2, 2), ("x", "y"), axis_types=(
        jax.sharding.AxisType.Auto,) * 2), in_specs=jax.P("x"), out_specs=jax.P("x"), axis_names={"x"}))(x).eqns[0]
    assert "newly_manual_axes" in jeqn.params and "in_names" not in jeqn.params


@pytest.mark.skipif(jax.local_device_count() < 2, reason="needs 2 host devices (tests/conftest.py)")
def test_untyped_aval_sharding_is_over_the_mesh_in_context_when_read():
    fm, jm = ftrans.make_mesh((2,), ("x",)), jax.make_mesh((2,), ("x",))
    with ftrans.set_mesh(fm):
        faval = ftrans.make_jaxpr(lambda a: a * 2)(X).jaxpr.outvars[0].aval
        assert faval.sharding.mesh == fm.abstract_mesh  # read inside: the mesh in context, as JAX's
    with jax.set_mesh(jm):
        javal = jax.make_jaxpr(lambda a: a * 2)(X).jaxpr.outvars[0].aval
    assert tuple(faval.sharding.spec) == tuple(javal.sharding.spec) == (None,)
    assert faval.sharding.mesh.empty  # read outside: the empty mesh
    assert javal.sharding.mesh == jm.abstract_mesh  # JAX's: the mesh when the value was made


@pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")
def test_reshard_accepts_auto_axes():
    from jax.sharding import AxisType as JA
    from jax.sharding import NamedSharding as JNS
    from jax.sharding import PartitionSpec as JP

    from ftrans.sharding import AxisType, NamedSharding, P

    x = np.ones((8, 8), np.float32)
    jm = jax.make_mesh((2, 4), ("x", "y"), axis_types=(JA.Auto,) * 2)
    with pytest.raises(ValueError, match="Auto"):
        jax.jit(lambda a: jax.reshard(a, JNS(jm, JP("x"))))(x)
    fm = ftrans.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    out = ftrans.jit(lambda a: ftrans.reshard(a, NamedSharding(fm, P("x"))))(x)
    assert out.sharding == NamedSharding(fm, P("x"))


@pytest.mark.skipif(jax.local_device_count() < 2, reason="needs 2 host devices (tests/conftest.py)")
def test_unreduced_axes_are_typed_and_host_values_put_unreduced():
    from ftrans.sharding import P

    jm = jax.make_mesh((2,), ("x",))
    assert jax.NamedSharding(jm, jax.P(None, unreduced={"x"})).spec.unreduced == {"x"}
    s = P(None, unreduced={"x"})  # a spec carries the sets, as JAX's (compared, hashed, printed alike)
    # (jax 0.11's repr adds its unreduced_kind, which ftrans's specs do not have)
    assert s == jax.P(None, unreduced={"x"}) and s != P(None)
    assert repr(s) == repr(jax.P(None, unreduced={"x"})).replace(", unreduced_kind=sum", "")
    fm = ftrans.make_mesh((2,), ("x",))
    assert ftrans.NamedSharding(fm, s).spec.unreduced == {"x"}  # a sharding type (tests/test_unreduced.py)
    with ftrans.set_mesh(fm):
        out = ftrans.device_put(np.arange(2.0), s)  # JAX: NotImplementedError for a host value
        # (read on the host: indexing a shard's one-device data under the mesh is JAX's incompatible-devices error)
        assert [float(np.asarray(b.data)[0]) for b in out.addressable_shards] == [0.0, 0.0]
    with jax.set_mesh(jm):
        with pytest.raises(NotImplementedError):
            jax.device_put(np.arange(2.0), jax.P(None, unreduced={"x"}))
    assert P(None, unreduced=set()) == P() == jax.P()


@pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")
def test_device_put_in_jit_annotates_any_mesh_and_host_arrays_name_no_source():
    from jax.sharding import AxisType as JA
    from jax.sharding import NamedSharding as JNS
    from jax.sharding import PartitionSpec as JP

    from ftrans.sharding import AxisType, NamedSharding, P

    x = np.arange(8, dtype=np.float32)
    jm = jax.make_mesh((4,), ("x",), axis_types=(JA.Auto,))
    fm = ftrans.make_mesh((4,), ("x",), axis_types=(AxisType.Auto,))
    jo = jax.jit(lambda a: jax.device_put(a * 2, JNS(jm, JP("x"))) + 1)(x)
    fo = ftrans.jit(lambda a: ftrans.device_put(a * 2, NamedSharding(fm, P("x"))) + 1)(x)
    assert tuple(jo.sharding.spec) == () and tuple(fo.sharding.spec) == ("x",)  # JAX: left to the partitioner
    np.testing.assert_array_equal(fo, jo)
    d1, jd1 = ftrans.devices()[1], jax.devices()[1]
    jg = jax.grad(lambda a: jax.device_put(a, jd1).sum())(jnp.asarray(x))
    fg = ftrans.grad(lambda a: ftrans.device_put(a, d1).sum())(fnp.asarray(x))
    assert jg.committed and not fg._committed  # JAX's arrays always live on a device, so its gradient is committed
    assert jg.devices() == {jax.devices()[0]} and fg.devices() == {ftrans.devices()[0]}


# ---------------------------------------------------------------- IR (docs/differences.md, "IR")
def test_printed_jitted_body_has_been_through_the_ir_passes():
    """Printed IR is JAX's text, but a jitted function's body has been through ftrans's IR passes: its two
    identical calls are one (so the callee, used once, is printed in place); without the passes the text
    is JAX's exactly."""

    def build(lib, **kw):
        f = lib.jit(lambda x: x ** 2)
        return lib.jit(lambda x: f(x) + f(x), **kw)

    x = np.array([4.2], np.float32)
    theirs = jax.make_jaxpr(build(jax))(x).pretty_print(use_color=False)
    ours = ftrans.make_jaxpr(build(ftrans))(x).pretty_print()
    assert theirs.startswith("let lambda = ") and "e:f32[1] = jit[name=<lambda> jaxpr=lambda] c" in theirs
    assert "          b:f32[1] = add c c\n" in ours and ours.count("= jit[") == 2 and "let " not in ours
    assert ftrans.make_jaxpr(build(ftrans, optimizations="none"))(x).pretty_print() == theirs


def test_str_short_names_the_dtype_short_by_default():
    from ftrans.core.avals import ShapedArray

    theirs, ours = jax.core.ShapedArray((8, 2), np.float32), ShapedArray((8, 2), np.float32)
    assert theirs.str_short() == "float32[8,2]" and theirs.str_short(short_dtypes=True) == "f32[8,2]"
    assert ours.str_short() == "f32[8,2]"
    if jax.local_device_count() >= 2:  # a sharding type: the same, and ``short_dtypes=False`` gives JAX's default
        am = ftrans.sharding.AbstractMesh((2,), ("x",), axis_types=(ftrans.sharding.AxisType.Explicit,))
        typed = ShapedArray((8, 2), np.float32, sharding=ftrans.NamedSharding(am, ftrans.P("x")))
        assert typed.str_short() == "f32[8@x,2]" and typed.str_short(short_dtypes=False) == "float32[8@x,2]"


# ---------------------------------------------------------------- jit: the stability rewrites
def test_jit_rewrites_log_softmax_stably():
    x = np.array([0., 100., 200., -300.], np.float32)

    def naive(m):
        return lambda v: m.log(m.exp(v) / m.sum(m.exp(v)))

    with np.errstate(all="ignore"):
        got_jax = np.asarray(jax.jit(naive(jnp))(x))
    assert not np.all(np.isfinite(got_jax))
    got = np.asarray(ftrans.jit(naive(fnp))(x))
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, np.asarray(jax.nn.log_softmax(x)), rtol=1e-6)
    eager = np.asarray(naive(fnp)(x))  # eager runs what was written
    assert not np.all(np.isfinite(eager))
    off = np.asarray(ftrans.jit(naive(fnp), optimizations=["cse", "simplify", "fold_constants", "dce"])(x))
    assert not np.all(np.isfinite(off))


def test_jit_grad_differentiates_the_stable_form():
    x = np.array([0., 100., 200., -300.], np.float32)

    def naive(m):
        return lambda v: m.log(m.exp(v) / m.sum(m.exp(v)))[1]

    with np.errstate(all="ignore"):
        got_jax = np.asarray(jax.jit(jax.grad(naive(jnp)))(x))
    assert not np.all(np.isfinite(got_jax))
    want = np.asarray(jax.grad(lambda v: jax.nn.log_softmax(v)[1])(x))
    for g in (ftrans.jit(ftrans.grad(naive(fnp))), ftrans.grad(ftrans.jit(naive(fnp)))):
        np.testing.assert_allclose(np.asarray(g(x)), want, atol=1e-6)
    assert not np.all(np.isfinite(np.asarray(ftrans.grad(naive(fnp))(x))))  # eager: as written


def test_jit_of_a_callable_that_cannot_be_weakly_referenced_runs():
    class Slotted:
        __slots__ = ()

        def __call__(self, x):
            return x + 1

    with pytest.raises(TypeError, match="cannot create weak reference"):
        jax.jit(Slotted())(3)
    assert int(ftrans.jit(Slotted())(3)) == 4


# ---------------------------------------------------------------- control flow
def test_reverse_mode_of_while_loop_works():
    def loop(lax, np_):
        return lambda x: lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, np_.sin(c[1])), (0, x))[1]

    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for lax.while_loop"):
        jax.grad(loop(jlax, jnp))(np.float32(0.3))
    want = jax.grad(lambda x: jlax.fori_loop(0, 5, lambda i, y: jnp.sin(y), x))(np.float32(0.3))
    np.testing.assert_allclose(ftrans.grad(loop(flax, fnp))(np.float32(0.3)), want, rtol=1e-6)
    np.testing.assert_allclose(ftrans.grad(ftrans.checkpoint(loop(flax, fnp)))(np.float32(0.3)), want, rtol=1e-6)
    # the tangent function of a linearized loop is not reverse-differentiable, in either
    x0 = np.float32(0.3)
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for lax.while_loop"):
        jax.grad(lambda x: jax.linearize(loop(jlax, jnp), x)[1](x))(x0)
    with pytest.raises(ValueError, match="linearized lax.while_loop's tangent function"):
        ftrans.grad(lambda x: ftrans.linearize(loop(flax, fnp), x)[1](x))(x0)


def test_tail_recursion_through_cond_is_a_loop():
    def factorial(lax, r, x):
        return lax.cond(x <= 1.0, lambda: r, lambda: factorial(lax, r * x, x - 1))

    with pytest.raises(RecursionError):
        jax.jit(lambda r, x: factorial(jlax, r, x))(1.0, 5.0)
    assert float(ftrans.jit(lambda r, x: factorial(flax, r, x))(1.0, 5.0)) == 120.0


# ---------------------------------------------------------------- lax extras (issue 18)
def test_half_precision_reduce_sum_accumulates_in_float32():
    a = np.full(1024, 0.1, np.float32)
    for lib, m in ((jax, jnp), (ftrans, fnp)):
        x = a.astype(m.bfloat16)
        got = [float(np.float32(lib.jit(lambda v: lib.lax.reduce(v, m.bfloat16(0), lib.lax.add, (0,)))(x))),
               float(np.float32(lib.lax.reduce(x, m.bfloat16(0), lib.lax.add, (0,)))),
               float(np.float32(lib.jit(m.sum)(x)))]
        if lib is ftrans:
            assert got == [102.5, 102.5, 102.5]
        elif jax.default_backend() == "cpu":  # (XLA:GPU sums a bfloat16 reduce in another order)
            assert got == [100.0, 100.0, 102.5]


def test_empty_is_zeros():
    assert not np.asarray(flax.empty((4,), np.float32)).any()
    assert jlax.empty((4,), np.float32).shape == (4,)


def test_zeta_differentiates():
    with pytest.raises(NotImplementedError):
        jax.grad(lambda q: jlax.zeta(3.0, q))(2.0)
    g = ftrans.grad(lambda q: flax.zeta(3.0, q))(2.0)
    assert abs(float(g) - (-3.0 * float(flax.zeta(4.0, 2.0)))) < 1e-5  # d/dq zeta(s, q) = -s zeta(s+1, q)
    assert not hasattr(flax, "igamma_p") and hasattr(jlax, "igamma_p")


# ---------------------------------------------------------------- scipy.special
def test_expn_at_zero_is_one_over_n_minus_one():
    import jax.scipy.special as jsp

    from ftrans.scipy import special as fsp

    n = np.array([2.0, 3.0, 5.0], np.float32)
    z = np.zeros(3, np.float32)
    np.testing.assert_allclose(np.asarray(fsp.expn(n, z)), 1 / (n - 1))
    np.testing.assert_allclose(np.asarray(jsp.expn(n, z)), 1 / (n - 1) if JAX_012 else 1 / n)  # (0.12: fixed)


def test_special_functions_follow_jax012():
    """docs/differences.md, "What jax 0.12 changed": scipy.special's fixes (tests/test_jax012_special.py)."""
    import jax.scipy.special as jsp

    from ftrans.scipy import special as fsp

    x = np.array([np.inf], np.float32)
    assert float(fsp.exp1(x)[0]) == 0.0
    assert float(jsp.exp1(x)[0]) == 0.0 if JAX_012 else np.isnan(jsp.exp1(x)[0])
    z = np.array([0.0], np.float32)
    assert float(fsp.expi(z)[0]) == -np.inf
    assert float(jsp.expi(z)[0]) == -np.inf if JAX_012 else np.isnan(jsp.expi(z)[0])
    p, q = np.array([np.nan], np.float32), np.array([1.0], np.float32)
    assert np.isnan(fsp.rel_entr(p, q)[0])
    assert np.isnan(jsp.rel_entr(p, q)[0]) if JAX_012 else jsp.rel_entr(p, q)[0] == np.inf
    assert hasattr(fsp, "erfcinv") and hasattr(jsp, "erfcinv") == JAX_012


def test_spence_derivative_near_one():
    import jax.scipy.special as jsp

    from ftrans.scipy import special as fsp

    x = np.array([1.0, 1.5], np.float32)
    ours = np.asarray(ftrans.vmap(ftrans.grad(fsp.spence))(x))
    np.testing.assert_allclose(ours, [-1.0, np.log(1.5) / -0.5], rtol=1e-5)
    theirs = np.asarray(jax.vmap(jax.grad(jsp.spence))(x))
    assert theirs[0] == 0.0 and np.isnan(theirs[1])


# ---------------------------------------------------------------- debugging and callbacks
def test_callbacks_finish_before_a_jitted_call_returns():
    got = []
    ftrans.jit(lambda x: ftrans.debug.callback(got.append, x))(np.float32(1))
    assert len(got) == 1  # no effects_barrier needed
    assert ftrans.effects_barrier() is None and jax.effects_barrier() is None


def test_as_text_locations_and_name_stack_under_grad():
    import re

    def f(J, np_):
        def g(x):
            with J.named_scope("block"):
                return np_.sin(x) * x
        return g

    # locations only with debug_info=True, in both
    assert "loc(" not in jax.jit(f(jax, jnp)).lower(1.0).as_text()
    assert "loc(" not in ftrans.jit(f(ftrans, fnp)).lower(1.0).as_text()
    assert 'loc("jit(g)/block/sin"' in ftrans.jit(f(ftrans, fnp)).lower(1.0).as_text(debug_info=True)
    jt = jax.jit(jax.grad(f(jax, jnp))).lower(1.0).as_text(debug_info=True)
    ft = ftrans.jit(ftrans.grad(f(ftrans, fnp))).lower(1.0).as_text(debug_info=True)
    assert "jvp(block)" in jt and "jvp(block)" in ft  # the transform is in the name stack, as JAX's
    assert re.search(r'loc\("jit\(g\)/jvp\(block\)/cos"', ft)


def test_compiled_on_call_locations_leave_out_the_callers_frames():
    def g(x):
        return x * 2.0

    for api in (jax, ftrans):  # the lowered module's locations are call sites: g's frame, then this test's
        assert "callsite(" in api.jit(g).lower(1.0).as_text(debug_info=True)
    f = ftrans.jit(g)
    f(np.float32(1))
    (entry,) = f._cache.values()
    text = entry.exe.text  # the program compiled on call: g's own frame only
    assert "<locals>.g" in text and "callsite(" not in text


def test_callback_exception_keeps_its_type():
    def fail(x):
        raise KeyError("Ooops")

    with pytest.raises(RuntimeError, match="Ooops"):
        jax.jit(lambda x: jax.pure_callback(fail, jax.ShapeDtypeStruct((), np.float32), x))(1.0).block_until_ready()
    with pytest.raises(KeyError, match="Ooops"):
        ftrans.jit(lambda x: ftrans.pure_callback(fail, ftrans.ShapeDtypeStruct((), np.float32), x))(1.0)


def test_buffer_callback_exception_keeps_its_type():
    from jax.experimental import buffer_callback as jbc

    from ftrans.experimental import buffer_callback as fbc

    def fail(ctx, out, x):
        raise KeyError("Ooops")

    # (on the CPU device: a GPU's buffers reach the callback as device memory, and jax reports a failed GPU
    # callback later, at another call)
    with host_oracle():
        _buffer_callback_errors(jbc, fbc, fail)


def _buffer_callback_errors(jbc, fbc, fail):
    with pytest.raises(RuntimeError, match="Ooops") as e:
        jax.jit(jbc.buffer_callback(fail, jax.ShapeDtypeStruct((), np.float32)))(1.0).block_until_ready()
    assert not isinstance(e.value, KeyError)
    with pytest.raises(KeyError, match="Ooops") as e:
        ftrans.jit(fbc.buffer_callback(fail, ftrans.ShapeDtypeStruct((), np.float32)))(1.0)
    assert isinstance(e.value, RuntimeError) and any("in your code at" in n for n in e.value.__notes__)
    for bc, api in ((jbc, jax), (fbc, ftrans)):  # returning a value: a RuntimeError in both; ftrans's a ValueError
        with pytest.raises(RuntimeError, match="must not return any values") as e:
            bc.buffer_callback(lambda c, o, x: 1, api.ShapeDtypeStruct((), np.float32))(1.0)
        assert isinstance(e.value, ValueError) == (api is ftrans)


def test_ordered_print_in_batched_while_condition_keeps_the_right_values(capsys):
    def count_to_5(J, L):
        def cond(x):
            J.debug.print("x: {x}", x=x, ordered=True)
            return x < 5
        return lambda x: L.while_loop(cond, lambda x: x + 1, x)

    got_jax = np.asarray(jax.vmap(count_to_5(jax, jlax))(jnp.arange(2)))
    jax.effects_barrier()
    jax_lines = capsys.readouterr().out.split()
    got = np.asarray(ftrans.vmap(count_to_5(ftrans, flax))(fnp.arange(2)))
    lines = capsys.readouterr().out.split()
    assert got_jax.tolist() == [5, 6]  # JAX: the finished element keeps stepping
    assert got.tolist() == [5, 5]
    assert lines != jax_lines


def test_no_execution_and_no_tracing_leave_eager_host_operations_running():
    x = np.arange(3.0, dtype=np.float32)
    with jax.no_execution():
        with pytest.raises(RuntimeError, match="no_execution"):
            jnp.sin(jnp.asarray(x)) + 1  # JAX: every eager op is a compiled program
    with ftrans.no_execution():
        np.testing.assert_allclose(np.asarray(fnp.sin(fnp.asarray(x)) + 1), np.sin(x) + 1, rtol=1e-6)
        with pytest.raises(errors.FtransRuntimeError, match="no_execution"):
            ftrans.jit(lambda a: a + 1)(x)
    with jax.no_tracing():
        with pytest.raises(RuntimeError, match="no_tracing"):
            jnp.cos(jnp.asarray(np.arange(7.0, dtype=np.float32)))
    with ftrans.no_tracing():
        np.testing.assert_allclose(np.asarray(fnp.cos(fnp.asarray(x))), np.cos(x), rtol=1e-6)


def test_pbroadcast_works_under_vmap_where_jax_raises():
    x = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    got = ftrans.vmap(lambda v: flax.pbroadcast(v, "i", 2), axis_name="i")(x)
    np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(x[2], x.shape))
    with pytest.raises(TypeError):
        jax.vmap(lambda v: jlax.pbroadcast(v, "i", 2), axis_name="i")(jnp.asarray(x))


def test_pcast_varying_outside_shard_map_is_identity():
    x = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    got = ftrans.vmap(lambda v: flax.pcast(v, "i", to="varying"), axis_name="i")(x)
    np.testing.assert_array_equal(np.asarray(got), x)
    with pytest.raises(ValueError, match="shard_map"):
        jax.vmap(lambda v: jlax.pcast(v, "i", to="varying"), axis_name="i")(x)


def test_scaled_dot_differentiates_where_jax_raises():
    lhs = np.linspace(-1, 1, 24, dtype=np.float32).reshape(3, 8)
    rhs = np.linspace(1, 2, 16, dtype=np.float32).reshape(8, 2)
    g = ftrans.grad(lambda a: flax.scaled_dot(a, rhs, preferred_element_type=np.float32).sum())(lhs)
    np.testing.assert_allclose(np.asarray(g), np.broadcast_to(rhs.sum(1), (3, 8)), rtol=1e-2)
    with pytest.raises(NotImplementedError):
        jax.grad(lambda a: jlax.scaled_dot(a, rhs, preferred_element_type=np.float32).sum())(lhs)


def test_token_is_a_pytree_without_leaves():
    t = flax.create_token()
    assert jax.tree_util.tree_leaves(t) == []
    assert len(jax.tree_util.tree_leaves(jlax.create_token())) == 1
    jp = ftrans.make_jaxpr(lambda x: flax.after_all(flax.create_token(x)))(1.0)
    assert not jp.jaxpr.eqns


def test_token_operand_of_a_users_primitive_is_not_in_the_program():
    from jax.extend.core import Primitive as JPrimitive

    from ftrans.extend.core import Primitive as FPrimitive

    jp, fp = JPrimitive("tokentest"), FPrimitive("tokentest")
    for p in (jp, fp):
        p.def_abstract_eval(lambda x, t: x)
    x = np.ones(3, np.float32)
    jj = jax.make_jaxpr(lambda x, t: jp.bind(x, t))(x, jlax.create_token())
    fj = ftrans.make_jaxpr(lambda x, t: fp.bind(x, t))(x, flax.create_token())
    assert len(jj.jaxpr.eqns[0].invars) == 2
    assert len(fj.jaxpr.eqns[0].invars) == 1 and fj.jaxpr.eqns[0].primitive.name == "tokentest"


@pytest.mark.jax_default_precision
def test_default_matmul_precision_change_drops_every_trace():
    """Changing default_matmul_precision with ``config.update`` clears ftrans's jit caches, so returning to an
    earlier value traces again; JAX keys its caches on the option and reuses the earlier trace. (The context
    manager, which holds for one thread, is part of the keys, as in JAX: tests/test_config_threads.py.)"""
    x = np.ones((2, 2), np.float32)
    counts = {}
    for lib, m in ((jax, jnp), (ftrans, fnp)):
        n = [0]

        @lib.jit
        def f(a, n=n, m=m):
            n[0] += 1
            return m.dot(a, a)

        f(x)
        lib.config.update("jax_default_matmul_precision", "float32")
        try:
            f(x)
        finally:
            lib.config.update("jax_default_matmul_precision", None)
        f(x)
        counts[lib.__name__] = n[0]
    assert counts == {"jax": 2, "ftrans": 3}


# ---------------------------------------------------------------- experimental.jet
def test_jet_has_rules_jax_lacks():
    from jax.experimental.jet import jet as jjet

    from ftrans.experimental.jet import jet as fjet

    x, terms = np.float32(0.3), [np.float32(1.0), np.float32(0.5)]
    for jf, ff in ((jnp.tan, fnp.tan), (lambda v: jax.checkpoint(jnp.sin)(v), lambda v: ftrans.checkpoint(fnp.sin)(v))):
        with pytest.raises(KeyError):
            jjet(jf, (x,), (terms,))
        y, (t1, t2) = fjet(ff, (x,), (terms,))
        assert np.isfinite([float(y), float(t1), float(t2)]).all()
    with pytest.raises(KeyError):
        jjet(lambda v: jnp.sort(v), (X,), ([X],))
    with pytest.raises(NotImplementedError, match="'sort'"):
        fjet(lambda v: fnp.sort(v), (X,), ([X],))


def test_jet_min_and_clamp_take_a_scalar_operand():
    from jax.experimental.jet import jet as jjet

    from ftrans.experimental.jet import jet as fjet

    x = np.full(3, 0.5, np.float32)
    if not JAX_012:  # (jax 0.12's jet takes it too)
        with pytest.raises(TypeError):
            jjet(lambda v: jlax.clamp(0.0, v, 1.0), (x,), ([x],))
    y, (t,) = fjet(lambda v: flax.clamp(0.0, v, 1.0), (x,), ([x],))
    np.testing.assert_array_equal(np.asarray(t), x)
    y, (t,) = fjet(lambda v: flax.min(v, 1.0), (x,), ([x],))
    np.testing.assert_array_equal(np.asarray(t), x)
# ---------------------------------------------------------------- multi-device helpers (docs/differences.md)
def test_ragged_all_to_all_runs_on_cpu_where_jax_does_not_compile():
    from jax.sharding import Mesh as JMesh
    from jax.sharding import PartitionSpec as JP

    from ftrans.sharding import Mesh, P

    if jax.local_device_count() < 2 or jax.default_backend() != "cpu":
        pytest.skip("needs 2 host devices")
    args = (np.array([[1, 2, 2], [3, 4, 0]], np.int32), np.zeros((2, 4), np.int32),
            np.array([[0, 1], [0, 1]], np.int32), np.array([[1, 2], [1, 1]], np.int32),
            np.array([[0, 0], [1, 2]], np.int32), np.array([[1, 1], [2, 1]], np.int32))
    jf = jax.jit(jax.shard_map(lambda *a: jlax.ragged_all_to_all(*[x[0] for x in a], axis_name="x")[None],
                               mesh=JMesh(np.array(jax.devices()[:2]), ("x",)), in_specs=JP("x"),
                               out_specs=JP("x"), check_vma=False))
    with pytest.raises(Exception, match="ragged-all-to-all"):
        jf(*args)
    ff = ftrans.jit(ftrans.shard_map(lambda *a: flax.ragged_all_to_all(*[x[0] for x in a], axis_name="x")[None],
                                     mesh=Mesh(np.array(ftrans.devices()[:2]), ("x",)), in_specs=P("x"),
                                     out_specs=P("x")))
    np.testing.assert_array_equal(np.asarray(ff(*args)), [[1, 3, 0, 0], [2, 2, 4, 0]])


def test_only_the_default_layout_is_accepted():
    from jax.experimental import layout as jlayout

    from ftrans.experimental import layout as flayout

    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    out = jlayout.with_layout_constraint(jnp.asarray(x), jlayout.Layout((1, 0)))
    assert out.format.layout.major_to_minor == (1, 0)
    with pytest.raises(NotImplementedError, match="default layout"):
        flayout.with_layout_constraint(x, flayout.Layout((1, 0)))


def test_closed_over_arrays_are_arguments_of_the_lowered_module():
    x = np.full(100, 42.0, np.float32)
    jconst, fconst = jnp.arange(100.0) + 1.0, fnp.arange(100.0) + 1.0
    jtext = jax.jit(lambda v: jnp.sin(v) + jconst).lower(x).as_text()
    fc = ftrans.jit(lambda v: fnp.sin(v) + fconst).lower(x).compile()
    ftext = ftrans.jit(lambda v: fnp.sin(v) + fconst).lower(x).as_text()
    assert "stablehlo.constant dense" in jtext and "%arg1" not in jtext.split("@main(")[1].split(") ->")[0]
    assert "%arg1: tensor<100xf32>" in ftext.split("@main(")[1].split(") ->")[0]  # the constant, then x
    assert len(fc.args_info[0]) == 1 and len(fc.in_avals[0]) == 1


def test_xla_metadata_call_is_a_jit_call_with_tagged_results():
    from jax.experimental.scheduling_groups import xla_metadata_call as jcall

    from ftrans.experimental.scheduling_groups import xla_metadata_call as fcall

    x = np.float32(1.0)
    jeqns = jax.make_jaxpr(jcall(jnp.sin, inlineable="false"))(x).eqns
    feqns = ftrans.make_jaxpr(fcall(fnp.sin, inlineable="false"))(x).eqns
    assert [e.primitive.name for e in jeqns] == ["xla_metadata_call"]
    assert [e.primitive.name for e in feqns] == ["jit_call", "xla_metadata_value"]
    jax.jit(jcall(jnp.sin, inlineable=False)).trace(x)  # JAX: only lowering rejects a non-string value
    with pytest.raises(NotImplementedError, match="string"):
        fcall(fnp.sin, inlineable=False)


def test_serialize_executable_is_single_device_and_ftrans_format():
    from jax.experimental import serialize_executable as jser
    from jax.sharding import Mesh as JMesh
    from jax.sharding import NamedSharding as JNS
    from jax.sharding import PartitionSpec as JP

    from ftrans.experimental import serialize_executable as fser
    from ftrans.sharding import Mesh, NamedSharding
    from ftrans.sharding import PartitionSpec as P

    x = np.ones(4, np.float32)
    jmesh, fmesh = JMesh(np.array(jax.devices()[:2]), ("x",)), Mesh(np.array(ftrans.devices()[:2]), ("x",))
    jser.serialize(jax.jit(lambda v: v * 2, in_shardings=JNS(jmesh, JP("x"))).lower(x).compile())
    with pytest.raises(ValueError, match="does not support serialization"):
        fser.serialize(ftrans.jit(lambda v: v * 2, in_shardings=NamedSharding(fmesh, P("x"))).lower(x).compile())
    payload, in_tree, out_tree = jser.serialize(jax.jit(lambda v: v * 2).lower(x).compile())
    with pytest.raises(ValueError, match="not an executable ftrans's serialize wrote"):
        fser.deserialize_and_load(payload, in_tree, out_tree)
    f = fser.deserialize_and_load(*fser.serialize(ftrans.jit(lambda v: v * 2).lower(x).compile()))
    np.testing.assert_array_equal(np.asarray(f(x)), x * 2)


def test_custom_partitioning_runs_the_function_and_differentiates_it():
    from jax.experimental.custom_partitioning import custom_partitioning as jcp

    from ftrans.experimental.custom_partitioning import custom_partitioning as fcp

    def rule(*_):
        raise AssertionError("not called")

    jf, ff = jcp(jnp.sin), fcp(fnp.sin)
    jf.def_partition(partition=rule, sharding_rule="i -> i")
    ff.def_partition(partition=rule, sharding_rule="i -> i")
    np.testing.assert_allclose(np.asarray(ff(X)), np.asarray(jax.jit(jf)(X)), rtol=1e-6)
    with pytest.raises(Exception):
        jax.grad(lambda a: jf(a).sum())(X)
    np.testing.assert_allclose(np.asarray(ftrans.grad(lambda a: ff(a).sum())(X)), np.cos(X), rtol=1e-6)


def test_ref_buffer_pointer_changes_when_a_jitted_function_writes():
    def run(mod, np_mod):
        @mod.jit
        def sin_inplace(r):
            r[...] = np_mod.sin(r[...])

        r = mod.new_ref(np_mod.arange(3.0))
        before = r.unsafe_buffer_pointer()
        sin_inplace(r)
        return before == r.unsafe_buffer_pointer(), np.asarray(r[...])

    (f_same, f_val), (j_same, j_val) = run(ftrans, fnp), run(jax, jnp)
    np.testing.assert_allclose(f_val, j_val, rtol=1e-6)
    assert j_same and not f_same  # docs/differences.md, "Mutable array references"


def test_donated_argument_may_go_to_a_closed_over_refs_new_value():
    def run(mod, np_mod):
        r = mod.new_ref(np_mod.zeros(3))

        def f(x, y):
            r[...] += y
            return x * 2

        x, y = np_mod.arange(3.0), np_mod.ones(3)
        out = mod.jit(f, donate_argnums=(0, 1))(x, y)
        return np.asarray(out), np.asarray(r[...]), x.is_deleted(), y.is_deleted()

    f_, j_ = run(ftrans, fnp), run(jax, jnp)
    np.testing.assert_allclose(f_[0], j_[0])
    np.testing.assert_allclose(f_[1], j_[1])
    assert f_[2] and j_[2]
    assert f_[3] and not j_[3]  # docs/differences.md, "Mutable array references"


# ---------------------------------------------------------------- error checking (docs/differences.md)
def test_error_state_exists_before_the_first_traced_check():
    import subprocess
    import sys

    # One fresh process: ftrans's part first (its state before any check is what is tested), then jax's
    # oracle, whose error state is its own (a second process would cost seconds of imports).
    code = (
        "import ftrans\nfrom ftrans.numpy import error\n"
        "try:\n    ftrans.jit(lambda x: (error.set_error_if(x > 0, 'm'), x)[1])(1.0)\n"
        "except RuntimeError as e:\n    print('refused', 'import ftrans.error_check' in str(e))\n"
        "from ftrans import error_check\n"
        "ftrans.jit(lambda x: (error_check.set_error_if(x > 0, 'm'), x)[1])(1.0)\n"
        "try:\n    error_check.raise_if_error()\nexcept error_check.JaxValueError as e:\n    print('recorded', e)\n"
        "print('jax:')\n"
        "import jax\nfrom jax._src import error_check as jax_error_check\n"
        "jax.jit(lambda x: (jax_error_check.set_error_if(x > 0, 'm'), x)[1])(1.0)\n"
        "try:\n    jax_error_check.raise_if_error()\nexcept jax_error_check.JaxValueError as e:\n    print('recorded', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=str(__import__("pathlib").Path(__file__).resolve().parents[1])).stdout
    ours, theirs = out.split("jax:")
    assert theirs.split() == ["recorded", "m"]
    assert ours.split() == ["refused", "True", "recorded", "m"]


# ---------------------------------------------------------------- user primitives' lowering rules (docs/differences.md)
def test_mlir_binding_lowering_rules_are_refused_lower_fun_is_not():
    import jax.extend.core as jcore
    import jax.interpreters.mlir as jmlir

    from ftrans.extend.core import Primitive
    from ftrans.interpreters import mlir

    jp = jcore.Primitive("diff_bindings_rule")
    jmlir.register_lowering(jp, lambda ctx, x: [x])  # JAX takes a rule on its MLIR bindings
    p = Primitive("diff_bindings_rule")
    with pytest.raises(NotImplementedError, match="lower_fun"):
        mlir.register_lowering(p, lambda ctx, x: [x])
    mlir.register_lowering(p, mlir.lower_fun(lambda x: x, multiple_results=False))


# ---------------------------------------------------------------- running on a GPU (docs/differences.md)
def test_cpu_only_factorizations_refuse_a_gpu_lowering_with_a_value_error():
    """Lowered for CUDA (no GPU needed): ftrans raises ValueError naming the platform, JAX NotImplementedError."""
    a = np.eye(3, dtype=np.float32)
    with pytest.raises(ValueError, match="cuda"):
        ftrans.export.export(ftrans.jit(flax.linalg.schur), platforms=("cuda",))(a)
    with pytest.raises(NotImplementedError, match="schur"):
        jax.export.export(jax.jit(jlax.linalg.schur), platforms=("cuda",))(a)


def test_matmul_precision_option_reaches_the_lowered_products():
    a = np.ones((2, 2), np.float32)
    with ftrans.default_matmul_precision("highest"), jax.default_matmul_precision("highest"):
        mine = ftrans.jit(lambda x: x @ x).lower(a).as_text()
        theirs = jax.jit(lambda x: x @ x).lower(a).as_text()
    assert "precision = [HIGHEST, HIGHEST]" in mine and "precision = [HIGHEST, HIGHEST]" in theirs


def test_a_host_array_reports_the_default_device():
    assert fnp.ones(3).device == ftrans.devices()[0]
    assert jnp.ones(3).device == jax.devices()[0]


# ---------------------------------------------------------------- names jax 0.11 removed (docs/differences.md)
def test_names_jax_011_removed_stay():
    import jax.extend.core as jcore

    import ftrans.extend.core as fcore

    x = np.float32(2.0)
    for p in (fcore.primitives.call_p, fcore.primitives.closed_call_p):
        assert p.name in ("call", "closed_call")
        body = ftrans.make_jaxpr(lambda v: [fnp.sin(v)])(x)
        assert float(p.bind(x, call_jaxpr=body)[0]) == pytest.approx(np.sin(2.0))
        assert float(p.bind(x, subfuns=(lambda v: [fnp.sin(v)],))[0]) == pytest.approx(np.sin(2.0))
    # jax 0.10: final-style "call"; jax 0.11: eval_jaxpr_p under both names
    assert jcore.primitives.call_p.name in ("call", "eval_jaxpr")
    assert ftrans.core.is_constant_dim(3) and ftrans.core.is_constant_shape((1, 2))
    assert flax.dce_sink_p.name == "dce_sink"


def test_simplified_jaxpr_constants_only_change_the_printing():
    from jax._src import config as jconfig

    from ftrans.core.config import config_context

    f = lambda x: x + np.arange(3, dtype=np.float32)  # noqa: E731
    with jconfig.use_simplified_jaxpr_constants(True), config_context("use_simplified_jaxpr_constants")(True):
        jj, fj = jax.make_jaxpr(f)(1.0), ftrans.make_jaxpr(f)(1.0)
        assert "[...]:f32[3]" in str(fj) and "[...]:f32[3]" in str(jj)
    assert not jj.jaxpr.constvars and len(fj.jaxpr.constvars) == 1


# ---------------------------------------------------------------- experimental.roofline (docs/differences.md)
def _jax_roofline():
    from tests.backend_util import import_jax_module_without_absl

    return import_jax_module_without_absl("jax.experimental.roofline")


def test_roofline_broadcast_operand_counts_in_full():
    jroof = _jax_roofline()
    from ftrans.experimental import roofline as froof

    _, j = jroof.roofline(lambda a, b: a + b)(jnp.ones((3, 8)), jnp.ones((1, 1)))
    _, f = froof.roofline(lambda a, b: a + b)(fnp.ones((3, 8)), fnp.ones((1, 1)))
    assert f.unfused_flops == j.unfused_flops == 24
    assert (j.unfused_hbm_bytes, f.unfused_hbm_bytes) == (4 * (24 + 1 + 24), 4 * 3 * 24)


def test_roofline_cotangent_sums_cost_an_add():
    jroof = _jax_roofline()
    from ftrans.experimental import roofline as froof

    _, j = jroof.roofline(lambda x: x * x, vjp=True)(jax.ShapeDtypeStruct((4,), jnp.bfloat16))
    _, f = froof.roofline(lambda x: x * x, vjp=True)(ftrans.ShapeDtypeStruct((4,), fnp.bfloat16))
    assert f.unfused_flops == j.unfused_flops + 4


def test_roofline_random_split_of_raw_keys():
    jroof = _jax_roofline()
    from ftrans.experimental import roofline as froof

    assert jroof.roofline(lambda k: jax.random.split(k)[0])(jax.random.PRNGKey(0))[1].unfused_flops == 0
    assert froof.roofline(lambda k: ftrans.random.split(k)[0])(ftrans.random.PRNGKey(0))[1].unfused_flops > 0


@_needs_devices
def test_roofline_collective_axes():
    jroof = _jax_roofline()
    from ftrans.experimental import roofline as froof

    jmesh = jax.sharding.Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"))
    fmesh = ftrans.sharding.Mesh(np.array(ftrans.devices()[:4]).reshape(2, 2), ("x", "y"))
    jP, fP = jax.sharding.PartitionSpec, ftrans.sharding.PartitionSpec
    # one all_to_all over two axes: one equation on JAX, one per axis on ftrans
    _, j = jroof.roofline(lambda a: jlax.all_to_all(a, ("x", "y"), 0, 1, tiled=True), mesh=jmesh,
                          in_specs=jP(None, ("x", "y")), out_specs=jP(("x", "y"), None))(
        jax.ShapeDtypeStruct((8, 8), jnp.float32))
    _, f = froof.roofline(lambda a: flax.all_to_all(a, ("x", "y"), 0, 1, tiled=True), mesh=fmesh,
                          in_specs=fP(None, ("x", "y")), out_specs=fP(("x", "y"), None))(
        ftrans.ShapeDtypeStruct((8, 8), np.float32))
    assert j.ici_latency == {"x": 2, "y": 2} and f.ici_latency == {"x": 1, "y": 1}
    # a collective costed without a mesh
    with pytest.raises(AssertionError):
        jroof.roofline(jax.shard_map(lambda a: jlax.psum(a, "x"), mesh=jmesh, in_specs=jP("x"),
                                     out_specs=jP()))(jnp.ones((4,)))
    with pytest.raises(ValueError, match="needs a mesh"):
        froof.roofline(ftrans.shard_map(lambda a: flax.psum(a, "x"), mesh=fmesh, in_specs=fP("x"),
                                        out_specs=fP()))(fnp.ones((4,)))
    # an all_to_all over an axis with a longer name
    jm = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("data",))
    fm = ftrans.sharding.Mesh(np.array(ftrans.devices()[:2]), ("data",))
    with pytest.raises(KeyError):
        jroof.roofline(lambda a: jlax.all_to_all(a, "data", 0, 1, tiled=True), mesh=jm, in_specs=jP("data"),
                       out_specs=jP(None, "data"))(jax.ShapeDtypeStruct((4, 4), jnp.float32))
    _, f = froof.roofline(lambda a: flax.all_to_all(a, "data", 0, 1, tiled=True), mesh=fm, in_specs=fP("data"),
                          out_specs=fP(None, "data"))(ftrans.ShapeDtypeStruct((4, 4), np.float32))
    assert set(f.ici_bytes) == {"data"}


def test_checkify_index_checks_cover_at_subtract():
    from jax.experimental import checkify as jc

    from ftrans.experimental import checkify as fc

    jerr, jout = jc.checkify(lambda a: a.at[7].subtract(1.0), errors=jc.index_checks)(jnp.arange(4.0))
    ferr, fout = fc.checkify(lambda a: a.at[7].subtract(1.0), errors=fc.index_checks)(fnp.arange(4.0))
    assert jerr.get() is None and "out-of-bounds" in ferr.get()
    np.testing.assert_array_equal(fout, jout)


def test_programs_jax_traces_but_cannot_run_are_refused_when_tracing():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    jax.make_jaxpr(lambda v: jlax.cumlogsumexp(v, axis=1))(x)  # traces on JAX ...
    with pytest.raises(OverflowError):
        jax.jit(lambda v: jlax.cumlogsumexp(v, axis=1))(x)  # ... but does not run
    with pytest.raises(TypeError, match="floating-point"):
        ftrans.make_jaxpr(lambda v: flax.cumlogsumexp(v, axis=1))(x)
    jmesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",))
    fmesh = ftrans.sharding.Mesh(np.array(ftrans.devices()[:1]), ("x",))
    jf = jax.shard_map(lambda a: jlax.ppermute(a, "x", perm=((1, 0), (0, 1))), mesh=jmesh,
                       in_specs=jax.sharding.PartitionSpec("x"), out_specs=jax.sharding.PartitionSpec("x"))
    jax.make_jaxpr(jf)(jnp.ones(2))
    with pytest.raises(ValueError):
        jax.jit(jf)(jnp.ones(2))
    ff = ftrans.shard_map(lambda a: flax.ppermute(a, "x", perm=((1, 0), (0, 1))), mesh=fmesh,
                          in_specs=ftrans.sharding.PartitionSpec("x"), out_specs=ftrans.sharding.PartitionSpec("x"))
    with pytest.raises(ValueError, match="out of range"):
        ftrans.make_jaxpr(ff)(fnp.ones(2))


# ---------------------------------------------------------------- debugging (docs/differences.md, "Debugging")
def test_inspect_array_sharding_on_one_device_is_a_single_device_sharding():
    seen_f, seen_j = [], []
    ftrans.jit(lambda a: (ftrans.debug.inspect_array_sharding(a * 2, callback=seen_f.append), a)[1])(np.arange(3.0))
    jax.jit(lambda a: (jax.debug.inspect_array_sharding(a * 2, callback=seen_j.append), a)[1])(np.arange(3.0))
    assert type(seen_f[0]).__name__ == "SingleDeviceSharding" and type(seen_j[0]).__name__ == "GSPMDSharding"
    assert seen_f[0].device_set == seen_j[0].device_set and seen_j[0].is_fully_replicated


# ---------------------------------------------------------------- autodiff (docs/differences.md, "Autodiff")
def test_outer_grad_of_a_strong_tangent_through_a_jitted_library_function():
    f = ftrans.grad(lambda a: ftrans.jvp(ftrans.nn.silu, (a,), (np.float32(1.0),))[1])(0.7)
    j = jax.grad(lambda a: jax.jvp(jax.nn.silu, (a,), (np.float32(1.0),))[1])(0.7)
    assert jax.typeof(j).weak_type and not ftrans.typeof(f).weak_type
    np.testing.assert_allclose(np.asarray(f), np.asarray(j), rtol=1e-6)
    # at the innermost level the tangent comes out weak, as JAX's
    assert ftrans.typeof(ftrans.jvp(ftrans.nn.silu, (0.7,), (np.float32(1.0),))[1]).weak_type
    # a jvp in a jit that rewrites its program differentiates the staged program: the tangent keeps its type
    def inner(L, n):
        return lambda x: L.jvp(lambda v: n.abs(v ** v), (x,), (1.0,))[1]

    assert jax.typeof(jax.jit(inner(jax, jnp))(2.0)).weak_type
    assert not ftrans.typeof(ftrans.jit(inner(ftrans, fnp))(2.0)).weak_type
    assert ftrans.typeof(ftrans.jit(inner(ftrans, fnp), optimizations=())(2.0)).weak_type



# ---------------------------------------------------------------- scipy.stats (docs/differences.md, "What jax 0.12 changed")
def test_cauchy_quantile_derivative_at_the_median():
    import jax.scipy.stats as jst

    import ftrans.scipy.stats as fst

    q = np.float32(0.5)
    for fn, sign in (("ppf", 1), ("isf", -1)):
        ours = ftrans.grad(lambda v, f=getattr(fst.cauchy, fn): f(v, 0.0, 2.0))(q)
        theirs = jax.grad(lambda v, f=getattr(jst.cauchy, fn): f(v, 0.0, 2.0))(q)
        np.testing.assert_allclose(np.asarray(ours), sign * 2 * np.pi, rtol=1e-6)
        # jax 0.12 selects 0 for the median's value, zeroing the derivative; 0.10 and 0.11's tan has it
        np.testing.assert_allclose(np.asarray(theirs), 0.0 if JAX_012 else sign * 2 * np.pi, rtol=1e-6)


# ---------------------------------------------------------------- what jax 0.12 changed: new names (j12api)
def test_polynomial_past_unroll_terms_at_infinity():
    """ftrans unrolls every term from the leading coefficient: +inf; jax 0.12's scan (past 8 terms) starts
    from zero: NaN."""
    coeffs = [1.0] * 10
    assert float(flax.polynomial(np.float32(np.inf), coeffs)) == np.inf
    assert float(ftrans.jit(lambda x: flax.polynomial(x, coeffs))(np.float32(np.inf))) == np.inf
    if JAX_012:
        assert np.isnan(float(jlax.polynomial(np.float32(np.inf), coeffs)))
        assert float(jlax.polynomial(np.float32(np.inf), coeffs[:3])) == np.inf  # (unrolled: as ftrans)


def test_symbolic_dim_bounds_may_be_looser_than_jax():
    from ftrans import export as fe

    c, d = fe.symbolic_shape("c, d", constraints=("c >= 4", "c <= 10", "d <= c"))
    assert fe.symbolic_dim_bounds(d) == (1, np.inf)
    if hasattr(jax.export, "symbolic_dim_bounds"):
        jc, jd = jax.export.symbolic_shape("c, d", constraints=("c >= 4", "c <= 10", "d <= c"))
        assert jax.export.symbolic_dim_bounds(jd) == (1, 10)


def test_ffi_call_refuses_a_token_result():
    with pytest.raises(NotImplementedError, match="token result"):
        ftrans.ffi.ffi_call("some_target", ftrans.ffi.abstract_token)


def test_psum_scatter_start_returns_a_future_outside_jit_too():
    g = ftrans.vmap(lambda a: flax.psum_scatter_start(a, "b", tiled=True).done(), axis_name="b")
    np.testing.assert_array_equal(np.asarray(g(np.ones((2, 4), np.float32))), np.full((2, 2), 2, np.float32))


def test_eager_maximum_of_signed_zeros_takes_numpys_choice():
    """docs/differences.md (Arrays): eagerly NumPy's tie rule picks the zero; under jit XLA's order, as JAX."""
    a, b = np.array([0.0, -0.0], np.float32), np.array([-0.0, 0.0], np.float32)
    assert list(np.signbit(np.asarray(fnp.maximum(a, b)))) == [True, False]  # the second operand
    assert list(np.signbit(np.asarray(ftrans.jit(fnp.maximum)(a, b)))) == [False, False]
    assert list(np.signbit(np.asarray(jax.jit(jnp.maximum)(a, b)))) == [False, False]
    assert list(np.signbit(np.asarray(ftrans.jit(fnp.minimum)(a, b)))) == [True, True]
