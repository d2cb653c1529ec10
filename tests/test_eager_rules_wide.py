"""Every float unary primitive's eager (NumPy) rule against jax's compiled one over the whole real line.

The per-primitive tests sample each function on its comfortable domain; an eager rule can still be wrong
off it. ``lgamma``'s rule once negated every result below -1, believing log|Gamma| never goes that low,
which holds for x > 0 only: ``gamma(-4.7)`` came back as its reciprocal, eagerly, while jit was right.
So this file runs each rule on negative and positive values from 1e-30 to 3e38, non-integers near the
poles, and the special values, and compares with jax's jitted result.
"""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest
import scipy.special as sps
from jax import lax as jlax

import ftrans
import ftrans.lax as flax
import ftrans.scipy.special as fsp

_RNG = np.random.default_rng(0)
X = np.concatenate([
    np.linspace(-30, 30, 241) + 0.137,  # every half-integer region, off the poles
    -np.logspace(-30, 38, 60), np.logspace(-30, 38, 60),
    [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0],
    _RNG.uniform(-1, 1, 50), _RNG.uniform(-200, 200, 50),
]).astype(np.float32)

UNARY = ["exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan", "asin", "acos",
         "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "erf", "erfc",
         "erf_inv", "lgamma", "digamma", "floor", "ceil", "round", "neg", "abs", "sign", "square",
         "bessel_i0e", "bessel_i1e"]

# Documented differences (docs/differences.md): digamma at +-0 is -inf (XLA under jax 0.10: NaN), and XLA's
# lgamma(1) is 4.8e-7, not 0.
_KNOWN = {"digamma": X == 0, "lgamma": X == 1}
# Near their interior zeros the two libraries' lgamma and digamma agree absolutely, not relatively.
_ATOL = {"lgamma": 5e-6, "digamma": 5e-6}


@pytest.fixture(scope="module")
def jax_results():
    return dict(zip(UNARY, jax.jit(lambda v: [getattr(jlax, n)(v) for n in UNARY])(X)))


@pytest.mark.parametrize("name", UNARY)
def test_eager_rule_matches_compiled_over_the_real_line(name, jax_results):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = np.asarray(getattr(flax, name)(X)).astype(np.float64)
    want = np.asarray(jax_results[name]).astype(np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    # Subnormal results: XLA on the CPU flushes them to zero, NumPy keeps them.
    close = np.abs(got - want) <= 5e-6 * np.abs(want) + _ATOL.get(name, 1e-36)
    bad = ~(same | close | _KNOWN.get(name, False))
    assert not bad.any(), (
        f"{name}: eager and compiled differ at x = {X[bad][:6]}: eager {got[bad][:6]}, jax {want[bad][:6]}")


def test_gamma_family_at_negative_arguments_against_scipy():
    """The functions built on lgamma, eagerly and under jit, at negative non-integers."""
    x = np.array([-0.5, -1.5, -2.5, -3.2, -4.7, -5.2, -6.5, -10.3, -20.5], np.float32)
    a = np.array([-4.7, 2.5, -0.5, -6.2], np.float32)
    b = np.array([1.5, -5.3, -0.3, 3.1], np.float32)
    cases = [
        (fsp.gammaln, sps.gammaln, (x,)), (fsp.gamma, sps.gamma, (x,)), (flax.lgamma, sps.gammaln, (x,)),
        (fsp.beta, sps.beta, (a, b)), (fsp.betaln, sps.betaln, (a, b)),
    ]
    for f, ref, args in cases:
        want = ref(*(np.float64(v) for v in args))
        np.testing.assert_allclose(np.asarray(f(*args)), want, rtol=2e-5, err_msg=f"{f.__name__} eager")
        np.testing.assert_allclose(np.asarray(ftrans.jit(f)(*args)), want, rtol=2e-5, err_msg=f"{f.__name__} jit")
    # lgamma(-inf) is +inf, as C99's (SciPy's gammaln gives -inf).
    assert float(flax.lgamma(np.float32(-np.inf))) == np.inf
    assert np.asarray(flax.lgamma(np.array([-np.inf, -4.7], np.float32)))[0] == np.inf
