"""String arrays (NumPy 2's ``StringDType``) on CPU devices, differential against JAX.

JAX accepts ``StringDType`` NumPy arrays as device arrays on CPU devices (``device_put``,
``jnp.asarray``; one device or a ``NamedSharding`` over several), reads them back unchanged, and
refuses them in computations: ``jit``/``grad`` arguments, primitive operands, type promotion. Each
case runs on both libraries with the same inputs; values, dtypes and error types must agree.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp

pytestmark = pytest.mark.skipif(not hasattr(np, "dtypes") or not hasattr(np.dtypes, "StringDType"),
                                reason="needs NumPy 2's StringDType")

S = np.dtypes.StringDType() if hasattr(np, "dtypes") and hasattr(np.dtypes, "StringDType") else None
LIBS = {"jax": (jax, jnp), "ftrans": (ftrans, fnp)}


def _strings(*shape):
    n = int(np.prod(shape)) if shape else 1
    words = ["abcdefghijklmnopqrstuvwxyz", "cba", "", "héllo wörld", "x" * 40, "12", "a b", "z"]
    return np.array([words[i % len(words)] for i in range(n)], dtype=S).reshape(shape)


def _outcome(fn):
    """('ok', NumPy value) or ('err', exception) for ``fn()``."""
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001 - compared by type against JAX's
        return "err", e


def _both(make):
    """``make(lib, lnp)`` run on JAX and on ftrans: both outcomes."""
    return {name: _outcome(lambda lib=lib, lnp=lnp: make(lib, lnp)) for name, (lib, lnp) in LIBS.items()}


def _same_error_kind(ours, theirs):
    for base in (TypeError, ValueError, RuntimeError, IndexError):
        if isinstance(theirs, base):
            assert isinstance(ours, base), (ours, theirs)
            return
    raise AssertionError(f"unexpected JAX error {theirs!r}")


def _check_agree(make, *, expect_ok, read=lambda x: np.asarray(x), match=None):
    out = _both(make)
    (jk, jv), (fk, fv) = out["jax"], out["ftrans"]
    assert jk == ("ok" if expect_ok else "err"), f"JAX itself changed: {jv!r}"
    assert fk == jk, f"ftrans {fk}: {fv!r}; JAX {jk}: {jv!r}"
    if jk == "ok":
        jr, fr = read(jv), read(fv)
        assert fr.dtype == jr.dtype == S
        np.testing.assert_array_equal(fr, jr)
        return jv, fv
    _same_error_kind(fv, jv)
    if match is not None:
        import re

        assert re.search(match, str(fv)), str(fv)
        assert re.search(match, str(jv)), str(jv)
    return jv, fv


def _cpu(lib, i=0):
    return lib.devices("cpu")[i]


# -- placement --------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2,), (3, 2), (), (1, 4, 1), (2, 6)])
@pytest.mark.parametrize("how", ["device_put", "asarray", "asarray_dtype", "array"])
def test_single_device_round_trip(shape, how):
    host = _strings(*shape)

    def make(lib, lnp):
        dev = _cpu(lib)
        if how == "device_put":
            x = lib.device_put(host, device=dev)
        elif how == "asarray":
            x = lnp.asarray(host, device=dev)
        elif how == "asarray_dtype":
            x = lnp.asarray(host, device=dev, dtype=S)
        else:
            x = lnp.array(host, device=dev)
        assert x.block_until_ready() is x
        return x

    jx, fx = _check_agree(make, expect_ok=True, read=lambda x: x)
    assert fx.dtype == jx.dtype == S
    assert fx.shape == jx.shape == shape
    got = ftrans.device_get(fx)
    assert type(got) is np.ndarray and got.dtype == S
    np.testing.assert_array_equal(got, host)
    assert fx.devices() == {_cpu(ftrans)} and fx.committed == jx.committed
    assert isinstance(fx, ftrans.Array)
    assert repr(fx) == repr(jx)
    assert str(fx) == str(jx)


def test_empty_string_array_is_placed():
    # JAX's runtime refuses an empty one (docs/differences.md, tests/test_differences.py)
    x = ftrans.device_put(_strings(0), _cpu(ftrans))
    assert x.shape == (0,) and x.dtype == S and repr(x) == "Array([], shape=(0,), dtype=StringDType128)"


def test_placement_copies_the_host_array():
    host = _strings(2)
    x = ftrans.device_put(host, _cpu(ftrans))
    host[0] = "changed"
    assert np.asarray(x)[0] == "abcdefghijklmnopqrstuvwxyz"
    with pytest.raises(ValueError):  # read back read-only: the Array is immutable
        np.asarray(x)[0] = "no"


def test_moved_between_cpu_devices():
    def make(lib, lnp):
        x = lib.device_put(_strings(2), _cpu(lib, 0))
        y = lib.device_put(x, _cpu(lib, 1))
        assert y.devices() == {_cpu(lib, 1)}
        return y

    _check_agree(make, expect_ok=True)


@pytest.mark.parametrize("spec,shape", [(("x", "y"), (2, 2)), (("x", None), (4, 3)), ((None, "x"), (1, 2)),
                                        (("y", "x"), (1, 4)), (("x",), (2,))])
@pytest.mark.parametrize("asarray", [False, True])
def test_sharded_over_cpu_devices(spec, shape, asarray):
    host = _strings(*shape)

    def make(lib, lnp):
        mesh = lib.sharding.Mesh(np.array(lib.devices("cpu")[:2]).reshape((2, 1)), ("x", "y"))
        sharding = lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec(*spec))
        x = lnp.asarray(host, device=sharding) if asarray else lib.device_put(host, device=sharding)
        x.block_until_ready()
        return x

    jx, fx = _check_agree(make, expect_ok=True, read=lambda x: x)
    np.testing.assert_array_equal(ftrans.device_get(fx), host)
    assert {d.id for d in fx.devices()} == {d.id for d in jx.devices()}
    js = sorted((s.device.id, str(s.index), s.replica_id) for s in jx.addressable_shards)
    fs = sorted((s.device.id, str(s.index), s.replica_id) for s in fx.addressable_shards)
    assert fs == js
    for s in fx.addressable_shards:
        assert s.data.dtype == S
        np.testing.assert_array_equal(np.asarray(s.data), host[s.index])


def test_replicated_over_cpu_devices():
    # JAX's runtime fails to replicate a string array (docs/differences.md); ftrans gives each device a copy
    mesh = ftrans.sharding.Mesh(np.array(ftrans.devices("cpu")[:2]), ("x",))
    host = _strings(2, 2)
    x = ftrans.device_put(host, ftrans.sharding.NamedSharding(mesh, ftrans.sharding.PartitionSpec()))
    assert x.is_fully_replicated and len(x.addressable_shards) == 2
    assert [s.replica_id for s in x.addressable_shards] == [0, 1]
    for s in x.addressable_shards:
        np.testing.assert_array_equal(np.asarray(s.data), host)
    np.testing.assert_array_equal(np.asarray(x), host)


def test_sharded_indivisible():
    def make(lib, lnp):
        mesh = lib.sharding.Mesh(np.array(lib.devices("cpu")[:2]), ("x",))
        return lib.device_put(_strings(3), lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x")))

    _check_agree(make, expect_ok=False)


def test_device_none_is_refused_as_in_jax():
    # JAX checks the target itself (not the default device): a string array needs a CPU device named
    _check_agree(lambda lib, lnp: lib.device_put(_strings(2)), expect_ok=False,
                 match="String arrays can only be sharded to CPU devices")
    _check_agree(lambda lib, lnp: lnp.asarray(_strings(2), dtype=S), expect_ok=False,
                 match="String arrays can only be sharded to CPU devices")


def test_non_cpu_target_is_refused():
    # (no accelerator on the CPU test machine: a device that names another platform stands for one)
    from ftrans.core import strings

    class FakeGpu:
        platform = "gpu"
        id = 0

        def __repr__(self):
            return "CudaDevice(id=0)"

    with pytest.raises(TypeError, match="String arrays can only be sharded to CPU devices.*CudaDevice"):
        strings.place(_strings(2), FakeGpu())
    strings.check_target(_cpu(ftrans))  # the CPU is fine


# -- dtype conversions ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "int32", "bool"])
def test_string_to_numeric_dtype_refused(dtype):
    _check_agree(lambda lib, lnp: lnp.asarray(np.array(["1", "2"], dtype=S), device=_cpu(lib),
                                              dtype=getattr(lnp, dtype)),
                 expect_ok=False, match=f"Cannot make an array with dtype {dtype} from an object with dtype "
                                        r"StringDType\(\)")


@pytest.mark.parametrize("src", [np.int32, np.float32, np.bool_])
def test_numeric_to_string_dtype_refused(src):
    name = np.dtype(src).name
    _check_agree(lambda lib, lnp: lnp.asarray(np.arange(2).astype(src), device=_cpu(lib), dtype=S),
                 expect_ok=False, match=rf"Cannot make an array with dtype StringDType\(\) from an object with "
                                        rf"dtype {name}\.")


@pytest.mark.parametrize("obj", [["a", "b"], "a"])
def test_string_dtype_from_non_numpy_refused(obj):
    _check_agree(lambda lib, lnp: lnp.asarray(obj, device=_cpu(lib), dtype=S), expect_ok=False,
                 match="string arrays can only be made from NumPy arrays")


def test_ndmin_beyond_rank_refused():
    _check_agree(lambda lib, lnp: lnp.array(_strings(2), device=_cpu(lib), ndmin=3), expect_ok=False,
                 match="ndmin 3 cannot be greater than object's ndims 1")


# -- transformations and operations -----------------------------------------------------------


def _placed(lib):
    return lib.device_put(_strings(2), _cpu(lib))


def test_jit_refuses_string_arrays():
    _check_agree(lambda lib, lnp: lib.jit(lambda x: x)(_placed(lib)), expect_ok=False,
                 match="Argument.*is not a valid JAX type")
    _check_agree(lambda lib, lnp: lib.jit(lambda x: x)(_strings(2)), expect_ok=False,
                 match="is not a valid JAX type")


@pytest.mark.parametrize("transform,kw", [("grad", {}), ("value_and_grad", {}), ("grad", {"holomorphic": True}),
                                          ("grad", {"allow_int": True}), ("jacrev", {}), ("jacfwd", {})])
def test_grad_refuses_string_arrays(transform, kw):
    _check_agree(lambda lib, lnp: getattr(lib, transform)(lambda x: x, **kw)(_placed(lib)), expect_ok=False,
                 match="Argument.*is not a valid JAX type")


def test_vmap_of_identity_passes_it_through():
    jx, fx = _check_agree(lambda lib, lnp: lib.vmap(lambda x: x)(_placed(lib)), expect_ok=True,
                          read=lambda x: x)
    assert fx.dtype == jx.dtype


def test_vmap_with_arithmetic_refused():
    _check_agree(lambda lib, lnp: lib.vmap(lambda x: x + lnp.arange(2))(_placed(lib)), expect_ok=False,
                 match=r"StringDType.*is not a valid dtype")


@pytest.mark.parametrize("op", ["index", "reshape", "sin", "astype", "sum", "eq"])
def test_operations_refused(op):
    def make(lib, lnp):
        x = _placed(lib)
        if op == "index":
            return x[0]
        if op == "reshape":
            return x.reshape(2, 1)
        if op == "sin":
            return lnp.sin(x)
        if op == "astype":
            return x.astype(np.float32)
        if op == "sum":
            return x.sum()
        return x == x

    _check_agree(make, expect_ok=False)


def test_make_jaxpr_names_the_type():
    j = jax.make_jaxpr(lambda x: x)(_placed(jax))
    f = ftrans.make_jaxpr(lambda x: x)(_placed(ftrans))
    assert str(f).strip() == str(j).strip() == "{ lambda ; a:StringDType128[2]. let  in (a,) }"


def test_tolist_and_len():
    jx, fx = _placed(jax), _placed(ftrans)
    assert fx.tolist() == jx.tolist()
    assert len(fx) == len(jx)


def test_eval_shape_gives_the_string_type():
    j = jax.eval_shape(lambda x: x, _placed(jax))
    f = ftrans.eval_shape(lambda x: x, _placed(ftrans))
    assert f.shape == j.shape == (2,) and f.dtype == j.dtype == S


def test_placed_array_without_target_refused():
    _check_agree(lambda lib, lnp: lib.device_put(_placed(lib)), expect_ok=False,
                 match="String arrays can only be sharded to CPU devices")


def test_pickle_round_trip():
    import pickle

    x = ftrans.device_put(_strings(3), _cpu(ftrans, 1))
    y = pickle.loads(pickle.dumps(x))
    assert y.dtype == S and y.devices() == {_cpu(ftrans, 1)}
    np.testing.assert_array_equal(np.asarray(y), _strings(3))
    # (JAX's unpickling of one fails: docs/differences.md, tests/test_differences.py)
