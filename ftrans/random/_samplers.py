"""The samplers of JAX's ``random`` module over threefry2x32 keys, producing JAX's bits.

Every public function validates its arguments here, in Python, where
concrete values and the user's line are at hand, then calls a jitted core
whose static arguments are the shape, dtype and options.  Running the cores
through XLA (as JAX's ``random`` does) keeps eager results bit-identical with
JAX's even where a sampler uses transcendental functions (``erf_inv``,
``log``) whose last bits NumPy computes differently; ``jit`` composes with
``vmap`` and ``grad``, so the cores batch over keys and differentiate in
their float parameters like any other ftrans code.  Each core mirrors the
operation sequence of the corresponding JAX sampler so that XLA sees the same
arithmetic.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
import warnings
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.core import config as _config
from ftrans.core import dtypes
from ftrans.core import key_reuse as _kr
from ftrans.core.array import Array, DeviceArray
from ftrans.core.keys import PRNGKeyArray, is_key, wrap
from ftrans.core.operands import as_operand, dtype_weak, shape_of
from ftrans.core.prims import random as R
from ftrans.core.shape_poly import DimExpr
from ftrans.core.trace import Tracer
from ftrans.errors import (
    ConcretizationTypeError,
    FtransNotImplementedError,
    FtransOverflowError,
    FtransTypeError,
    FtransValueError,
    user_stacklevel,
)
from ftrans.lax._ops import convert_quiet as _convert  # (no warning for 64-bit dtypes it narrows)
from ftrans.random import _prng
from ftrans.random._prng import core_jit
from ftrans.transforms.jit import jit

__all__ = [
    "PRNGKey", "key", "key_data", "wrap_key_data", "split", "fold_in", "bits", "uniform", "normal",
    "randint", "bernoulli", "categorical", "choice", "permutation", "shuffle", "truncated_normal",
    "gumbel",
]

_U32 = np.dtype(np.uint32)


# ---------------------------------------------------------------- out_sharding
def sharded_sampler(fn: Any) -> Any:
    """``fn`` with JAX's keyword-only ``out_sharding=`` (a NamedSharding, or a PartitionSpec under the current
    mesh): the samples are drawn as without it (the same bits) and laid out as asked; over Explicit mesh
    axes that is the result's sharding type, as JAX's samplers (which draw under ``auto_axes``) give."""
    name = fn.__name__
    sig = inspect.signature(fn)
    extra = inspect.Parameter("out_sharding", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="Any")

    @functools.wraps(fn)
    def wrapped(*args: Any, out_sharding: Any = None, **kwargs: Any) -> Any:
        if out_sharding is None:
            return fn(*args, **kwargs)
        from ftrans.lax._sharding import _resolve, place_result

        target = _resolve(out_sharding, f"random.{name}")
        return place_result(f"random.{name}", target, lambda: _draw_auto(fn, args, kwargs, target))

    wrapped.__signature__ = sig.replace(parameters=[*sig.parameters.values(), extra])  # type: ignore[attr-defined]
    return wrapped


def _draw_auto(fn: Any, args: tuple, kwargs: dict, target: Any) -> Any:
    """``fn(*args, **kwargs)`` with the Explicit axes of ``target``'s mesh typed Auto (JAX's samplers draw under
    ``auto_axes``: ``maybe_auto_axes``), so their inner reshapes and reductions need no shardings of their own;
    the caller lays the result out as ``target``."""
    from ftrans.lax._sharding import under_auto_axes

    return under_auto_axes(fn, args, kwargs, target)


# ---------------------------------------------------------------- argument checks
def _concrete(x: Any) -> np.ndarray | None:
    """A NumPy value for ``x`` when it is concrete; None when it is traced."""
    if isinstance(x, Tracer):
        return None
    return np.asarray(x)


def _impl_arg(name: str, impl: Any, dtype: Any) -> _prng.PRNGImpl:
    """The implementation named by ``impl`` or (JAX's alternative spelling) ``dtype``; the default if neither."""
    if impl is not None and dtype is not None:
        raise FtransValueError(f"ftrans.random.{name}: Cannot specify both `impl` and `dtype`; give one of them")
    return _prng.resolve_impl(name, impl if impl is not None else dtype)


_KEY_HELP = ("uint32 array of shape (2,) (a threefry2x32 key), (4,) (an rbg or unsafe_rbg key) or (1,) (a "
             "philox2x32 key) made by "
             "ftrans.random.PRNGKey/key/split/fold_in")


_LEGACY_KEY_MESSAGE = (
    "Legacy uint32 key array passed as key to ftrans.random function. Please create keys using "
    "ftrans.random.key(). If use of a raw key array was intended, set jax_legacy_prng_key=\"allow\".")


# Key-reuse checking (ftrans.experimental.key_reuse): the functions that read a key without consuming it
# (JAX's signatures: fold_in and key_data do not sink their key), and the names JAX's errors give the
# operation that consumes it (traced, eager); every other sampler is a jitted function in JAX.
_KEY_READERS = frozenset(("key_data", "fold_in", "key_impl", "clone"))
_KEY_REUSE_NAMES = {"bits": ("random_bits", "random_bits"), "split": ("random_split", "random_split")}


def _check_key(name: str, key: Any, *, allow_batched: bool = False, legacy_check: bool = True) -> Any:
    """``key`` checked: a typed key array as it is, raw ``uint32[..., 2]`` (or ``[..., 4]``, ``[..., 1]``)
    key data as an ftrans operand. Raw key data is refused or warned about as the ``legacy_prng_key``
    option says (JAX's ``jax_legacy_prng_key``: "allow", "warn" or "error"), after its own checks; not for
    ``legacy_check=False`` (``clone``, which JAX does not check either)."""
    if is_key(key):
        if key.ndim and not allow_batched:
            raise FtransValueError(
                f"ftrans.random.{name}: {name} accepts a single key, but was given a key array of shape "
                f"{key.shape} != (); use ftrans.vmap to map over keys")
        if _kr.tracking() and name not in _KEY_READERS:  # key-reuse checking: the sampler consumes the key
            _kr.sink(key, *_KEY_REUSE_NAMES.get(name, ("jit", "jit-compiled function")))
            return _kr.exempt(PRNGKeyArray(key._impl, key._base_array))
        return key
    if isinstance(key, (Array, Tracer, np.ndarray, np.generic)):
        k = key
    elif hasattr(key, "__array__") and hasattr(key, "dtype") and hasattr(key, "shape"):
        if str(key.dtype).startswith("key<"):
            raise FtransTypeError(
                f"ftrans.random.{name}: got a jax typed key array ({key.dtype}), which ftrans cannot "
                "read; pass its raw data (JAX's random.key_data of it) to ftrans.random.wrap_key_data(data, "
                "impl=...), or make the key with ftrans.random.key")
        k = np.asarray(key)
    else:
        raise FtransTypeError(
            f"ftrans.random.{name}: the key must be a {_KEY_HELP}; got a value of type {type(key).__name__}")
    d = np.dtype(k.dtype)
    shape = tuple(k.shape)
    if d != _U32 or len(shape) < 1 or _prng.impl_for_width(shape[-1]) is None:
        raise FtransTypeError(f"ftrans.random.{name}: the key must be a {_KEY_HELP}; got {d.name}{list(shape)}")
    if len(shape) > 1 and not allow_batched:
        raise FtransValueError(
            f"ftrans.random.{name}: {name} accepts a single key, but was given a key array of shape "
            f"{shape} (a batch of {shape[:-1]} keys); use ftrans.vmap to map over keys")
    if legacy_check:
        policy = _config.config.legacy_prng_key
        if policy == "error":
            raise FtransValueError(f"ftrans.random.{name}: {_LEGACY_KEY_MESSAGE}")
        if policy == "warn":
            warnings.warn(_LEGACY_KEY_MESSAGE, UserWarning, stacklevel=3)
    return as_operand(k)


def _traced_shape(name: str, shape: Any) -> None:
    raise ConcretizationTypeError(
        f"ftrans.random.{name}: Shapes must be 1D sequences of concrete values of integer type, got "
        f"{shape!r}: a traced value cannot set a shape. Pass the size as a static argument of jit "
        "(static_argnums) or compute it outside the traced function")


def _dim(name: str, d: Any, shape: Any) -> int:
    if isinstance(d, DimExpr):  # a symbolic size (shape polymorphism): at least 1
        return d
    if isinstance(d, Tracer):
        _traced_shape(name, shape)
    if isinstance(d, (bool, np.bool_)) or isinstance(d, (float, np.floating)):
        raise FtransTypeError(
            f"ftrans.random.{name}: shape must be a sequence of integers, got {shape!r}")
    try:
        v = operator.index(d)
    except TypeError:
        raise FtransTypeError(
            f"ftrans.random.{name}: shape must be a sequence of integers, got {shape!r}") from None
    if v < 0:
        raise FtransValueError(
            f"ftrans.random.{name}: shape entries must be non-negative, got {tuple(shape)!r}")
    return v


def _canonical_shape(name: str, shape: Any) -> tuple[int, ...]:
    """JAX's ``canonicalize_shape``: an int or a sequence of non-negative ints."""
    if isinstance(shape, Tracer):
        _traced_shape(name, shape)
    if isinstance(shape, (int, np.integer, DimExpr)) and not isinstance(shape, bool):
        return (_dim(name, shape, (shape,)),)
    if isinstance(shape, (Array, np.ndarray)) and np.ndim(shape) == 0:
        return (_dim(name, shape, (shape,)),)
    if not isinstance(shape, (Sequence, np.ndarray, Array)) or isinstance(shape, str):
        raise FtransTypeError(
            f"ftrans.random.{name}: shape must be a sequence of integers, got {shape!r}")
    return tuple(_dim(name, d, shape) for d in shape)


def _check_param_shape(name: str, shape: tuple[int, ...], *params: Any) -> None:
    """Parameter shapes must broadcast to exactly ``shape``."""
    shapes = [shape_of(p) for p in params]
    try:
        out = jnp.broadcast_shapes(shape, *shapes)
    except ValueError:
        out = None
    if out != shape:
        got = ", ".join(str(s) for s in shapes)
        raise FtransValueError(
            f"ftrans.random.{name}: parameter shapes ({got}) must broadcast to the shape argument "
            f"{shape}")


def _broadcast_param_shapes(name: str, *params: Any) -> tuple[int, ...]:
    shapes = [shape_of(p) for p in params]
    try:
        return tuple(jnp.broadcast_shapes(*shapes))
    except ValueError:
        raise FtransValueError(
            f"ftrans.random.{name}: parameter shapes {', '.join(map(str, shapes))} do not broadcast "
            "together") from None


def _float_dtype(name: str, dtype: Any, *, allow_complex: bool = False) -> np.dtype:
    dtypes.check_requested(dtype, f"random.{name}")
    d = dtypes.default_float() if dtype is None else dtypes.to_dtype(dtype)
    ok = dtypes.is_float(d) or (allow_complex and dtypes.is_inexact(d))
    if not ok:
        kind = "a float or complex" if allow_complex else "a float"
        raise FtransValueError(
            f"ftrans.random.{name}: dtype argument to `{name}` must be {kind} dtype, got {d.name}")
    return d


def _check_arraylike(name: str, *xs: Any) -> None:
    for x in xs:
        if not (isinstance(x, (Array, Tracer, np.ndarray, np.generic, int, float, bool))
                or (hasattr(x, "__array__") and hasattr(x, "dtype"))):
            raise FtransTypeError(
                f"ftrans.random.{name}: expected an array or a scalar, got a value of type {type(x).__name__}"
                + (" (convert lists with jnp.asarray)" if isinstance(x, (list, tuple)) else ""))


def _asarray(x: Any) -> Any:
    if isinstance(x, (Array, Tracer)):
        return x
    if isinstance(x, (int, float, bool, complex, np.ndarray, np.generic)):
        return jnp.asarray(x)
    return jnp.asarray(np.asarray(x))


def _param(x: Any) -> Any:
    """A float/int parameter as jit accepts it: scalars keep their weak type, foreign arrays become NumPy."""
    if isinstance(x, (Array, Tracer, np.ndarray, np.generic, int, float, bool)):
        return x
    return np.asarray(x)


def _finfo(d: np.dtype):
    # NumPy's finfo knows only its own floats; bfloat16 and the 8-bit (and smaller) floats are ml_dtypes'.
    return np.finfo(d) if d.type.__module__ == "numpy" else ml_dtypes.finfo(d)


# ---------------------------------------------------------------- keys
def _seed_from_concrete(name: str, seed: Any) -> np.ndarray:
    """The threefry2x32 key data of a concrete integer seed (JAX's seed rule, see ``_threefry.seed_key``)."""
    if isinstance(seed, (bool, np.bool_)):
        raise FtransTypeError(f"ftrans.random.{name}: PRNG key seed must be an integer, got a bool")
    if isinstance(seed, int):
        if not -(2**63) <= seed < 2**63:
            raise FtransOverflowError(
                f"ftrans.random.{name}: seed {seed} does not fit in a 64-bit integer")
        wide = dtypes.x64_enabled()
        v = int(seed)
    else:
        a = np.asarray(seed)
        if a.ndim:
            raise FtransTypeError(
                f"ftrans.random.{name}: {name} accepts a scalar seed, but was given an array of shape "
                f"{a.shape} != (); use ftrans.vmap to make a batch of keys")
        if not np.issubdtype(a.dtype, np.integer):
            raise FtransTypeError(
                f"ftrans.random.{name}: PRNG key seed must be an integer; got {a.dtype.name} {a!r}")
        wide = dtypes.canonicalize(a.dtype).itemsize == 8
        v = int(a)
    v = (v + _config.config.random_seed_offset) & ((1 << 64) - 1)
    hi = (v >> 32) if wide else 0
    return np.array([hi, v & 0xFFFFFFFF], _U32)


def PRNGKey(seed: Any, *, impl: Any = None) -> Any:
    """A legacy key: the raw ``uint32`` key data of an integer seed, as JAX's ``random.PRNGKey``
    (``uint32[2]`` for threefry2x32, the default; ``uint32[4]`` for ``impl="rbg"``/``"unsafe_rbg"``;
    ``uint32[1]`` for ``"philox2x32"``).  Prefer ``key``, whose typed key array knows its implementation.

    Args:
      seed: an integer scalar (a Python int, a NumPy or ftrans integer scalar, or a traced one).
      impl: the PRNG implementation (a name such as ``"threefry2x32"``, or a key dtype); the default
        is ``config.default_prng_impl``.

    Returns:
      The key data, a ``uint32`` array of the implementation's key shape; with ``jax_enable_custom_prng``
      on, a typed key array (``key(seed, impl=impl)``), as JAX's.
    """
    if _config.config.enable_custom_prng:
        return key(seed, impl=impl)
    return _make_key("PRNGKey", seed, _prng.resolve_impl("PRNGKey", impl))


def key(seed: Any, *, impl: Any = None, dtype: Any = None) -> Any:
    """A typed PRNG key from an integer seed, as JAX's ``random.key``.

    The result is a key array of shape ``()`` whose dtype is the implementation's key dtype (``key<fry>``
    for threefry2x32): ``ftrans.dtypes.issubdtype(k.dtype, ftrans.dtypes.prng_key)`` is True, arithmetic
    on it is an error, and every ``ftrans.random`` function accepts it.  Its data (``key_data``) is what
    ``PRNGKey(seed, impl=impl)`` returns, so the bits drawn from either are the same (JAX's).

    Args:
      seed: an integer scalar (a Python int, a NumPy or ftrans integer scalar, or a traced one).
      impl: the PRNG implementation: a name (``"threefry2x32"``, ``"rbg"``, ``"unsafe_rbg"``,
        ``"philox2x32"``) or a key dtype; the default is ``config.default_prng_impl``.
      dtype: a key dtype (``random.key_dtype(name)`` or another key's ``dtype``), as an alternative to
        ``impl``; give at most one of the two.

    Returns:
      A key array of shape ``()``.
    """
    im = _impl_arg("key", impl, dtype)
    return wrap(im, _make_key("key", seed, im, typed=True))


def _make_key(name: str, seed: Any, impl: _prng.PRNGImpl, typed: bool = False) -> Any:
    if is_key(seed):
        raise FtransTypeError(
            f"ftrans.random.{name}: {name} accepts a scalar seed, but was given a key array "
            f"({seed.dtype.name}{list(seed.shape)}); split or fold_in the key instead")
    if isinstance(seed, Tracer) or (type(seed) is DeviceArray and seed.device.platform != "cpu"):
        # (a seed held on an accelerator: the key is made there, as JAX does, not read back to the host)
        if seed.ndim:
            raise FtransTypeError(
                f"ftrans.random.{name}: {name} accepts a scalar seed, but was given an array of shape "
                f"{seed.shape} != (); use ftrans.vmap to make a batch of keys")
        if not dtypes.is_int(np.dtype(seed.dtype)) or np.dtype(seed.dtype) == np.bool_:
            raise FtransTypeError(
                f"ftrans.random.{name}: PRNG key seed must be an integer; got {np.dtype(seed.dtype).name}")
        offset = _config.config.random_seed_offset
        if offset:  # added in the seed's own dtype (wrapping), as JAX does
            d = np.dtype(seed.dtype)
            seed = lax.add(seed, np.asarray(offset % (1 << 8 * d.itemsize)).astype(d))
        if typed and _prng.is_staged(seed):  # a key-typed value of the staged program
            return R.random_seed_p.bind(seed, impl=impl)
        return _seed_jit(seed, impl)
    if not _prng.is_builtin(impl):
        return _custom_seed(name, seed, impl)
    if not isinstance(seed, (int, np.integer, np.ndarray, Array, np.generic)) and not hasattr(seed, "__array__"):
        raise FtransTypeError(
            f"ftrans.random.{name}: PRNG key seed must be an integer; got a value of type {type(seed).__name__}")
    return Array._make(_prng.concrete_seed(impl, _seed_from_concrete(name, seed)))


def random_seed(seed: Any, impl: _prng.PRNGImpl) -> Any:  # JAX's primitive's name, in printed programs
    return impl.seed(seed)


_seed_jit = jit(random_seed, static_argnums=(1,))


def _custom_seed(name: str, seed: Any, impl: _prng.PRNGImpl) -> Any:
    """The key data a user's implementation (a ``PRNGImpl`` of their own) makes of a concrete seed: its
    ``seed`` function traced on the seed as an integer array (a Python int as int64, narrowed without
    x64, as JAX's ``random_seed``), the configured offset added."""
    _seed_from_concrete(name, seed)  # the checks: an integer scalar
    a = np.asarray(np.int64(seed) if isinstance(seed, int) else seed)
    a = a.astype(dtypes.canonicalize(a.dtype))
    offset = _config.config.random_seed_offset
    if offset:
        a = (a + np.asarray(offset).astype(a.dtype)).astype(a.dtype)
    return _seed_jit(Array._make(a), impl)


def key_data(keys: Any) -> Any:
    """The ``uint32`` data of keys, as JAX's ``random.key_data``.

    Args:
      keys: a typed key array (its data has the key array's shape followed by the implementation's key
        shape, ``(2,)`` for threefry2x32), or legacy raw key data (returned as it is, after checking).

    Returns:
      A ``uint32`` array.
    """
    k = _check_key("key_data", keys, allow_batched=True)
    if is_key(k):
        if k._typed:
            return R.random_unwrap_p.bind(k._base_array)
        return as_operand(k._base_array)
    return k


def wrap_key_data(key_bits_array: Any, *, impl: Any = None, dtype: Any = None) -> Any:
    """A typed key array over ``uint32`` key data, as JAX's ``random.wrap_key_data``.

    Args:
      key_bits_array: a ``uint32`` array whose trailing axes are the implementation's key shape
        (``(2,)`` for threefry2x32, ``(4,)`` for rbg and unsafe_rbg, ``(1,)`` for philox2x32); the
        leading axes become the key array's shape.
      impl: the PRNG implementation (a name or a key dtype); the default is ``config.default_prng_impl``.
      dtype: a key dtype, as an alternative to ``impl``; give at most one of the two.

    Returns:
      A key array of shape ``key_bits_array.shape[:-len(key_shape)]``.
    """
    im = _impl_arg("wrap_key_data", impl, dtype)
    if is_key(key_bits_array):
        raise FtransTypeError(
            f"ftrans.random.wrap_key_data: got a key array ({key_bits_array.dtype.name}), which is wrapped "
            "already; pass its data (ftrans.random.key_data(keys)) or use the keys as they are")
    if not isinstance(key_bits_array, (Array, Tracer, np.ndarray, np.generic)):
        if hasattr(key_bits_array, "__array__") and hasattr(key_bits_array, "dtype"):
            key_bits_array = np.asarray(key_bits_array)
        else:
            raise FtransTypeError(
                "ftrans.random.wrap_key_data: the key data must be a uint32 array, got a value of type "
                f"{type(key_bits_array).__name__}")
    d = np.dtype(key_bits_array.dtype)
    shape = tuple(key_bits_array.shape)
    ks = im.key_shape
    if d != _U32 or shape[len(shape) - len(ks):] != ks or len(shape) < len(ks):
        raise FtransTypeError(
            f"ftrans.random.wrap_key_data: invalid PRNG key data: {im.name} key data must be uint32 with a "
            f"shape that ends with {ks}; got {d.name}{list(shape)}")
    if _prng.is_staged(key_bits_array):  # inside a staged program: a key-typed value
        return PRNGKeyArray(im, R.random_wrap_p.bind(key_bits_array, impl=im))
    return wrap(im, as_operand(key_bits_array))


def _rewrap(key: Any, out: Any) -> Any:
    """``out`` (new key data) as a key of the kind ``key`` was: typed in, typed out (and raw in, typed out
    with ``jax_enable_custom_prng`` on, as JAX's)."""
    if is_key(key):
        return wrap(key._impl, out)
    if _config.config.enable_custom_prng:
        return wrap(_prng.impl_for_width(key.shape[-1]), out)
    return out


@core_jit(static_argnums=(1,), name="random_split")
def _split(k: Any, shape: tuple[int, ...]) -> Any:
    return _prng.split(k, shape)


def split(key: Any, num: int | Sequence[int] = 2) -> Any:
    """``num`` new keys (a leading axis, or ``num`` as a shape), as JAX's ``random.split``."""
    k = _check_key("split", key)
    shape = _canonical_shape("split", num)
    if is_key(k) and k._typed:
        return _rewrap(k, R.random_split_p.bind(k._base_array, shape=shape))
    return _rewrap(k, _split(k, shape))


@core_jit(name="random_fold_in")
def _fold_in(k: Any, data: Any) -> Any:
    return _prng.fold_in(k, data)


def fold_in(key: Any, data: Any) -> Any:
    """A new key from ``key`` and the 32-bit integer ``data``, as JAX's ``random.fold_in``."""
    k = _check_key("fold_in", key)
    if type(data) is int:
        if not 0 <= data < 2**32:
            raise FtransOverflowError(
                f"ftrans.random.fold_in: data {data} is out of bounds for uint32 (0 <= data < 2**32)")
        d = np.uint32(data)
    else:
        _check_arraylike("fold_in", data)
        if len(shape_of(data)):
            raise FtransTypeError(
                f"ftrans.random.fold_in: accepts a scalar, but was given an array of shape "
                f"{shape_of(data)}; use ftrans.vmap for batching")
        d = _convert(as_operand(_asarray(data)), _U32)
    if is_key(k) and k._typed:
        return _rewrap(k, R.random_fold_in_p.bind(k._base_array, as_operand(d)))
    return _rewrap(k, _fold_in(k, d))


# ---------------------------------------------------------------- bits and uniform
@core_jit(static_argnums=(1, 2), name="random_bits")
def _bits(k: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    return _prng.random_bits(k, bit_width, shape)


@sharded_sampler
def bits(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Uniform random unsigned integers (every bit random), as JAX's ``random.bits``."""
    k = _check_key("bits", key)
    dtypes.check_requested(dtype, "random.bits")
    d = dtypes.default_uint() if dtype is None else dtypes.to_dtype(dtype)
    if d.kind != "u":
        raise FtransValueError(
            f"ftrans.random.bits: dtype argument to `bits` must be an unsigned int dtype, got {d.name}")
    shape = _canonical_shape("bits", shape)
    if is_key(k) and k._typed:
        return R.random_bits_p.bind(k._base_array, bit_width=d.itemsize * 8, shape=shape)
    return _bits(k, d.itemsize * 8, shape)


_UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32),
         64: np.dtype(np.uint64)}


def _rank_broadcast(x: Any, ndim: int) -> Any:
    """Prepend unit axes so ``x`` has ``ndim`` axes (JAX's ``broadcast_to_rank``)."""
    s = shape_of(x)
    if len(s) >= ndim:
        return x
    return lax.reshape(x, (1,) * (ndim - len(s)) + tuple(s))


def _uniform_core(k: Any, minval: Any, maxval: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    minval = _convert(minval, dtype)
    maxval = _convert(maxval, dtype)
    minval = _rank_broadcast(minval, len(shape))
    maxval = _rank_broadcast(maxval, len(shape))
    fi = _finfo(dtype)
    nbits, nmant = fi.bits, fi.nmant
    rng_bits = 8 if nmant < 8 else nbits
    uint = _UINT[nbits]
    b = _prng.random_bits(k, rng_bits, shape)
    if rng_bits == 8:
        # An 8-bit float's transcendental consumers (erf_inv, log1p: computed wider and narrowed again)
        # would each have XLA fuse in a copy of the cipher that makes the bits; jaxlib 0.12's CPU emitters
        # then take minutes to compile a (3, 128, 8) normal draw.  The bits are computed once instead.
        b = lax.optimization_barrier(b)
    if rng_bits != nbits:
        b = _convert(b, uint)
    # Random mantissa under the exponent of 1.0: a float in [1, 2), shifted to [0, 1).
    one_bits = np.asarray(np.array(1.0, dtype).view(uint), uint)
    fbits = lax.bitwise_or(lax.shift_right_logical(b, np.asarray(rng_bits - nmant, uint)), one_bits)
    floats = lax.sub(lax.bitcast_convert_type(fbits, dtype), np.asarray(1.0, dtype))
    # The parameters broadcast to ``shape`` (checked by the caller), so ``floats`` sets the shape.
    return jnp.maximum(minval, jnp.add(jnp.multiply(floats, jnp.subtract(maxval, minval)), minval))


_uniform = core_jit(_uniform_core, static_argnums=(3, 4))


@sharded_sampler
def uniform(key: Any, shape: Any = (), dtype: Any = None, minval: Any = 0.0, maxval: Any = 1.0) -> Any:
    """Uniform floats in ``[minval, maxval)``, as JAX's ``random.uniform``."""
    k = _check_key("uniform", key)
    shape = _canonical_shape("uniform", shape)
    d = _float_dtype("uniform", dtype)
    _check_arraylike("uniform", minval, maxval)
    _check_param_shape("uniform", shape, minval, maxval)
    return _uniform(k, _param(minval), _param(maxval), shape, d)


# ---------------------------------------------------------------- normal family
def _normal_real(k: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    hi = np.array(1.0, dtype)
    u = _uniform_core(k, lo, hi, shape, dtype)
    return lax.mul(np.asarray(np.sqrt(2), dtype), lax.erf_inv(u))


def _normal_core(k: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    if dtypes.is_float(dtype):
        return _normal_real(k, shape, dtype)
    real = np.dtype(np.array(0, dtype).real.dtype)
    k_re, k_im = _prng.split(k, (2,))
    re = _normal_real(k_re, shape, real).astype(dtype)
    im = _normal_real(k_im, shape, real).astype(dtype)
    return (re + 1j * im) / np.asarray(np.sqrt(2), dtype)


_normal = core_jit(_normal_core, static_argnums=(1, 2))


@sharded_sampler
def normal(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Standard normal floats (or complex), as JAX's ``random.normal``."""
    k = _check_key("normal", key)
    shape = _canonical_shape("normal", shape)
    d = _float_dtype("normal", dtype, allow_complex=True)
    return _normal(k, shape, d)


@core_jit(static_argnums=(3, 4))
def _truncated_normal(k: Any, lower: Any, upper: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    sqrt2 = np.asarray(np.sqrt(2), dtype)
    lower = _convert(lower, dtype)
    upper = _convert(upper, dtype)
    a = lax.erf(jnp.divide(lower, sqrt2))
    b = lax.erf(jnp.divide(upper, sqrt2))
    u = _uniform_core(k, a, b, shape, dtype)
    out = jnp.multiply(sqrt2, lax.erf_inv(u))
    # Keep rounding from landing on (or past) the bounds: clamp to the open interval.
    lo = lax.nextafter(lax.stop_gradient(lower), np.asarray(np.inf, dtype))
    hi = lax.nextafter(lax.stop_gradient(upper), np.asarray(-np.inf, dtype))
    return jnp.minimum(hi, jnp.maximum(lo, out))


@sharded_sampler
def truncated_normal(key: Any, lower: Any, upper: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Standard normal floats restricted to ``(lower, upper)``, as JAX's ``random.truncated_normal``."""
    k = _check_key("truncated_normal", key)
    d = _float_dtype("truncated_normal", dtype)
    _check_arraylike("truncated_normal", lower, upper)
    if shape is None:
        shape = _broadcast_param_shapes("truncated_normal", lower, upper)
    else:
        shape = _canonical_shape("truncated_normal", shape)
        _check_param_shape("truncated_normal", shape, lower, upper)
    return _truncated_normal(k, _param(lower), _param(upper), shape, d)


# ---------------------------------------------------------------- gumbel
def _clz32(x: Any) -> Any:
    """Count leading zeros of ``uint32`` values (32 for zero) with shifts and a popcount."""
    for s in (1, 2, 4, 8, 16):
        x = lax.bitwise_or(x, lax.shift_right_logical(x, np.asarray(s, _U32)))
    return lax.sub(np.asarray(32, _U32), lax.population_count(x))


def _u32_pair_to_f32(hi: Any, lo: Any) -> Any:
    """The 64-bit fixed-point fraction ``hi:lo`` (nonzero) as a float32 in (0, 1)."""
    f32 = np.dtype(np.float32)
    fi = np.finfo(f32)
    hclz, lclz = _clz32(hi), _clz32(lo)
    hi_zero = lax.eq(hclz, np.asarray(32, _U32))
    mantissa = lax.bitwise_or(
        lax.shift_left(hi, hclz),
        lax.select(hi_zero, lax.shift_left(lo, lclz),
                   lax.shift_right_logical(lo, lax.sub(np.asarray(32, _U32), hclz))))
    mantissa = lax.shift_right_logical(mantissa, np.asarray(32 - fi.nmant - 1, _U32))
    mantissa = lax.bitwise_and(mantissa, np.asarray((1 << fi.nmant) - 1, _U32))
    lead = lax.select(hi_zero, lax.add(lclz, np.asarray(32, _U32)), hclz)
    expo = lax.shift_left(lax.sub(np.asarray(-fi.minexp, _U32), lead), np.asarray(fi.nmant, _U32))
    expo = lax.bitwise_and(expo, np.asarray((1 << 30) - (1 << (fi.nmant - 1)), _U32))
    return lax.bitcast_convert_type(lax.bitwise_or(expo, mantissa), f32)


def _gumbel_core(k: Any, shape: tuple[int, ...], dtype: np.dtype, mode: str) -> Any:
    fi = _finfo(dtype)
    if dtype == np.dtype(np.float32) and mode == "highest":
        b = _prng.random_bits(k, 32, (2, *shape))
        b_hi, b_lo = b[0], b[1]
        neg = lax.bitwise_not(b)
        n_lo = neg[1]
        # 1 - bits as a 64-bit fixed-point fraction: carry from the low word into the high one.
        carry = _convert(lax.eq(n_lo, np.asarray(0xFFFFFFFF, _U32)), _U32)
        neg_hi = lax.add(neg[0], carry)
        neg_lo = lax.add(n_lo, np.asarray(1, _U32))
        flip = lax.lt(b_hi, np.asarray(1 << 31, _U32))
        x = _u32_pair_to_f32(lax.select(flip, b_hi, neg_hi), lax.select(flip, b_lo, neg_lo))
        return jnp.where(flip, -jnp.log(-jnp.log1p(-x)), -jnp.log(-jnp.log(x)))
    if mode in ("high", "highest"):
        u = _uniform_core(k, 0.0, 1.0, (2, *shape), dtype)
        high, low = u[0], u[1]
        x = jnp.where(high >= 0.5, high,
                      high + np.asarray(2.0 ** -fi.nmant, dtype) * low + np.asarray(fi.tiny, dtype))
        return -jnp.log(-jnp.log1p(-x))
    u = _uniform_core(k, np.asarray(fi.tiny, dtype), 1.0, shape, dtype)
    return -jnp.log(-jnp.log(u))


_gumbel = core_jit(_gumbel_core, static_argnums=(1, 2, 3))


def _gumbel_mode(name: str, mode: Any) -> str:
    if mode is None:
        return "low"
    if mode not in ("highest", "high", "low"):
        raise FtransValueError(
            f"ftrans.random.{name}: mode must be 'low', 'high' or 'highest', got {mode!r}")
    return mode


@sharded_sampler
def gumbel(key: Any, shape: Any = (), dtype: Any = None, mode: str | None = None) -> Any:
    """Standard Gumbel floats, as JAX's ``random.gumbel``."""
    k = _check_key("gumbel", key)
    d = _float_dtype("gumbel", dtype)
    shape = _canonical_shape("gumbel", shape)
    return _gumbel(k, shape, d, _gumbel_mode("gumbel", mode))


# ---------------------------------------------------------------- bernoulli
@core_jit(static_argnums=(2, 3))
def _bernoulli(k: Any, p: Any, shape: tuple[int, ...], mode: str) -> Any:
    d = np.dtype(p.dtype)
    if mode == "high":
        u = _uniform_core(k, 0.0, 1.0, (2, *shape), d)
        u1, u2 = u[0], u[1]
        u2 = u2 * np.asarray(2.0 ** -_finfo(d).nmant, d)
        return u2 < p - u1
    return _uniform_core(k, 0.0, 1.0, shape, d) < p


@sharded_sampler
def bernoulli(key: Any, p: Any = 0.5, shape: Any = None, mode: str = "low") -> Any:
    """Booleans that are True with probability ``p``, as JAX's ``random.bernoulli``."""
    if mode not in ("high", "low"):
        raise FtransValueError(f"ftrans.random.bernoulli: mode must be 'high' or 'low', got {mode!r}")
    k = _check_key("bernoulli", key)
    _check_arraylike("bernoulli", p)
    p = _asarray(p)
    d, _ = dtype_weak(p)
    if not dtypes.is_float(d):
        raise FtransTypeError(
            f"ftrans.random.bernoulli: the probability p must have a floating dtype, got {d.name}")
    p = _convert(p, d)
    if shape is None:
        shape = tuple(shape_of(p))
    else:
        shape = _canonical_shape("bernoulli", shape)
        _check_param_shape("bernoulli", shape, p)
    return _bernoulli(k, p, shape, mode)


# ---------------------------------------------------------------- randint
def _clip_convert(val: Any, dtype: np.dtype) -> Any:
    """Convert an integer array to ``dtype``, saturating at its range instead of wrapping."""
    src = np.dtype(val.dtype)
    lo = max(int(np.iinfo(dtype).min), int(np.iinfo(src).min))
    hi = min(int(np.iinfo(dtype).max), int(np.iinfo(src).max))
    clipped = jnp.minimum(jnp.maximum(val, np.asarray(lo, src)), np.asarray(hi, src))
    return _convert(clipped, dtype)


@core_jit(static_argnums=(3, 4))
def _randint(k: Any, minval: Any, maxval: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    minval = jnp.asarray(minval)
    maxval = jnp.asarray(maxval)
    if not dtypes.is_int(np.dtype(minval.dtype)):
        minval = minval.astype(int)
    if not dtypes.is_int(np.dtype(maxval.dtype)):
        maxval = maxval.astype(int)
    top = _clip_convert(jnp.asarray(np.asarray(np.iinfo(dtype).max, dtype)), np.dtype(maxval.dtype))
    max_out_of_range = maxval > top
    minval = _rank_broadcast(_clip_convert(minval, dtype), len(shape))
    maxval = _rank_broadcast(_clip_convert(maxval, dtype), len(shape))
    nbits = np.iinfo(dtype).bits
    # Two draws of nbits each, combined modulo the span, keep the modulo bias small.
    k1, k2 = _prng.split(k, (2,))
    higher = _prng.random_bits(k1, nbits, shape)
    lower = _prng.random_bits(k2, nbits, shape)
    udt = _UINT[nbits]
    span = _convert(maxval - minval, udt)
    # An empty range gives minval (span 1); a maxval past the dtype's range widens the span by one.
    span = jnp.where(maxval <= minval, np.asarray(1, udt), span)
    span = jnp.where(max_out_of_range & (maxval > minval), span + np.asarray(1, udt), span)
    span = jnp.broadcast_to(span, shape)
    # (hi * 2**nbits + lo) mod span, without overflowing nbits: 2**nbits mod span is
    # (2**(nbits/2) mod span)**2 mod span.
    mult = lax.rem(jnp.broadcast_to(np.asarray(2 ** (nbits // 2), udt), shape), span)
    mult = lax.rem(lax.mul(mult, mult), span)
    offset = lax.add(lax.mul(lax.rem(higher, span), mult), lax.rem(lower, span))
    offset = lax.rem(offset, span)
    return jnp.add(minval, _convert(offset, dtype))


def _check_randint_range(minval: Any, maxval: Any) -> None:
    lo, hi = _concrete(minval), _concrete(maxval)
    if lo is None or hi is None:
        return
    if not np.issubdtype(lo.dtype, np.integer):
        lo = lo.astype(np.int64)
    if not np.issubdtype(hi.dtype, np.integer):
        hi = hi.astype(np.int64)
    lo_b, hi_b = np.broadcast_arrays(lo.astype(object), hi.astype(object))
    bad = lo_b >= hi_b
    if np.any(bad):
        if lo_b.ndim:
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            where = f" (first at index {idx}: minval={lo_b[idx]}, maxval={hi_b[idx]})"
            shown = f"minval={lo.tolist()!r} and maxval={hi.tolist()!r}"
        else:
            where = ""
            shown = f"minval={lo_b.item()} and maxval={hi_b.item()}"
        raise FtransValueError(
            f"ftrans.random.randint: got {shown}, but minval must be less than maxval{where}; "
            "the range [minval, maxval) is empty (JAX silently returns minval here)")


@sharded_sampler
def randint(key: Any, shape: Any, minval: Any, maxval: Any, dtype: Any = None) -> Any:
    """Uniform integers in ``[minval, maxval)``, as JAX's ``random.randint``."""
    k = _check_key("randint", key)
    dtypes.check_requested(dtype, "random.randint")
    d = dtypes.default_int() if dtype is None else dtypes.to_dtype(dtype)
    if d.kind not in "iu":
        raise FtransTypeError(f"ftrans.random.randint: dtype must be an integer dtype, got {d.name}")
    shape = _canonical_shape("randint", shape)
    _check_arraylike("randint", minval, maxval)
    _check_randint_range(minval, maxval)
    _check_param_shape("randint", shape, minval, maxval)
    sample_d = d
    if d.itemsize < 4:
        # Sample at 32 bits (less modulo bias) with the bounds saturated to the target range.
        info = np.iinfo(d)
        sample_d = np.dtype(np.int32)
        minval = jnp.clip(_asarray(minval).astype(np.int32), int(info.min), int(info.max))
        maxval = jnp.clip(_asarray(maxval).astype(np.int32), int(info.min), int(info.max) + 1)
    out = _randint(k, _param(minval), _param(maxval), shape, sample_d)
    return out if sample_d == d else out.astype(d)


# ---------------------------------------------------------------- permutations
def _shuffle_core(k: Any, x: Any, axis: int) -> Any:
    # Sort by fresh random 32-bit keys, enough rounds that ties are unlikely to survive
    # (the number of rounds is JAX's, so the bits agree).
    size = math.prod(shape_of(x))
    if isinstance(size, DimExpr):  # the number of rounds depends on the size (JAX's refusal, in its words)
        raise FtransNotImplementedError(
            f"shape polymorphism for `permutation` or `shuffle` for arrays of non-constant size: {size}")
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        pair = _prng.split(k, (2,))
        k, sub = pair[0], pair[1]
        sort_keys = _prng.random_bits(sub, 32, tuple(shape_of(x)))
        _, x = lax.sort_key_val(sort_keys, x, axis)
    return x


_shuffle = core_jit(_shuffle_core, static_argnums=(2,))


@core_jit(static_argnums=(1,))
def _permute_range(k: Any, n: int) -> Any:
    return _shuffle_core(k, jnp.arange(n), 0)


@core_jit(static_argnums=(2,))
def _permute_rows(k: Any, x: Any, axis: int) -> Any:
    ind = _shuffle_core(k, jnp.arange(shape_of(x)[axis]), 0)
    return jnp.take(x, ind, axis=axis, unique_indices=True)


def _axis(name: str, axis: Any, ndim: int) -> int:
    try:
        a = operator.index(axis)
    except TypeError:
        raise FtransTypeError(f"ftrans.random.{name}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= a < ndim:
        raise FtransValueError(
            f"ftrans.random.{name}: axis {a} is out of bounds for an array of dimension {ndim}")
    return a % ndim


@sharded_sampler
def permutation(key: Any, x: Any, axis: int = 0, independent: bool = False) -> Any:
    """A shuffled ``arange(x)`` or a copy of ``x`` shuffled along ``axis``, as JAX's ``random.permutation``."""
    k = _check_key("permutation", key)
    _check_arraylike("permutation", x)
    nd = len(shape_of(x))
    axis = _axis("permutation", axis, nd or 1)
    if not nd:
        d, _ = dtype_weak(x)
        if not dtypes.is_int(d) or d == np.bool_:
            raise FtransTypeError(
                "ftrans.random.permutation: x must be an integer or at least 1-dimensional, "
                f"got a {d.name} scalar")
        n = _concrete(x)
        if n is None:
            raise ConcretizationTypeError(
                "ftrans.random.permutation: an integer x must be concrete (it sets the output size); "
                "pass it as a static argument of jit")
        n = int(n)
        if n < 0:
            raise FtransValueError(f"ftrans.random.permutation: x must be non-negative, got {n}")
        return _permute_range(k, n)
    x = _asarray(x)
    if independent or nd == 1:
        return _shuffle(k, x, axis)
    return _permute_rows(k, x, axis)


def shuffle(key: Any, x: Any, axis: int = 0) -> Any:
    """Deprecated (as in JAX): shuffles each slice along ``axis`` independently.

    Use ``permutation(key, x, axis, independent=True)``, which gives the same bits.
    """
    warnings.warn(
        "ftrans.random.shuffle is deprecated and will be removed (JAX's random.shuffle was); use "
        "ftrans.random.permutation with independent=True", DeprecationWarning, stacklevel=user_stacklevel())
    k = _check_key("shuffle", key)
    _check_arraylike("shuffle", x)
    nd = len(shape_of(x))
    if not nd:
        raise FtransValueError("ftrans.random.shuffle: x must be at least 1-dimensional")
    axis = _axis("shuffle", axis, nd)
    return _shuffle(k, _asarray(x), axis)


# ---------------------------------------------------------------- choice and categorical
@core_jit(static_argnums=(2, 3, 4, 5))
def _choice_p(k: Any, p: Any, shape: tuple[int, ...], replace: bool, n_draws: int, mode: str) -> Any:
    if replace:
        p_cuml = jnp.cumsum(p)
        r = p_cuml[-1] * (1 - _uniform_core(k, 0.0, 1.0, shape, np.dtype(p_cuml.dtype)))
        return jnp.searchsorted(p_cuml, r).astype(int)
    g = _gumbel_core(k, (shape_of(p)[0],), np.dtype(p.dtype), mode) + jnp.log(p)
    return lax.top_k(g, n_draws)[1].astype(int)


def choice(key: Any, a: Any, shape: Sequence[int] = (), replace: bool = True, p: Any = None,
           axis: int = 0, mode: str | None = None) -> Any:
    """A random sample of ``a`` (or of ``arange(a)``), as JAX's ``random.choice``."""
    k = _check_key("choice", key)
    if not is_key(k):  # as a typed key (the same bits): the randint/permutation below check no raw key again
        k = wrap(_prng.impl_of_key(k), k)
    if not isinstance(shape, Sequence):
        raise FtransTypeError(
            f"ftrans.random.choice: shape must be a sequence of integers, got {shape!r}")
    shape = _canonical_shape("choice", shape)
    _check_arraylike("choice", a)
    arr = _asarray(a)
    nd = len(shape_of(arr))
    if nd == 0:
        d, _ = dtype_weak(arr)
        n = _concrete(a)
        if n is None:
            raise ConcretizationTypeError(
                "ftrans.random.choice: an integer a must be concrete (it sets the population size); "
                "pass it as a static argument of jit")
        if not dtypes.is_int(d) or d == np.bool_:
            raise FtransTypeError(
                f"ftrans.random.choice: a must be an integer or an array, got a {d.name} scalar")
        n_inputs = int(n)
    else:
        axis = _axis("choice", axis, nd)
        n_inputs = shape_of(arr)[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(shape, dtype=arr.dtype)
    if n_inputs <= 0:
        raise FtransValueError(
            f"ftrans.random.choice: a must be a positive integer or a non-empty axis unless no "
            f"samples are taken; got population size {n_inputs}")
    if not replace and n_draws > n_inputs:
        raise FtransValueError(
            f"ftrans.random.choice: cannot take a larger sample (size {n_draws}, shape {shape}) than "
            f"the population (size {n_inputs}) when replace=False")
    if p is None:
        if replace:
            hi = n_inputs.__jax_array__() if isinstance(n_inputs, DimExpr) else n_inputs  # a symbolic size's value
            ind = randint(k, shape, 0, hi)
            result = ind if nd == 0 else jnp.take(arr, ind, axis=axis)
        else:
            perm = permutation(k, n_inputs if nd == 0 else arr, axis)
            result = lax.slice_in_dim(perm, 0, n_draws, axis=axis if nd else 0)
    else:
        _check_arraylike("choice", p)
        p_arr = _asarray(p)
        pd, _ = dtype_weak(p_arr)
        if not dtypes.is_inexact(pd):
            p_arr = p_arr.astype(dtypes.default_float())
        if tuple(shape_of(p_arr)) != (n_inputs,):
            raise FtransValueError(
                "ftrans.random.choice: p must be None or a 1-D vector with the same size as "
                f"a.shape[axis]; p has shape {tuple(shape_of(p_arr))} and a.shape[axis] is {n_inputs}")
        ind = _choice_p(k, p_arr, shape, bool(replace), n_draws, _gumbel_mode("choice", mode))
        result = ind if nd == 0 else jnp.take(arr, ind, axis=axis)
    out_shape = shape if nd == 0 else tuple(shape_of(arr))[:axis] + shape + tuple(shape_of(arr))[axis + 1:]
    return result.reshape(out_shape)


@core_jit(static_argnums=(2, 3, 4, 5, 6))
def _categorical(k: Any, logits: Any, shape: tuple[int, ...], batch_shape: tuple[int, ...],
                 axis: int, replace: bool, mode: str) -> Any:
    nd = len(shape_of(logits))
    prefix = shape[:len(shape) - len(batch_shape)]
    d = np.dtype(logits.dtype)
    if replace:
        neg_axis = axis - nd  # axis counted from the end, as in the output of the Gumbel draw
        lshape = list(shape[len(shape) - len(batch_shape):])
        lshape.insert(neg_axis % nd, shape_of(logits)[axis])
        g = _gumbel_core(k, (*prefix, *lshape), d, mode)
        return jnp.argmax(g + jnp.expand_dims(logits, tuple(range(len(prefix)))), axis=neg_axis)
    logits = logits + _gumbel_core(k, tuple(shape_of(logits)), d, mode)
    kk = math.prod(prefix)
    _, indices = lax.top_k(jnp.moveaxis(logits, axis, -1), kk)
    nd_i = len(shape_of(indices))
    return lax.reshape(indices, shape, (nd_i - 1, *range(nd_i - 1)))


@sharded_sampler
def categorical(key: Any, logits: Any, axis: int = -1, shape: Any = None, replace: bool = True,
                mode: str | None = None) -> Any:
    """Samples from categorical distributions given by ``logits``, as JAX's ``random.categorical``."""
    k = _check_key("categorical", key)
    _check_arraylike("categorical", logits)
    logits = _asarray(logits)
    lshape = tuple(shape_of(logits))
    if not lshape:
        raise FtransValueError("ftrans.random.categorical: logits must be at least 1-dimensional")
    axis = _axis("categorical", axis, len(lshape))
    ld, _ = dtype_weak(logits)
    if not dtypes.is_float(ld):
        raise FtransValueError(
            f"ftrans.random.categorical: logits must have a float dtype, got {ld.name}")
    batch_shape = lshape[:axis] + lshape[axis + 1:]
    if shape is None:
        shape = batch_shape
    else:
        shape = _canonical_shape("categorical", shape)
        try:
            ok = tuple(np.broadcast_shapes(shape, batch_shape)) == shape
        except ValueError:
            ok = False
        if not ok:
            raise FtransValueError(
                f"ftrans.random.categorical: shape {shape} must broadcast with the logits' batch "
                f"shape {batch_shape} (logits shape {lshape} without axis {axis}) to itself")
    mode = _gumbel_mode("categorical", mode)
    if not replace:
        kk = math.prod(shape[:len(shape) - len(batch_shape)])
        if kk > lshape[axis]:
            raise FtransValueError(
                f"ftrans.random.categorical: Number of samples without replacement ({kk}) cannot "
                f"exceed the number of categories ({lshape[axis]})")
    return _categorical(k, logits, shape, batch_shape, axis, bool(replace), mode)
