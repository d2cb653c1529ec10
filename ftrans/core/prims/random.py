"""The PRNG primitives over key-typed values (JAX's ``random_seed``, ``random_bits``, ``random_split``,
``random_fold_in``, ``random_wrap``, ``random_unwrap``).

Inside a staged program a typed key array is a value of a key dtype (``key<fry>[]``: ``KeyDtype``,
shape counting keys), and these primitives are the only ones that look into keys.  Each takes the PRNG
implementation from its key operand's dtype (``random_seed`` and ``random_wrap``, which make keys, from
their ``impl`` parameter), so a user's implementation (``extend.random.define_prng_impl``) goes through
them like the built-in ones.

What a primitive computes is its implementation's function on the ``uint32`` key data (the *physical*
form: the key array's shape followed by ``impl.key_shape``).  Those functions are ``ftrans.random``
code, above this layer, so ``ftrans.random`` registers them in ``physical`` at import; the NumPy rule
(eager) and the StableHLO lowering (``lowering/rules/random.py``, which traces the function on the
physical types and inlines it) both run them, so a key is ``uint32[..., *key_shape]`` at the StableHLO
boundary and in a concrete key array's buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.avals import ShapedArray
from ftrans.core.keys import KeyDtype, PRNGKeyArray, is_key, is_key_dtype
from ftrans.core.primitive import Primitive, never_weak
from ftrans.core.prims._base import prim_type_error, prim_value_error

__all__ = ["random_seed_p", "random_bits_p", "random_split_p", "random_fold_in_p", "random_wrap_p",
           "random_unwrap_p", "random_clone_p", "consume_p", "random_gamma_p", "physical", "derivatives",
           "key_impl_of", "physical_aval"]

_U32 = np.dtype(np.uint32)

# primitive -> fn(impl, *physical operands, **params) -> physical result: registered by ``ftrans.random``
physical: dict[Primitive, Callable[..., Any]] = {}
# primitive -> fn(result, *operands, **params) -> d result / d (its differentiable operand), for a sampler
# differentiable in its parameter (``random_gamma``, by implicit reparameterisation): ``ftrans.random`` code too
derivatives: dict[Primitive, Callable[..., Any]] = {}


def physical_aval(aval: ShapedArray) -> ShapedArray:
    """The ``uint32`` type of a key-typed value's data (any other type as it is)."""
    d = aval.dtype
    if type(d) is KeyDtype:
        return ShapedArray((*aval.shape, *d._impl.key_shape), _U32)
    return aval


def key_impl_of(prim: Primitive, aval: ShapedArray) -> Any:
    if not is_key_dtype(aval.dtype):
        raise prim_type_error(prim, [aval], f"{prim.name} takes a key array operand (a key<...> dtype), got "
                                            f"{getattr(aval.dtype, 'name', aval.dtype)}")
    return aval.dtype._impl


def _shape_param(prim: Primitive, shape: Any) -> tuple[int, ...]:
    try:
        return tuple(int(d) if isinstance(d, (int, np.integer)) else d for d in shape)
    except TypeError:
        raise prim_value_error(prim, f"shape must be a tuple of integers, got {shape!r}") from None


# ---------------------------------------------------------------- abstract evaluation
random_seed_p = Primitive("random_seed")
random_bits_p = Primitive("random_bits")
random_split_p = Primitive("random_split")
random_fold_in_p = Primitive("random_fold_in")
random_wrap_p = Primitive("random_wrap")
random_unwrap_p = Primitive("random_unwrap")


@random_seed_p.def_abstract_eval
def _seed_abstract(seeds: ShapedArray, *, impl: Any) -> ShapedArray:
    if not dtypes.is_int(seeds.dtype) or seeds.dtype == np.bool_:
        raise prim_type_error(random_seed_p, [seeds], "the seed must be an integer array")
    return ShapedArray(seeds.shape, KeyDtype(impl))


@random_bits_p.def_abstract_eval
def _bits_abstract(keys: ShapedArray, *, bit_width: int, shape: tuple) -> ShapedArray:
    key_impl_of(random_bits_p, keys)
    if bit_width not in (8, 16, 32, 64):
        raise prim_value_error(random_bits_p, f"bit_width must be 8, 16, 32 or 64, got {bit_width}")
    return ShapedArray((*keys.shape, *_shape_param(random_bits_p, shape)), np.dtype(f"uint{bit_width}"))


@random_split_p.def_abstract_eval
def _split_abstract(keys: ShapedArray, *, shape: tuple) -> ShapedArray:
    key_impl_of(random_split_p, keys)
    return ShapedArray((*keys.shape, *_shape_param(random_split_p, shape)), keys.dtype)


@random_fold_in_p.def_abstract_eval
def _fold_in_abstract(keys: ShapedArray, msgs: ShapedArray) -> ShapedArray:
    key_impl_of(random_fold_in_p, keys)
    if msgs.dtype != _U32:
        raise prim_type_error(random_fold_in_p, [keys, msgs], "the data folded in must be uint32")
    if tuple(msgs.shape) != tuple(keys.shape):
        raise prim_type_error(random_fold_in_p, [keys, msgs], "keys and data must have the same shape")
    return ShapedArray(keys.shape, keys.dtype)


@random_wrap_p.def_abstract_eval
def _wrap_abstract(base: ShapedArray, *, impl: Any) -> ShapedArray:
    ks = tuple(impl.key_shape)
    shape = tuple(base.shape)
    if is_key_dtype(base.dtype):
        raise prim_type_error(random_wrap_p, [base], "random_wrap takes uint32 key data, got a key array")
    if base.dtype != _U32 or len(shape) < len(ks) or shape[len(shape) - len(ks):] != ks:
        raise prim_type_error(random_wrap_p, [base],
                              f"{impl.name} key data must be uint32 with a shape that ends with {ks}")
    return ShapedArray(shape[:len(shape) - len(ks)], KeyDtype(impl))


@random_unwrap_p.def_abstract_eval
def _unwrap_abstract(keys: ShapedArray) -> ShapedArray:
    impl = key_impl_of(random_unwrap_p, keys)
    return ShapedArray((*keys.shape, *impl.key_shape), _U32)


# ---------------------------------------------------------------- eager operations on concrete key arrays
# A concrete key array (``PRNGKeyArray`` over its ``uint32`` data) reaches a primitive's eager bind when a
# staged program that has key-typed values is interpreted (a control-flow body run eagerly, ``eval_jaxpr``).
# The PRNG primitives' own rules take key arrays; any other primitive is staged alone on the key types and
# run compiled (``run_with_keys``, installed by the lowering, ``lowering/rules/random.py``).
run_with_keys: Callable[[Primitive, tuple, dict], Any] | None = None


def eager_with_keys(prim: Primitive, args: tuple, params: dict) -> Any:
    """``prim`` applied to concrete operands among which is a key array."""
    if prim in _OWN_RULES:
        return prim.impl(*args, **params)
    if run_with_keys is None:
        raise prim_type_error(prim, [], "got a key array operand, which it cannot take eagerly")
    return run_with_keys(prim, args, params)


# ---------------------------------------------------------------- NumPy / eager rules
def _data(x: Any) -> Any:
    return x._base_array if is_key(x) else x


def _run(prim: Primitive, impl: Any, *args: Any, **params: Any) -> Any:
    fn = physical.get(prim)
    if fn is None:
        raise prim_value_error(prim, "the PRNG operations are registered by ftrans.random: import ftrans first")
    return fn(impl, *args, **params)


@random_seed_p.def_impl
def _seed_impl(seeds: Any, *, impl: Any) -> Any:
    return PRNGKeyArray(impl, _run(random_seed_p, impl, seeds))


@random_bits_p.def_impl
def _bits_impl(keys: Any, *, bit_width: int, shape: tuple) -> Any:
    return _run(random_bits_p, keys._impl, _data(keys), bit_width=bit_width, shape=tuple(shape))


@random_split_p.def_impl
def _split_impl(keys: Any, *, shape: tuple) -> Any:
    return PRNGKeyArray(keys._impl, _run(random_split_p, keys._impl, _data(keys), shape=tuple(shape)))


@random_fold_in_p.def_impl
def _fold_in_impl(keys: Any, msgs: Any) -> Any:
    return PRNGKeyArray(keys._impl, _run(random_fold_in_p, keys._impl, _data(keys), msgs))


@random_wrap_p.def_impl
def _wrap_impl(base: Any, *, impl: Any) -> Any:
    return PRNGKeyArray(impl, base)


@random_unwrap_p.def_impl
def _unwrap_impl(keys: Any) -> Any:
    return _data(keys)


# ---------------------------------------------------------------- identities the key-reuse checker reads
# ``random.clone`` (a key the checker counts as fresh) and key_reuse's ``consume`` (a key it counts as
# used): the same keys out, so every rule but the key-reuse signature is the identity's.
random_clone_p = Primitive("random_clone")
consume_p = Primitive("consume")


def _identity_abstract(prim: Primitive) -> Callable[..., ShapedArray]:
    def rule(keys: ShapedArray) -> ShapedArray:
        key_impl_of(prim, keys)
        return keys

    return rule


for _p in (random_clone_p, consume_p):
    _p.def_abstract_eval(_identity_abstract(_p))
    _p.def_impl(lambda keys: keys)


# ---------------------------------------------------------------- random_gamma: JAX's gamma sampler primitive
# ``random_gamma(keys, a, log_space=...)``: Gamma(a, 1) samples (their logs for ``log_space``) of ``a``'s
# shape, whose leading axes are those of ``keys``: each key is split into one key per element of the
# rest of ``a`` (Marsaglia and Tsang's method per element: ``ftrans.random``'s ``physical`` function).
# Differentiable in ``a`` (``derivatives``); batching moves both batch axes to the front.
random_gamma_p = Primitive("random_gamma")


@random_gamma_p.def_abstract_eval
def _gamma_abstract(keys: ShapedArray, a: ShapedArray, *, log_space: bool) -> ShapedArray:
    key_impl_of(random_gamma_p, keys)
    if not dtypes.is_float(a.dtype):
        raise prim_type_error(random_gamma_p, [keys, a], "the shape parameter a must be a float array")
    if tuple(a.shape[:len(keys.shape)]) != tuple(keys.shape):
        raise prim_type_error(random_gamma_p, [keys, a],
                              f"the keys' shape {tuple(keys.shape)} must lead a's shape {tuple(a.shape)}")
    return ShapedArray(a.shape, a.dtype)


@random_gamma_p.def_impl
def _gamma_impl(keys: Any, a: Any, *, log_space: bool) -> Any:
    return _run(random_gamma_p, keys._impl, _data(keys), a, log_space=log_space)


RANDOM_PRIMITIVES = (random_seed_p, random_bits_p, random_split_p, random_fold_in_p, random_wrap_p,
                     random_unwrap_p, random_clone_p, consume_p)
# (``random_gamma`` on concrete keys runs compiled, ``run_with_keys``, so its values are the jitted sampler's)
_OWN_RULES = frozenset(RANDOM_PRIMITIVES)
for _p in (*RANDOM_PRIMITIVES, random_gamma_p):
    _p.def_weak_type(never_weak)  # (and so the eager path's one-operand elementwise shortcut skips them)
