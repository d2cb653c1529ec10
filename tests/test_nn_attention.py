"""``ftrans.nn.dot_product_attention`` against ``jax.nn.dot_product_attention``: every mask option,
grouped-query heads, unbatched operands, the residual, gradients, ``jit`` and ``vmap``, and the errors."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

import ftrans
import ftrans.nn as fnn

B, T, S, N, K, H = 2, 5, 6, 4, 2, 8
_rng = np.random.default_rng(0)
Q = _rng.standard_normal((B, T, N, H)).astype(np.float32)
KEY = _rng.standard_normal((B, S, K, H)).astype(np.float32)
V = _rng.standard_normal((B, S, K, H)).astype(np.float32)
BIAS1 = _rng.standard_normal((B, 1, T, S)).astype(np.float32)
BIASN = _rng.standard_normal((B, N, T, S)).astype(np.float32)
MASK = _rng.random((B, N, T, S)) > 0.3
QLEN = np.array([3, 5], np.int32)
KVLEN = np.array([6, 2], np.int32)

CASES = {
    "plain": {},
    "bias_one_head": dict(bias=BIAS1),
    "bias_all_heads": dict(bias=BIASN),
    "mask": dict(mask=MASK),
    "causal": dict(is_causal=True),
    "seq_lengths": dict(query_seq_lengths=QLEN, key_value_seq_lengths=KVLEN),
    "q_lengths_only": dict(query_seq_lengths=QLEN),
    "window_pair": dict(local_window_size=(1, 2)),
    "everything": dict(local_window_size=1, is_causal=True, bias=BIAS1, mask=MASK, scale=0.3),
    "xla": dict(implementation="xla", scale=2.0),
}


GRAD_CASES = ["plain", "causal", "seq_lengths", "everything"]


def _loss(nn, kw):
    return lambda q, k, v: (nn.dot_product_attention(q, k, v, **kw) ** 2).sum()


@functools.cache
def jax_refs() -> dict:
    """Every jax reference of this file from one jitted jax program (eagerly, jax compiles each operation
    of each case apart)."""
    def refs(q, k, v):
        out = {"values " + name: jax.nn.dot_product_attention(q, k, v, **kw) for name, kw in CASES.items()}
        out.update({"grads " + name: jax.grad(_loss(jax.nn, CASES[name]), (0, 1, 2))(q, k, v)
                    for name in GRAD_CASES})
        out["residual"] = jax.nn.dot_product_attention(q, k, v, is_causal=True, return_residual=True)
        out["unbatched"] = jax.nn.dot_product_attention(q[0], k[0], v[0])
        bq, bk, bv = (x.astype(jax.numpy.bfloat16) for x in (q, k, v))
        out["bf16"] = jax.nn.dot_product_attention(bq, bk, bv, is_causal=True)
        out["vmap"] = jax.vmap(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, mask=MASK[0],
                                                                            is_causal=True))(q, k, v)
        return out

    return jax.jit(refs)(Q, KEY, V)


def close(a, b, tol=2e-5):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_values(name):
    kw = CASES[name]
    close(fnn.dot_product_attention(Q, KEY, V, **kw), jax_refs()["values " + name])


@pytest.mark.parametrize("name", GRAD_CASES)
def test_grads(name):
    ours = ftrans.grad(_loss(fnn, CASES[name]), (0, 1, 2))(Q, KEY, V)
    theirs = jax_refs()["grads " + name]
    for a, b in zip(ours, theirs):
        close(a, b, 2e-4)


def test_residual():
    a, ra = fnn.dot_product_attention(Q, KEY, V, is_causal=True, return_residual=True)
    b, rb = jax_refs()["residual"]
    close(a, b)
    close(ra, rb)


def test_unbatched_and_half_precision():
    close(fnn.dot_product_attention(Q[0], KEY[0], V[0]), jax_refs()["unbatched"])
    q, k, v = (x.astype(jax.numpy.bfloat16) for x in (Q, KEY, V))
    a = fnn.dot_product_attention(np.asarray(q), np.asarray(k), np.asarray(v), is_causal=True)
    b = jax_refs()["bf16"]
    close(np.asarray(a, np.float32), np.asarray(b, np.float32), 2e-2)
    assert a.dtype == b.dtype


def test_jit_vmap():
    f = ftrans.jit(ftrans.vmap(lambda q, k, v: fnn.dot_product_attention(q, k, v, mask=MASK[0], is_causal=True)))
    close(f(Q, KEY, V), jax_refs()["vmap"])


@pytest.mark.parametrize("args,kw,match", [
    ((Q, KEY, V[..., :4]), {}, "value shape"),
    ((Q, KEY, V.astype(np.float16)), {}, "value dtype"),
    ((Q[:, :, :3], KEY, V), {}, "multiple"),
    ((Q, KEY, V), dict(mask=MASK.astype(np.int32)), "mask dtype"),
    ((Q, KEY, V), dict(implementation="cudnn"), "cudnn"),
    ((Q, KEY, V), dict(implementation="flash"), "Unsupported"),
])
def test_errors(args, kw, match):
    if match != "cudnn":  # jax raises ValueError for the same inputs (cudnn needs a GPU there)
        with pytest.raises(ValueError):
            jax.nn.dot_product_attention(*args, **kw)
    with pytest.raises(ValueError, match=match):
        fnn.dot_product_attention(*args, **kw)
