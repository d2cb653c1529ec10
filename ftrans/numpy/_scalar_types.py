"""``jnp.float32`` and friends: dtype objects that are also array constructors.

In JAX, ``jnp.float32(x)`` makes a 0-d (or n-d) array of that dtype, and works
on traced values, while ``jnp.float32`` still serves anywhere a dtype is
expected.  NumPy's scalar types cannot do the first (calling them on a tracer
tries to concretize it), so each name is a small class whose metaclass turns a
call into ``asarray(x, dtype)`` and whose ``dtype`` attribute lets
``np.dtype(jnp.float32)`` and ``arr.dtype == jnp.float32`` work unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import dtypes as _dtypes


class _ScalarMeta(type):
    dtype: np.dtype

    def __call__(cls, x: Any = 0) -> Any:
        from ftrans.numpy._creation import asarray

        return asarray(x, dtype=cls.dtype)

    def __hash__(cls) -> int:
        return hash(cls.dtype.type)

    def __eq__(cls, other: Any) -> bool:
        return other is cls or other == cls.dtype.type

    def __ne__(cls, other: Any) -> bool:
        # Not ``cls.__eq__``: on a class that finds ``object.__eq__`` unbound.
        return not _ScalarMeta.__eq__(cls, other)

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls.dtype.type)

    def __repr__(cls) -> str:
        return f"ftrans.numpy.{cls.__name__}"


def _make(name: str, dtype: np.dtype) -> type:
    return _ScalarMeta(name, (), {"dtype": np.dtype(dtype), "__module__": "ftrans.numpy",
                                  "__doc__": f"The {dtype} dtype; calling it makes an array of that dtype."})


# Named "bool" as JAX's (and NumPy 2's) bool_ type is: code that labels cases by
# ``dtype.__name__`` gives the same labels under both.
bool_ = _make("bool", _dtypes.bool_)
int8 = _make("int8", np.int8)
int16 = _make("int16", np.int16)
int32 = _make("int32", np.int32)
int64 = _make("int64", np.int64)
uint8 = _make("uint8", np.uint8)
uint16 = _make("uint16", np.uint16)
uint32 = _make("uint32", np.uint32)
uint64 = _make("uint64", np.uint64)
float16 = _make("float16", np.float16)
float32 = _make("float32", np.float32)
float64 = _make("float64", np.float64)
bfloat16 = _make("bfloat16", _dtypes.bfloat16)
complex64 = _make("complex64", np.complex64)
complex128 = _make("complex128", np.complex128)
# JAX's narrow storage types (ml_dtypes): no implicit promotion, basic arithmetic and conversions.
int2 = _make("int2", _dtypes.int2)
int4 = _make("int4", _dtypes.int4)
uint2 = _make("uint2", _dtypes.uint2)
uint4 = _make("uint4", _dtypes.uint4)
float4_e2m1fn = _make("float4_e2m1fn", _dtypes.float4_e2m1fn)
float8_e3m4 = _make("float8_e3m4", _dtypes.float8_e3m4)
float8_e4m3 = _make("float8_e4m3", _dtypes.float8_e4m3)
float8_e4m3b11fnuz = _make("float8_e4m3b11fnuz", _dtypes.float8_e4m3b11fnuz)
float8_e4m3fn = _make("float8_e4m3fn", _dtypes.float8_e4m3fn)
float8_e4m3fnuz = _make("float8_e4m3fnuz", _dtypes.float8_e4m3fnuz)
float8_e5m2 = _make("float8_e5m2", _dtypes.float8_e5m2)
float8_e5m2fnuz = _make("float8_e5m2fnuz", _dtypes.float8_e5m2fnuz)
float8_e8m0fnu = _make("float8_e8m0fnu", _dtypes.float8_e8m0fnu)
# Names JAX exports for types XLA's runtime cannot hold yet (jax's own arrays of them fail inside XLA):
# the dtypes exist (``finfo``/``iinfo``, ``issubdtype``, dtype tables), making an array refuses them.
int1 = _make("int1", _dtypes.int1)
uint1 = _make("uint1", _dtypes.uint1)
float6_e2m3fn = _make("float6_e2m3fn", _dtypes.float6_e2m3fn)
float6_e3m2fn = _make("float6_e3m2fn", _dtypes.float6_e3m2fn)

# NumPy-style aliases.  As in JAX, the 64-bit names stay 64-bit dtypes; arrays
# built from them are narrowed to 32 bits unless x64 is enabled.
bool = bool_  # noqa: A001 - jnp.bool is the array API name of bool_
float_ = double = float64
single = float32
int_ = int64
uint = uint64
complex_ = cdouble = complex128
csingle = complex64
