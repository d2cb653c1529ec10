"""Lowering of ``ffi_call`` (``ftrans/core/prims/ffi.py``) and its eager rule.

The call becomes one ``stablehlo.custom_call`` of the target, written as JAX writes it so
XLA treats it as a typed-FFI call: an empty ``backend_config`` string and the keyword
attributes in the ``mhlo.backend_config`` dictionary (custom-call API version 4 and up),
or, for a legacy target (``custom_call_api_version < 4``), the opaque
``legacy_backend_config`` string; the operands' and results' layouts (minor-to-major),
``output_operand_aliases`` for ``input_output_aliases`` and ``has_side_effect``.

Attributes are encoded as JAX's MLIR attribute handlers encode them: a NumPy scalar is a
typed scalar (``np.int32(1)`` -> ``1 : i32``), a Python ``int``/``float``/``bool`` a 64-bit
integer, a 64-bit float or a boolean, a NumPy array a dense elements attribute (``float0``
as booleans), a string a string, a dtype a type, a dict a dictionary and a list or tuple an
array of attributes.

Eagerly, an ``ffi_call`` runs as a one-call XLA program (the target is native code; there
is no NumPy rule for it), compiled once per signature as on-device eager operations are.
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from ftrans.core.prims.ffi import HashableArray, ffi_call_p, unwrap_attributes
from ftrans.errors import FtransValueError
from ftrans.lowering import compat
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, register_lowering

__all__ = ["attribute_text", "layouts_text"]

_FLOAT0 = np.dtype([("float0", np.void, 0)])
# Python scalars become attributes of these types (JAX's handlers do not canonicalize them).
_PY_SCALAR = {bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float64)}
# NumPy scalar types encoded as typed scalars (the others, as JAX's, become type attributes).
_SCALAR_TYPES = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float16,
                 np.float32, np.float64, np.complex64, np.complex128, np.bool_, np.longlong, ml_dtypes.bfloat16)


def _float_text(value: Any, dtype: np.dtype) -> str:
    """An exact MLIR float literal: decimal when finite (round-trips), the bit pattern in hex otherwise."""
    f = float(value)
    if math.isfinite(f):
        return repr(f)
    bits = np.asarray(value, dtype).reshape(1).view(f"u{dtype.itemsize}")[0]
    return f"0x{int(bits):0{2 * dtype.itemsize}X}"


def _scalar_text(value: Any, dtype: np.dtype) -> str:
    dtype = np.dtype(dtype)
    et = mt.element_type(dtype)
    if dtype == np.bool_:
        return "true" if bool(value) else "false"
    if dtype.kind in "iu" or dtype in mt._NARROW_INTS:
        return f"{int(value)} : {et}"
    if dtype.kind == "c":
        raise TypeError(f"Unsupported scalar attribute type: {type(value)}")
    return f"{_float_text(value, dtype)} : {et}"


def _elements(arr: np.ndarray) -> str:
    if arr.ndim == 0:
        v = arr.reshape(())[()]
        if arr.dtype == np.bool_:
            return "true" if bool(v) else "false"
        if arr.dtype.kind in "iu" or arr.dtype in mt._NARROW_INTS:
            return str(int(v))
        if arr.dtype.kind == "c":
            return f"({_float_text(v.real, np.dtype(v.real.dtype))}, {_float_text(v.imag, np.dtype(v.imag.dtype))})"
        return _float_text(v, arr.dtype)
    return "[" + ", ".join(_elements(a) for a in arr) + "]"


def _array_text(arr: np.ndarray) -> str:
    if 0 in arr.strides and arr.size > 0:
        raise ValueError("NumPy arrays with zero strides are not supported as MLIR attributes")
    if arr.dtype == _FLOAT0:
        arr = np.zeros(arr.shape, np.bool_)
    t = mt.tensor_type(arr.shape, arr.dtype)
    if arr.size == 0:
        return f"dense<> : {t}"
    return f"dense<{_elements(arr)}> : {t}"


def _name(k: Any) -> str:
    k = str(k)
    if k and (k[0].isalpha() or k[0] == "_") and all(c.isalnum() or c in "_.$" for c in k):
        return k
    return '"' + mt._quoted(k) + '"'


def attribute_text(v: Any) -> str:
    """The MLIR attribute JAX writes for the Python value ``v`` (see the module docstring)."""
    if isinstance(v, HashableArray):
        v = v.val
    if isinstance(v, (bool, np.bool_)) and type(v) in (bool, np.bool_):
        return "true" if bool(v) else "false"
    if type(v) in _PY_SCALAR:
        return _scalar_text(v, _PY_SCALAR[type(v)])
    if isinstance(v, np.ndarray):
        return _array_text(v)
    if isinstance(v, _SCALAR_TYPES):
        return _scalar_text(v, np.dtype(type(v)))
    if isinstance(v, (np.dtype, np.generic)):
        return mt.element_type(np.dtype(v.dtype if isinstance(v, np.generic) else v))
    if isinstance(v, (str, bytes)):
        s = v.decode() if isinstance(v, bytes) else v
        return '"' + mt._quoted(s) + '"'
    if isinstance(v, dict) or (hasattr(v, "items") and hasattr(v, "_d")):
        return "{" + ", ".join(f"{_name(k)} = {attribute_text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(attribute_text(x) for x in v) + "]"
    if isinstance(v, int):  # an int subclass (an IntEnum)
        return _scalar_text(int(v), np.dtype(np.int64))
    if isinstance(v, float):
        return _scalar_text(float(v), np.dtype(np.float64))
    raise TypeError(f"No attribute handler defined for type: {type(v)}")


def _layout_text(layout: Any) -> str:
    dims = [int(d) for d in layout]
    if not dims:
        return "dense<> : tensor<0xindex>"
    return f"dense<[{', '.join(map(str, dims))}]> : tensor<{len(dims)}xindex>"


def layouts_text(layouts: Any) -> str:
    """``operand_layouts``/``result_layouts``: one minor-to-major dimension list per value."""
    return "[" + ", ".join(_layout_text(lay) for lay in layouts) + "]"


@register_lowering(ffi_call_p)
def _ffi_call_lowering(ctx: LoweringContext, *args: str, target_name: str, result_avals: tuple,
                       has_side_effect: bool, vmap_method: Any, input_layouts: tuple, output_layouts: tuple,
                       input_output_aliases: tuple, custom_call_api_version: int,
                       legacy_backend_config: Any, attributes: tuple) -> list[str]:
    if ctx.platform == "cpu" and target_name.startswith("lapack_"):
        compat.ensure_lapack_targets()  # jaxlib's LAPACK targets (JAX registers them when it is imported)
    attrs: dict[str, str] = {
        "api_version": f"{1 if custom_call_api_version >= 4 else int(custom_call_api_version)} : i32",
        "call_target_name": '"' + mt._quoted(target_name) + '"',
        "called_computations": "[]",
        "has_side_effect": mt.bool_attr(has_side_effect),
        "operand_layouts": layouts_text(input_layouts),
        "result_layouts": layouts_text(output_layouts),
    }
    if custom_call_api_version >= 4:
        if legacy_backend_config is not None:
            raise FtransValueError("The use of the legacy_backend_config parameter requires "
                                   f"custom_call_api_version < 4; got {custom_call_api_version}.")
        attrs["backend_config"] = '""'
        config = unwrap_attributes(attributes)
        attrs["mhlo.backend_config"] = "{" + ", ".join(
            f"{_name(k)} = {attribute_text(v)}" for k, v in config.items()) + "}"
    else:
        if attributes:
            raise FtransValueError("The use of ffi_call attributes requires a custom call API version of at "
                                   f"least 4; got api_version={custom_call_api_version}.")
        attrs["backend_config"] = '"' + mt._quoted(legacy_backend_config or "") + '"'
    many = len(result_avals) > 1  # the aliases are written even when there are none, as JAX writes them
    attrs["output_operand_aliases"] = "[" + ", ".join(
        f"#stablehlo.output_operand_alias<output_tuple_indices = {f'[{o}]' if many else '[]'}, "
        f"operand_index = {i}, operand_tuple_indices = []>" for i, o in input_output_aliases) + "]"
    result_types = [mt.aval_type(a) for a in ctx.avals_out]
    return ctx.emit("stablehlo.custom_call", list(args), result_types, attrs)


def _ffi_call_impl(*args: Any, **params: Any) -> list:
    """The host rule (NumPy arrays in and out): a one-call program run on the default device, whose results
    come back to the host. (Operands already on an accelerator take core's device path instead.)"""
    from ftrans.devices import default_device
    from ftrans.lowering import device_eager

    outs = device_eager.apply(ffi_call_p, args, params, default_device())
    return [np.asarray(o) for o in outs]


ffi_call_p.def_impl(_ffi_call_impl)
