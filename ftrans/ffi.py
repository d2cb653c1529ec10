"""JAX's ``jax.ffi``: calling native (XLA typed-FFI) functions from ftrans programs.

``ffi_call(target_name, result_shape_dtypes, ...)`` returns a function that binds the
``ffi_call`` primitive (``ftrans/core/prims/ffi.py``), which lowers to one
``stablehlo.custom_call`` of the target with its keyword arguments as typed attributes
(``ftrans/lowering/rules/ffi.py``). Targets are registered with XLA through the
custom-call registry jaxlib ships (``register_ffi_target``); jaxlib's own CPU targets (its
LAPACK kernels, ``lapack_sgeqrf_ffi`` and the others) are registered on first use.

Eagerly, a call runs as a one-call compiled program; under ``vmap`` it follows
``vmap_method`` as in JAX (``sequential``, ``sequential_unrolled``, ``expand_dims``,
``broadcast_all``, ``legacy_vectorized``); it has no derivative (wrap it in ``custom_jvp``
or ``custom_vjp``).

``ffi_lowering`` and ``build_ffi_lowering_function`` build lowering rules for JAX's MLIR
lowering (they take and return MLIR Python objects of JAX's lowering context); ftrans
lowers through its own rule table, so they raise a ``NotImplementedError`` that says to use
``ffi_call`` instead.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core.avals import ShapedArray
from ftrans.core.keys import is_key
from ftrans.core.prims import random as R
from ftrans.core.prims.callbacks import VMAP_METHODS
from ftrans.core.prims.ffi import ffi_call_p, wrap_attributes
from ftrans.core.trace import aval_of
from ftrans.errors import FtransValueError
from ftrans.lowering import compat

__all__ = ["ffi_call", "ffi_lowering", "build_ffi_lowering_function", "include_dir", "pycapsule",
           "register_ffi_target", "register_ffi_type", "register_ffi_type_id",
           "register_ffi_target_as_batch_partitionable", "abstract_token"]

from ftrans.core.tokens import abstract_token  # noqa: E402  (JAX's ``ffi.abstract_token``, a token's type)


def register_ffi_target(name: str, fn: Any, platform: str = "cpu", api_version: int = 1, **kwargs: Any) -> None:
    """Register the native function ``fn`` (a ``PyCapsule``, or a dict of them keyed by FFI stage such as
    ``"execute"``) as the custom-call target ``name`` on ``platform``. ``api_version`` 1 (the default) is the
    typed FFI, 0 the older custom-call API; other keyword arguments go to XLA's registration."""
    return compat.register_custom_call_target(name, fn, platform, api_version, **kwargs)


def register_ffi_type(name: str, type_registration: Any, platform: str = "cpu") -> None:
    """Register a custom type (a dict with a ``type_id`` capsule and optionally ``type_info``) for FFI targets."""
    return compat.register_custom_type(name, type_registration, platform)


def register_ffi_type_id(name: str, obj: Any, platform: str = "cpu") -> None:
    """Superseded by ``register_ffi_type`` in the jaxlib releases ftrans runs on: raises ``ValueError``, as JAX's."""
    raise FtransValueError("register_ffi_type_id is not supported after jaxlib version 381; use "
                           "register_ffi_type(name, {'type_id': capsule}, platform)")


def register_ffi_target_as_batch_partitionable(name: str) -> None:
    """Tell XLA's partitioner that ``name``'s leading axes are batch axes it may split across devices."""
    compat.register_custom_call_as_batch_partitionable(name)


def pycapsule(funcptr: Any) -> Any:
    """A ``PyCapsule`` holding the address of ``funcptr`` (a ``ctypes`` function from a loaded library), the
    form ``register_ffi_target`` takes."""
    destructor = ctypes.CFUNCTYPE(None, ctypes.py_object)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, destructor)
    return new(ctypes.cast(funcptr, ctypes.c_void_p), None, destructor(0))


def include_dir() -> str:
    """The directory of the XLA FFI C/C++ headers bundled with jaxlib (``xla/ffi/api/ffi.h``)."""
    return compat.ffi_include_dir()


def _jax_lowering_only(name: str) -> Callable:
    def unsupported(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"ftrans.ffi.{name} builds a lowering rule for JAX's MLIR lowering (rules over JAX's lowering "
            "context and MLIR values), which ftrans does not use: ftrans lowers through its own rule table. "
            "Call the target with ftrans.ffi.ffi_call(target_name, result_shape_dtypes, input_layouts=..., "
            "output_layouts=..., ...)(*args, **attributes) instead.")

    unsupported.__name__ = name
    unsupported.__doc__ = (f"JAX's ``jax.ffi.{name}``: not available in ftrans (it needs JAX's MLIR lowering); "
                           "raises ``NotImplementedError`` naming ``ffi_call``, which covers the same calls.")
    return unsupported


ffi_lowering = _jax_lowering_only("ffi_lowering")
build_ffi_lowering_function = _jax_lowering_only("build_ffi_lowering_function")


def _result_aval(r: Any, idx: int) -> ShapedArray:
    if r is abstract_token:
        raise NotImplementedError("ffi_call: a token result (ffi.abstract_token) is not supported by ftrans; "
                                  "order side-effecting targets with has_side_effect=True instead")
    if not hasattr(r, "shape") or not hasattr(r, "dtype"):
        raise FtransValueError("All elements of result_shape_dtypes must have 'shape' and 'dtype' attributes. "
                               f"Got {r} at position {idx}.")
    # The declared dtype as given, 64-bit included (as JAX's: the target writes what it writes).
    return ShapedArray(tuple(int(d) for d in r.shape), np.dtype(r.dtype), False)


def _key_data(k: Any) -> Any:
    """A key array's ``uint32`` data (a typed key traced by ``jit`` is a key-typed value: unwrapped)."""
    return R.random_unwrap_p.bind(k._base_array) if k._typed else k._base_array


def _minor_to_major(aval: ShapedArray, layout: Any, major_to_minor: bool) -> tuple:
    """A layout as the minor-to-major dimension order the custom call takes (None: row-major)."""
    if layout is None:
        return tuple(reversed(range(len(aval.shape))))
    if hasattr(layout, "major_to_minor"):  # JAX's Layout
        if getattr(layout, "tiling", None) is not None:
            raise FtransValueError("The FFI does not support layouts with tiling")
        return tuple(layout.major_to_minor[::-1])
    order = tuple(int(d) for d in layout)
    return order[::-1] if major_to_minor else order


def ffi_call(target_name: str, result_shape_dtypes: Any, *, has_side_effect: bool = False,
             vmap_method: str | None = None, input_layouts: Sequence[Any] | None = None,
             output_layouts: Any = None, input_output_aliases: dict[int, int] | None = None,
             custom_call_api_version: int = 4, legacy_backend_config: str | None = None) -> Callable[..., Any]:
    """A function calling the FFI target ``target_name`` on its positional array arguments; its keyword
    arguments become the call's attributes (NumPy scalars typed, arrays dense, dicts dictionaries).

    ``result_shape_dtypes``: one object with ``shape`` and ``dtype`` (one result) or a sequence of them;
    ``input_layouts``/``output_layouts``: per value, None (row-major), a major-to-minor axis order or a
    ``Layout``; ``input_output_aliases``: input index -> output index whose buffer it shares;
    ``vmap_method`` says how the call is batched; ``has_side_effect`` keeps a call whose results are unused.
    """
    if vmap_method not in VMAP_METHODS:
        raise FtransValueError(f"vmap_method must be on of the allowed methods {list(VMAP_METHODS)}, "
                               f"but got: {vmap_method}")
    if isinstance(result_shape_dtypes, Sequence) and not hasattr(result_shape_dtypes, "dtype"):
        multiple = True
        result_avals = tuple(_result_aval(r, i) for i, r in enumerate(result_shape_dtypes))
        out_layouts = output_layouts
    else:
        multiple = False
        result_avals = (_result_aval(result_shape_dtypes, 0),)
        out_layouts = (output_layouts,)
    if custom_call_api_version >= 4 and legacy_backend_config is not None:
        raise FtransValueError("The use of the legacy_backend_config parameter requires custom_call_api_version "
                               f"< 4; got {custom_call_api_version}.")

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        # A typed key array goes to the target as its key data (JAX lowers an extended dtype to its physical
        # type: the uint32 data, key shape trailing).
        args = tuple(_key_data(x) if is_key(x) else x for x in args)
        in_avals = [aval_of(x) for x in args]
        if input_layouts is None:
            in_lay = tuple(_minor_to_major(a, None, True) for a in in_avals)
        else:
            if len(input_layouts) != len(in_avals):
                raise FtransValueError(f"The number of input arguments ({len(in_avals)}) must equal the number of "
                                       f"input layouts ({len(input_layouts)}).")
            in_lay = tuple(_minor_to_major(a, lay, True) for a, lay in zip(in_avals, input_layouts))
        if out_layouts is None:
            out_lay = tuple(_minor_to_major(a, None, True) for a in result_avals)
        else:
            if len(out_layouts) != len(result_avals):
                raise FtransValueError(f"The number of outputs ({len(result_avals)}) must equal the number of "
                                       f"output layouts ({len(out_layouts)}).")
            out_lay = tuple(_minor_to_major(a, lay, True) for a, lay in zip(result_avals, out_layouts))
        aliases = []
        for i, o in sorted((input_output_aliases or {}).items()):
            i, o = int(i), int(o)
            if i >= len(args):
                raise FtransValueError(f"input_output_aliases contains the mapping '{i}:{o}' with input index {i} "
                                       f"outside the range [0, {len(args)}).")
            if o >= len(result_avals):
                raise FtransValueError(f"input_output_aliases contains the mapping '{i}:{o}' with output index {o} "
                                       f"outside the range [0, {len(result_avals)}).")
            a, r = in_avals[i], result_avals[o]
            if a.shape != r.shape or a.dtype != r.dtype:
                raise FtransValueError(f"input_output_aliases contains the mapping '{i}:{o}' referring to an input "
                                       f"with abstract value {a.str_short() if hasattr(a, 'str_short') else a} and "
                                       f"an output with a different abstract value {r}.")
            if in_lay[i] != out_lay[o]:
                raise FtransValueError(f"input_output_aliases contains the mapping '{i}:{o}' referring to an input "
                                       f"with layout {in_lay[i]} and an output with a different layout "
                                       f"{out_lay[o]}.")
            aliases.append((i, o))
        outs = ffi_call_p.bind(*args, target_name=target_name, result_avals=result_avals,
                               has_side_effect=bool(has_side_effect), vmap_method=vmap_method,
                               input_layouts=in_lay, output_layouts=out_lay,
                               input_output_aliases=tuple(aliases),
                               custom_call_api_version=int(custom_call_api_version),
                               legacy_backend_config=legacy_backend_config,
                               attributes=wrap_attributes(kwargs))
        if multiple:
            return tuple(outs) if isinstance(result_shape_dtypes, tuple) else list(outs)
        return outs[0]

    return wrapped
