"""Python scalars through ``jvp``/``vjp``/``linearize`` and custom rules, against jax: a primal (or tangent,
or cotangent) the user gave as a Python scalar comes back as that scalar where the function returns it
untouched, and ``custom_jvp``/``custom_vjp`` rules receive it as given; anything computed is an array."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np

import ftrans
import ftrans.numpy as fjnp

LIBS = [(jax, jjnp), (ftrans, fjnp)]


def kind(x):
    """'scalar' for a Python scalar (JAX's TypedFloat/TypedInt are float/int subclasses), else 'array'."""
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        return "scalar"
    return "array"


def kinds(tree):
    return [kind(x) for x in jax.tree_util.tree_leaves(tree)]


def values(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def same(got, want):
    assert kinds(got) == kinds(want), (got, want)
    for a, b in zip(values(got), values(want)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_untouched_primals_and_tangents_come_back_as_given():
    out = []
    for api, _ in LIBS:
        out.append((
            api.jvp(lambda x: x, (3.0,), (1.0,)),
            api.jvp(lambda x: (x, x * 2), (3.0,), (1.0,)),
            api.jvp(lambda x: 3.0, (3.0,), (1.0,)),
            api.vjp(lambda x: x, 3.0)[0],
            api.vjp(lambda x: x, 3.0)[1](1.0),
            api.linearize(lambda x: x, 3.0)[0],
        ))
    same(out[1], out[0])


def test_custom_rules_receive_python_scalars_as_given():
    out = []
    for api, m in LIBS:
        seen = []

        @api.custom_jvp
        def f(x, y):
            return x + y

        @f.defjvp
        def f_jvp(primals, tangents):
            seen.append(("jvp", kind(primals[0]), kind(primals[1]), kind(tangents[0])))
            return f(*primals), primals[0] + 90  # both Python floats: f(1., 4.) runs on them

        @api.custom_vjp
        def g(x, c):
            return x * c

        def g_fwd(x, c):
            seen.append(("fwd", kind(x), kind(c)))
            return x * c, c

        def g_bwd(c, ct):
            seen.append(("bwd", kind(ct)))
            return ct + 92, None

        g.defvjp(g_fwd, g_bwd)
        res = (api.jvp(lambda a: f(1.0, a), (4.0,), (7.0,)),
               api.jvp(lambda a: f(1.0, a) * m.ones(2), (4.0,), (7.0,)),
               api.vjp(lambda a: g(a, 2.0), 4.0)[1](7.0))
        out.append((res, seen))
    same(out[1][0], out[0][0])
    assert out[1][1] == out[0][1]


def test_symbolic_zero_rules_hand_back_python_scalars():
    """JAX's symbolic-zeros custom_jvp/custom_vjp programs with a static Python scalar argument: the
    scalar outputs and the scalar input's cotangent stay Python floats, the array ones arrays."""
    out = []
    for api, m in LIBS:
        cd = api.custom_derivatives

        def fun(s, sa, d, da):
            return s, sa, s + d, sa + da

        f = api.custom_vjp(fun)

        def fwd(*args):
            xs = [a.value for a in args]
            return f(*xs), xs

        def bwd(res, g):
            assert type(g[0]) is cd.SymbolicZero
            return (res[0] + 90, g[1] + 91, g[2] + 92, g[3] + 93)

        f.defvjp(fwd, bwd, symbolic_zeros=True)
        h = api.custom_jvp(lambda s, sa, d, da: (s + d, sa + da))
        h.defjvp(lambda p, t: (h(*p), (p[0] + 90, t[3] + 91)), symbolic_zeros=True)
        sa = m.array([2.0, 3.0])
        primals, pull = api.vjp(lambda d, da: f(1.0, sa, d, da)[1:], 4.0, m.array([5.0, 6.0]))
        cts = pull((m.array([10.0, 11.0]), 7.0, m.array([8.0, 9.0])))
        jv = api.jvp(lambda d, da: h(1.0, sa, d, da), (4.0, m.array([5.0, 6.0])), (7.0, m.array([8.0, 9.0])))
        out.append((primals, cts, jv))
    same(out[1], out[0])
