"""``ftrans.extend.core``: JAX's "Writing custom interpreters" tutorial run on ftrans's IR and on jax's.

The interpreters below are the tutorial's, written once against a module ``core`` (``jax.extend.core`` or
``ftrans.extend.core``) and a ``lax`` with the ``*_p`` primitive objects; both must give the same values,
under ``jit`` and ``grad`` too, and staging the interpreter must give the same program.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from functools import wraps

import jax
import jax.extend.core as jcore
import jax.numpy as jjnp
import numpy as np
import pytest
from jax import lax as jlax

import ftrans
import ftrans.extend.core as fcore
import ftrans.numpy as fjnp
from ftrans import lax as flax

LIBS = {"ftrans": (ftrans, fcore, fjnp, flax), "jax": (jax, jcore, jjnp, jlax)}


def close(a, b, tol=1e-5):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


def make_eval_jaxpr(core):
    """The tutorial's evaluator."""
    def eval_jaxpr(jaxpr, consts, *args):
        env = {}

        def read(var):
            if type(var) is core.Literal:
                return var.val
            return env[var]

        def write(var, val):
            env[var] = val

        for v, a in zip(jaxpr.invars, args, strict=True):
            write(v, a)
        for v, c in zip(jaxpr.constvars, consts, strict=True):
            write(v, c)
        for eqn in jaxpr.eqns:
            invals = [read(v) for v in eqn.invars]
            outvals = eqn.primitive.bind(*invals, **eqn.params)
            if not eqn.primitive.multiple_results:
                outvals = [outvals]
            for v, o in zip(eqn.outvars, outvals, strict=True):
                write(v, o)
        return [read(v) for v in jaxpr.outvars]
    return eval_jaxpr


def make_inverse(J, core, jnp, lax):
    """The tutorial's inverse transformation: walk the program backwards, inverting each unary primitive."""
    inverse_registry = {lax.exp_p: jnp.log, lax.tanh_p: jnp.arctanh}

    def inverse_jaxpr(jaxpr, consts, *args):
        env = {}

        def read(var):
            if type(var) is core.Literal:
                return var.val
            return env[var]

        def write(var, val):
            env[var] = val

        for v, a in zip(jaxpr.outvars, args):
            write(v, a)
        for v, c in zip(jaxpr.constvars, consts):
            write(v, c)
        for eqn in jaxpr.eqns[::-1]:
            invals = [read(v) for v in eqn.outvars]
            if eqn.primitive not in inverse_registry:
                raise NotImplementedError(f"{eqn.primitive} does not have registered inverse.")
            write(eqn.invars[0], inverse_registry[eqn.primitive](*invals))
        return [read(v) for v in jaxpr.invars]

    def inverse(fun):
        @wraps(fun)
        def wrapped(*args, **kwargs):
            closed_jaxpr = J.make_jaxpr(fun)(*args, **kwargs)
            return inverse_jaxpr(closed_jaxpr.jaxpr, closed_jaxpr.literals, *args)[0]
        return wrapped

    return inverse


def _program(jnp, lax):
    def f(x):
        y = jnp.sin(x) * 2.0 + jnp.array([1.0, 2.0, 3.0, 4.0, 5.0])  # a closed-over constant array
        z = -0.5 * jnp.exp(y)
        w = lax.cond(z.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, z)  # a higher-order primitive
        return jnp.tanh(w) + x.sum()
    return f


@pytest.mark.parametrize("use_jit", [False, True])
def test_tutorial_evaluator_matches_jax(use_jit):
    x = np.linspace(-1, 1, 5).astype(np.float32)
    res = {}
    for name, (J, core, jnp, lax) in LIBS.items():
        f = _program(jnp, lax)
        closed = J.make_jaxpr(f)(x)
        assert len(closed.literals) == len(closed.jaxpr.constvars)
        ev = make_eval_jaxpr(core)

        def run(x, closed=closed, ev=ev):
            return ev(closed.jaxpr, closed.literals, x)

        res[name] = (J.jit(run) if use_jit else run)(x)
        close(res[name], [f(x)])
    close(res["ftrans"], res["jax"])


def test_tutorial_evaluator_composes_with_grad_and_vmap():
    x = np.linspace(-1, 1, 5).astype(np.float32)
    out = {}
    for name, (J, core, jnp, lax) in LIBS.items():
        closed = J.make_jaxpr(_program(jnp, lax))(x)
        ev = make_eval_jaxpr(core)
        g = J.grad(lambda x: ev(closed.jaxpr, closed.literals, x)[0].sum())(x)
        v = J.vmap(lambda x: ev(closed.jaxpr, closed.literals, x)[0])(np.stack([x, 2 * x]))
        out[name] = (g, v)
    close(out["ftrans"], out["jax"], 1e-4)


def test_tutorial_inverse_matches_jax():
    res = {}
    for name, lib in LIBS.items():
        J, core, jnp, lax = lib
        f = lambda x: jnp.exp(jnp.tanh(x))  # noqa: E731
        f_inv = make_inverse(*lib)(f)
        assert np.allclose(f_inv(f(1.0)), 1.0)
        xs = np.linspace(-0.9, 0.9, 7).astype(np.float32)
        res[name] = (f_inv(f(xs)), J.jit(f_inv)(f(xs)))
        # staging the inverse gives the inverted program: log then arctanh
        staged = J.make_jaxpr(f_inv)(f(1.0))
        names = [e.primitive.name for e in staged.jaxpr.eqns]
        assert names.index("log") < names.index("atanh"), names
        with pytest.raises(NotImplementedError, match="inverse"):
            make_inverse(*lib)(lambda x: jnp.sin(x))(0.5)
    close(res["ftrans"], res["jax"], 1e-4)


def test_primitive_objects_match_jax_names():
    from jax._src.lax import lax as jlax_impl

    # jax 0.11.2's jax.lax no longer exports dce_sink_p (jax 0.10's and 0.11.0's do); ftrans.lax keeps it
    kept = {n for n in ("dce_sink_p",) if not hasattr(jlax, n) and hasattr(jlax_impl, n)}
    jax_names = {n for n in dir(jlax) if n.endswith("_p")} | kept
    ours = {n for n in dir(flax) if n.endswith("_p")}
    newer = {"polynomial_p"} - jax_names  # (jax 0.12's, which ftrans has whichever jax is installed)
    assert ours - newer <= jax_names
    assert len(ours) >= 120
    for n in ours:
        p = getattr(flax, n)
        assert isinstance(p, fcore.Primitive)
        assert getattr(fcore.primitives, n) is p
        if n in newer:
            continue
        jp = getattr(jlax_impl if n in kept else jlax, n)
        assert p.name == jp.name.replace("-", "_") or n == "linear_solve_p", (n, p.name, jp.name)
    # make_jaxpr's equations hold exactly these objects
    eqns = ftrans.make_jaxpr(lambda x: fjnp.exp(x) + flax.sin(x))(1.0).jaxpr.eqns
    assert [e.primitive for e in eqns] == [flax.exp_p, flax.sin_p, flax.add_p]


def test_jaxpr_as_fun_and_eval_jaxpr():
    x = np.arange(3, dtype=np.float32)
    for J, core, jnp, lax in LIBS.values():
        closed = J.make_jaxpr(lambda x: (jnp.sin(x), x * 2))(x)
        got = core.jaxpr_as_fun(closed)(x)
        assert isinstance(got, (list, tuple)) and len(got) == 2
        close(list(got), [np.sin(x), x * 2])
    closed = ftrans.make_jaxpr(lambda x: fjnp.sin(x) * 3.0)(x)
    close(fcore.eval_jaxpr(closed.jaxpr, closed.literals, x), [np.sin(x) * 3])
    fcore.check_jaxpr(closed.jaxpr)
    cond = ftrans.make_jaxpr(lambda x: flax.cond(True, lambda a: a, lambda a: -a, x))(x)
    eqn = [e for e in cond.jaxpr.eqns if e.primitive is flax.cond_p][0]
    assert len(fcore.jaxprs_in_params(eqn.params)) == 2 == len(fcore.subjaxprs(eqn))


def test_a_rewriting_interpreter():
    """Rewrite every exp into exp2 of a scaled argument by staging an interpreter: the supported way to
    produce a new program from an old one."""
    def rewrite(closed):
        def run(*args):
            env = {}
            read = lambda v: v.val if type(v) is fcore.Literal else env[v]  # noqa: E731
            for v, a in zip(closed.jaxpr.invars, args):
                env[v] = a
            for v, c in zip(closed.jaxpr.constvars, closed.literals):
                env[v] = c
            for eqn in closed.jaxpr.eqns:
                ins = [read(v) for v in eqn.invars]
                if eqn.primitive is flax.exp_p:
                    outs = [flax.exp2(ins[0] * np.float32(1 / np.log(2)))]
                else:
                    outs = eqn.primitive.bind(*ins, **eqn.params)
                    outs = outs if eqn.primitive.multiple_results else [outs]
                for v, o in zip(eqn.outvars, outs):
                    env[v] = o
            return [read(v) for v in closed.jaxpr.outvars]
        return run

    x = np.linspace(-1, 1, 4).astype(np.float32)
    closed = ftrans.make_jaxpr(lambda x: fjnp.exp(x) * 2.0)(x)
    new = ftrans.make_jaxpr(rewrite(closed))(x)
    names = [e.primitive.name for e in new.jaxpr.eqns]
    assert "exp" not in names and "exp2" in names
    close(fcore.jaxpr_as_fun(new)(x), [np.exp(x) * 2])
    close(ftrans.grad(lambda x: rewrite(closed)(x)[0].sum())(x), np.exp(x) * 2, 1e-5)
