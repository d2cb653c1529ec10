"""Small mismatches with JAX, each checked against jax on the same inputs:

* a jitted function that threads refs (closed over, or jnp's error state it touched) runs a twin program;
  the twin donates exactly the user's donated arguments (it had donated none), and ``Compiled`` calls (with
  or without refs) delete the inputs they donated, as ``jit``'s calls do;
* eager ``shard_map`` results under ``jax_remove_size_one_mesh_axis_from_type`` carry the sharding JAX gives;
* ``lax.convert_element_type`` to a 64-bit dtype with x64 off warns as JAX's does (ftrans's own callers
  narrow quietly).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from tests.thorough import THOROUGH

LIBS = [(ftrans, fjnp), (jax, jjnp)]


def _both(scenario):
    return scenario(ftrans, fjnp), scenario(jax, jjnp)


def _run(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``: (its result as NumPy, which array arguments are deleted after, warnings)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    arrays = [a for a in list(args) + list(kwargs.values()) if hasattr(a, "is_deleted")]
    msgs = [str(m.message) for m in w if "donated" in str(m.message)]
    return jax.tree_util.tree_map(np.asarray, out), [a.is_deleted() for a in arrays], msgs


# ------------------------------------------------------------------------------------------------
# 1. donation through refs' twin programs


def _closing_over_a_ref(lib, jnp, how):
    r = lib.new_ref(jnp.zeros(3))

    def f(x, y):
        r[...] += y
        return x * 2

    def fs(n, x):
        r[...] += x
        return x * n

    x, y = jnp.arange(3.0), jnp.ones(3)
    if how == "argnums":
        got = _run(lib.jit(f, donate_argnums=0), x, y)
    elif how == "argnames":
        got = _run(lib.jit(f, donate_argnames="x"), x, y)
    elif how == "argnames_kw":
        got = _run(lib.jit(f, donate_argnames="y"), x, y=y)
    elif how == "static":
        got = _run(lib.jit(fs, static_argnums=0, donate_argnums=1), 2, x)
    elif how == "compiled":
        c = lib.jit(f, donate_argnums=0).lower(x, y).compile()
        assert c.donate_argnums == (0,)
        x2 = jnp.arange(3.0)
        got = _run(c, x2, y)
    elif how == "twice":  # the twin exists already: the second call donates too
        g = lib.jit(f, donate_argnums=0)
        g(jnp.arange(3.0), y)
        got = _run(g, x, y)
    return got, np.asarray(r[...])


@pytest.mark.parametrize("how", ["argnums", "argnames", "argnames_kw", "static", "compiled", "twice"])
def test_jit_of_a_function_closing_over_a_ref_donates_its_donated_arguments(how):
    (fo, fdel, fw), fr = _closing_over_a_ref(ftrans, fjnp, how)
    (jo, jdel, jw), jr = _closing_over_a_ref(jax, jjnp, how)
    np.testing.assert_allclose(fo, jo)
    np.testing.assert_allclose(fr, jr)
    assert fdel == jdel
    assert any(fdel)
    assert fw == jw == []


def test_donated_argument_of_a_ref_threading_function_is_gone_after_the_call():
    r = ftrans.new_ref(fjnp.zeros(3))

    @ftrans.jit
    def bump(x):
        r[...] += x
        return x + 1

    g = ftrans.jit(bump.__wrapped__, donate_argnums=0)
    x = fjnp.arange(3.0)
    out = g(x)
    assert x.is_deleted()
    with pytest.raises(RuntimeError, match="deleted"):
        np.asarray(x)
    np.testing.assert_allclose(np.asarray(out), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(np.asarray(r[...]), [0.0, 1.0, 2.0])


def test_functions_that_touched_jnps_error_state_still_donate():
    """jnp's NaN checks leave the error state (a ref) in a function's store: its later calls run the twin,
    which must donate as the plain program did."""
    from ftrans.numpy import error as ferr

    g = ftrans.jit(lambda a: fjnp.log(a) * 2, donate_argnums=0)
    x = fjnp.arange(1.0, 4.0)
    with ferr.error_checking_behavior(nan="raise"):
        out = g(x)
    assert x.is_deleted()
    x = fjnp.arange(1.0, 4.0)
    out = g(x)  # checks off again: the twin still threads the error state
    assert x.is_deleted()
    np.testing.assert_allclose(np.asarray(out), np.log(np.arange(1.0, 4.0)) * 2, rtol=1e-6)

    jg = jax.jit(lambda a: jjnp.log(a) * 2, donate_argnums=0)
    jx = jjnp.arange(1.0, 4.0)
    jg(jx)
    assert jx.is_deleted()


def test_unusable_donation_warns_through_a_twin_as_through_the_plain_program():
    """A donated argument no output can take warns with the plain path's words, ref or not (the argument
    not read is pruned, so not warned about, as in JAX)."""
    r = ftrans.new_ref(fjnp.zeros(()))

    def f(x, y):
        r[...] += 1.0
        return x.sum()

    def plain(x, y):
        return x.sum()

    _, fdel, fw = _run(ftrans.jit(f, donate_argnums=(0, 1)), fjnp.arange(3.0), fjnp.ones(4))
    _, pdel, pw = _run(ftrans.jit(plain, donate_argnums=(0, 1)), fjnp.arange(3.0), fjnp.ones(4))
    _, jdel, jw = _run(jax.jit(plain, donate_argnums=(0, 1)), jjnp.arange(3.0), jjnp.ones(4))
    assert fdel == pdel == jdel == [False, False]
    assert len(fw) == len(pw) == len(jw) == 1
    assert "Some donated buffers were not usable: float32[3]" in fw[0]
    assert fw[0].replace("jit(f)", "") == pw[0].replace("jit(plain)", "")


def test_compiled_call_deletes_donated_inputs_as_jax():
    """``jit(f, donate_argnums=...).lower(...).compile()(x)``: x is gone after the call, as in JAX (a host
    array's device copy was donated, and the array kept)."""
    def scenario(lib, jnp):
        c = lib.jit(lambda x, y: (x * 2, y + 1), donate_argnums=0).lower(jnp.arange(3.0), 1.0).compile()
        x = jnp.arange(3.0)
        out, deleted, _ = _run(c, x, jnp.float32(1.0))
        return out, deleted

    (fo, fdel), (jo, jdel) = _both(scenario)
    np.testing.assert_allclose(fo[0], jo[0])
    assert fdel == jdel == [True, False]


@pytest.mark.needs_devices(2)
def test_sharded_jit_closing_over_a_ref_lowers_and_donates():
    """``jit(f, in_shardings=..., donate_argnums=0).lower(x).compile()`` of a function closing over a ref:
    lowered as its twin (it had raised an internal NeedsRef), donating x, as JAX."""
    def scenario(lib, jnp):
        from jax.sharding import PartitionSpec as JP

        mesh = lib.make_mesh((2,), ("x",))
        ns = lib.sharding.NamedSharding
        P = lib.sharding.PartitionSpec if lib is ftrans else JP
        s = ns(mesh, P("x"))
        r = lib.new_ref(lib.device_put(jnp.zeros(4), ns(mesh, P())))

        def f(x):
            r[...] += x
            return x * 2

        g = lib.jit(f, donate_argnums=0, in_shardings=s, out_shardings=s)
        x = lib.device_put(jnp.arange(4.0), s)
        out1, del1, _ = _run(g, x)
        x = lib.device_put(jnp.arange(4.0), s)
        out2, del2, _ = _run(g.lower(x).compile(), x)
        return out1, out2, del1, del2, np.asarray(r[...])

    f_, j_ = _both(scenario)
    for a, b in zip(f_, j_):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b))
    assert f_[2] == f_[3] == [True]


# ------------------------------------------------------------------------------------------------
# 2. eager shard_map results' shardings (and under jax_remove_size_one_mesh_axis_from_type)

_SPECS = [(("x", "y"), ("x", "y")), (("y", "x"), ("y", "x")), ((("x", "y"),), (("x", "y"),)), (("x", "y"), ("x",)),
          (("x", None), ("x", "y")), (("x", "y"), (("x", "y"),)), (("y",), ("y",)), ((), ())]


def _twice(x):
    return x * 2


def _shard_map_result(lib, jnp_, mesh_shape, types, ins, outs, jit, remove, how, axis_names=None):
    if lib is ftrans:
        from ftrans.sharding import AxisType as T
        from ftrans.sharding import NamedSharding as NS
        from ftrans.sharding import P as Pc
    else:
        from jax.sharding import AxisType as T
        from jax.sharding import NamedSharding as NS
        from jax.sharding import PartitionSpec as Pc
    mesh = lib.make_mesh(mesh_shape, ("x", "y"), axis_types=(getattr(T, types),) * 2)
    ins, outs = Pc(*ins), Pc(*outs)
    before = lib.config.read("jax_remove_size_one_mesh_axis_from_type") if lib is ftrans else \
        jax.config.jax_remove_size_one_mesh_axis_from_type
    try:
        if how == "update":  # (ftrans: the body runs device by device; a scoped option stages it)
            lib.config.update("jax_remove_size_one_mesh_axis_from_type", remove)
            ctx = lib.set_mesh(mesh)
        else:
            ctx = lib.remove_size_one_mesh_axis_from_type(remove)
        with ctx, lib.set_mesh(mesh):
            arr = lib.device_put(np.arange(16.0).reshape(8, 2), NS(mesh, ins))
            kw = {} if axis_names is None else {"axis_names": axis_names}
            f = lib.shard_map(_twice, mesh=mesh, in_specs=ins, out_specs=outs, **kw)
            out = lib.jit(f)(arr) if jit else f(arr)
            typed = str(lib.typeof(out).sharding.spec) if types == "Explicit" else None
            return str(out.sharding.spec), typed, np.asarray(out)
    finally:
        lib.config.update("jax_remove_size_one_mesh_axis_from_type", before)


# Which axis has size one is data to the same code path: the quick run keeps each axis type with one mesh (the
# four took 25-35 s, half of it JAX's eager shard_map); HYPOTHESIS_PROFILE=full runs all four.
_MESHES_AND_TYPES = [(m, t) for m in [(2, 1), (1, 2)] for t in ["Explicit", "Auto"]
                     if THOROUGH or (m, t) in [((2, 1), "Explicit"), ((1, 2), "Auto")]]


@pytest.mark.parametrize("mesh_shape,types", _MESHES_AND_TYPES)
def test_shard_map_result_sharding_with_size_one_axes_like_jax(mesh_shape, types):
    """Eager: the out_specs entry as written (JAX's), whatever the option; jitted: the type's.  ftrans is
    checked with the option set both ways (a scoped option, and ``config.update``), each against JAX's one
    answer (JAX's eager shard_map compiles several programs per call whichever way the option is set)."""
    for (ins, outs), jit in [(io, False) for io in _SPECS] + [(_SPECS[0], True), (_SPECS[2], True)]:
        for remove in (False, True):
            try:
                want = _shard_map_result(jax, jjnp, mesh_shape, types, ins, outs, jit, remove, "context")
            except ValueError:  # out_specs that need a replication the body does not have
                want = None
            for how in ("context", "update"):
                args = (mesh_shape, types, ins, outs, jit, remove, how)
                if want is None:
                    with pytest.raises(ValueError):
                        _shard_map_result(ftrans, fjnp, *args)
                    continue
                got = _shard_map_result(ftrans, fjnp, *args)
                assert got[:2] == want[:2], args
                np.testing.assert_array_equal(got[2], want[2])


@pytest.mark.needs_devices(2)
@pytest.mark.parametrize("types", ["Explicit", "Auto"])
@pytest.mark.parametrize("mesh_shape", [(2, 1), (1, 2)])
def test_partially_manual_eager_shard_map_result_sharding_like_jax(mesh_shape, types, how="context"):
    """Partially manual, outside jit, staged (a scoped option on): XLA's spec over Auto axes, the type's over
    Explicit ones (as JAX's, which runs it as a jitted program)."""
    for ins in [("x",), ("x", None), ()]:
        for remove in (False, True):
            args = (mesh_shape, types, ins, ins, False, remove, how, {"x"})
            got, want = _shard_map_result(ftrans, fjnp, *args), _shard_map_result(jax, jjnp, *args)
            assert got[:2] == want[:2], args
            np.testing.assert_array_equal(got[2], want[2])


# ------------------------------------------------------------------------------------------------
# 3. lax.convert_element_type to a 64-bit dtype without x64


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, [(m.category, str(m.message)) for m in w if "Explicitly requested" in str(m.message)]


def _head(msg):
    """A warning's text up to the point where ftrans's adds its own hint (JAX's words before it)."""
    return msg.split(". To enable")[0]


@pytest.mark.parametrize("dtype", [np.float64, "float64", np.dtype("int64"), np.uint64, np.complex128])
@pytest.mark.parametrize("where", ["eager", "jit", "vmap", "grad"])
def test_convert_element_type_to_a_64_bit_dtype_warns_like_jax(dtype, where):
    if where == "grad" and np.dtype(dtype).kind not in "fc":
        pytest.skip("grad needs a float result")

    def scenario(lib, jnp_):
        def conv(a):
            return lib.lax.convert_element_type(a, dtype)

        x = jnp_.arange(3.0)

        def fn():
            if where == "jit":
                return lib.jit(conv)(x)
            if where == "vmap":
                return lib.vmap(conv)(x)
            if where == "grad":
                return lib.grad(lambda a: jnp_.real(conv(a)).sum())(x)
            return conv(x)

        out, w = _warnings_of(fn)
        return out.dtype, [(c, _head(m)) for c, m in w]

    got, want = _both(scenario)
    assert got[0] == want[0]
    assert got[1] == want[1]
    assert len(got[1]) == 1 and got[1][0][0] is UserWarning


def test_convert_element_type_quiet_for_32_bit_and_python_types_and_with_x64():
    for d in (np.float32, np.int32, float, int, complex, bool, "bfloat16"):
        _, w = _warnings_of(lambda: ftrans.lax.convert_element_type(fjnp.arange(3.0), d))
        _, jw = _warnings_of(lambda: jax.lax.convert_element_type(jjnp.arange(3.0), d))
        assert w == jw == []
    with ftrans.enable_x64(True):
        out, w = _warnings_of(lambda: ftrans.lax.convert_element_type(fjnp.arange(3.0), np.float64))
    assert out.dtype == np.float64 and w == []


def test_convert_element_type_follows_explicit_x64_dtypes_like_jax():
    x = np.arange(3.0, dtype=np.float32)
    for mode in ("error", "allow"):
        fbefore, jbefore = ftrans.config.read("jax_explicit_x64_dtypes"), jax.config.jax_explicit_x64_dtypes
        ftrans.config.update("jax_explicit_x64_dtypes", mode)
        jax.config.update("jax_explicit_x64_dtypes", mode)
        try:
            if mode == "error":
                with pytest.raises(ValueError, match="Explicitly requested dtype float64 requested in "
                                                     "convert_element_type is not available"):
                    ftrans.lax.convert_element_type(fjnp.asarray(x), np.float64)
                with pytest.raises(ValueError, match="Explicitly requested dtype float64 requested in "
                                                     "convert_element_type is not available"):
                    jax.lax.convert_element_type(jjnp.asarray(x), np.float64)
            else:
                f_, fw = _warnings_of(lambda: ftrans.lax.convert_element_type(fjnp.asarray(x), np.float64))
                j_, jw = _warnings_of(lambda: jax.lax.convert_element_type(jjnp.asarray(x), np.float64))
                assert f_.dtype == j_.dtype and fw == jw == []
        finally:
            ftrans.config.update("jax_explicit_x64_dtypes", fbefore)
            jax.config.update("jax_explicit_x64_dtypes", jbefore)


@pytest.mark.parametrize("case", ["asarray", "asarray_array", "scalar_type", "astype", "jnp_astype", "zeros",
                                  "random_normal", "random_bits", "random_randint", "random_uniform"])
def test_explicit_64_bit_requests_warn_once_in_jaxs_words(case):
    """One warning per call, naming the function as JAX's does (asarray, not array; none for random's), and
    no warning from ftrans's own conversions inside (random's samplers narrow quietly)."""
    def scenario(lib, jnp_):
        k = lib.random.key(0)
        fn = {
            "asarray": lambda: jnp_.asarray([1.0, 2.0], dtype=np.float64),
            "asarray_array": lambda: jnp_.asarray(jnp_.arange(2.0), dtype=np.float64),
            "scalar_type": lambda: jnp_.float64(1.5),
            "astype": lambda: jnp_.arange(2.0).astype(np.float64),
            "jnp_astype": lambda: jnp_.astype(jnp_.arange(2.0), "float64"),
            "zeros": lambda: jnp_.zeros(3, np.float64),
            "random_normal": lambda: lib.random.normal(k, (3,), dtype=np.float64),
            "random_bits": lambda: lib.random.bits(k, (3,), dtype=np.uint64),
            "random_randint": lambda: lib.random.randint(k, (3,), 0, 5, dtype=np.int64),
            "random_uniform": lambda: lib.random.uniform(k, (3,), dtype=np.float64),
        }[case]
        out, w = _warnings_of(fn)
        return np.asarray(out), [(c, _head(m)) for c, m in w]

    got, want = _both(scenario)
    assert got[0].dtype == want[0].dtype
    if not case.startswith("random"):
        np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1]
    assert len(got[1]) == 1


def test_ftrans_random_and_library_code_do_not_warn_without_x64():
    """Code that never names a 64-bit dtype sees no warning from ftrans's own conversions."""
    k = ftrans.random.key(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for fn in (lambda: ftrans.random.normal(k, (4,)), lambda: ftrans.random.uniform(k, (4,)),
                   lambda: ftrans.random.randint(k, (4,), 0, 9), lambda: ftrans.random.bits(k, (4,)),
                   lambda: ftrans.random.gamma(k, 2.0, (4,)), lambda: ftrans.random.poisson(k, 3.0, (4,)),
                   lambda: ftrans.random.permutation(k, 5), lambda: ftrans.random.choice(k, 5, (3,)),
                   lambda: ftrans.random.split(k), lambda: ftrans.random.fold_in(k, 3),
                   lambda: ftrans.random.beta(k, 2.0, 3.0, (2,)), lambda: ftrans.random.t(k, 3.0, (2,)),
                   lambda: ftrans.random.binomial(k, 5, 0.5, (2,)),
                   lambda: ftrans.jit(lambda kk: ftrans.random.normal(kk, (2,)))(k),
                   lambda: ftrans.random.PRNGKey(3), lambda: ftrans.random.key(2**40)):
            fn()


_F64, _I64 = np.float64, np.int64
_MORE = {
    "lax.full": lambda lib, jnp_: lib.lax.full((2,), 1, _F64),
    "lax.iota": lambda lib, jnp_: lib.lax.iota(_I64, 3),
    "lax.broadcasted_iota": lambda lib, jnp_: lib.lax.broadcasted_iota(_I64, (2, 3), 1),
    "lax.dot_general": lambda lib, jnp_: lib.lax.dot_general(jnp_.ones((2, 2)), jnp_.ones((2, 2)),
                                                             (((1,), (0,)), ((), ())), preferred_element_type=_F64),
    "lax.dot": lambda lib, jnp_: lib.lax.dot(jnp_.ones((2, 2)), jnp_.ones((2, 2)), preferred_element_type=_F64),
    "lax.conv_general_dilated": lambda lib, jnp_: lib.lax.conv_general_dilated(
        jnp_.ones((1, 1, 3)), jnp_.ones((1, 1, 2)), (1,), "VALID", preferred_element_type=_F64),
    "lax.bitcast_convert_type": lambda lib, jnp_: lib.lax.bitcast_convert_type(jnp_.ones(2), _I64),
    "jnp.dot": lambda lib, jnp_: jnp_.dot(jnp_.ones((2, 2)), jnp_.ones((2, 2)), preferred_element_type=_F64),
    "jnp.dot_scalar": lambda lib, jnp_: jnp_.dot(2.0, jnp_.ones(2), preferred_element_type=_F64),
    "jnp.vdot": lambda lib, jnp_: jnp_.vdot(jnp_.ones(2), jnp_.ones(2), preferred_element_type=_F64),
    "jnp.matmul": lambda lib, jnp_: jnp_.matmul(jnp_.ones((3, 2, 2)), jnp_.ones((3, 2, 2)), preferred_element_type=_F64),
    "jnp.einsum": lambda lib, jnp_: jnp_.einsum("ij,jk", jnp_.ones((2, 2)), jnp_.ones((2, 2)),
                                                preferred_element_type=_F64),
    "jnp.tensordot": lambda lib, jnp_: jnp_.tensordot(jnp_.ones((2, 2)), jnp_.ones((2, 2)),
                                                      preferred_element_type=_F64),
    "jnp.inner": lambda lib, jnp_: jnp_.inner(jnp_.ones(2), jnp_.ones(2), preferred_element_type=_F64),
    # (3,): a shape the other cases do not use, so jax traces vecdot afresh and warns at once; with (2,) it hit a
    # jitted function another case had traced, was silent, and the test cleared all of jax's caches (below),
    # which every later test in the process then paid for in recompiles
    "jnp.vecdot": lambda lib, jnp_: jnp_.vecdot(jnp_.ones(3), jnp_.ones(3), preferred_element_type=_F64),
    "jnp.identity": lambda lib, jnp_: jnp_.identity(2, dtype=_F64),
    "jnp.indices": lambda lib, jnp_: jnp_.indices((2, 2), dtype=_I64),
    "jnp.trace": lambda lib, jnp_: jnp_.trace(jnp_.ones((2, 2)), dtype=_F64),
}


@pytest.mark.parametrize("case", sorted(_MORE))
def test_other_explicit_64_bit_requests_warn_like_jax(case):
    """lax's dtype-taking functions and jnp's products with preferred_element_type: JAX's one warning, named
    as JAX names it.  (JAX's jitted jnp functions -- dot, matmul, vecdot, ... -- warn only when they trace:
    a cache hit left from another test is silent, so a silent call is made again with jax's caches cleared.
    Clearing them only then spares the recompiles of every jax program the process runs after.)"""
    def scenario(lib, jnp_):
        out, w = _warnings_of(lambda: _MORE[case](lib, jnp_))
        if lib is jax and not w:
            jax.clear_caches()
            out, w = _warnings_of(lambda: _MORE[case](lib, jnp_))
        return np.asarray(out), [(c, _head(m)) for c, m in w]

    got, want = _both(scenario)
    assert got[0].dtype == want[0].dtype
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1]
    assert len(got[1]) == 1


def test_lax_full_like_warns_for_a_64_bit_dtype():
    """(JAX's message names ``dtype`` there; ftrans's names full_like)"""
    x = np.ones(2, np.float32)
    _, fw = _warnings_of(lambda: ftrans.lax.full_like(fjnp.asarray(x), 1, _F64))
    _, jw = _warnings_of(lambda: jax.lax.full_like(jjnp.asarray(x), 1, _F64))
    assert len(fw) == len(jw) == 1
    assert fw[0][1].startswith("Explicitly requested dtype float64 requested in full_like is not available")
