"""``jit``: agreement with eager and jax.jit, caching, static and donated arguments, nesting, threads, errors."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ftrans
import ftrans.numpy as jnp
from ftrans.core.array import Array, DeviceArray
from ftrans.core.ir import typecheck
from ftrans.errors import DeletedArrayError, FtransTypeError, FtransValueError
from tests.hypothesis_budget import examples


def _close(a, b, tol=1e-5):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=tol, atol=tol)


FUNCS = [
    lambda m, x, y: m.sin(x) * 2.0 + y,
    lambda m, x, y: m.tanh(x * y) - m.exp(-x * x),
    lambda m, x, y: m.where(x > y, x, y) + 1,
    lambda m, x, y: m.maximum(x, 0.5) / (1.0 + m.abs(y)),
    lambda m, x, y: (x - y) ** 2 + m.sqrt(m.abs(x)),
]


@settings(max_examples=examples(10), deadline=None)
@given(st.data(), st.sampled_from(range(len(FUNCS))))
def test_jit_matches_eager_and_jax(data, k):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=4))
    x = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(-3, 3, width=32)))
    y = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(-3, 3, width=32)))
    f = FUNCS[k]
    got = ftrans.jit(lambda a, b: f(jnp, a, b))(x, y)
    assert isinstance(got, DeviceArray)
    _close(got, f(jnp, x, y))
    _close(got, jax.jit(lambda a, b: f(jjnp, a, b))(x, y))


def test_weak_types_match_jax():
    for arg in (2.0, 3, np.float32(2.0), np.arange(3, dtype=np.int32)):
        got = ftrans.jit(lambda a: a * 2)(arg)
        want = jax.jit(lambda a: a * 2)(arg)
        assert got.dtype == want.dtype
        assert got.weak_type == want.aval.weak_type, arg


def test_pytrees_in_and_out_and_kwargs():
    def f(params, x, *, scale):
        w, b = params["w"], params["b"]
        return {"out": x @ w + b, "aux": [scale * x.sum(), (w.shape[0],)]}

    p = {"w": np.ones((3, 2), np.float32), "b": np.zeros(2, np.float32)}
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = ftrans.jit(f)(p, x, scale=2.0)
    want = f(p, x, scale=2.0)
    _close(got["out"], want["out"])
    _close(got["aux"][0], np.float32(30.0))
    assert isinstance(got["aux"][1][0], Array) and int(got["aux"][1][0]) == 3


def test_static_argnums_and_argnames():
    calls = []

    def f(x, n, *, mode):
        calls.append(1)
        return x * n if mode == "mul" else x + n

    g = ftrans.jit(f, static_argnums=1, static_argnames="mode")
    x = np.arange(3, dtype=np.float32)
    _close(g(x, 3, mode="mul"), x * 3)
    _close(g(x, 3, mode="add"), x + 3)
    _close(g(x, 3, mode="mul"), x * 3)
    assert len(calls) == 2
    # static by name is also static by position, as in JAX
    h = ftrans.jit(lambda x, k: x * k, static_argnames="k")
    _close(h(x, 4), x * 4)
    _close(h(x, k=5), x * 5)


def test_static_argument_errors():
    with pytest.raises(FtransValueError, match="static_argnums 3 is out of range"):
        ftrans.jit(lambda x, y: x, static_argnums=3)
    g = ftrans.jit(lambda x, n: x, static_argnums=1)
    with pytest.raises(ValueError, match="not hashable"):
        g(np.ones(2), [1, 2])
    with pytest.raises(TypeError, match="called with 1 positional"):  # JAX: a TypeError too
        g(np.ones(2))
    with pytest.raises(FtransValueError, match="not a parameter"):
        ftrans.jit(lambda x: x, static_argnames="nope")


def test_cache_hits_and_misses():
    f = ftrans.jit(lambda x: x + 1)
    x = np.ones(3, np.float32)
    f(x)
    f(x)
    f(np.zeros(3, np.float32))
    assert f.cache_info()["misses"] == 1 and f.cache_info()["hits"] == 2
    f(np.ones(4, np.float32))  # new shape
    f(np.ones(3, np.int32))  # new dtype
    f(1.0)  # weak scalar
    f(np.float32(1.0))  # strong scalar: a different signature
    assert f.cache_info()["misses"] == 5
    assert f._cache_size() == 5
    dx = ftrans.device_put(x)
    before = f.cache_info()["hits"]
    for _ in range(3):
        f(dx)
    assert f.cache_info()["hits"] == before + 3
    f.clear_cache()
    assert f._cache_size() == 0


def test_cache_is_bounded():
    f = ftrans.jit(lambda x: x * 2, max_cache_size=2)
    for n in range(1, 5):
        f(np.ones(n, np.float32))
    assert f._cache_size() == 2


def test_x64_switch_retraces():
    f = ftrans.jit(lambda x: x + 1)
    assert f(1.0).dtype == np.float32
    ftrans.config.update("enable_x64", True)
    try:
        assert f(1.0).dtype == np.float64
    finally:
        ftrans.config.update("enable_x64", False)
    assert f(1.0).dtype == np.float32


def test_retraces_only_when_the_key_changes():
    traces = []

    @ftrans.jit
    def f(x):
        traces.append(x.shape)
        return x * 2

    for _ in range(3):
        f(np.ones(2, np.float32))
    f(np.ones(5, np.float32))
    assert traces == [(2,), (5,)]


def test_make_jaxpr_shows_the_call_and_nesting_works():
    inner = ftrans.jit(lambda x: jnp.sin(x) * 2.0)
    closed = ftrans.make_jaxpr(lambda x: inner(x) + 1.0)(np.ones(3, np.float32))
    text = str(closed)
    assert "= jit[" in text and "name=<lambda>" in text and "sin" in text
    typecheck(closed)
    outer = ftrans.jit(lambda x: inner(inner(x)) - 1.0)
    x = np.linspace(0, 1, 4, dtype=np.float32)
    _close(outer(x), np.sin(np.sin(x) * 2) * 2 - 1)
    assert "call @" in outer.lower(x).as_text()
    # eval_jaxpr runs a staged call through the jit_call impl rule
    x3 = x[:3]
    out = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, x3)
    _close(out[0], np.sin(x3) * 2 + 1)
    with pytest.raises(TypeError, match="do not match"):
        ftrans.eval_jaxpr(closed.jaxpr, closed.consts, x)


def test_closed_over_constants_are_arguments():
    w = jnp.arange(6.0).reshape(2, 3)
    f = ftrans.jit(lambda x: x @ w)
    text = f.lower(np.ones((4, 2), np.float32)).as_text()
    assert "tensor<2x3xf32>" in text.splitlines()[1]  # a parameter of main, not a literal
    _close(f(np.ones((4, 2), np.float32)), np.ones((4, 2), np.float32) @ np.asarray(w))


def test_lower_and_compile():
    f = ftrans.jit(lambda x, y: x * y + 1)
    lowered = f.lower(np.ones(3, np.float32), 2.0)
    text = lowered.as_text()
    assert text.startswith("module @") and "stablehlo.multiply" in text
    compiled = lowered.compile()
    _close(compiled(np.arange(3, dtype=np.float32), 2.0), np.arange(3, dtype=np.float32) * 2 + 1)
    with pytest.raises(TypeError, match="compiled with float32\\[3\\] and called with float32\\[4\\]"):
        compiled(np.ones(4, np.float32), 2.0)
    assert f.eval_shape(np.ones(3, np.float32), 2.0).shape == (3,)


def test_donation():
    f = ftrans.jit(lambda x, y: x * 2 + y, donate_argnums=0)
    x = ftrans.device_put(jnp.arange(4.0))
    out = f(x, jnp.ones(4))
    _close(out, np.arange(4.0, dtype=np.float32) * 2 + 1)
    assert x.is_deleted()
    with pytest.raises(DeletedArrayError, match="donated"):
        np.asarray(x)
    with pytest.raises(DeletedArrayError, match="donated"):
        f(x, jnp.ones(4))
    with pytest.raises(DeletedArrayError, match="donated"):
        ftrans.jit(lambda a: a + 1)(x)
    with pytest.raises(FtransValueError, match="both static and donated"):
        ftrans.jit(lambda a, b: a, static_argnums=0, donate_argnums=0)


def test_bad_argument_types_name_the_path():
    f = ftrans.jit(lambda p: p["a"][1])
    with pytest.raises(FtransTypeError, match=r"args\[0\]\['a'\]\[0\]"):
        f({"a": ["text", np.ones(2)]})
    with pytest.raises(TypeError, match="not a valid JAX type"):
        ftrans.jit(lambda x: x)(object())
    with pytest.raises(TypeError, match=r"at output component \(the whole output\), which is not a valid JAX type"):
        ftrans.jit(lambda x: "no")(np.ones(2))


def test_trace_errors_point_at_user_code():
    def f(x):
        return jnp.ones(3) + x  # line reported

    with pytest.raises(TypeError) as e:
        ftrans.jit(f)(np.ones(4, np.float32))
    assert "test_jit.py" in str(e.value)

    def g(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(ftrans.errors.ConcretizationTypeError, match="test_jit.py"):
        ftrans.jit(g)(1.0)


def test_outputs_live_on_device_and_transfer_on_use():
    f = ftrans.jit(lambda x: x + 1)
    out = f(np.ones(3, np.float32))
    assert isinstance(out, DeviceArray) and out.shape == (3,) and out.dtype == np.float32
    assert out.block_until_ready() is out
    assert "Array([2., 2., 2.]" in repr(out)
    _close(out * 2, np.full(3, 4.0, np.float32))  # eager use transfers to the host once
    np.testing.assert_array_equal(ftrans.device_get({"a": out})["a"], np.full(3, 2.0, np.float32))


@pytest.mark.needs_devices(8)
def test_devices_and_device_put():
    devs = ftrans.devices()
    assert len(devs) == 8 and ftrans.device_count() == 8  # tests/conftest.py forces 8 CPU devices
    assert ftrans.default_backend() == "cpu"
    assert ftrans.local_device_count() == len(ftrans.local_devices())
    x = ftrans.device_put(np.arange(3, dtype=np.float32), devs[3])
    assert x.device == devs[3]
    y = ftrans.jit(lambda a: a * 2)(x)
    assert y.device == devs[3]  # computation follows the data
    z = ftrans.device_put({"a": 1.0, "b": [np.ones(2)]})
    assert z["a"].weak_type and isinstance(z["b"][0], DeviceArray)
    w = ftrans.device_put(x, devs[5])
    assert w.device == devs[5]
    with pytest.raises(ValueError, match="incompatible devices"):
        ftrans.jit(lambda a, b: a + b)(x, w)
    f = ftrans.jit(lambda a: a + 1, device=devs[2])
    assert f(np.ones(2, np.float32)).device == devs[2]


def test_disable_jit():
    seen = []

    def f(x):
        seen.append(type(x))
        return x + 1

    ftrans.config.update("disable_jit", True)
    try:
        ftrans.jit(f)(np.ones(2, np.float32))
    finally:
        ftrans.config.update("disable_jit", False)
    assert seen and not issubclass(seen[0], ftrans.core.trace.Tracer)


def test_threads_call_same_and_different_functions():
    fs = [ftrans.jit(lambda x, k=k: jnp.sin(x) * k) for k in range(4)]
    shared = ftrans.jit(lambda x: x * x + 1)
    errors: list = []

    def worker(i: int) -> None:
        try:
            rng = np.random.default_rng(i)
            for _ in range(20):
                x = rng.standard_normal(5).astype(np.float32)
                _close(shared(x), x * x + 1)
                k = i % 4
                _close(fs[k](x), np.sin(x) * k)
        except Exception as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]


def test_jit_of_method_needs_static_self():
    class M:
        @ftrans.jit
        def f(self, x):
            return x * 2

        def g(self, x):
            return x * 3

    with pytest.raises(TypeError, match="args\\[0\\]"):  # as in JAX: self is an argument like any other
        M().f(np.ones(2, np.float32))
    m = M()
    g = ftrans.jit(M.g, static_argnums=0)
    M.__hash__ = object.__hash__
    _close(g(m, np.ones(2, np.float32)), np.full(2, 3.0, np.float32))


def test_eager_device_path_one_primitive_executables():
    from ftrans.core.primitive import registry
    from ftrans.lowering import device_eager

    x = ftrans.device_put(np.arange(4, dtype=np.float32))
    before = device_eager.stats["compiles"]
    r1 = device_eager.apply(registry["sin"], [x], {}, x.device)
    r2 = device_eager.apply(registry["sin"], [x], {}, x.device)
    assert isinstance(r1, DeviceArray)
    _close(r1, np.sin(np.arange(4, dtype=np.float32)))
    _close(r2, r1)
    assert device_eager.stats["compiles"] == before + 1


def test_xla_rejection_names_the_op():
    from ftrans.core import primitive as P
    from ftrans.core.prims._base import standard_primitive
    from ftrans.lowering.executable import XlaRejectedError
    from ftrans.lowering.lower import lowering_rules, register_lowering

    prim = standard_primitive("_test_broken", lambda x: x.shape, lambda x: x.dtype, lambda x: x)

    @register_lowering(prim)
    def _bad(ctx, x):  # emits an op with the wrong result type on purpose
        return ctx.emit1("stablehlo.sine", [x], "tensor<7xi1>")

    try:
        with pytest.raises(XlaRejectedError, match="stablehlo.sine"):
            ftrans.jit(lambda a: prim.bind(a))(np.ones(2, np.float32))
    finally:
        lowering_rules.pop(prim, None)
        P.registry.pop("_test_broken", None)
        P.abstract_eval_rules.pop(prim, None)
        P.impl_rules.pop(prim, None)


def test_fast_tiers_agree_with_the_general_path():
    w = jnp.arange(3.0)  # a closed-over constant: an extra leading argument of the program
    f = ftrans.jit(lambda p, s: (p["a"] * w + s, p["b"].sum()))
    p = ftrans.device_put({"a": np.ones(3, np.float32), "b": np.arange(4, dtype=np.float32)})
    s = ftrans.device_put(np.float32(2.0))
    first = f(p, s)
    for _ in range(3):  # later calls take the pytree tier
        again = f(p, s)
        _close(again[0], first[0])
        _close(again[1], np.float32(6.0))
    assert len(f._tree_fast) == 1
    g = ftrans.jit(lambda x: x * w)
    x = ftrans.device_put(np.ones(3, np.float32))
    for _ in range(3):  # the positional tier, with a constant
        _close(g(x), np.arange(3, dtype=np.float32))


def test_disable_jit_overrides_cached_fast_paths():
    seen = []

    @ftrans.jit
    def f(x):
        seen.append(1)
        return x + 1

    x = ftrans.device_put(np.ones(2, np.float32))
    f(x)
    f(x)
    assert len(seen) == 1
    ftrans.config.update("disable_jit", True)
    try:
        f(x)
    finally:
        ftrans.config.update("disable_jit", False)
    assert len(seen) == 2


@pytest.mark.needs_devices(8)
def test_device_put_may_alias_donate_and_src():
    """device_put's options act (none is accepted and ignored), with JAX's defaults."""
    d0, d1 = ftrans.devices()[:2]
    x = ftrans.device_put(jnp.arange(4.0), d0)
    assert ftrans.device_put(x, d0) is x                      # may_alias=None: already there, aliased
    c = ftrans.device_put(x, d0, may_alias=False)             # always a copy
    assert c is not x and c._buf is not x._buf and not x.is_deleted()
    np.testing.assert_array_equal(np.asarray(c), np.arange(4.0))
    moved = ftrans.device_put(c, d0, donate=True)              # donated: a copy, and the input is gone
    assert c.is_deleted() and moved.device == d0
    with pytest.raises(DeletedArrayError, match="device_put\\(donate=True\\)"):
        c + 1
    with pytest.raises(ValueError, match="donate=True and may_alias=True"):
        ftrans.device_put(moved, d0, donate=True, may_alias=True)
    with pytest.raises(ValueError, match="cannot be True at the same time"):  # jax refuses the same
        jax.device_put(jax.numpy.ones(2), jax.devices()[0], donate=True, may_alias=True)
    t = {"a": ftrans.device_put(jnp.ones(2), d0), "b": ftrans.device_put(jnp.ones(3), d0)}
    r = ftrans.device_put(t, d1, donate={"a": True, "b": False})  # a tree prefix of flags
    assert t["a"].is_deleted() and not t["b"].is_deleted() and r["a"].device == r["b"].device == d1
    assert ftrans.device_put(moved, d1, src=d0).device == d1
    # src is where reverse mode sends cotangents; as in JAX it is not checked against where x lives
    assert ftrans.device_put(moved, d1, src=d1).device == d1
    jd0, jd1 = jax.devices()[:2]
    assert jax.device_put(jax.device_put(np.ones(2), jd0), jd1, src=jd1).devices() == {jd1}
    with pytest.raises(TypeError, match="donate must be a bool") as e:
        ftrans.device_put(moved, d0, donate="yes")
    assert "test_jit.py" in str(e.value)                      # the user's line, not jax's tree_util


@pytest.mark.needs_devices(8)
def test_creation_functions_honour_device_and_process_queries():
    d = ftrans.devices()[3]
    for make in (lambda: jnp.zeros(3, device=d), lambda: jnp.ones((2, 2), device=d),
                 lambda: jnp.full(2, 7.0, device=d), lambda: jnp.arange(4, device=d),
                 lambda: jnp.linspace(0.0, 1.0, 5, device=d), lambda: jnp.eye(2, device=d),
                 lambda: jnp.asarray([1, 2], device=d), lambda: jnp.array(3.0, device=d),
                 lambda: jnp.zeros_like(np.ones(2), device=d), lambda: jnp.full_like(np.ones(2), 2, device=d)):
        out = make()
        assert isinstance(out, DeviceArray) and out.device == d
    assert isinstance(jnp.zeros(3), Array) and not isinstance(jnp.zeros(3), DeviceArray)  # no device: host
    assert "zeros" not in str(ftrans.make_jaxpr(lambda x: jnp.zeros(3, device=d) + x)(1.0))  # traced: staged
    assert ftrans.local_devices(process_index=0) == ftrans.local_devices()
    assert ftrans.local_devices(process_index=1) == [] and ftrans.process_count() == jax.process_count() == 1


@pytest.mark.parametrize("v", [1.0, 1, True, 1j, np.float32(2.5), np.array(3.0), np.int8(-4)])
def test_device_put_of_a_scalar_keeps_rank_0_like_jax(v):
    # np.ascontiguousarray makes a rank-0 array rank 1; the device buffer must stay rank 0.
    want = jax.device_put(v)
    got = ftrans.device_put(v)
    assert got.shape == want.shape == ()
    assert np.asarray(got).shape == () and got._buf.shape == ()
    assert np.asarray(got).dtype == np.asarray(want).dtype
    assert np.asarray(got) == np.asarray(want)
    tree = ftrans.block_until_ready((ftrans.device_put(v), np.ones(3), 4))
    assert np.asarray(tree[0]).shape == () and tree[2] == 4
    assert np.asarray(ftrans.jit(lambda x: x * 2)(got)).shape == ()
    assert repr(got) == repr(want)


def test_copy_to_host_async_like_jax():
    from unittest import mock

    for mod in (jax, ftrans):
        d = mod.device_put(1.0)
        assert mod.copy_to_host_async(d) is d and float(np.asarray(d)) == 1.0
        o, m = object(), mock.Mock()
        m.copy_to_host_async.return_value = None
        tree = [o, 1, 2, 3, m]
        assert mod.copy_to_host_async(tree) is tree
        m.copy_to_host_async.assert_called_once()
        bad = mock.Mock()
        bad.copy_to_host_async.side_effect = AttributeError("foo")
        with pytest.raises(AttributeError, match="foo"):
            mod.copy_to_host_async(bad)
    h = jnp.ones(3) * 2  # a host Array: nothing to start, no error
    assert ftrans.copy_to_host_async(h) is h and np.asarray(h).tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("mod", [jax, ftrans], ids=["jax", "ftrans"])
def test_jit_outputs_are_fresh_buffers_like_jax(mod):
    np_ = jjnp if mod is jax else jnp
    x = np_.array([1, 2, 3])
    y = mod.jit(lambda a: a)(x)
    assert isinstance(x.unsafe_buffer_pointer(), int)
    assert x.unsafe_buffer_pointer() != y.unsafe_buffer_pointer()
    z1, z2 = mod.jit(lambda a: (a, a))(x)
    assert z1.unsafe_buffer_pointer() != z2.unsafe_buffer_pointer()
    x1, x2 = np_.array([1, 2]), np_.array([2, 3])
    z1, z2, z3 = mod.jit(lambda a, b: (b, 1, a))(x1, x2)
    assert z1.unsafe_buffer_pointer() != x2.unsafe_buffer_pointer()
    assert z3.unsafe_buffer_pointer() != x1.unsafe_buffer_pointer()
    assert int(z2) == 1


@pytest.mark.parametrize("mod", [jax, ftrans], ids=["jax", "ftrans"])
def test_default_device_context_like_jax(mod):
    with mod.default_device("cpu"):
        result = mod.jit(lambda x: x + 1)(1)
        placed = mod.device_put(np.float32(2))
    assert result.device.platform == "cpu" and result.device == mod.local_devices(backend="cpu")[0]
    assert placed.device == mod.local_devices(backend="cpu")[0]
    last = mod.devices()[-1]
    with mod.default_device(last):
        assert mod.device_put(1.0).device == last
        assert mod.jit(lambda x: x * 3)(2).device == last
    result = mod.jit(lambda x: x + 1)(1)
    assert result.device == mod.local_devices()[0] and int(result) == 2
    for bad in ("nonexistent", 3):
        with pytest.raises(ValueError):
            with mod.default_device(bad):
                mod.jit(lambda x: x + 1)(1)
    with mod.default_device(None):
        assert int(mod.jit(lambda x: x * 2)(2)) == 4
    mod.config.update("jax_default_device", mod.devices()[0])
    try:
        assert mod.device_put(2).device == mod.devices()[0]
    finally:
        mod.config.update("jax_default_device", None)


@pytest.mark.parametrize("bad", ["cpu", 3, object()])
def test_device_put_invalid_device_is_a_value_error_like_jax(bad):
    with pytest.raises(ValueError, match="Received invalid value"):
        jax.device_put(jjnp.arange(8), bad)
    with pytest.raises(FtransValueError, match="Received invalid value"):
        ftrans.device_put(jnp.arange(8), bad)


def test_bad_argument_is_named_by_parameter_like_jax():
    def f(x, params=None):
        return x

    for call, name in [(lambda m: m.jit(f)("foo"), "x"), (lambda m: m.jit(f)(1.0, {"w": "bad"}), "params['w']"),
                       (lambda m: m.jit(f)(x="kw"), "x"), (lambda m: m.jit(f).lower("foo"), "x")]:
        with pytest.raises(TypeError, match="path " + name.replace("[", r"\[").replace("]", r"\]")):
            call(jax)
        esc = name.replace("[", r"\[").replace("]", r"\]")
        with pytest.raises(FtransTypeError, match=r"at path " + esc + r"\. Argument " + esc
                           + r" (\(.*\))?: '\w+' of type <class 'str'>"):
            call(ftrans)


def test_jit_drops_closed_over_values_with_the_function():
    """JAX's test_jit_reference_dropping: once the jitted function (and the function it wraps) are
    gone, a value the function closed over is freed at once, without waiting for the garbage
    collector (staging leaves no reference cycle holding it)."""
    import gc
    import weakref

    gc.disable()
    try:
        x = jnp.ones(10)
        f = (lambda x: lambda: x)(x)
        g = ftrans.jit(f)
        x = weakref.ref(x)
        g()
        g()
        del f
        assert x() is not None
        np.testing.assert_array_equal(np.asarray(g()), np.ones(10, np.float32))
        del g
        assert x() is None
    finally:
        gc.enable()


def test_jit_repr_and_wrapped_attributes_like_jax():
    def my_function(x: int) -> int:
        """docstring of f."""
        return x + 1

    my_function.some_value = 4
    for mod in (jax, ftrans):
        jf = mod.jit(my_function)
        assert repr(jf) == f"<PjitFunction of {my_function!r}>"
        for attr in ("doc", "name", "module", "qualname", "annotations"):
            assert getattr(jf, f"__{attr}__") == getattr(my_function, f"__{attr}__")
        assert jf.some_value == 4
        with pytest.raises(AttributeError):
            jf.no_such_attribute  # noqa: B018

    class BadRepr:
        def __call__(self):
            return 1.0

        def __repr__(self):
            raise ValueError("invalid repr")

    for mod in (jax, ftrans):
        jitted = mod.jit(BadRepr())
        assert repr(jitted) == "<PjitFunction>"  # the function's repr failing does not fail jit's
        del jitted.__wrapped__
        assert repr(jitted) == "<PjitFunction>"
    nested = ftrans.jit(ftrans.jit(my_function))
    assert nested.some_value == 4 and int(nested(1)) == 2  # ftrans's own fields are not replaced


@pytest.mark.parametrize("num_args", [2, 3, 4])
def test_pruned_arguments_are_not_transferred(num_args, monkeypatch):
    """JAX's test_jit_with_pruned_args: arguments the program never reads (keep_unused=False) are not
    moved to the device; only the one it reads is."""
    from ftrans.lowering import compat

    def f(*args):
        return args[1] + np.array(2)

    g = ftrans.jit(f)
    assert int(g(*range(num_args))) == int(jax.jit(f)(*range(num_args))) == 3
    puts = []
    real = compat.device_put
    monkeypatch.setattr(compat, "device_put", lambda v, d: puts.append(np.shape(v)) or real(v, d))
    np.testing.assert_allclose(np.asarray(g(*range(num_args))), 3)
    assert len(puts) == 1
    puts.clear()
    np.testing.assert_allclose(np.asarray(ftrans.jit(f, keep_unused=True)(*range(num_args))), 3)
    assert len(puts) == num_args


_CLOSURES = {
    "grad": lambda x: ftrans.grad(lambda y: jnp.sum(y * x)),
    "vmap": lambda x: ftrans.vmap(lambda y: y * x),
    "scan": lambda x: (lambda y: ftrans.lax.scan(lambda c, a: (c + a * x[0], c), 0.0, y)[1]),
    "cond": lambda x: (lambda y: ftrans.lax.cond(y[0] > 0, lambda: y * x, lambda: y)),
    "inner jit": lambda x: (lambda y: ftrans.jit(lambda z: z * x)(y)),
    "checkpoint": lambda x: ftrans.grad(ftrans.checkpoint(lambda y: jnp.sum(jnp.sin(y) * x))),
    "rewritten": lambda x: (lambda y: y * x + 0.0),  # the passes rewrite it: their report must not hold it
}


@pytest.mark.parametrize("kind", sorted(_CLOSURES))
def test_closed_over_values_are_freed_without_the_collector(kind):
    """Whatever transform staged the function (linearize, vmap, scan bodies, the pass pipeline's report),
    a value it closed over is freed as soon as the jitted function is gone, and eager grad/vjp drop it
    as soon as they return: staging leaves no reference cycle that only the garbage collector breaks."""
    import gc
    import weakref

    gc.disable()
    try:
        x = jnp.ones(10)
        f = _CLOSURES[kind](x)
        g = ftrans.jit(f)
        first = np.asarray(g(jnp.ones(10)))
        np.testing.assert_array_equal(np.asarray(g(jnp.ones(10))), first)
        ref = weakref.ref(x)
        del x, f, g
        assert ref() is None
        if kind in ("grad", "checkpoint"):
            y = jnp.ones(10)
            fn = _CLOSURES[kind](y)
            fn(jnp.ones(10))
            ftrans.vjp(lambda z, y=y: z * y, jnp.ones(10))[1](jnp.ones(10))
            ref = weakref.ref(y)
            del y, fn
            assert ref() is None
    finally:
        gc.enable()
