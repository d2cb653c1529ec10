"""Recursion through cond/switch while tracing (issue 21): tail recursion becomes a while_loop.

References are closed forms, or the same recursion run in plain Python /
differentiated by jax on the unrolled computation.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.errors import FtransValueError

F32 = np.float32


def factorial(r, x):
    return flax.cond(x <= 1.0, lambda: r, lambda: factorial(r * x, x - 1))


@pytest.mark.parametrize("x", [0.5, 1.0, 5.0, 7.0])
def test_factorial_eager_jit_and_ir(x):
    want = float(math.factorial(int(x))) if x >= 1 else 1.0
    assert float(ftrans.jit(factorial)(1.0, x)) == want
    assert float(factorial(1.0, x)) == want
    text = str(ftrans.make_jaxpr(factorial)(1.0, x))
    assert "while[" in text


def test_factorial_vmap_and_grad():
    xs = np.array([1.0, 3.0, 4.0, 6.0], F32)
    np.testing.assert_allclose(ftrans.vmap(factorial, in_axes=(None, 0))(F32(1.0), xs), [1, 6, 24, 720])
    np.testing.assert_allclose(ftrans.jit(ftrans.vmap(factorial))(np.full(4, 2, F32), xs), [2, 12, 48, 1440])

    def unrolled(r, x, n):  # the same product with its length fixed, for jax
        for _ in range(n):
            r, x = r * x, x - 1
        return r

    for x, n in ((5.0, 4), (3.0, 2)):
        want = jax.grad(unrolled, argnums=(0, 1))(F32(2.0), F32(x), n)
        got = ftrans.grad(factorial, argnums=(0, 1))(F32(2.0), F32(x))
        np.testing.assert_allclose(got, want, rtol=1e-6)
        got = ftrans.jit(ftrans.grad(factorial, argnums=(0, 1)))(F32(2.0), F32(x))
        np.testing.assert_allclose(got, want, rtol=1e-6)
    got = ftrans.vmap(ftrans.grad(factorial, argnums=1), in_axes=(None, 0))(F32(1.0), xs)
    want = [jax.grad(unrolled, argnums=1)(F32(1.0), F32(x), max(int(x) - 1, 0)) for x in xs]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def collatz_steps(n, k):
    """Three-way switch, two branches recursive: the number of Collatz steps from n."""
    idx = fjnp.where(n == 1, 0, fjnp.where(n % 2 == 0, 1, 2))
    return flax.switch(idx, [lambda: k, lambda: collatz_steps(n // 2, k + 1),
                             lambda: collatz_steps(3 * n + 1, k + 1)])


def _collatz(n):
    k = 0
    while n != 1:
        n, k = (n // 2 if n % 2 == 0 else 3 * n + 1), k + 1
    return k


def test_switch_with_several_recursive_branches():
    for n in (1, 6, 27):
        assert int(ftrans.jit(collatz_steps)(np.int32(n), np.int32(0))) == _collatz(n)
    ns = np.array([1, 6, 7, 27], np.int32)
    got = ftrans.vmap(collatz_steps, in_axes=(0, None))(ns, np.int32(0))
    assert np.asarray(got).tolist() == [_collatz(int(n)) for n in ns]


def newton_sqrt(a, x):
    """Array state and operands: recursion until converged."""
    nxt = 0.5 * (x + a / x)
    return flax.cond(fjnp.max(fjnp.abs(nxt - x)) < 1e-6, lambda y: y, lambda y: newton_sqrt(a, y), nxt)


def test_array_state_with_operands_and_grad():
    a = np.array([2.0, 9.0, 0.5], F32)
    np.testing.assert_allclose(ftrans.jit(newton_sqrt)(a, a), np.sqrt(a), rtol=1e-6)
    g = ftrans.grad(lambda a: newton_sqrt(a, a + 1.0).sum())(a)
    np.testing.assert_allclose(g, jax.grad(lambda a: jjnp.sqrt(a).sum())(a), rtol=1e-3)


def test_non_tail_recursion_is_a_located_error():
    def fact(x):
        return flax.cond(x <= 1.0, lambda: x, lambda: x * fact(x - 1))

    with pytest.raises(FtransValueError) as ei:
        ftrans.jit(fact)(F32(3.0))
    msg = str(ei.value)
    assert isinstance(ei.value, ValueError)
    assert "tail recursion" in msg and "test_recursion.py" in msg and "accumulator" in msg, msg


def test_recursion_without_a_base_branch_is_an_error():
    def forever(x):
        return flax.cond(x > 0, lambda: forever(x - 1), lambda: forever(x + 1))

    with pytest.raises(FtransValueError, match="never ends"):
        ftrans.jit(forever)(F32(3.0))


def test_nested_distinct_conds_are_not_recursion():
    def f(x):
        return flax.cond(x > 0, lambda: flax.cond(x > 1, lambda: x * 2, lambda: x * 3), lambda: -x)

    for x in (-1.0, 0.5, 2.0):
        want = (x * 2 if x > 1 else x * 3) if x > 0 else -x
        assert float(ftrans.jit(f)(F32(x))) == pytest.approx(want)
        assert "while[" not in str(ftrans.make_jaxpr(f)(F32(x)))
