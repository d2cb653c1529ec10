"""Every primitive's StableHLO lowering agrees with its NumPy rule on the registry's samples.

The samples are the ones ``tests/test_registry.py`` builds for every
registered primitive (all dtypes each accepts); here each is staged as a
one-equation program, lowered, compiled by XLA and run, and the result is
compared with the primitive's NumPy rule: exactly for integer, boolean and
structural results, to a tolerance for floating-point math.
"""

from __future__ import annotations

import numpy as np
import pytest

import ftrans
from ftrans.core import primitive as P
from ftrans.core.array import Array
from ftrans.lowering.lower import lowering_rules
from tests.lowering_util import run_lowered
from tests.test_registry import SAMPLES, _aval

# Float math whose last bits legitimately differ between NumPy/SciPy and XLA.
_APPROX = {
    "exp", "exp2", "log", "log1p", "expm1", "sqrt", "rsqrt", "cbrt", "tanh", "logistic", "sin", "cos",
    "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "atan2", "erf", "erfc",
    "erf_inv", "lgamma", "digamma", "pow", "div", "integer_pow", "dot_general", "reduce_sum",
    "reduce_prod", "cumsum", "cumprod", "cumlogsumexp", "reduce_window_sum", "scatter_add",
    "scatter_mul", "mul", "square", "polynomial", "rem", "sign", "abs", "conv_general_dilated", "fft",
    "cholesky", "triangular_solve", "lu", "qr", "eigh", "svd", "eig", "bessel_i0e", "bessel_i1e",
    "cholesky_update", "symmetric_product", "hessenberg", "householder_product", "ormqr", "tridiagonal",
    "tridiagonal_solve",
}
# Lowered only inside a program of their own kind: pmap's rule needs a replicated module (its
# lowering is checked against jax.pmap in tests/test_pmap.py); a one-equation jit program of it
# must refuse with PmapInsideJitError instead.
# checkify's ``check`` is never lowered: checkify functionalizes it first, and its lowering refuses.
_OWN_PROGRAM = {"pmap", "check"}
# XLA's unseeded generator: its values are unspecified, so only the type and the range [a, b) are compared.
_UNSEEDED = {"rng_uniform"}
NAMES = sorted(n for n in SAMPLES if n in P.registry and P.registry[n] in lowering_rules and n not in _OWN_PROGRAM)


def _tol(dtype: np.dtype) -> float:
    return {2: 2e-2, 4: 2e-5, 8: 1e-12, 16: 1e-12}.get(np.dtype(dtype).itemsize, 1e-5) if np.dtype(
        dtype).kind != "c" else (2e-5 if np.dtype(dtype).itemsize == 8 else 1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_lowering_matches_impl(name):
    """All accepted samples of a primitive, one equation each, in one lowered program (one XLA compile per
    primitive, not per sample); each equation's outputs are compared with the NumPy rule on its sample."""
    prim = P.registry[name]
    cases = []
    seen = set()
    for ops, params in SAMPLES[name]:
        avals = [_aval(x) for x in ops]
        # weak_type changes no lowered program: one of each pair is enough (convert_element_type has ~170)
        key = (repr(avals), repr(sorted((k, repr(v)) for k, v in params.items() if k != "weak_type")))
        if "weak_type" in params and key in seen:
            continue
        seen.add(key)
        try:
            P.abstract_eval_rules[prim](*avals, **params)
        except (TypeError, ValueError):
            continue
        raw = [x._value if isinstance(x, Array) else np.asarray(x) for x in ops]
        with ftrans.default_device(ftrans.devices("cpu")[0]):  # run_lowered runs on the CPU (LAPACK targets)
            expected = prim.impl(*raw, **params)
        expected = list(expected) if prim.multiple_results else [expected]
        cases.append((params, avals, raw, expected))
    assert cases, f"no sample of {name} was accepted"

    def fn(*xs):
        outs, pos = [], 0
        for params, _, raw, _ in cases:
            out = prim.bind(*xs[pos:pos + len(raw)], **params)
            pos += len(raw)
            outs += list(out) if prim.multiple_results else [out]
        return outs

    got_all, text = run_lowered(fn, *[r for _, _, raw, _ in cases for r in raw])
    pos = 0
    for params, avals, raw, expected in cases:
        got = got_all[pos:pos + len(expected)]
        pos += len(expected)
        where = f"{name}{params} on {', '.join(a.str_short() for a in avals)}"
        for g, e in zip(got, expected):
            e = np.asarray(e)
            assert g.dtype == e.dtype and g.shape == e.shape, f"{where}: {g.dtype}{g.shape} vs {e.dtype}{e.shape}"
            if name in _UNSEEDED:
                lo, hi = np.asarray(raw[0]), np.asarray(raw[1])
                assert lo >= hi or ((g >= lo) & (g < hi)).all(), f"{where}: {g} outside [{lo}, {hi})"
            elif name in _APPROX and e.dtype.kind in "fcV" or e.dtype.name == "bfloat16":
                t = _tol(e.dtype)
                np.testing.assert_allclose(g.astype(np.complex128 if e.dtype.kind == "c" else np.float64),
                                           e.astype(np.complex128 if e.dtype.kind == "c" else np.float64),
                                           rtol=t, atol=t, equal_nan=True, err_msg=f"{where}\n{text}")
            else:
                np.testing.assert_array_equal(g, e, err_msg=f"{where}\n{text}")
    assert pos == len(got_all)


def test_pmap_refuses_a_single_device_program():
    from ftrans.lowering.rules.parallel import PmapInsideJitError

    prim = P.registry["pmap"]
    ops, params = SAMPLES["pmap"][0]
    raw = [x._value if isinstance(x, Array) else np.asarray(x) for x in ops]
    with pytest.raises(PmapInsideJitError, match="inside a jitted function"):
        run_lowered(lambda *xs: list(prim.bind(*xs, **params)), *raw)


def test_every_primitive_lowers():
    missing = sorted(n for n, p in P.registry.items()  # ftrans's own (a user's supplies what it needs)
                     if p.ftrans_owned and p not in lowering_rules and (p, "lowering") not in P.not_supported)
    assert not missing, f"primitives without a StableHLO lowering: {missing}"
