"""``ftrans.lax``: primitive-level operations (JAX's ``lax``), control flow and collectives over named axes."""

from ftrans.lax import linalg  # noqa: F401,E402
from ftrans.lax._collectives import (  # noqa: F401
    all_gather,
    all_to_all,
    axis_index,
    pbroadcast,
    pcast,
    pmax,
    pmean,
    pmin,
    ppermute,
    pshuffle,
    psum,
    psum_scatter,
    psum_scatter_start,
    pswapaxes,
    ragged_all_to_all,
)
from ftrans.lax._control_flow import (  # noqa: A004, F401
    associative_scan,
    cond,
    fori_loop,
    map,
    scan,
    switch,
    while_loop,
)
from ftrans.lax._convolution import *  # noqa: F401,F403
from ftrans.lax._extras import *  # noqa: F401,F403
from ftrans.lax._indexing import *  # noqa: F401,F403
from ftrans.lax._ops import *  # noqa: F401,F403
from ftrans.lax._primitives import *  # noqa: F401,F403
from ftrans.lax._ragged import RaggedDotDimensionNumbers, ragged_dot, ragged_dot_general  # noqa: F401
from ftrans.lax._reductions import *  # noqa: F401,F403
from ftrans.lax._sharding import with_sharding_constraint  # noqa: F401
from ftrans.lax._solves import custom_linear_solve, custom_root, linear_solve_p  # noqa: F401
from ftrans.lax._special import *  # noqa: F401,F403
from ftrans.lax._tokens import Token, after_all, create_token  # noqa: F401
from ftrans.lax._windowed import *  # noqa: F401,F403


def optimization_barrier(operand):  # noqa: ANN001, ANN201 - mirrors JAX's lax signature
    """JAX's ``lax.optimization_barrier``: an identity on a pytree that XLA may not optimize across."""
    from ftrans.transforms.remat import optimization_barrier as _barrier

    return _barrier(operand)


from ftrans.lax import _keys as _lax_keys  # noqa: E402

_lax_keys.install(globals())


# jax 0.12 deprecated ``lax.psend`` and ``lax.precv``: they stay reachable, with a DeprecationWarning, and out of
# ``dir(ftrans.lax)`` (as in jax 0.12, whichever jax is installed).
_DEPRECATED = {"psend": "ftrans.lax.psend is deprecated (as jax.lax.psend is since jax 0.12).",
               "precv": "ftrans.lax.precv is deprecated (as jax.lax.precv is since jax 0.12)."}


# Eager calls run from a program traced once per signature (``core/eager_programs.py``): each of these is
# more than one primitive, or one behind argument handling that costs twice the program's time or more.
from ftrans.core import eager_programs as _eager_programs  # noqa: E402

_eager_programs.install(globals(), (
    "batch_matmul", "clamp", "cumlogsumexp", "cummax", "cummin", "cumprod", "cumsum", "dot", "log2", "mulhi",
    "polynomial", "pow", "reciprocal", "round", "scaled_dot", "sort", "sort_key_val", "stack", "unstack",
))


def __getattr__(name: str):
    if name in _DEPRECATED:
        import warnings

        from ftrans.lax import _collectives

        warnings.warn(_DEPRECATED[name], DeprecationWarning, stacklevel=2)
        return getattr(_collectives, name)
    raise AttributeError(f"module 'ftrans.lax' has no attribute {name!r}")
