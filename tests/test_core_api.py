"""JAX's core-level public API on ftrans, checked against jax: ``call_p``/``closed_call_p`` bound with a
wrapped function (``extend.linear_util.wrap_init`` + ``api_util.flatten_fun_nokwargs``) under every
transform, ``check_jaxpr``'s errors, ``valid_jaxtype``, interned ``ManualAxisType`` and tracer documents."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import copy
import pickle

import jax
import jax.api_util as japi
import jax.extend.core as jcore
import jax.extend.linear_util as jlu
import jax.numpy as jjnp
import numpy as np
import pytest
from jax import lax as jlax

import ftrans
import ftrans.extend.core as fcore
import ftrans.numpy as fjnp
from ftrans import api_util as fapi
from ftrans import lax as flax
from ftrans.extend import linear_util as flu
from tests.test_extend_core import close

LIBS = {"ftrans": (ftrans, fcore, fapi, flu, fjnp, flax), "jax": (jax, jcore, japi, jlu, jjnp, jlax)}
RNG = np.random.RandomState(0)
X, Y = RNG.randn(3, 2).astype(np.float32), RNG.randn(3, 2).astype(np.float32)


# jax 0.11 deleted the final-style call primitives: its call_p and closed_call_p are eval_jaxpr_p, bound with
# ``call_jaxpr=`` only. ftrans keeps jax 0.10's ``bind(*args, subfuns=(f,))`` and takes ``call_jaxpr=`` too.
JAX_CALL_TAKES_SUBFUNS = jcore.primitives.call_p.name == "call"


def core_call(lib, prim_name, f):
    top, core, api, lu, _, _ = LIBS[lib]

    def call(*args):
        leaves, in_tree = top.tree_util.tree_flatten(args)
        dbg = api.debug_info("core_call_test", f, leaves, {})
        flat, out_tree = api.flatten_fun_nokwargs(lu.wrap_init(f, debug_info=dbg), in_tree)
        if lib == "jax" and not JAX_CALL_TAKES_SUBFUNS:
            out = flat.call_wrapped(*leaves)  # the values jax 0.10's call_p gives
        else:
            out = getattr(core.primitives, prim_name).bind(*leaves, subfuns=(flat,))
        return top.tree_util.tree_unflatten(out_tree(), out)

    return call


@pytest.mark.parametrize("prim", ["call_p", "closed_call_p"])
@pytest.mark.parametrize("how", ["eager", "jit", "jvp", "vjp", "vmap", "nested", "closure"])
def test_call_p_with_a_wrapped_function_matches_jax(prim, how):
    res = {}
    for lib in LIBS:
        top, _, _, _, jnp, _ = LIBS[lib]

        def fun(x, y, jnp=jnp):
            return {"s": jnp.sin(x * y), "c": [jnp.cos(x)]}

        g = core_call(lib, prim, fun)
        if how == "eager":
            res[lib] = g(X, Y)
        elif how == "jit":
            res[lib] = top.jit(g)(X, Y)
        elif how == "jvp":
            res[lib] = top.jvp(g, (X, Y), (Y, X))
        elif how == "vjp":
            out, back = top.vjp(g, X, Y)
            res[lib] = back(out)
        elif how == "vmap":
            res[lib] = top.vmap(g)(X, Y)
        elif how == "nested":
            res[lib] = top.jit(core_call(lib, prim, top.jit(g)))(X, Y)
        else:  # the wrapped function closes over a tracer of the enclosing transform
            res[lib] = top.grad(lambda a: core_call(lib, prim, lambda y: fun(a, y))(Y)["s"].sum())(X)
    close(res["ftrans"], res["jax"])


@pytest.mark.parametrize("prim", ["call_p", "closed_call_p"])
def test_call_p_bound_with_a_jaxpr_as_jax_011(prim):
    """jax 0.11's form, ``call_p.bind(*args, call_jaxpr=closed_jaxpr)``, on ftrans, against the function itself
    run by jax (and against jax's call_p bound so, where jax's takes it)."""
    res = {}
    for lib in LIBS:
        top, core, _, _, jnp, _ = LIBS[lib]
        c = np.float32(3.0)

        def f(x, jnp=jnp, c=c):
            return [jnp.sin(x) * c + jnp.ones(2, np.float32)]

        if lib == "jax" and JAX_CALL_TAKES_SUBFUNS:
            g = f
        else:
            body, p = top.make_jaxpr(f)(X), getattr(core.primitives, prim)

            def g(x, body=body, p=p):
                return p.bind(x, call_jaxpr=body)
        res[lib] = (g(X), top.jit(g)(X), top.grad(lambda x, g=g: g(x)[0].sum())(X),
                    top.vmap(g, in_axes=2)(np.stack([X, Y], 2)))
    close(res["ftrans"], res["jax"])


def test_call_p_stages_one_call_equation_and_out_tree_waits_for_the_call():
    staged = ftrans.make_jaxpr(core_call("ftrans", "call_p", lambda x: fjnp.sin(x)))(X)
    (eqn,) = staged.eqns
    assert eqn.primitive is fcore.primitives.call_p and eqn.primitive.name == "call"
    flat, out_tree = fapi.flatten_fun_nokwargs(flu.wrap_init(lambda x: x), ftrans.tree_util.tree_structure((1.0,)))
    with pytest.raises(flu.StoreException):
        out_tree()
    assert flat.call_wrapped(2.0) == [2.0] and out_tree() == ftrans.tree_util.tree_structure(1.0)


def _errors(lib, mutate, fun, *args):
    top, core, _, _, jnp, lax = LIBS[lib]
    jaxpr = top.make_jaxpr(fun(top, jnp, lax))(*args).jaxpr
    mutate(jaxpr, core)
    with pytest.raises(core.JaxprTypeError) as info:
        core.check_jaxpr(jaxpr)
    return str(info.value)


def _retype_first(jaxpr, core):
    jaxpr.eqns[0].outvars[0].aval = (ftrans.core.ShapedArray if core is fcore else jax.core.ShapedArray)(
        (), np.dtype(np.int32))


def _drop_operands(jaxpr, core):
    jaxpr._eqns[0] = jaxpr.eqns[0].replace(invars=())


def _branch_arity(jaxpr, core):
    cond = next(e for e in jaxpr.eqns if e.primitive.name == "cond")
    branch = cond.params["branches"][0].jaxpr
    if core is fcore or hasattr(branch, "_invars"):
        branch._invars = ()
    else:  # jax 0.11's Jaxpr (merged with ClosedJaxpr) stores its constvars and invars together
        branch._all_invars = branch._all_invars[:branch.num_consts]


@pytest.mark.parametrize("mutate, fun, expect", [
    (_retype_first, lambda top, jnp, lax: lambda x: jnp.sin(x) + jnp.cos(x),
     "Value for variable 'b' inconsistently typed as f32[] for let-binder of type i32[]\n\nin equation:\n\n"
     "b:i32[] = sin a"),
    (_drop_operands, lambda top, jnp, lax: top.jit(lambda x, y: x + 1), "0 operands cannot call jaxpr with 2 inputs"),
    (_branch_arity, lambda top, jnp, lax: lambda x: lax.switch(0, [jnp.sin, jnp.cos], x),
     "cond branch 0 takes 0 inputs, branch 1 takes 1"),
])
def test_check_jaxpr_errors_say_what_jax_says(mutate, fun, expect):
    args = (np.float32(1.0), np.float32(2.0)) if mutate is _drop_operands else (np.float32(1.0),)
    for lib in LIBS:
        msg = _errors(lib, mutate, fun, *args)
        assert expect in msg, (lib, msg)
        for part in ("in equation:", "from source:", "while checking jaxpr:"):
            assert part in msg, (lib, part, msg)


def test_check_jaxpr_error_shows_an_excerpt_of_a_long_program():
    def fun(top, jnp, lax):
        def g(x):
            for _ in range(100):
                x = x + x
            x = lax.switch(0, [jnp.sin, jnp.cos], x)
            for _ in range(100):
                x = x + x
            return x
        return g

    for lib in LIBS:
        msg = _errors(lib, _branch_arity, fun, np.float32(1.0))
        assert "cond branch 0 takes 0 inputs, branch 1 takes 1" in msg and msg.count("\n") < 200, lib
        assert "    ...\n" in msg or "; ...;" in msg or "...\n" in msg


def test_correct_programs_check_as_in_jax():
    for lib in LIBS:
        top, core, _, _, jnp, lax = LIBS[lib]
        core.check_jaxpr(top.make_jaxpr(lambda x: lax.switch(0, [jnp.sin, jnp.cos], x))(1.0).jaxpr)
        core.check_jaxpr(top.make_jaxpr(lambda c, xs: lax.scan(lambda c, x: (c * x, c), c, xs))(
            np.ones(3, np.float32), np.ones((5, 3), np.float32)).jaxpr)


@pytest.mark.parametrize("value", [np.zeros(3, object), np.zeros(3, [("i", "i4"), ("f", "f4")]), "text",
                                   np.zeros(3, np.float32), np.zeros(2, np.int8), 1.0, True, np.zeros((), bool)])
def test_valid_jaxtype_matches_jax(value):
    assert fcore.valid_jaxtype(value) == jcore.valid_jaxtype(value)


def test_manual_axis_type_is_interned_and_immutable():
    mt = ftrans.sharding.ManualAxisType(varying={"x"}, unreduced={"y"}, reduced={"z"})
    assert pickle.loads(pickle.dumps(mt)) is mt
    assert copy.deepcopy(mt) is mt and copy.copy(mt) is mt
    assert ftrans.sharding.ManualAxisType(varying=["x"], unreduced=("y",), reduced={"z"}) is mt
    with pytest.raises(AttributeError):
        mt.varying = frozenset()
    with pytest.raises(AttributeError):
        del mt.varying
    assert mt.update(varying={"w"}).varying == frozenset({"w"}) and mt.varying == frozenset({"x"})


def test_frozenset_params_print_sorted_as_jax():
    prim = ftrans.core.primitive.Primitive("frozen_probe")
    prim.def_abstract_eval(lambda x, **_: x)
    prim.def_impl(lambda x, **_: x)
    text = str(ftrans.make_jaxpr(lambda x: prim.bind(x, axes=frozenset({"b", "a", "c"}), none=frozenset()))(1.0))
    del ftrans.core.primitive.registry[prim.name]
    assert "axes=frozenset({'a', 'b', 'c'})" in text and "none=frozenset({})" in text


def test_tracer_documents_name_their_trace_as_jax():
    seen = []

    def f(x):
        seen.append(x._pretty_print(verbose=True).format())
        return x.sum()

    ftrans.jit(f)(fjnp.arange(10.0, dtype="float32"))
    ftrans.vmap(f)(fjnp.arange(20, dtype="int32"))
    ftrans.grad(f)(fjnp.float16(1.0))
    assert seen[0] == "Traced<float32[10]>with<DynamicJaxprTrace>"
    assert seen[1] == "Traced<int32[]>with<BatchTrace>"
    assert seen[2].startswith("Traced<float16[]>with<") and seen[2].endswith("Trace>")


def test_subjaxprs_and_jaxprs_in_params_give_jaxprs_as_jax():
    counts = {}
    for lib in LIBS:
        top, core, _, _, jnp, lax = LIBS[lib]

        def f(x, lax=lax, jnp=jnp, top=top):
            y = lax.cond(x > 0, jnp.sin, jnp.cos, x)
            return top.jit(lambda z: z * 2)(y) + lax.fori_loop(0, 3, lambda i, c: c + 1.0, y)

        closed = top.make_jaxpr(f)(np.float32(1.0))
        subs = list(core.subjaxprs(closed.jaxpr))
        assert all(isinstance(j, core.Jaxpr) for j in subs), lib
        assert list(core.subjaxprs(closed)) == subs
        in_params = [j for e in closed.jaxpr.eqns for j in core.jaxprs_in_params(e.params)]
        assert in_params == subs and all(isinstance(j, core.Jaxpr) for j in in_params)
        counts[lib] = len(subs)
    assert counts["ftrans"] == counts["jax"]


@pytest.mark.parametrize("primals, tangents, exc, words", [
    (0.0, (1.0,), TypeError, "primal and tangent arguments to jax.jvp must be tuples or lists; found float and tuple."),
    ((0.0,), np.array([1.0, 2.0]), TypeError,
     "primal and tangent arguments to jax.jvp must be tuples or lists; found tuple and ndarray."),
    ((np.float32(2),), (), TypeError, "primal and tangent arguments to jax.jvp must have the same tree structure"),
    ((np.float32(2),), [np.float32(2)], TypeError,
     "primal and tangent arguments to jax.jvp must have the same tree structure"),
    ((np.float16(2),), (np.float32(4),), TypeError, "primal and tangent arguments to jax.jvp do not match"),
    ((np.ones(3, np.float32),), (np.ones(4, np.float32),), ValueError,
     "jvp called with different primal and tangent shapes"),
])
def test_jvp_argument_errors_as_jax(primals, tangents, exc, words):
    for lib in LIBS:
        top = LIBS[lib][0]
        with pytest.raises(exc) as info:
            top.jvp(lambda *xs: xs[0], primals, tangents)
        assert words in str(info.value), (lib, str(info.value))


def test_user_primitives_may_share_a_name_as_in_jax():
    made = []
    for lib in LIBS:
        top, core, _, _, jnp, _ = LIBS[lib]
        for k in (1, 2):
            p = core.Primitive("core_api_probe_twice")
            p.def_impl(lambda x, k=k: x + k)
            p.def_abstract_eval(lambda x: x)
            made.append((lib, p))
    import ftrans.core.primitive as P

    del P.registry["core_api_probe_twice"]
    assert [float(np.asarray(p.bind(np.float32(1.0)))) for _, p in made] == [2.0, 3.0, 2.0, 3.0]

    with pytest.raises(ValueError, match="registered twice"):  # ftrans's own names stay unique
        exec("P.Primitive('add')", {"P": P, "__name__": "ftrans.probe"})


def test_user_primitive_rule_errors_as_jax():
    import ftrans.core.primitive as P

    for lib in LIBS:
        top, core, *_ = LIBS[lib]
        foo_p = core.Primitive("core_api_probe_foo")
        with pytest.raises(NotImplementedError) as info:
            foo_p.bind(1.0)
        assert str(info.value).startswith("Evaluation rule for 'core_api_probe_foo' not implemented"), lib
        with pytest.raises(NotImplementedError) as info:
            top.jit(foo_p.bind)(1.0)
        assert str(info.value).startswith("Abstract evaluation for 'core_api_probe_foo' not implemented"), lib
        foo_p.def_abstract_eval(lambda x: [x])  # should not return a list
        foo_p.def_impl(lambda x: x)
        with pytest.raises(ValueError, match=r"core_api_probe_foo.abstract_eval\(\) method should return a tuple or"):
            top.jit(lambda x: foo_p.bind(x))(1.0)
        foo2_p = core.Primitive("core_api_probe_foo2")
        foo2_p.multiple_results = True
        foo2_p.def_abstract_eval(lambda x: x)  # should return a list
        foo2_p.def_impl(lambda x: [x])
        with pytest.raises(ValueError, match=r"core_api_probe_foo2.abstract_eval\(\) method should return a tuple"):
            top.jit(lambda x: foo2_p.bind(x))(1.0)
    for name in ("core_api_probe_foo", "core_api_probe_foo2"):
        P.registry.pop(name, None)
