"""``ftrans.pure_callback`` and ``ftrans.experimental.io_callback`` against JAX: results eagerly and under
``jit``; every ``vmap_method``; not differentiable unless wrapped in ``custom_jvp``; dead-code elimination
drops an unused ``pure_callback`` but never an ``io_callback``; a result of the wrong shape or dtype is an
error naming the user's line."""

import logging
import os

import jax
import jax.numpy as jnp_jax
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jax.experimental import io_callback as jax_io_callback

import ftrans
import ftrans.numpy as jnp
from ftrans import errors, lax
from ftrans.core.prims.callbacks import CallbackResultError
from ftrans.experimental import io_callback
from ftrans.transforms.passes import run_pipeline
from tests.backend_util import host_oracle

THIS = os.path.abspath(__file__)


def _line_of(marker: str) -> int:
    src = open(THIS).read().splitlines()
    return next(i + 1 for i, s in enumerate(src) if marker in s and "_line_of" not in s)


def _host_sin_cos(x, y):
    x, y = np.asarray(x), np.asarray(y)
    return np.sin(x) * y, {"c": np.cos(x).astype(x.dtype)}


def _pc(J, x, y, **kw):
    out_type = (J.ShapeDtypeStruct(x.shape, x.dtype), {"c": J.ShapeDtypeStruct(x.shape, x.dtype)})
    return J.pure_callback(_host_sin_cos, out_type, x, y, **kw)


@pytest.mark.parametrize("wrap", ["eager", "jit"])
def test_pure_callback_pytree_results(wrap):
    x = np.linspace(0, 1, 5, dtype=np.float32)
    outs = []
    for J in (jax, ftrans):
        f = lambda a, b, J=J: _pc(J, a, b)  # noqa: E731
        outs.append((J.jit(f) if wrap == "jit" else f)(x, np.float32(2)))
    (ja, jd), (fa, fd) = outs
    np.testing.assert_allclose(np.asarray(fa), np.asarray(ja), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fd["c"]), np.asarray(jd["c"]), rtol=1e-6)
    assert isinstance(fa, ftrans.Array) and fa.dtype == np.float32


@given(st.lists(st.floats(-10, 10, width=32), min_size=1, max_size=6))
def test_pure_callback_values_match_jax(xs):
    x = np.asarray(xs, np.float32)
    f = lambda J: J.jit(lambda v: _pc(J, v, v)[0] + 1)  # noqa: E731
    np.testing.assert_allclose(np.asarray(f(ftrans)(x)), np.asarray(f(jax)(x)), rtol=1e-6)


@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                                    "legacy_vectorized"])
def test_pure_callback_vmap_methods(method):
    """Same results and the same shapes seen by the callback as JAX, for every vmap_method."""
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    y = np.float32(3)
    results = []
    for J in (jax, ftrans):
        seen = []

        def cb(a, b, seen=seen):
            seen.append((np.shape(a), np.shape(b)))
            b = np.asarray(b)
            return np.asarray(a) * b.reshape(b.shape + (1,) * (np.ndim(a) - b.ndim))

        def f(a, b, J=J, cb=cb):
            shape = np.broadcast_shapes(a.shape, np.shape(b))
            return J.pure_callback(cb, J.ShapeDtypeStruct(shape, a.dtype), a, b, vmap_method=method)

        out = J.jit(J.vmap(f, in_axes=(0, None)))(x, y)
        results.append((np.asarray(out), sorted(set(seen))))
    np.testing.assert_allclose(results[1][0], results[0][0])
    assert results[1][1] == results[0][1]


@pytest.mark.parametrize("method, unroll", [("sequential", 1), ("sequential_unrolled", 5)])
def test_sequential_is_a_loop_as_jax(method, unroll):
    """``sequential`` loops over the batch with a ``scan`` (one call in the program, as JAX's ``lax.map``);
    ``sequential_unrolled`` unrolls that scan."""
    def f(J):
        return J.vmap(lambda v: J.pure_callback(lambda a: np.asarray(a) + 1, J.ShapeDtypeStruct((), np.float32), v,
                                                vmap_method=method))

    x = np.arange(5, dtype=np.float32)
    (scan,) = ftrans.make_jaxpr(f(ftrans))(x).eqns
    (jscan,) = jax.make_jaxpr(f(jax))(x).eqns
    assert scan.primitive.name == jscan.primitive.name == "scan"
    assert scan.params["unroll"] == jscan.params["unroll"] == unroll
    big = np.arange(3000 if unroll == 1 else 5, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(ftrans.jit(f(ftrans))(big)), big + 1)


def test_pure_callback_vmap_axis_1_and_nested():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    outs = []
    for J in (jax, ftrans):
        f = lambda a, J=J: J.pure_callback(lambda v: np.asarray(v) ** 2, J.ShapeDtypeStruct(a.shape, a.dtype), a,  # noqa: E731
                                           vmap_method="expand_dims")
        outs.append(np.asarray(J.vmap(J.vmap(f), in_axes=1)(x)))
    np.testing.assert_allclose(outs[1], outs[0])


def test_pure_callback_vmap_without_method_is_refused():
    f = lambda a: ftrans.pure_callback(lambda v: v, ftrans.ShapeDtypeStruct((), np.float32), a)  # noqa: E731
    with pytest.raises(NotImplementedError, match="vmap_method"):
        ftrans.vmap(f)(np.ones(3, np.float32))
    with pytest.raises(NotImplementedError, match="vmap_method"):  # as JAX
        jax.vmap(lambda a: jax.pure_callback(lambda v: v, jax.ShapeDtypeStruct((), np.float32), a))(
            np.ones(3, np.float32))


def test_pure_callback_bad_vmap_method():
    with pytest.raises(ValueError, match="vmap_method"):
        ftrans.pure_callback(lambda v: v, ftrans.ShapeDtypeStruct((), np.float32), 1.0, vmap_method="nope")


def test_pure_callback_not_differentiable():
    f = lambda a: ftrans.pure_callback(lambda v: np.sin(np.asarray(v)), ftrans.ShapeDtypeStruct((), np.float32),  # noqa: E731
                                       a)
    with pytest.raises(ValueError, match="custom_jvp"):
        ftrans.grad(f)(1.0)
    with pytest.raises(ValueError, match="custom_jvp"):
        jax.grad(lambda a: jax.pure_callback(np.sin, jax.ShapeDtypeStruct((), np.float32), a))(1.0)
    # with no tangent flowing in, it is simply evaluated
    assert float(ftrans.grad(lambda a: a * f(ftrans.lax.stop_gradient(a)))(1.0)) == pytest.approx(np.sin(1.0))


def test_pure_callback_inside_custom_jvp():
    def make(J):
        @J.custom_jvp
        def host_sin(x):
            return J.pure_callback(lambda v: np.sin(v).astype(np.float32), J.ShapeDtypeStruct(x.shape, x.dtype), x,
                                   vmap_method="sequential")

        @host_sin.defjvp
        def _(primals, tangents):
            (x,), (t,) = primals, tangents
            return host_sin(x), J.numpy.cos(x) * t

        return J.jit(J.vmap(J.grad(lambda x: host_sin(x) * x)))

    x = np.linspace(0.1, 1.0, 4, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(make(ftrans)(x)), np.asarray(make(jax)(x)), rtol=1e-6)


def test_dce_drops_unused_pure_callback_but_not_io_callback():
    calls = []

    def pure(x):
        calls.append("pure")
        return x

    def io(x):
        calls.append("io")
        return x

    def f(x):
        s = ftrans.ShapeDtypeStruct((), np.float32)
        ftrans.pure_callback(pure, s, x)
        io_callback(io, s, x)
        return x + 1

    closed = run_pipeline(ftrans.make_jaxpr(f)(1.0))
    names = [e.primitive.name for e in closed.eqns]
    assert "pure_callback" not in names and "io_callback" in names
    assert float(ftrans.jit(f)(1.0)) == 2.0
    assert calls == ["io"]


def test_pure_callback_not_folded_or_merged():
    """Constant operands are not folded (that would call it while compiling); two equal calls stay two."""
    calls = []

    def cb(x):
        calls.append(1)
        return np.asarray(x) * 2

    def f():
        s = ftrans.ShapeDtypeStruct((), np.float32)
        c = jnp.float32(3)
        return ftrans.pure_callback(cb, s, c) + ftrans.pure_callback(cb, s, c)

    g = ftrans.jit(f)
    g.lower()
    assert calls == []
    assert float(g()) == 12.0
    assert len(calls) == 2


@pytest.mark.parametrize("wrap", ["eager", "jit"])
def test_io_callback_ordered_side_effects(wrap):
    log = {"jax": [], "ftrans": []}
    for name, J, io in (("jax", jax, jax_io_callback), ("ftrans", ftrans, io_callback)):
        store = log[name]

        def record(v, store=store):
            store.append(int(v))
            return np.int32(len(store))

        def f(xs, J=J, io=io):
            def body(c, x):
                n = io(record, J.ShapeDtypeStruct((), np.int32), x + c, ordered=True)
                return c + n, n
            return J.lax.scan(body, np.int32(0), xs)

        out = (J.jit(f) if wrap == "jit" else f)(np.arange(4, dtype=np.int32))
        J.effects_barrier()
        store.append(np.asarray(out[1]).tolist())
    assert log["ftrans"] == log["jax"]


def test_io_callback_vmap():
    got = []
    f = lambda a: io_callback(lambda v: got.append(float(v)) or np.float32(v * 2),  # noqa: E731
                              ftrans.ShapeDtypeStruct((), np.float32), a)
    out = ftrans.vmap(f)(np.arange(3, dtype=np.float32))
    np.testing.assert_allclose(np.asarray(out), [0, 2, 4])
    assert got == [0.0, 1.0, 2.0]
    g = lambda a: io_callback(lambda v: v, ftrans.ShapeDtypeStruct((), np.float32), a, ordered=True)  # noqa: E731
    with pytest.raises(ValueError, match="Cannot `vmap` ordered IO callback"):
        ftrans.vmap(g)(np.arange(3, dtype=np.float32))


def test_io_callback_not_differentiable():
    f = lambda a: io_callback(np.sin, ftrans.ShapeDtypeStruct((), np.float32), a)  # noqa: E731
    with pytest.raises(ValueError, match="IO callbacks do not support JVP"):
        ftrans.grad(f)(1.0)


# ----------------------------------------------------------------------------
# Results that do not match their declaration


@pytest.mark.parametrize("wrap", ["eager", "jit"])
def test_wrong_result_shape_names_the_line(wrap):
    def f(x):
        return ftrans.pure_callback(lambda v: np.zeros(2, np.float32),
                                    ftrans.ShapeDtypeStruct((3,), np.float32), x)  # MARK-shape
    g = ftrans.jit(f) if wrap == "jit" else f
    with pytest.raises(RuntimeError) as ei:
        g(np.ones(3, np.float32))
    assert isinstance(ei.value, CallbackResultError)
    msg = str(ei.value)
    assert "(2,)" in msg and "(3,)" in msg
    line = _line_of("MARK-shape")
    assert f"{THIS}:{line - 1}" in msg or f"{THIS}:{line}" in msg


@pytest.mark.parametrize("wrap", ["eager", "jit"])
def test_wrong_result_dtype(wrap):
    def f(x):
        return io_callback(lambda v: np.zeros(3, np.int32), ftrans.ShapeDtypeStruct((3,), np.float32), x)
    g = ftrans.jit(f) if wrap == "jit" else f
    with pytest.raises(CallbackResultError, match="int32.*float32"):
        g(np.ones(3, np.float32))


def test_wrong_number_of_results():
    with pytest.raises(CallbackResultError, match="returned 2 value"):
        ftrans.pure_callback(lambda v: (v, v), ftrans.ShapeDtypeStruct((), np.float32), 1.0)


def test_float64_result_is_canonicalized_as_jax():
    """A float64 result for a float32 declaration is accepted without x64, as JAX canonicalizes it."""
    f = lambda J: J.jit(lambda x: J.pure_callback(lambda v: np.asarray(v, np.float64) + 0.5,  # noqa: E731
                                                  J.ShapeDtypeStruct((), np.float32), x))
    assert float(f(ftrans)(1.0)) == float(f(jax)(1.0)) == 1.5


def test_bad_result_shape_dtypes():
    with pytest.raises(TypeError, match="shape and .dtype|.shape and .dtype"):
        ftrans.pure_callback(lambda v: v, [3], 1.0)


def test_callbacks_in_while_loop_jit():
    def f(J, x):
        def body(c):
            i, v = c
            v = J.pure_callback(lambda a: np.asarray(a) * 2, J.ShapeDtypeStruct((), np.float32), v)
            return i + 1, v
        return J.lax.while_loop(lambda c: c[0] < 4, body, (0, x))[1]

    assert float(ftrans.jit(lambda x: f(ftrans, x))(1.5)) == float(jax.jit(lambda x: f(jax, x))(1.5)) == 24.0


def test_errors_module_types():
    assert issubclass(CallbackResultError, RuntimeError) and issubclass(CallbackResultError, errors.FtransError)
    assert lax is not None and jnp_jax is not None


# ----------------------------------------------------------------------------
# What JAX refuses


def test_io_callback_refused_in_batched_cond_and_while():
    def f(pred):
        return lax.cond(pred, lambda: io_callback(lambda: None, None), lambda: io_callback(lambda: None, None))

    with pytest.raises(NotImplementedError, match="IO effect not supported in vmap-of-cond"):
        ftrans.vmap(f)(jnp.array([True, False]))

    def g(i):
        return lax.while_loop(lambda i: i < 5, lambda i: (io_callback(lambda v: None, None, i), i + 1)[1], i)

    with pytest.raises(NotImplementedError, match="IO effect not supported in while_loop with batched predicate"):
        ftrans.vmap(g)(jnp.arange(3))
    # an unbatched predicate is fine: the I/O happens as the program says
    got = []
    ftrans.vmap(lambda x: lax.cond(True, lambda v: io_callback(got.append, None, v), lambda v: None, x))(
        jnp.arange(2.0))
    assert [float(v) for v in got] == [0.0, 1.0]


def test_io_callback_refused_in_checkpoint_under_grad():
    def f(x, y):
        io_callback(lambda v: v, y, y)
        return x

    with pytest.raises(NotImplementedError, match="Effects not supported in AD of `checkpoint`"):  # jax 0.11's
        ftrans.grad(ftrans.checkpoint(f))(2.0, 3.0)
    with pytest.raises(NotImplementedError, match="Effects not supported in (AD|partial-eval) of `checkpoint`"):
        jax.grad(jax.checkpoint(lambda x, y: (jax_io_callback(lambda v: v, y, y), x)[1]))(2.0, 3.0)


def test_callbacks_refused_by_linear_transpose():
    s = ftrans.ShapeDtypeStruct((), np.float32)
    with pytest.raises(ValueError, match="IO callbacks do not support transpose"):
        ftrans.linear_transpose(lambda x: io_callback(lambda v: v, s, x), 1.0)(1.0)
    with pytest.raises(ValueError, match="Pure callbacks do not support transpose"):
        ftrans.linear_transpose(lambda x: ftrans.pure_callback(lambda v: v, s, x), 1.0)(1.0)


def test_64_bit_result_declaration_without_x64():
    import types

    decl = types.SimpleNamespace(shape=(), dtype=np.float64)
    with pytest.raises(ValueError, match="cannot specify 64-bit types"):
        ftrans.pure_callback(lambda: np.float64(1.0), decl)
    with pytest.raises(ValueError, match="cannot specify 64-bit types"):
        jax.pure_callback(lambda: np.float64(1.0), jax.ShapeDtypeStruct((), np.float64))


def test_callback_exception_is_logged_with_traceback(caplog):
    def fail(x):
        raise KeyError("Ooops")

    with pytest.raises(KeyError, match="Ooops"):
        ftrans.jit(lambda x: ftrans.pure_callback(fail, ftrans.ShapeDtypeStruct((), np.float32), x))(1.0)
    rec = [r for r in caplog.records if r.name == "ftrans.callback" and r.levelno == logging.ERROR]
    assert rec and "pure_callback failed" in rec[0].getMessage() and rec[0].exc_info is not None


@pytest.mark.parametrize("where", ["jit", "eager"])
@pytest.mark.parametrize("api", ["pure", "io"])
def test_callback_exception_is_its_own_type_and_a_runtime_error_as_in_jax(where, api):
    """JAX raises a RuntimeError for a failing callback; ftrans's exception is both that and the callback's own."""
    def fail(x):
        raise KeyError("Ooops")

    def wrong_arity():
        return np.float32(0)

    def call(fn, *args):
        spec = ftrans.ShapeDtypeStruct((), np.float32)
        if api == "pure":
            return ftrans.pure_callback(fn, spec, *args)
        return io_callback(fn, spec, *args)

    run = (lambda g, *a: ftrans.jit(g)(*a)) if where == "jit" else (lambda g, *a: g(*a))
    for exc in (KeyError, RuntimeError):
        with pytest.raises(exc, match="Ooops"):
            run(lambda x: call(fail, x), 1.0)
    with pytest.raises(RuntimeError):  # the callback called with an argument it does not take (JAX: RuntimeError)
        run(lambda x: call(wrong_arity, x), 1.0)
    # jax: the same program raises a RuntimeError (on the CPU device: on a GPU jax's failed callback leaves
    # its error behind, and a later jax call in the process raises it again)
    with pytest.raises(RuntimeError), host_oracle():
        jax.jit(lambda x: jax.pure_callback(fail, jax.ShapeDtypeStruct((), np.float32), x))(1.0).block_until_ready()


def test_pjit_is_jit_under_its_old_name():
    # (jax's own pjit warns only on its first access in a process: test_multidevice_api checks that warning)
    with pytest.warns(DeprecationWarning):
        from ftrans.experimental.pjit import pjit

    x = np.arange(6.0, dtype=np.float32)
    f = pjit(lambda a: a * 2 + 1)
    g = pjit(static_argnums=1)(lambda a, k: a * k)
    np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(jax.jit(lambda a: a * 2 + 1)(x)))
    np.testing.assert_array_equal(np.asarray(g(x, 3)), x * 3)
    assert isinstance(f, type(ftrans.jit(lambda a: a)))
