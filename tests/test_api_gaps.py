"""Small pieces of JAX's public API that real programs use, each checked against jax itself:
weak types of derivatives, ``float0``, ``disable_jit``, ``ensure_compile_time_eval``, ``named_call`` /
``named_scope``, ``clear_caches``, ``jacobian``, ``ShapeDtypeStruct.like``, ``typeof``, ``Device`` and
``tree_util.register_dataclass`` / ``Partial``."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp

# ---------------------------------------------------------------- weak types of derivatives

_YS = 3.0  # a strong float32 operand, made per library below


def _cases(lib, np_):
    ys = np_.float32(_YS)
    grad, vag, jacfwd, jacrev, vjp = lib.grad, lib.value_and_grad, lib.jacfwd, lib.jacrev, lib.vjp
    return {
        "grad_weak": lambda: grad(lambda x: x * x)(2.0),
        "grad_strong": lambda: grad(lambda x: x * x)(ys),
        "grad_jit_weak": lambda: lib.jit(grad(lambda x: x * x))(2.0),
        "grad_jit_strong": lambda: lib.jit(grad(lambda x: x * x))(ys),
        "grad_mixed_mul": lambda: grad(lambda x: x * ys)(2.0),
        "grad_mixed_add": lambda: grad(lambda x: x + ys)(2.0),
        "grad_mixed_jit": lambda: lib.jit(grad(lambda x: x * ys))(2.0),
        "grad_mixed_argnums0": lambda: grad(lambda x, y: x * y, argnums=(0, 1))(2.0, ys)[0],
        "grad_mixed_argnums1": lambda: grad(lambda x, y: x * y, argnums=(0, 1))(2.0, ys)[1],
        "grad_sin_weak": lambda: grad(np_.sin)(2.0),
        "grad_sin_strong": lambda: grad(np_.sin)(ys),
        "grad_astype": lambda: grad(lambda x: np_.asarray(x, np_.float32) * 1.0)(2.0),
        "grad_sum_array": lambda: grad(lambda x: (x * 2).sum())(np_.ones(3)),
        "grad_weak_times_array": lambda: grad(lambda x: (x * np_.ones(3)).sum())(2.0),
        "grad_dot_mixed": lambda: grad(lambda x: np_.dot(x, ys))(2.0),
        "grad_where": lambda: grad(lambda x: np_.where(True, x, ys))(2.0),
        "vag_value": lambda: vag(lambda x: x * x)(2.0)[0],
        "vag_grad": lambda: vag(lambda x: x * x)(2.0)[1],
        "vag_grad_mixed": lambda: vag(lambda x: x * ys)(2.0)[1],
        "jacfwd_weak": lambda: jacfwd(lambda x: x * x)(2.0),
        "jacfwd_strong": lambda: jacfwd(lambda x: x * x)(ys),
        "jacfwd_mixed": lambda: jacfwd(lambda x: x * ys)(2.0),
        "jacrev_weak": lambda: jacrev(lambda x: x * x)(2.0),
        "jacrev_mixed": lambda: jacrev(lambda x: x * ys)(2.0),
        "vjp_weak_ct": lambda: vjp(lambda x: x * x, 2.0)[1](1.0)[0],
        "vjp_strong_primal_weak_ct": lambda: vjp(lambda x: x * x, ys)[1](1.0)[0],
        "vjp_mixed_strong_ct": lambda: vjp(lambda x: x * ys, 2.0)[1](np_.float32(1.0))[0],
        "vjp_sin_strong_ct": lambda: vjp(np_.sin, 2.0)[1](np_.float32(1.0))[0],
        "hessian_weak": lambda: lib.hessian(lambda x: x * x * x)(2.0),
    }


_NAMES = list(_cases(jax, jnp))


@pytest.mark.parametrize("name", _NAMES)
def test_derivative_weak_type_matches_jax(name):
    want = _cases(jax, jnp)[name]()
    got = _cases(ftrans, fnp)[name]()
    assert got.dtype == want.dtype
    assert got.weak_type == want.weak_type, (name, want)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_grad_of_weak_input_stages_jax_conversions():
    """The weak input joined with a strong one is converted (strong) and its cotangent converted back (weak)."""
    ys = fnp.float32(3.0)
    text = str(ftrans.make_jaxpr(ftrans.grad(lambda x: x * ys))(2.0))
    assert "weak_type=False" in text and "weak_type=True" in text
    assert ftrans.make_jaxpr(ftrans.grad(lambda x: x * ys))(2.0).out_avals[0].weak_type is True


# ---------------------------------------------------------------- float0


def test_float0_is_jax_float0():
    assert ftrans.dtypes.float0 == jax.dtypes.float0
    assert ftrans.float0 == jax.float0
    assert ftrans.float0 is ftrans.dtypes.float0
    assert ftrans.float0.itemsize == jax.dtypes.float0.itemsize == 0


def test_float0_is_the_gradient_dtype_of_integer_inputs():
    g = ftrans.grad(lambda x, n: x * n, argnums=(0, 1), allow_int=True)(2.0, 3)
    gj = jax.grad(lambda x, n: x * n, argnums=(0, 1), allow_int=True)(2.0, 3)
    assert g[1].dtype == ftrans.dtypes.float0 == gj[1].dtype
    # A float0 tangent for an integer primal is accepted by jvp, as in JAX.
    out = ftrans.jvp(lambda n: n * 2, (3,), (np.zeros((), ftrans.dtypes.float0),))
    outj = jax.jvp(lambda n: n * 2, (3,), (np.zeros((), jax.dtypes.float0),))
    assert int(out[0]) == int(outj[0]) == 6
    assert out[1].dtype == outj[1].dtype == jax.dtypes.float0


# ---------------------------------------------------------------- disable_jit


def test_disable_jit_context_manager_runs_python():
    calls = []

    def f(x):
        calls.append(type(x))
        return x * 2

    jf, jjf = ftrans.jit(f), jax.jit(f)
    with ftrans.disable_jit():
        assert ftrans.config.disable_jit
        assert float(jf(fnp.float32(3.0))) == 6.0
        assert float(jf(fnp.float32(4.0))) == 8.0
    # Both calls ran the Python with concrete values (no tracer), as under jax.disable_jit.
    assert len(calls) == 2 and all(not issubclass(t, ftrans.core.trace.Tracer) for t in calls)
    assert not ftrans.config.disable_jit
    calls.clear()
    with jax.disable_jit():
        jjf(jnp.float32(3.0))
        jjf(jnp.float32(4.0))
    assert len(calls) == 2
    # Outside the block jit traces again (once for a new shape).
    calls.clear()
    jf(fnp.ones(5))
    jf(fnp.ones(5))
    assert len(calls) == 1


def test_disable_jit_restores_previous_and_false_argument():
    with ftrans.disable_jit():
        with ftrans.disable_jit(False):
            assert not ftrans.config.disable_jit
        assert ftrans.config.disable_jit
    assert not ftrans.config.disable_jit
    with pytest.raises(ZeroDivisionError):
        with ftrans.disable_jit():
            1 / 0
    assert not ftrans.config.disable_jit


def test_config_update_disable_jit_both_spellings():
    seen = []
    jf = ftrans.jit(lambda x: seen.append(1) or x + 1)
    for name in ("jax_disable_jit", "disable_jit"):
        ftrans.config.update(name, True)
        try:
            assert ftrans.config.jax_disable_jit is True
            jf(1.0)
            jf(1.0)
        finally:
            ftrans.config.update(name, False)
    assert len(seen) == 4
    assert ftrans.config.disable_jit is False


# ---------------------------------------------------------------- ensure_compile_time_eval


def _compile_time_fn(lib, np_):
    def f(x):
        with lib.ensure_compile_time_eval():
            c = np_.arange(4).sum()  # concrete: Python may branch on it
            y = x + c if int(c) > 5 else x - c
            w = np_.sin(np_.float32(0.5)) * 2
            is_concrete = not isinstance(w, jax.core.Tracer) and not isinstance(w, ftrans.core.trace.Tracer)
        return y * w, is_concrete

    return f


def test_ensure_compile_time_eval_under_jit_matches_jax():
    f = _compile_time_fn(ftrans, fnp)
    g = _compile_time_fn(jax, jnp)
    seen = {}

    def run(lib, fn, x):
        def body(x):
            out, conc = fn(x)
            seen[lib.__name__] = conc
            return out

        return lib.jit(body)(x)

    got = run(ftrans, f, fnp.float32(1.5))
    want = run(jax, g, jnp.float32(1.5))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    assert seen == {"ftrans": True, "jax": True}


def test_ensure_compile_time_eval_still_stages_traced_values():
    def f(x):
        with ftrans.ensure_compile_time_eval():
            y = x * 2  # traced operand: staged
            c = fnp.ones(()) * 3  # concrete: evaluated
        assert isinstance(y, ftrans.core.trace.Tracer)
        assert not isinstance(c, ftrans.core.trace.Tracer)
        return y + c

    closed = ftrans.make_jaxpr(f)(1.0)
    assert "mul" in str(closed) and float(ftrans.jit(f)(1.0)) == float(jax.jit(lambda x: x * 2 + 3.0)(1.0))
    # Outside the block concrete operations are staged again.
    assert "mul" in str(ftrans.make_jaxpr(lambda x: fnp.ones(()) * 3 + x)(1.0))


# ---------------------------------------------------------------- named_call / named_scope


def test_named_scope_and_named_call_are_harmless():
    def layer(lib, np_, x):
        with lib.named_scope("dot_product"):
            y = np_.dot(x, x)
        with lib.named_scope("activation"):
            return np_.tanh(y)

    x = np.arange(3, dtype=np.float32) * 0.3
    got = ftrans.jit(lambda x: layer(ftrans, fnp, x))(x)
    want = jax.jit(lambda x: layer(jax, jnp, x))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    g = ftrans.grad(lambda x: layer(ftrans, fnp, x))(x)
    gj = jax.grad(lambda x: layer(jax, jnp, x))(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(gj), rtol=1e-5)

    f = ftrans.named_call(lambda x: x + 1, name="foo")
    fj = jax.named_call(lambda x: x + 1, name="foo")
    assert float(f(1.0)) == float(fj(1.0)) == 2.0
    assert float(ftrans.jit(f)(1.0)) == 2.0
    assert float(ftrans.grad(ftrans.named_call(lambda x: x * x))(3.0)) == float(jax.grad(jax.named_call(lambda x: x * x))(3.0))

    def named_fun(x):
        return x

    assert ftrans.named_call(named_fun).__name__ == "named_fun"
    with ftrans.named_scope("outer"):
        with ftrans.named_scope("inner"):
            assert ftrans.core.trace.current_name_stack() == ("outer", "inner")
    assert ftrans.core.trace.current_name_stack() == ()


def test_named_scope_rejects_non_string_like_jax():
    with pytest.raises(TypeError):
        with jax.named_scope(3):
            pass
    with pytest.raises(TypeError, match="string"):
        with ftrans.named_scope(3):
            pass


# ---------------------------------------------------------------- clear_caches, jacobian, typeof, ...


def test_clear_caches_forces_a_retrace():
    traces = []
    f = ftrans.jit(lambda x: traces.append(1) or x + 1)
    f(1.0)
    f(1.0)
    assert len(traces) == 1
    ftrans.clear_caches()
    assert float(f(1.0)) == 2.0
    assert len(traces) == 2
    assert callable(jax.clear_caches)  # the same name in JAX (not called: every later jax op would recompile)
    assert ftrans.clear_caches() is None


def test_jacobian_is_reverse_mode_jacobian():
    def f(lib, np_):
        return lambda x: np_.sin(x) * x[::-1]

    x = np.linspace(0.1, 1.0, 4).astype(np.float32)
    got = ftrans.jacobian(f(ftrans, fnp))(x)
    want = jax.jacobian(f(jax, jnp))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    gi = ftrans.jacobian(lambda x, y: x * y, argnums=1)(x, x)
    wi = jax.jacobian(lambda x, y: x * y, argnums=1)(x, x)
    np.testing.assert_allclose(np.asarray(gi), np.asarray(wi), rtol=1e-6)


@pytest.mark.parametrize("make", [
    lambda np_: 2.0,
    lambda np_: 3,
    lambda np_: np_.ones((2, 3)),
    lambda np_: np_.arange(4, dtype=np_.int32),
    lambda np_: np.zeros((2,), np.float16),
])
def test_shape_dtype_struct_like_and_typeof(make):
    want = jax.ShapeDtypeStruct.like(make(jnp))
    got = ftrans.ShapeDtypeStruct.like(make(fnp))
    assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
    assert repr(got) == repr(want)
    t, tj = ftrans.typeof(make(fnp)), jax.typeof(make(jnp))
    assert (t.shape, t.dtype, t.weak_type) == (tj.shape, tj.dtype, tj.weak_type)
    assert (str(t), repr(t)) == (str(tj), repr(tj))  # "float32[2,3]", "~int32[]", "ShapedArray(...)"


def _printed_tracers(lib, np_):
    """What ``print(x)`` shows for a value inside each transform (JAX's documentation teaches these)."""
    out = []

    def show(x):
        out.append(repr(x))
        return x

    xs = np_.arange(6.0).reshape(2, 3)
    lib.vmap(show)(xs)
    lib.vmap(show, in_axes=1)(xs)
    lib.vmap(lambda x, y: show(y) + x, in_axes=(0, None))(np_.ones(2), np_.ones(3))
    lib.jit(show)(np_.ones(3))
    lib.jit(show)(2)
    lib.grad(lambda x: show(x * 1.0))(np_.float32(2.0))
    lib.grad(lambda x: show(x).sum())(np_.ones((2, 2)))
    lib.jvp(show, (np_.ones(2),), (np_.ones(2),))
    lib.vmap(lib.grad(show))(np_.ones(2))
    return out


def test_printed_tracers_match_jax():
    assert _printed_tracers(ftrans, fnp) == _printed_tracers(jax, jnp)


def test_typeof_of_a_tracer():
    seen = {}

    def f(x):
        seen["t"] = ftrans.typeof(x)
        return x

    ftrans.jit(f)(fnp.ones((2,), fnp.int32))
    assert (seen["t"].shape, seen["t"].dtype, seen["t"].weak_type) == ((2,), np.dtype(np.int32), False)


def test_typeof_of_a_key_array_like_jax():
    # A typed key array's type is key<impl> over its key shape (flax's nnx reads typeof of every leaf).
    def types(lib):
        out = [lib.typeof(lib.random.key(0)), lib.typeof(lib.random.split(lib.random.key(0), 3))]
        lib.vmap(lambda k: out.append(lib.typeof(k)))(lib.random.split(lib.random.key(1), 2))
        return [(t.shape, str(t)) for t in out]

    assert types(ftrans) == types(jax)


def test_device_class():
    assert ftrans.Device is jax.Device
    assert all(isinstance(d, ftrans.Device) for d in ftrans.devices())


def test_tree_util_register_dataclass_and_partial():
    @dataclasses.dataclass
    class Params:
        w: object
        b: object
        name: str

    ftrans.tree_util.register_dataclass(Params, data_fields=["w", "b"], meta_fields=["name"])
    p = Params(fnp.ones(3), fnp.zeros(()), "lin")
    assert ftrans.tree_util.tree_structure(p).num_leaves == 2
    g = ftrans.grad(lambda p: (p.w * 2 + p.b).sum())(p)
    assert isinstance(g, Params) and g.name == "lin"
    np.testing.assert_allclose(np.asarray(g.w), 2 * np.ones(3))
    assert float(g.b) == 3.0
    assert ftrans.tree_util.Partial is jax.tree_util.Partial
    part = ftrans.tree_util.Partial(lambda a, x: a * x, fnp.float32(2.0))
    assert float(ftrans.jit(lambda f, x: f(x))(part, 3.0)) == 6.0


# ---------------------------------------------------------------- config context managers, tree_util names


@pytest.mark.parametrize("name", ["enable_x64", "debug_nans", "debug_infs"])
def test_config_context_managers_like_jax(name):
    ours, theirs = getattr(ftrans, name), getattr(jax, name)
    assert not getattr(ftrans.config, name) and not getattr(jax.config, f"jax_{name}")
    with ours(), theirs():  # no argument: turn the option on
        assert getattr(ftrans.config, name) is True is getattr(jax.config, f"jax_{name}")
        with ours(False), theirs(False):
            assert getattr(ftrans.config, name) is False is getattr(jax.config, f"jax_{name}")
        assert getattr(ftrans.config, name) is True
    assert getattr(ftrans.config, name) is False is getattr(jax.config, f"jax_{name}")


def test_enable_x64_context_changes_default_dtypes_like_jax():
    with ftrans.enable_x64(True), jax.enable_x64(True):
        assert fnp.ones(2).dtype == jnp.ones(2).dtype == np.float64
        assert ftrans.jit(lambda x: x * 2)(fnp.arange(3)).dtype == jnp.arange(3).dtype == np.int64
    assert fnp.ones(2).dtype == jnp.ones(2).dtype == np.float32
    assert ftrans.jit(lambda x: x * 2)(fnp.arange(3)).dtype == np.int32


def test_debug_nans_context_raises_like_jax():
    with ftrans.debug_nans(True):
        with pytest.raises(FloatingPointError):
            fnp.log(fnp.float32(-1.0)) + 0
    with jax.debug_nans(True):
        with pytest.raises(FloatingPointError):
            jnp.log(jnp.float32(-1.0)) + 0
    assert bool(fnp.isnan(fnp.log(fnp.float32(-1.0))))


def test_tree_util_reexports_jax_names():
    names = [n for n in dir(jax.tree_util) if not n.startswith("_")]
    missing = [n for n in names if not hasattr(ftrans.tree_util, n)]
    assert missing == []
    tree = {"a": fnp.ones(2), "b": (1.0, fnp.zeros(()))}
    assert ftrans.tree_util.all_leaves(ftrans.tree_util.tree_leaves(tree))
    assert len(ftrans.tree_util.treedef_children(ftrans.tree_util.tree_structure(tree))) == 2
    assert isinstance(ftrans.tree_util.tree_structure(tree), ftrans.tree_util.PyTreeDef)


# ---------------------------------------------------------------- print_environment_info
@pytest.mark.parametrize("return_string", [True, False])
def test_print_environment_info_like_jax(return_string, capsys, monkeypatch):
    """The lines JAX's report has (jax, jaxlib, numpy, python, devices, process count, platform,
    JAX_/XLA_ variables), under ftrans's own version line; printed or returned as JAX's."""
    from jax._src import lib

    monkeypatch.setenv("XLA_FLAGS_FOR_THIS_TEST", "1")
    capsys.readouterr()
    result = ftrans.print_environment_info(return_string=return_string)
    out = capsys.readouterr().out
    if return_string:
        assert out == ""
    else:
        assert result is None
        result = out
    want = jax.print_environment_info(return_string=True)
    assert result.startswith(f"ftrans: {ftrans.__version__}\n")
    assert f"jax:    {jax.__version__}" in result
    assert f"jaxlib: {lib.version_str}" in result
    assert f"numpy:  {np.__version__}" in result
    for line in want.splitlines():
        if line.startswith(("python:", "process_count:", "platform:", "XLA_FLAGS_FOR_THIS_TEST")):
            assert line in result.splitlines()
    assert f"device info: {jax.devices()[0].device_kind}-{jax.device_count()}," in result


# ---------------------------------------------------------------- make_jaxpr(axis_env=...)
def test_make_jaxpr_axis_env_like_jax():
    """Collectives over the names axis_env binds stage as inside a pmap of that size, as in JAX."""
    def f(lib):
        return lambda x: x - lib.lax.psum(x, "i") + lib.lax.axis_index("i") + lib.lax.psum(1, "i")

    fj = ftrans.make_jaxpr(f(ftrans), axis_env=[("i", 4)])(2)
    jj = jax.make_jaxpr(f(jax), axis_env=[("i", 4)])(2)
    prims = lambda c: [e.primitive.name for e in c.eqns if e.primitive.name != "convert_element_type"]  # noqa: E731
    assert prims(fj) == prims(jj) == ["psum", "sub", "axis_index", "add", "add"]
    assert "4:i32[]" in str(fj) and "4:i32[]" in str(jj)  # psum(1) over the 4-wide axis folds to 4
    with pytest.raises(NameError, match="unbound axis name"):
        ftrans.make_jaxpr(f(ftrans))(2)
    with pytest.raises(NameError, match="unbound axis name"):  # the names are bound only while staging
        ftrans.make_jaxpr(f(ftrans), axis_env=[("j", 2)])(2)
    with pytest.raises(TypeError, match="axis_env"):
        ftrans.make_jaxpr(f(ftrans), axis_env=["i"])
    with pytest.raises(ValueError, match="positive"):
        ftrans.make_jaxpr(f(ftrans), axis_env=[("i", 0)])
