"""Transpose rules of the elementwise primitives that are linear in some operand.

``add``/``sub``/``neg`` are linear in every operand; ``mul`` in one operand
when the other is known; ``div`` in its numerator; ``real``, ``imag``,
``complex`` and ``conj`` are linear over the reals (JAX's conventions for
complex cotangents).  A rank-0 operand broadcast against a shaped one gets
the sum of the cotangent.  Every other elementwise primitive is non-linear and
is marked so: its derivative is expressed through these linear ones.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.primitive import Primitive, mark_unsupported
from ftrans.core.prims import elementwise as E
from ftrans.transforms.linear_rules._util import unbroadcast, zeros
from ftrans.transforms.transpose import is_undefined, register_transpose


@register_transpose(E.add_p)
def _add_t(ct: Any, x: Any, y: Any) -> list:
    return [unbroadcast(ct, x.aval) if is_undefined(x) else None,
            unbroadcast(ct, y.aval) if is_undefined(y) else None]


@register_transpose(E.sub_p)
def _sub_t(ct: Any, x: Any, y: Any) -> list:
    return [unbroadcast(ct, x.aval) if is_undefined(x) else None,
            unbroadcast(E.neg_p.bind(ct), y.aval) if is_undefined(y) else None]


@register_transpose(E.neg_p)
def _neg_t(ct: Any, x: Any) -> list:
    return [E.neg_p.bind(ct)]


def _not_bilinear(name: str) -> NotImplementedError:
    return NotImplementedError(
        f"transpose of `{name}` with both operands linear: the program is not linear in its inputs "
        "(linear_transpose needs a function linear in its arguments)"
    )


@register_transpose(E.mul_p)
def _mul_t(ct: Any, x: Any, y: Any) -> list:
    if is_undefined(x) and is_undefined(y):
        raise _not_bilinear("mul")
    if is_undefined(x):
        return [unbroadcast(E.mul_p.bind(ct, y), x.aval), None]
    return [None, unbroadcast(E.mul_p.bind(x, ct), y.aval)]


@register_transpose(E.div_p)
def _div_t(ct: Any, x: Any, y: Any) -> list:
    if is_undefined(y):
        raise NotImplementedError("transpose of `div` in its denominator: division is not linear there")
    return [unbroadcast(E.div_p.bind(ct, y), x.aval), None]


@register_transpose(E.copy_p)
def _copy_t(ct: Any, x: Any) -> list:
    return [E.copy_p.bind(ct)]  # a copy's cotangent is a copy too (as JAX), not the same object


@register_transpose(E.reduce_precision_p)
def _reduce_precision_t(ct: Any, x: Any, **params: Any) -> list:
    return [E.reduce_precision_p.bind(ct, **params)]


def _strong_zeros(ct: Any) -> Any:
    # JAX pairs the cotangent with a NumPy zero (never weakly typed), so the complex cotangent is strong
    # even where ``ct`` is weak (``grad`` of a function of a Python complex's real part)
    aval = _aval_of(ct)
    return zeros(aval.update(weak_type=False) if getattr(aval, "weak_type", False) else aval)


@register_transpose(E.real_p)
def _real_t(ct: Any, x: Any) -> list:
    return [E.complex_p.bind(ct, _strong_zeros(ct))]


@register_transpose(E.imag_p)
def _imag_t(ct: Any, x: Any) -> list:
    return [E.complex_p.bind(_strong_zeros(ct), E.neg_p.bind(ct))]


@register_transpose(E.complex_p)
def _complex_t(ct: Any, x: Any, y: Any) -> list:
    re = E.real_p.bind(ct)
    im = E.neg_p.bind(E.imag_p.bind(ct))
    return [unbroadcast(re, x.aval) if is_undefined(x) else None,
            unbroadcast(im, y.aval) if is_undefined(y) else None]


@register_transpose(E.conj_p)
def _conj_t(ct: Any, x: Any) -> list:
    if x.aval.dtype.kind == "c":
        return [E.conj_p.bind(ct)]
    return [E.real_p.bind(ct)]  # conj of a real operand returned a complex value


def _aval_of(x: Any) -> Any:
    from ftrans.core.trace import aval_of

    return aval_of(x)


@register_transpose(E.polynomial_p)
def _polynomial_t(ct: Any, x: Any, *coeffs: Any, unroll: Any = None) -> list:
    """Linear in the coefficients for a known ``x``: ``a_k``'s cotangent is ``ct * x**k`` (summed where
    ``a_k`` is rank 0)."""
    if is_undefined(x):
        raise NotImplementedError("transpose of `polynomial` in x: a polynomial is linear only in its "
                                  "coefficients (linear_transpose needs a function linear in its arguments)")
    out: list = [None]
    xk_ct = ct
    for k, c in enumerate(coeffs):
        out.append(unbroadcast(xk_ct, c.aval) if is_undefined(c) else None)
        if k + 1 < len(coeffs) and any(is_undefined(d) for d in coeffs[k + 1:]):
            xk_ct = E.mul_p.bind(xk_ct, x)
    return out


_LINEAR = {E.add_p, E.sub_p, E.neg_p, E.mul_p, E.div_p, E.copy_p, E.real_p, E.imag_p, E.complex_p, E.conj_p,
           E.reduce_precision_p, E.polynomial_p}
for _p in list(vars(E).values()):
    if isinstance(_p, Primitive) and _p not in _LINEAR:
        mark_unsupported(_p, "transpose", f"`{_p.name}` is not linear in any operand")
