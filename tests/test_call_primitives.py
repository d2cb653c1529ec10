"""Call-like primitives share one implementation of their rules (``ftrans/core/prims/calls.py``).

A new call primitive (``pmap`` and ``shard_map`` are coming) should declare
only what differs.  These tests create a throwaway :class:`CallPrimitive`,
check that every rule table picked it up, and run it eagerly and under
``jit``, ``jvp``, ``grad``, ``vmap`` and their compositions against JAX; the
primitive is removed from the registry and every table afterwards so the
registry-coverage test never sees it.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans.core import primitive as P
from ftrans.core.ir import ClosedJaxpr, Jaxpr, typecheck
from ftrans.core.prims import calls as C
from ftrans.core.trace import aval_of, stage
from ftrans.lowering.lower import lowering_rules
from ftrans.transforms.ad import jvp_rules
from ftrans.transforms.batching import batching_rules
from ftrans.transforms.partial_eval import partial_eval_jaxpr_rules, partial_eval_rules
from ftrans.transforms.transpose import transpose_rules

TABLES = {
    "abstract_eval": P.abstract_eval_rules, "impl": P.impl_rules, "lowering": lowering_rules, "jvp": jvp_rules,
    "transpose": transpose_rules, "batching": batching_rules, "partial_eval": partial_eval_rules,
    "partial_eval_jaxpr": partial_eval_jaxpr_rules,
}

RNG = np.random.RandomState(0)
X = RNG.randn(3, 4).astype(np.float32)
W = RNG.randn(4).astype(np.float32)


def _discard(prim: P.Primitive) -> None:
    del P.registry[prim.name]
    for table in TABLES.values():
        table.pop(prim, None)
    C.call_primitives.remove(prim)


@pytest.fixture
def probe_prim():
    """A call primitive that declares one difference: derived calls are renamed after their rule."""
    calls: list[str] = []

    def update(params: dict, rule: str, num_operands: int) -> dict:
        calls.append(rule)
        return {**params, "name": f"{rule}({params['name']})"}

    prim = C.CallPrimitive("probe_call", update_params=update)
    yield prim, calls
    _discard(prim)


def _caller(prim: C.CallPrimitive, fun, name: str = "body"):
    """``fun`` wrapped so that, under any transform, it runs as one ``prim`` call of its staged body."""

    def wrapped(*args):
        closed, _ = stage(lambda *xs: [fun(*xs)], [aval_of(fjnp.asarray(a)) for a in args])
        body, consts = C.hoist_consts(closed)
        (out,) = prim.bind(*consts, *[fjnp.asarray(a) for a in args], jaxpr=body, name=name)
        return out

    return wrapped


def _body(x, w):
    return fjnp.sin(x * w) + x.sum() * w


def _jax_body(x, w):
    return jjnp.sin(x * w) + x.sum() * w


def test_every_table_has_a_rule_for_a_new_call_primitive(probe_prim):
    prim, _ = probe_prim
    missing = [name for name, table in TABLES.items() if prim not in table]
    assert not missing, missing
    assert prim in C.call_primitives and P.registry["probe_call"] is prim


def test_explicit_rules_are_not_replaced_by_the_generic_ones():
    from ftrans.transforms.ad_rules import calls as ad_calls
    from ftrans.transforms.linear_rules import calls as lin_calls

    assert jvp_rules[C.custom_jvp_call_p] is ad_calls._custom_jvp_call_jvp
    assert partial_eval_rules[C.custom_vjp_call_p] is ad_calls._inline
    assert transpose_rules[C.remat_p] is lin_calls._remat_transpose
    # custom_jvp_call transposes through its body (JAX's rule, for a rule that applies the function to its
    # tangent), not through the generic call rule; custom_vjp_call has no transpose at all
    assert transpose_rules[C.custom_jvp_call_p] is lin_calls._custom_jvp_call_transpose
    assert (C.custom_vjp_call_p, "transpose") in P.not_supported and C.custom_vjp_call_p not in transpose_rules


def test_eager_and_jit(probe_prim):
    prim, _ = probe_prim
    f = _caller(prim, _body)
    want = _jax_body(X, W)
    closed = ftrans.make_jaxpr(f)(X, W)
    typecheck(closed)
    assert [e.primitive.name for e in closed.eqns] == ["probe_call"]
    assert "probe_call[" in str(closed) and "name=body" in str(closed)
    np.testing.assert_allclose(np.asarray(f(X, W)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ftrans.jit(f)(X, W)), want, rtol=1e-6)
    # eval_jaxpr of the staged program applies the primitive eagerly (its impl evaluates the body)
    np.testing.assert_allclose(np.asarray(ftrans.eval_jaxpr(closed.jaxpr, closed.consts, X, W)[0]), want,
                               rtol=1e-6)
    # lowered as a private function and a call
    text = ftrans.jit(f).lower(X, W).as_text()
    assert "call @body(" in text and "func.func private @body" in text


def test_jvp_is_one_call_with_updated_params(probe_prim):
    prim, seen = probe_prim
    f = _caller(prim, _body)
    tx, tw = np.ones_like(X), np.full_like(W, 0.5)
    out, t = ftrans.jvp(f, (X, W), (tx, tw))
    jout, jt = jax.jvp(_jax_body, (X, W), (tx, tw))
    np.testing.assert_allclose(np.asarray(out), jout, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(t), jt, rtol=1e-5, atol=1e-6)
    closed = ftrans.make_jaxpr(lambda x, w: ftrans.jvp(f, (x, w), (tx, tw)))(X, W)
    calls = [e for e in closed.eqns if e.primitive is prim]
    assert len(calls) == 1 and calls[0].params["name"] == "jvp(body)"
    assert "jvp" in seen


def test_grad_uses_partial_eval_and_transpose(probe_prim):
    prim, seen = probe_prim
    f = _caller(prim, _body)

    def loss(x, w):
        return f(x, w).sum()

    want = jax.grad(lambda x, w: _jax_body(x, w).sum(), argnums=(0, 1))(X, W)
    for g in (ftrans.grad(loss, argnums=(0, 1)), ftrans.jit(ftrans.grad(loss, argnums=(0, 1))),
              ftrans.grad(ftrans.jit(loss), argnums=(0, 1))):
        got = g(X, W)
        for a, b in zip(got, want):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
    closed = ftrans.make_jaxpr(ftrans.grad(loss, argnums=(0, 1)))(X, W)
    typecheck(closed)
    names = {e.params.get("name") for e in closed.eqns if e.primitive is prim}
    assert any(n.startswith("transpose(") for n in names), names
    assert {"known", "unknown", "transpose"} <= set(seen)


def test_split_inside_an_outer_call(probe_prim):
    """A probe call inside a jitted function: the jaxpr-split rule splits it when the jit body is split."""
    prim, seen = probe_prim
    f = _caller(prim, _body)

    def loss(x, w):
        return ftrans.jit(lambda a, b: f(a, b) * a)(x, w).sum()

    got = ftrans.grad(loss, argnums=(0, 1))(X, W)
    want = jax.grad(lambda x, w: (_jax_body(x, w) * x).sum(), argnums=(0, 1))(X, W)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


def test_vmap_is_one_call(probe_prim):
    prim, seen = probe_prim
    f = _caller(prim, _body)
    xs = RNG.randn(5, 3, 4).astype(np.float32)
    want = jax.vmap(_jax_body, (0, None))(xs, W)
    np.testing.assert_allclose(np.asarray(ftrans.vmap(f, (0, None))(xs, W)), want, rtol=1e-5, atol=1e-6)
    closed = ftrans.make_jaxpr(ftrans.vmap(f, (0, None)))(xs, W)
    assert [e.params["name"] for e in closed.eqns if e.primitive is prim] == ["batch(body)"]
    # and composed with reverse mode
    g = ftrans.vmap(ftrans.grad(lambda x, w: f(x, w).sum(), argnums=1), (0, None))(xs, W)
    jg = jax.vmap(jax.grad(lambda x, w: _jax_body(x, w).sum(), argnums=1), (0, None))(xs, W)
    np.testing.assert_allclose(np.asarray(g), jg, rtol=1e-5, atol=1e-5)


def test_operands_are_checked_against_the_body(probe_prim):
    prim, _ = probe_prim
    closed, _ = stage(lambda x: [x * 2.0], [aval_of(fjnp.asarray(W))])
    with pytest.raises(ftrans.errors.FtransTypeError, match="do not match the jaxpr's inputs"):
        ftrans.make_jaxpr(lambda x: prim.bind(x, jaxpr=closed, name="b"))(X)


def test_hoist_consts_moves_constants_to_leading_inputs():
    c = fjnp.asarray(W)
    closed = ftrans.make_jaxpr(lambda x: x * c)(W)
    assert closed.jaxpr.constvars
    body, consts = C.hoist_consts(closed)
    assert not body.jaxpr.constvars and not body.consts and len(consts) == len(closed.consts)
    assert len(body.jaxpr.invars) == len(closed.jaxpr.invars) + len(consts)
    assert body.jaxpr.invars[:len(consts)] == list(closed.jaxpr.constvars)
    same = ClosedJaxpr(Jaxpr([], closed.jaxpr.invars, [], closed.jaxpr.invars), [])
    assert C.hoist_consts(same) == (same, [])
