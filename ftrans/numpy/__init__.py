"""``ftrans.numpy``: the JAX's ``numpy`` API, written only in terms of ftrans primitives."""


import numpy as _np

from ftrans.core import array_methods as _array_methods
from ftrans.core import dtypes as _dtypes
from ftrans.core.array import PublicArray as ndarray  # noqa: F401  (jnp.ndarray is the Array type)
from ftrans.core.operands import result_type  # noqa: F401
from ftrans.numpy import (  # noqa: F401
    _batched,
    _conversion,
    _creation,
    _elementwise,
    _indexing,
    _products,
    _reductions,
    _shape,
    _sorting,
    fft,  # noqa: F401
    linalg,  # noqa: F401,E402
)
from ftrans.numpy._array_api import *  # noqa: F401,F403
from ftrans.numpy._array_api import __array_api_version__, __array_namespace_info__  # noqa: F401
from ftrans.numpy._conversion import *  # noqa: F401,F403
from ftrans.numpy._creation import *  # noqa: F401,F403
from ftrans.numpy._elementwise import *  # noqa: F401,F403
from ftrans.numpy._extras import *  # noqa: F401,F403
from ftrans.numpy._functional import *  # noqa: F401,F403
from ftrans.numpy._index_tricks import *  # noqa: F401,F403
from ftrans.numpy._indexing import *  # noqa: F401,F403
from ftrans.numpy._indexing import _getitem, _IndexUpdateHelper  # noqa: F401
from ftrans.numpy._io import *  # noqa: F401,F403
from ftrans.numpy._methods import (  # noqa: E402,F401
    _method_argpartition,
    _method_byteswap,
    _method_compress,
    _method_copy,
    _method_view,
    _operator_contains,
    _operator_round,
)
from ftrans.numpy._products import *  # noqa: F401,F403
from ftrans.numpy._reductions import *  # noqa: F401,F403

# dtypes and dtype utilities
from ftrans.numpy._scalar_types import (  # noqa: E402,F401
    bfloat16,
    bool,
    bool_,
    cdouble,
    complex64,
    complex128,
    complex_,
    csingle,
    double,
    float4_e2m1fn,
    float6_e2m3fn,
    float6_e3m2fn,
    float8_e3m4,
    float8_e4m3,
    float8_e4m3b11fnuz,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float8_e8m0fnu,
    float16,
    float32,
    float64,
    float_,
    int1,
    int2,
    int4,
    int8,
    int16,
    int32,
    int64,
    int_,
    single,
    uint,
    uint1,
    uint2,
    uint4,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ftrans.numpy._shape import *  # noqa: F401,F403
from ftrans.numpy._shape import _method_reshape, _method_transpose  # noqa: F401
from ftrans.numpy._signal import *  # noqa: F401,F403
from ftrans.numpy._sorting import *  # noqa: F401,F403
from ftrans.numpy._ufunc import *  # noqa: F401,F403

dtype = _np.dtype
promote_types = _dtypes.promote_types
finfo = _dtypes.finfo
iinfo = _dtypes.iinfo
issubdtype = _dtypes.issubdtype
generic, number, inexact, floating, integer, signedinteger, unsignedinteger, complexfloating = (
    _np.generic, _np.number, _np.inexact, _np.floating, _np.integer, _np.signedinteger,
    _np.unsignedinteger, _np.complexfloating,
)
pi, e, inf, nan, euler_gamma = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma
newaxis = None


_array_methods.install(__import__(__name__, fromlist=["_"]))

from ftrans.core import keys as _core_keys  # noqa: E402
from ftrans.numpy import _keys  # noqa: E402

_keys.install(globals())
_core_keys.install(__import__(__name__, fromlist=["_"]))

from ftrans.numpy import _ufunc  # noqa: E402

_ufunc._install()


def _own_names() -> None:
    """Give each public alias (``acos`` of ``arccos``, ``pow`` of ``power``, ``abs`` of ``absolute``) its own
    function object named as it is spelled, as JAX's are; it shares the code, so a call costs nothing more."""
    import types

    g = globals()
    for name, f in list(g.items()):
        if name.startswith("_") or type(f) is not types.FunctionType or f.__name__ == name:
            continue
        alias = types.FunctionType(f.__code__, f.__globals__, name, f.__defaults__, f.__closure__)
        alias.__kwdefaults__ = f.__kwdefaults__
        alias.__dict__.update(f.__dict__)
        alias.__doc__ = f"Alias of `ftrans.numpy.{f.__name__}`: the same function, under JAX's other name."
        alias.__annotations__ = f.__annotations__
        alias.__qualname__, alias.__module__ = name, __name__  # found again where it lives (pickle)
        g[name] = alias


_own_names()
