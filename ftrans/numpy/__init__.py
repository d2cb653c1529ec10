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

from ftrans.core import eager_programs as _eager_programs  # noqa: E402
from ftrans.numpy import _ufunc  # noqa: E402

_eager_programs.install(globals(), ("logaddexp", "logaddexp2"))  # (before they become ufuncs: the call is theirs)
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


# Composites that an eager call runs faster from a program traced once per signature than op by op
# (``core/eager_programs.py``; ``benchmarks/eager_composites.py`` measures them against jax). Left out:
# one-primitive functions with fast paths of their own (``sin``, ``add``, ...), and functions whose
# result's shape depends on values (``nonzero``, ``unique``, ...), which cannot be traced.
_REPLAYED = (
    "all", "allclose", "angle", "any", "append", "arctan2", "argmin", "argsort", "around", "array_equal",
    "array_equiv", "atan2", "atleast_2d", "atleast_3d", "average", "bitwise_count", "bitwise_invert",
    "bitwise_left_shift", "bitwise_not", "bitwise_right_shift", "clip", "column_stack", "concat", "concatenate",
    "copysign", "corrcoef", "correlate", "count_nonzero", "cov", "cumprod", "cumsum", "cumulative_prod",
    "degrees", "diag", "diag_indices_from", "diagflat", "diagonal", "diff", "digitize", "divmod", "dstack",
    "ediff1d", "einsum", "empty_like", "fliplr", "flipud", "float_power", "floor_divide", "fmax", "fmin", "fmod",
    "frexp", "full_like", "gcd", "geomspace", "gradient", "heaviside", "histogram", "histogram2d",
    "histogram_bin_edges", "histogramdd", "hstack", "hypot", "i0", "imag", "interp", "invert", "iscomplex",
    "isclose", "isin", "isinf", "isreal", "kron", "lcm", "ldexp", "left_shift", "lexsort", "linspace", "log2",
    "logical_not", "logspace", "matmul", "matrix_transpose", "matvec", "median", "mod", "modf", "nan_to_num",
    "nanargmax", "nanargmin", "nancumprod", "nancumsum", "nanmax", "nanmean", "nanmedian", "nanmin",
    "nanpercentile", "nanprod", "nanquantile", "nanstd", "nansum", "nanvar", "nextafter", "ones_like", "outer",
    "packbits", "percentile", "poly", "polyadd", "polyder", "polydiv", "polyint", "polymul", "polysub", "polyval",
    "pow", "power", "prod", "quantile", "rad2deg", "radians", "ravel", "remainder", "right_shift", "rot90",
    "searchsorted", "select", "signbit", "sinc", "sort_complex", "spacing", "stack", "std", "tensordot", "trace",
    "trapezoid", "tril", "tril_indices_from", "triu", "triu_indices_from", "trunc", "unravel_index",
    "unstack", "unwrap", "vander", "var", "vdot", "vecdot", "vecmat", "vstack", "where", "zeros_like",
)
# (``sum``, ``mean``, ``max`` and ``min`` replay their general path only: ``_reductions.py``.)
_eager_programs.install(globals(), _REPLAYED)
