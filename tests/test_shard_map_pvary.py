"""shard_map's ``pvary`` / ``psum_invariant`` equations (JAX's varying-manual-axes casts) against jax.

Inside a body checked with ``check_vma`` a value the same on every device that meets a varying one is cast
with ``pvary`` first (an operand of an elementwise op, of a collective, a result the out_specs split), and
``psum`` is ``psum_invariant``; their transposes are each other, so the gradient of a shard_map is the exact
sum JAX computes (no mean over replicas).  Each program runs under ftrans and ``jax.shard_map`` on the same
mesh: the jaxprs name the same casts, and values and gradients agree.
"""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import Mesh as JMesh
from jax.sharding import PartitionSpec as JP

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.sharding import Mesh, P

pytestmark = pytest.mark.needs_devices(4)

_LIBS = {"ftrans": (ftrans, fjnp, flax, Mesh, P), "jax": (jax, jjnp, jax.lax, JMesh, JP)}


# jax's oracle programs are compiled without LLVM's optimizing passes (level 0; the suite's default is 1): less
# compile time, the same values up to float rounding (which the tolerances are for).  ftrans's compile as always.
_ORACLE_OPTIONS = {"xla_backend_optimization_level": 0}


def _mesh(lib: str, shape: tuple = (4,), names: tuple = ("x",)) -> object:
    top, _, _, mesh_cls, _ = _LIBS[lib]
    n = int(np.prod(shape))
    return mesh_cls(np.array(top.devices()[:n]).reshape(shape), names)


def _prims(jaxpr: object) -> list:
    """The primitive names of the (first) shard_map body's equations."""
    (e,) = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "shard_map"]
    return [str(q.primitive) for q in e.params["jaxpr"].eqns]


def _both(make: object) -> tuple:
    return make("ftrans"), make("jax")


def _close(a: object, b: object, rtol: float = 1e-6) -> None:
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=1e-6)


def test_binop_of_invariant_and_varying_inserts_pvary() -> None:
    def make(lib: str) -> tuple:
        top, np_, _, _, P_ = _LIBS[lib]
        f = top.shard_map(lambda x, y: x * y, mesh=_mesh(lib), in_specs=(P_(), P_("x")), out_specs=P_("x"))
        x, y = np_.arange(1.0) + 2, np_.arange(4.0)

        def value_and_grad(x, y):
            return f(x, y), top.grad(lambda x, y: (f(x, y) ** 2).sum(), (0, 1))(x, y)

        # jax's value and gradient from one jitted program (its eager shard_map and grad compile op by op)
        v, g = jax.jit(value_and_grad, compiler_options=_ORACLE_OPTIONS)(x, y) if lib == "jax" else value_and_grad(x, y)
        return _prims(top.make_jaxpr(f)(x, y)), v, g

    (fp, fv, fg), (jp, jv, jg) = _both(make)
    assert fp == jp == ["pvary", "mul"]
    _close(fv, jv)
    _close(fg, jg)


def test_fanout_out_specs_transpose_to_psum_invariant() -> None:
    def make(lib: str) -> tuple:
        top, np_, _, _, P_ = _LIBS[lib]
        f = top.shard_map(lambda x: x, mesh=_mesh(lib), in_specs=P_(), out_specs=P_("x"))
        vjp = top.vjp(f, np_.arange(1.0))[1]
        eq = [e for e in top.make_jaxpr(vjp)(np_.arange(4.0)).jaxpr.eqns if e.primitive.name == "shard_map"][0]
        (e2,) = eq.params["jaxpr"].eqns
        return str(e2.primitive), tuple(e2.params["axes"]), vjp(np_.arange(4.0))

    (fp, fa, fv), (jp, ja, jv) = _both(make)
    assert (fp, fa) == (jp, ja) == ("psum_invariant", ("x",))
    _close(fv, jv)


def test_psum_transposes_to_pvary() -> None:
    def make(lib: str) -> tuple:
        top, np_, lax_, _, P_ = _LIBS[lib]
        f = top.shard_map(lambda x: lax_.psum(x, "x"), mesh=_mesh(lib), in_specs=P_("x"), out_specs=P_("x"))
        vjp = top.vjp(f, np_.arange(4.0))[1]
        return _prims(top.make_jaxpr(f)(np_.arange(4.0))), _prims(top.make_jaxpr(vjp)(np_.arange(4.0))), \
            vjp(np_.arange(4.0) + 1)

    (f1, f2, fv), (j1, j2, jv) = _both(make)
    assert f1 == j1 == ["psum_invariant", "pvary"]
    assert f2 == j2 == ["psum_invariant", "pvary"]
    _close(fv, jv)


def test_pcast_varying_binds_pvary_and_its_errors() -> None:
    def make(lib: str) -> tuple:
        top, np_, lax_, _, P_ = _LIBS[lib]

        def body(x):
            return lax_.pcast(x, "x", to="varying")

        f = top.shard_map(body, mesh=_mesh(lib), in_specs=P_(), out_specs=P_("x"))
        jaxpr = str(top.make_jaxpr(f)(np_.arange(8.0)))
        grad = top.grad(lambda x: (f(x) * np_.arange(32.0)).sum())
        g = (jax.jit(grad, compiler_options=_ORACLE_OPTIONS) if lib == "jax" else grad)(np_.arange(8.0))  # (jax's: one program, not op by op)
        bad = top.shard_map(body, mesh=_mesh(lib), in_specs=P_("x"), out_specs=P_("x"))
        with pytest.raises(ValueError, match="pcast"):
            bad(np_.arange(8.0))
        return "pvary[axes=('x',)" in jaxpr, g

    (fj, fg), (jj, jg) = _both(make)
    assert fj and jj
    _close(fg, jg)


@pytest.mark.parametrize("case", ["mlp", "all_gather", "ppermute", "psum_scatter", "scan", "pmean", "two_axes",
                                  "all_gather_invarying", "cond"])
def test_grads_of_check_vma_bodies_match_jax(case: str) -> None:
    """Gradients where invariant inputs meet varying values in many ways: exact sums, as jax's.  ftrans's
    loss and gradient eagerly and its jitted gradient, each against jax's one jitted value and gradient."""

    def make(lib: str) -> object:
        top, np_, lax_, _, P_ = _LIBS[lib]
        mesh = _mesh(lib, (2, 2), ("x", "y")) if case == "two_axes" else _mesh(lib)
        w = np_.arange(6.0).reshape(3, 2) / 10
        x = np_.arange(24.0).reshape(8, 3) / 24
        if case == "mlp":
            def body(w, x):
                return lax_.psum((np_.tanh(x @ w) ** 2).sum(), "x")
            specs, out = (P_(), P_("x")), P_()
        elif case == "all_gather":
            def body(w, x):
                return (lax_.all_gather(w, "x") * x.sum()).sum()[None]
            specs, out = (P_(), P_("x")), P_("x")
        elif case == "ppermute":
            def body(w, x):
                return lax_.ppermute(w * 2, "x", [(i, (i + 1) % 4) for i in range(4)]) * x[:2, :2].sum()
            specs, out = (P_(), P_("x")), P_("x")
        elif case == "psum_scatter":
            def body(w, x):
                return lax_.psum_scatter(np_.concatenate([w[:2], w[1:]]), "x", tiled=True) * x[0, 0]
            specs, out = (P_(), P_("x")), P_("x")
        elif case == "scan":
            def body(w, x):
                def step(c, xi):
                    return c + np_.sin(xi @ w).sum(), None
                c, _ = lax_.scan(step, lax_.pcast(0.0, "x", to="varying"), x)
                return lax_.psum(c, "x")
            specs, out = (P_(), P_("x")), P_()
        elif case == "pmean":
            def body(w, x):
                return lax_.pmean(w * x.sum(), "x")
            specs, out = (P_(), P_("x")), P_()
        elif case == "two_axes":
            def body(w, x):
                y = np_.tanh(x @ w)
                return lax_.psum(y.sum(0, keepdims=True), "x") * w.sum()
            specs, out = (P_(), P_("x")), P_(None, "y")
        elif case == "all_gather_invarying":
            def body(w, x):
                return (lax_.all_gather(x, "x", tiled=True, to="invarying") @ w).sum() * w[0, 0]
            specs, out = (P_(), P_("x")), P_()
        else:  # cond on a varying predicate
            def body(w, x):
                return lax_.cond(x.sum() > 1.0, lambda a, b: a.sum() * b.sum(), lambda a, b: a.sum() - b.sum(),
                                 w, x)[None]
            specs, out = (P_(), P_("x")), P_("x")
        f = top.shard_map(body, mesh=mesh, in_specs=specs, out_specs=out)

        def loss(w, x):
            return (f(w, x) ** 2).sum()

        if lib == "jax":  # the oracle: one jitted program (jax's eager shard_map and grad compile op by op)
            v, g = jax.jit(lambda w, x: (loss(w, x), jax.grad(loss, (0, 1))(w, x)), compiler_options=_ORACLE_OPTIONS)(w, x)
            return v, g, g
        return loss(w, x), top.grad(loss, (0, 1))(w, x), top.jit(top.grad(loss, (0, 1)))(w, x)

    fv, jv = _both(make)
    _close(fv, jv, rtol=1e-5)


def test_check_vma_false_keeps_the_replica_mean() -> None:
    """Without check_vma no casts are staged; the transpose shares out and sums at the boundary, as jax's."""

    def make(lib: str) -> tuple:
        top, np_, lax_, _, P_ = _LIBS[lib]
        f = top.shard_map(lambda w, x: w * x, mesh=_mesh(lib), in_specs=(P_(), P_("x")), out_specs=P_("x"),
                          check_vma=False)
        w, x = np_.arange(2.0) + 1, np_.arange(8.0)
        g = top.grad(lambda w, x: (f(w, x) ** 2).sum(), (0, 1))
        g = jax.jit(g, compiler_options=_ORACLE_OPTIONS) if lib == "jax" else g  # (jax's: one program, not op by op)
        return "pvary" in str(top.make_jaxpr(f)(w, x)), g(w, x)

    (fp, fg), (jp, jg) = _both(make)
    assert not fp and not jp
    _close(fg, jg)


def test_vmap_of_a_body_with_pvary() -> None:
    def make(lib: str) -> object:
        top, np_, lax_, _, P_ = _LIBS[lib]
        f = top.shard_map(lambda w, x: lax_.psum(w * x, "x"), mesh=_mesh(lib), in_specs=(P_(), P_("x")),
                          out_specs=P_())
        w, x = np_.arange(6.0).reshape(3, 2), np_.arange(8.0)

        def run(w, x):
            return top.vmap(f, (0, None))(w, x), top.vmap(top.grad(lambda w: f(w, x).sum()))(w)

        return jax.jit(run, compiler_options=_ORACLE_OPTIONS)(w, x) if lib == "jax" else run(w, x)  # (jax's: one program, not op by op)

    fv, jv = _both(make)
    _close(fv, jv)


def test_vmap_spmd_axis_name_of_grad_does_not_sum_over_examples() -> None:
    """The transpose's sums over unmentioned axes leave out the axes a vmap's spmd_axis_name splits the batch
    over (as jax's): the devices along them hold different examples."""

    def make(lib: str) -> tuple:
        top, np_, _, _, P_ = _LIBS[lib]
        f = top.shard_map(lambda x: np_.sin(np_.sum(x)), mesh=_mesh(lib, (2, 2), ("x", "y")), in_specs=P_("y"),
                          out_specs=P_(), check_vma=False)
        x = np_.arange(16.0).reshape(4, 4)

        def run(x):
            return top.vmap(top.grad(f), spmd_axis_name="x")(x), top.vmap(top.grad(f))(x)

        return jax.jit(run, compiler_options=_ORACLE_OPTIONS)(x) if lib == "jax" else run(x)  # (jax's: one program, not op by op)

    (fa, fb), (ja, jb) = _both(make)
    _close(fa, fb)
    _close(fa, ja)
    _close(fb, jb)
