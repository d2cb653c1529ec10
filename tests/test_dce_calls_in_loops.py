"""Dead-code elimination of a loop whose body holds a call (``checkpoint``, a nested ``jit``) with an unread
output. The loop's carries are pruned to a fixed point; that fixed point must see the calls as the final
pruning does (a pass run leaves call signatures to the pipeline, so an operand the call no longer needs is
still read), or the loop drops a carry its body still reads: ``jit(grad(...))`` of a ``scan`` over a
``checkpoint``ed step, a common way to save memory, failed with "Variable not defined". Each program here is
checked against jax."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
import ftrans.lax as flax
import ftrans.numpy as fnp

XS = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
W = np.full(3, 0.3, np.float32)


def _scan_loss(lib, lax, np_, wrap):
    def step(c, x):
        h, acc = c
        h = np_.tanh(h * 1.5 + x)
        return (h, acc + h.sum()), h

    body = wrap(lib, step)

    def loss(w, xs):
        (h, acc), hs = lax.scan(body, (w, 0.0), xs)
        return acc + hs.mean()

    return loss


def _while_loss(lib, lax, np_, wrap):
    def step(c):
        i, h, unused = c
        h = np_.sin(h) * 1.1
        return i + 1, h, unused + h.sum()

    body = wrap(lib, step)

    def loss(w):
        _, h, _ = lax.while_loop(lambda c: c[0] < 3, body, (0, w, 0.0))
        return h.sum()

    return loss


def _fori_loss(lib, lax, np_, wrap):
    def two(h):
        return np_.cos(h), h * 2.0  # the second result is never read

    inner = wrap(lib, two)

    def loss(w):
        return lax.fori_loop(0, 3, lambda i, h: inner(h)[0] + h, w).sum()

    return loss


WRAPS = {
    "checkpoint": lambda lib, f: lib.checkpoint(f),
    "jit": lambda lib, f: lib.jit(f),
    "checkpoint_of_jit": lambda lib, f: lib.checkpoint(lib.jit(f)),
}


@pytest.mark.parametrize("wrap", sorted(WRAPS))
def test_scan_over_a_call_with_an_unread_carry(wrap):
    fl = _scan_loss(ftrans, flax, fnp, WRAPS[wrap])
    jl = _scan_loss(jax, jax.lax, jnp, WRAPS[wrap])
    want = jax.jit(jax.grad(jl))(W, XS)
    np.testing.assert_allclose(ftrans.jit(ftrans.grad(fl))(W, XS), want, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(ftrans.grad(fl)(W, XS), want, rtol=2e-6, atol=1e-6)
    vj = jax.jit(jax.vmap(jax.grad(jl), in_axes=(None, 0)))(W, np.stack([XS, XS[::-1]]))
    vf = ftrans.jit(ftrans.vmap(ftrans.grad(fl), in_axes=(None, 0)))(W, np.stack([XS, XS[::-1]]))
    np.testing.assert_allclose(vf, vj, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("wrap", sorted(WRAPS))
def test_while_over_a_call_with_an_unread_carry(wrap):
    fl = _while_loss(ftrans, flax, fnp, WRAPS[wrap])
    jl = _while_loss(jax, jax.lax, jnp, WRAPS[wrap])
    np.testing.assert_allclose(ftrans.jit(fl)(W), jax.jit(jl)(W), rtol=2e-6)
    np.testing.assert_allclose(ftrans.jit(ftrans.jacfwd(fl))(W), jax.jit(jax.jacfwd(jl))(W), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("wrap", sorted(WRAPS))
def test_fori_over_a_call_with_an_unread_result(wrap):
    fl = _fori_loss(ftrans, flax, fnp, WRAPS[wrap])
    jl = _fori_loss(jax, jax.lax, jnp, WRAPS[wrap])
    np.testing.assert_allclose(ftrans.jit(ftrans.grad(fl))(W), jax.jit(jax.grad(jl))(W), rtol=2e-6, atol=1e-6)
