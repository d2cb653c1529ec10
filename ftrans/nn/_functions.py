"""Activation functions and the other functions of JAX's ``nn`` module, written with ``ftrans.numpy`` and ``ftrans.lax``.

Each function follows the formula JAX uses (the same operations in the same
order), so values agree to the last bit on the same backend, and derivatives
agree too: ``relu``/``relu6`` carry custom JVP rules with derivative 0 at the
kinks, and ``log_softmax``/``softmax``/``logsumexp`` subtract a
``stop_gradient``-ed maximum, as JAX's defaults do.
"""

from __future__ import annotations

import operator
import warnings
from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.core import dtypes
from ftrans.core import operands as _operands
from ftrans.core import trace as _trace
from ftrans.core.config import config as _config
from ftrans.core.operands import canonicalize_axes, check_arraylike, ndim_of, shape_of
from ftrans.core.shape_poly import DimExpr
from ftrans.errors import ConcretizationTypeError, FtransValueError, user_stacklevel
from ftrans.numpy._elementwise import _inexact
from ftrans.scipy.special import _log_softmax, _softmax, logsumexp
from ftrans.transforms.custom_derivatives import custom_jvp

__all__ = [
    "celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "identity",
    "leaky_relu", "log1mexp", "log_sigmoid", "log_softmax", "logmeanexp", "logsumexp", "mish", "one_hot",
    "relu", "relu6", "selu", "sigmoid", "silu", "soft_sign", "softmax", "softplus", "sparse_plus",
    "sparse_sigmoid", "squareplus", "standardize", "swish", "tanh",
]


def _arraylike(name: str, x: Any) -> Any:
    """JAX's ``ensure_arraylike``: arrays and scalars pass (as arrays), lists and other objects are refused."""
    check_arraylike(name, x)
    x = jnp.asarray(x)
    if _trace.active_anywhere and _operands.library_entry is not None:  # (JAX's nn functions are jitted)
        x = _operands.library_entry((x,))[0]
    return x


def identity(x: Any) -> Any:
    """JAX's ``nn.identity``: the argument, as an array."""
    return _arraylike("identity", x)


# ----------------------------------------------------------------------------
# rectifiers: derivative 0 at the kinks, as JAX defines it


@custom_jvp
def relu(x: Any) -> Any:
    """``max(x, 0)``; its derivative at 0 is 0 (a custom JVP, as in JAX)."""
    return jnp.maximum(x, 0)


relu.defjvps(lambda g, ans, x: jnp.where(x > 0, g, jnp.zeros_like(g)))


@custom_jvp
def relu6(x: Any) -> Any:
    """``min(max(x, 0), 6)``; its derivative is 0 at both 0 and 6."""
    return jnp.minimum(jnp.maximum(x, 0), 6.0)


relu6.defjvps(lambda g, ans, x: jnp.where((x > 0) & (x < 6), g, jnp.zeros_like(g)))


def leaky_relu(x: Any, negative_slope: Any = 1e-2) -> Any:
    """``x`` where ``x >= 0``, ``negative_slope * x`` elsewhere."""
    x = _arraylike("leaky_relu", x)
    return jnp.where(x >= 0, x, negative_slope * x)


def hard_tanh(x: Any) -> Any:
    """``x`` clipped to ``[-1, 1]``."""
    x = _arraylike("hard_tanh", x)
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


def elu(x: Any, alpha: Any = 1.0) -> Any:
    """``x`` for ``x > 0``, ``alpha * (exp(x) - 1)`` otherwise (the exp never sees positive inputs)."""
    x = _arraylike("elu", x)
    pos = x > 0
    return jnp.where(pos, x, alpha * jnp.expm1(jnp.where(pos, 0.0, x)))


def celu(x: Any, alpha: Any = 1.0) -> Any:
    """``max(x, 0) + alpha * expm1(min(x, 0) / alpha)``."""
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x: Any) -> Any:
    """``scale * elu(x, alpha)`` with the self-normalising constants."""
    return _SELU_SCALE * elu(x, _SELU_ALPHA)


# ----------------------------------------------------------------------------
# smooth activations


def sigmoid(x: Any) -> Any:
    """The logistic function ``1 / (1 + exp(-x))`` (``lax.logistic``)."""
    return lax.logistic(x)


def softplus(x: Any) -> Any:
    """``log(1 + exp(x))``, as ``logaddexp(x, 0)``: exact for large ``|x|``; ``softplus'(0) = 1/2``.

    ``jnp.logaddexp`` carries JAX's derivative rule (``exp(x - out)``), so the
    derivatives are JAX's too.
    """
    return jnp.logaddexp(*_inexact("softplus", x, 0))


def log_sigmoid(x: Any) -> Any:
    """``log(sigmoid(x)) = -softplus(-x)``."""
    x = _arraylike("log_sigmoid", x)
    return -softplus(-x)


def silu(x: Any) -> Any:
    """``x * sigmoid(x)`` (also ``swish``)."""
    x = _arraylike("silu", x)
    return x * sigmoid(x)


swish = silu


def mish(x: Any) -> Any:
    """``x * tanh(softplus(x))``."""
    x = _arraylike("mish", x)
    return x * jnp.tanh(softplus(x))


def tanh(x: Any) -> Any:
    """``jnp.tanh``."""
    return jnp.tanh(x)


def gelu(x: Any, approximate: bool = True) -> Any:
    """Gaussian error linear unit: the tanh approximation by default, ``erfc``-based when ``approximate=False``."""
    (x,) = _inexact("gelu", x)
    dt = x.dtype
    if approximate:
        c = np.asarray(np.sqrt(2 / np.pi)).astype(dt)[()]
        cdf = 0.5 * (1.0 + jnp.tanh(c * (x + 0.044715 * (x**3))))
        return x * cdf
    sqrt_half = np.asarray(np.sqrt(0.5)).astype(dt)[()]
    return jnp.array(0.5 * x * lax.erfc(-x * sqrt_half), dtype=dt)


def glu(x: Any, axis: int = -1) -> Any:
    """Gated linear unit: split ``x`` in two halves along ``axis``, return ``first * sigmoid(second)``."""
    x = _arraylike("glu", x)
    size = shape_of(x)[axis]
    if size % 2:
        raise ValueError(f"glu: the size of axis {axis} must be divisible by 2, got {size}")
    x1, x2 = jnp.split(x, 2, axis)
    return x1 * sigmoid(x2)


def squareplus(x: Any, b: Any = 4) -> Any:
    """``(x + sqrt(x**2 + b)) / 2``."""
    check_arraylike("squareplus", x, b)
    x, b = jnp.asarray(x), jnp.asarray(b)
    return (x + jnp.sqrt(jnp.square(x) + b)) / 2


def soft_sign(x: Any) -> Any:
    """``x / (|x| + 1)``."""
    x = _arraylike("soft_sign", x)
    return x / (jnp.abs(x) + 1)


def sparse_plus(x: Any) -> Any:
    """0 below -1, ``x`` above 1, ``(x + 1)**2 / 4`` between."""
    x = _arraylike("sparse_plus", x)
    return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


def sparse_sigmoid(x: Any) -> Any:
    """``clip((x + 1) / 2, 0, 1)``, the derivative of ``sparse_plus``."""
    x = _arraylike("sparse_sigmoid", x)  # (a NumPy array's ``x + 1.0`` would be NumPy's float64 arithmetic)
    return 0.5 * jnp.clip(x + 1.0, 0.0, 2.0)


def hard_sigmoid(x: Any) -> Any:
    """``relu6(x + 3) / 6``."""
    x = _arraylike("hard_sigmoid", x)
    return relu6(x + 3.0) / 6.0


def hard_silu(x: Any) -> Any:
    """``x * hard_sigmoid(x)`` (also ``hard_swish``)."""
    x = _arraylike("hard_silu", x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


@custom_jvp
def log1mexp(x: Any) -> Any:
    """``log(1 - exp(-x))``, switching formulas at ``log 2`` for accuracy."""
    x = _arraylike("log1mexp", x)
    c = jnp.log(2.0)
    return jnp.where(x < c, jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


log1mexp.defjvps(lambda g, ans, x: g / jnp.expm1(x))


# ----------------------------------------------------------------------------
# normalisations over axes


def _count(x: Any, axis: Any, where: Any, keepdims: bool, dtype: Any) -> Any:
    """How many elements a reduction over ``axis`` (masked by ``where``) sees, in ``dtype``."""
    shape = shape_of(x)
    if where is None:
        n = 1
        for a in canonicalize_axes("logmeanexp", axis, len(shape)):
            n *= shape[a]
        return jnp.asarray(n, dtype=dtype)
    return jnp.sum(jnp.broadcast_to(where, shape), axis=axis, keepdims=keepdims, dtype=dtype)


def logmeanexp(x: Any, axis: Any = None, where: Any = None, keepdims: bool = False) -> Any:
    """``logsumexp(x) - log(n)``, ``n`` the number of elements reduced."""
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    count = _count(jnp.asarray(x), axis, where, keepdims, lse.dtype)
    return lse - jnp.log(count)


def log_softmax(x: Any, axis: Any = -1, where: Any = None) -> Any:
    """``x - logsumexp(x, axis)``, computed from ``x - stop_gradient(max x)``; masked entries give ``-inf``."""
    return _log_softmax(_arraylike("log_softmax", x), axis, where)


def softmax(x: Any, axis: Any = -1, where: Any = None) -> Any:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``; masked entries give 0.

    The maximum is a ``stop_gradient`` constant (JAX's default,
    ``jax_softmax_custom_jvp=False``), so derivatives flow through the
    exponentials and the sum alone. With ``jax_softmax_custom_jvp`` on, the
    derivative is the closed form ``y * (dx - sum(y * dx))``, which keeps
    only the output ``y`` as a residual.
    """
    if _config.softmax_custom_jvp:
        return _softmax_closed_form(_arraylike("softmax", x), axis, where)
    return _softmax(_arraylike("softmax", x), axis, where)


def _softmax_closed_form_jvp(axis: Any, primals: tuple, tangents: tuple) -> tuple:
    x, where = primals
    x_dot = tangents[0]
    y = _softmax_closed_form(x, axis, where)
    return y, y * (x_dot - jnp.sum(y * x_dot, axis, where=where, keepdims=True))


_softmax_closed_form = custom_jvp(lambda x, axis, where: _softmax(x, axis, where), nondiff_argnums=(1,))
_softmax_closed_form.defjvp(_softmax_closed_form_jvp)


def standardize(x: Any, axis: Any = -1, mean: Any = None, variance: Any = None, epsilon: Any = 1e-5,
                where: Any = None, *, algorithm: str = "fast") -> Any:
    """``(x - mean) / sqrt(variance + epsilon)`` with the statistics taken over ``axis``.

    ``algorithm="fast"`` (JAX's default) uses ``mean(x**2) - mean(x)**2``
    clipped at 0; ``"stable"`` uses the two-pass ``mean((x - mean)**2)``.
    """
    check_arraylike("standardize", x)
    for v in (mean, variance, where):
        if v is not None:
            check_arraylike("standardize", v)
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(jnp.subtract(x, mean)), axis, keepdims=True, where=where)
        elif algorithm == "fast":
            variance = jnp.mean(jnp.square(x), axis, keepdims=True, where=where) - jnp.square(mean)
            variance = jnp.clip(variance, 0)
        else:
            raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    return jnp.subtract(x, mean) * lax.rsqrt(variance + epsilon)


def one_hot(x: Any, num_classes: int, *, dtype: Any = None, axis: Any = -1) -> Any:
    """A ``num_classes``-long indicator vector per index (out-of-range indices give all zeros).

    ``axis`` may also be the name of a ``vmap``/``pmap`` axis whose size is
    ``num_classes``: each position along it then compares with its own index.
    """
    try:  # a symbolic dimension (shape polymorphism) is a size too
        num_classes = num_classes if isinstance(num_classes, DimExpr) else operator.index(num_classes)
    except TypeError:
        msg = ("one_hot: num_classes must be a concrete Python integer (it sets the output shape), got "
               f"{type(num_classes).__name__}. Pass the number of classes as an int, or mark it static under jit "
               "(static_argnums).")
        # A traced count is a concretization problem, as in JAX; anything else is a plain wrong type.
        raise (ConcretizationTypeError if hasattr(num_classes, "aval") else TypeError)(msg) from None
    x = jnp.asarray(x)
    if not dtypes.is_int(x.dtype):
        warnings.warn(f"nn.one_hot input should be integer-typed (as in JAX); got dtype={x.dtype}",
                      DeprecationWarning, stacklevel=user_stacklevel())
    dtype = dtypes.default_float() if dtype is None else dtype
    nd = ndim_of(x)
    if isinstance(axis, (int, np.integer)) and not isinstance(axis, bool):
        if not -(nd + 1) <= axis <= nd:
            raise ValueError(f"one_hot: axis {axis} is out of bounds for an output of rank {nd + 1}")
        pos = int(axis) % (nd + 1)
        lhs = lax.expand_dims(x, (pos,))
        rhs_shape = [1] * nd
        rhs_shape.insert(pos, num_classes)
        rhs = lax.broadcasted_iota(x.dtype, rhs_shape, pos)
        return (lhs == rhs).astype(dtype)
    # a named (mapped) axis
    size = lax.psum(1, axis)
    if num_classes != size:
        raise ValueError(f"Expected num_classes to match the size of axis {axis}, but {num_classes} != {size}")
    return jnp.asarray(x == lax.axis_index(axis), dtype=dtype)


# ----------------------------------------------------------------------------
# attention


def _large_negative(dtype: Any) -> Any:
    """The fill for masked logits: -0.7 of the dtype's (float32-capped) maximum, finite in float32 (JAX's)."""
    big = min(float(np.finfo(dtype).max), float(np.finfo(np.float32).max))
    return jnp.asarray(-0.7 * big, dtype=dtype)


def _as_4d(t: Any) -> Any:
    t = jnp.asarray(t)
    return lax.expand_dims(t, tuple(range(4 - t.ndim))) if t.ndim < 4 else t


def _check_attention_operand(t: Any, shape: Any, dtype: Any, name: str) -> None:
    if t is None:
        return
    if t.ndim != len(shape):
        raise FtransValueError(f"dot_product_attention: {name} should have rank {len(shape)} "
                               f"(shape {tuple(shape)}, -1 = any), got shape {t.shape}")
    if dtype is not None and t.dtype != dtype:
        raise FtransValueError(f"dot_product_attention: {name} dtype should be {np.dtype(dtype).name}, "
                               f"got {t.dtype}; convert it with .astype")
    for want, got in zip(shape, t.shape):
        if want != -1 and want != got:
            raise FtransValueError(f"dot_product_attention: {name} shape should be {tuple(shape)} "
                                   f"(-1 = any), got {t.shape}")


def _grouped(t: Any, k: int, g: int) -> Any:
    """A (B, N|1, T, S) bias or mask as (B, K|1, G|1, T, S), the query heads split into K groups of G."""
    if t is None:
        return None
    b, n, tt, s = t.shape
    if n == 1:
        return lax.expand_dims(t, (2,))
    return jnp.reshape(t, (b, k, g, tt, s))


def _attention_xla(q: Any, k: Any, v: Any, bias: Any, mask: Any, is_causal: bool, scale: float,
                   q_len: Any, kv_len: Any, window: Any, return_residual: bool) -> Any:
    b, t, n, h = q.shape
    s, kh = k.shape[1], k.shape[2]
    g = n // kh
    q = jnp.reshape(q, (b, t, kh, g, h))
    logits_dtype = dtypes.promote_types(q.dtype, np.float32)
    logits = jnp.einsum("BTKGH,BSKH->BKGTS", q, k, preferred_element_type=logits_dtype)
    logits = logits * jnp.asarray(scale, dtype=logits.dtype)
    if bias is not None:
        logits = (logits + _grouped(bias, kh, g)).astype(logits.dtype)
    if mask is not None or is_causal or q_len is not None or kv_len is not None or window is not None:
        keep = jnp.ones(logits.shape, dtype=bool)
        if mask is not None:
            keep = keep & _grouped(mask, kh, g)
        qpos = lax.broadcasted_iota(np.int32, (t, s), 0)
        kpos = lax.broadcasted_iota(np.int32, (t, s), 1)
        if is_causal:
            keep = keep & (qpos >= kpos)
        if window is not None:
            left, right = window
            keep = keep & (qpos <= kpos + left) & (qpos >= kpos - right)
        if q_len is not None:
            keep = keep & (qpos[None] < q_len[:, None, None])[:, None, None]
        if kv_len is not None:
            keep = keep & (kpos[None] < kv_len[:, None, None])[:, None, None]
        logits = jnp.where(keep, logits, _large_negative(logits.dtype))
    logits = logits.astype(np.float32)  # the softmax runs in float32, as in JAX
    probs = softmax(logits, axis=-1).astype(k.dtype)
    out = jnp.einsum("BKGTS,BSKH->BTKGH", probs, v)
    if q_len is not None:
        valid = lax.broadcasted_iota(np.int32, (b, t), 1) < q_len[:, None]
        out = out * valid[:, :, None, None, None].astype(out.dtype)
    out = jnp.reshape(out, (b, t, n, h))
    if return_residual:
        lse = logsumexp(logits, axis=-1).astype(k.dtype)  # (B, K, G, T)
        lse = jnp.reshape(jnp.transpose(lse, (0, 3, 1, 2)), (b, t, n))
        return out, lax.stop_gradient(lse)
    return out


def dot_product_attention(query: Any, key: Any, value: Any, bias: Any = None, mask: Any = None, *,
                          scale: Any = None, is_causal: bool = False, query_seq_lengths: Any = None,
                          key_value_seq_lengths: Any = None, local_window_size: Any = None,
                          implementation: Any = None, return_residual: bool = False) -> Any:
    """Scaled dot-product attention, ``softmax(q k^T * scale + bias, masked) v`` (JAX's ``nn.dot_product_attention``).

    Operands are laid out ``(B, T, N, H)`` (query) and ``(B, S, K, H)``
    (key, value); the leading batch axis may be left out. ``N`` must be a
    multiple of ``K`` (grouped-query attention). ``bias`` and the boolean
    ``mask`` broadcast to ``(B, N, T, S)``. ``scale`` defaults to
    ``1/sqrt(H)``. ``is_causal``, ``query_seq_lengths``/``key_value_seq_lengths``
    (int32, shape ``(B,)``) and ``local_window_size`` (``w`` or ``(left,
    right)``) add the corresponding masks; masked logits become a large
    negative number (not ``-inf``), and query rows past their length give 0.
    The logits are accumulated in at least float32 and the softmax runs in
    float32. Only the ``'xla'`` implementation exists (``None`` selects it);
    ``'cudnn'`` raises. ``return_residual=True`` also returns the softmax's
    log-sum-exp, ``(B, T, N)``.
    """
    out_shape = jnp.shape(query)
    q = _as_4d(query)
    k = _as_4d(key)
    v = _as_4d(value)
    bias = _as_4d(bias) if bias is not None else None
    mask = _as_4d(mask) if mask is not None else None
    if query_seq_lengths is not None:
        query_seq_lengths = jnp.asarray(query_seq_lengths)
    if key_value_seq_lengths is not None:
        key_value_seq_lengths = jnp.asarray(key_value_seq_lengths)
    if isinstance(local_window_size, (int, np.integer)):
        local_window_size = (int(local_window_size), int(local_window_size))
    b, s, kh, h = k.shape
    _check_attention_operand(v, (b, s, kh, h), k.dtype, "value")
    _check_attention_operand(q, (b, -1, -1, h), k.dtype, "query")
    _check_attention_operand(mask, (-1,) * 4, np.dtype(bool), "mask")
    _check_attention_operand(bias, (-1,) * 4, None, "bias")
    _check_attention_operand(query_seq_lengths, (b,), np.dtype(np.int32), "query_seq_lengths")
    _check_attention_operand(key_value_seq_lengths, (b,), np.dtype(np.int32), "key_value_seq_lengths")
    if q.shape[-2] % kh != 0:
        raise FtransValueError(f"dot_product_attention: the number of query heads must be a multiple of the "
                               f"key/value heads, but got {q.shape[-2]} vs {kh}")
    if implementation == "cudnn":
        raise FtransValueError("dot_product_attention: implementation='cudnn' is not available in ftrans; "
                               "use implementation=None or 'xla'")
    if implementation not in (None, "xla"):
        raise FtransValueError(f"Unsupported implementation option: {implementation}")
    scale = (1.0 / np.sqrt(h)) if scale is None else scale
    out = _attention_xla(q, k, v, bias, mask, is_causal, scale, query_seq_lengths, key_value_seq_lengths,
                         local_window_size, return_residual)
    if return_residual:
        out, res = out
        return jnp.reshape(out, out_shape), jnp.reshape(res, out_shape[:-1])
    return jnp.reshape(out, out_shape)
