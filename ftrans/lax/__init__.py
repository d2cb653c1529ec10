"""``ftrans.lax``: primitive-level operations (JAX's ``lax``)."""

from ftrans.lax._indexing import *  # noqa: F401,F403
from ftrans.lax._ops import *  # noqa: F401,F403
from ftrans.lax._reductions import *  # noqa: F401,F403
from ftrans.lax._windowed import *  # noqa: F401,F403


def optimization_barrier(operand):  # noqa: ANN001, ANN201 - mirrors JAX's lax signature
    """JAX's ``lax.optimization_barrier``: an identity on a pytree that XLA may not optimize across."""
    from ftrans.transforms.remat import optimization_barrier as _barrier

    return _barrier(operand)


# Collectives over named axes (``ftrans/transforms/collectives.py``), imported lazily to avoid an import cycle.


def psum(x, axis_name, *, axis_index_groups=None):  # noqa: ANN001, ANN201 - mirrors JAX's lax signature
    """JAX's ``lax.psum``: the sum of ``x`` (a pytree) over the named axis or axes."""
    from ftrans.transforms import collectives

    return collectives.psum(x, axis_name, axis_index_groups=axis_index_groups)


def pmean(x, axis_name, *, axis_index_groups=None):  # noqa: ANN001, ANN201
    """JAX's ``lax.pmean``: the mean of ``x`` (a pytree) over the named axis or axes."""
    from ftrans.transforms import collectives

    return collectives.pmean(x, axis_name, axis_index_groups=axis_index_groups)


def pmax(x, axis_name, *, axis_index_groups=None):  # noqa: ANN001, ANN201
    """JAX's ``lax.pmax``: the maximum of ``x`` (a pytree) over the named axis or axes."""
    from ftrans.transforms import collectives

    return collectives.pmax(x, axis_name, axis_index_groups=axis_index_groups)


def pmin(x, axis_name, *, axis_index_groups=None):  # noqa: ANN001, ANN201
    """JAX's ``lax.pmin``: the minimum of ``x`` (a pytree) over the named axis or axes."""
    from ftrans.transforms import collectives

    return collectives.pmin(x, axis_name, axis_index_groups=axis_index_groups)


def all_gather(x, axis_name, *, axis_index_groups=None, axis=0, tiled=False):  # noqa: ANN001, ANN201
    """JAX's ``lax.all_gather``: every element's ``x`` stacked (or, ``tiled``, concatenated) along ``axis``."""
    from ftrans.transforms import collectives

    return collectives.all_gather(x, axis_name, axis_index_groups=axis_index_groups, axis=axis, tiled=tiled)


def all_to_all(x, axis_name, split_axis, concat_axis, *, axis_index_groups=None, tiled=False):  # noqa: ANN001, ANN201
    """JAX's ``lax.all_to_all``: exchange blocks of ``x`` along ``split_axis``, concatenated along ``concat_axis``."""
    from ftrans.transforms import collectives

    return collectives.all_to_all(x, axis_name, split_axis, concat_axis, axis_index_groups=axis_index_groups,
                                  tiled=tiled)


def ppermute(x, axis_name, perm):  # noqa: ANN001, ANN201
    """JAX's ``lax.ppermute``: send ``x`` from element ``src`` to ``dst`` for each pair of ``perm``."""
    from ftrans.transforms import collectives

    return collectives.ppermute(x, axis_name, perm)


def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None, tiled=False):  # noqa: ANN001, ANN201
    """JAX's ``lax.psum_scatter``: the sum over the axis, element ``k`` keeping block ``k`` of ``scatter_dimension``."""
    from ftrans.transforms import collectives

    return collectives.psum_scatter(x, axis_name, scatter_dimension=scatter_dimension,
                                    axis_index_groups=axis_index_groups, tiled=tiled)


def axis_index(axis_name):  # noqa: ANN001, ANN201
    """JAX's ``lax.axis_index``: this element's int32 index along the named axis."""
    from ftrans.transforms import collectives

    return collectives.axis_index(axis_name)


# Control flow (``ftrans/transforms/control_flow/``), imported lazily to avoid an import cycle.


def cond(pred, true_fun, false_fun, *operands, **kwargs):  # noqa: ANN001, ANN201 - mirrors JAX's lax signature
    """JAX's ``lax.cond``: ``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``."""
    from ftrans.transforms.control_flow import api

    return api.cond(pred, true_fun, false_fun, *operands, **kwargs)


def switch(index, branches, *operands, **kwargs):  # noqa: ANN001, ANN201
    """JAX's ``lax.switch``: ``branches[index](*operands)``, the index clamped into range."""
    from ftrans.transforms.control_flow import api

    return api.switch(index, branches, *operands, **kwargs)


def while_loop(cond_fun, body_fun, init_val):  # noqa: ANN001, ANN201
    """JAX's ``lax.while_loop``: repeat ``body_fun`` while ``cond_fun`` holds."""
    from ftrans.transforms.control_flow import api

    return api.while_loop(cond_fun, body_fun, init_val)


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):  # noqa: ANN001, ANN201
    """JAX's ``lax.fori_loop``: a scan for static bounds (reverse-differentiable), a while loop otherwise."""
    from ftrans.transforms.control_flow import api

    return api.fori_loop(lower, upper, body_fun, init_val, unroll=unroll)


def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):  # noqa: ANN001, ANN201
    """JAX's ``lax.scan``: ``f(carry, x) -> (carry, y)`` over the leading axis of ``xs``."""
    from ftrans.transforms.control_flow import api

    return api.scan(f, init, xs, length=length, reverse=reverse, unroll=unroll)


def map(f, xs, *, batch_size=None):  # noqa: A001, ANN001, ANN201
    """JAX's ``lax.map``: ``f`` over the leading axis of ``xs``."""
    from ftrans.transforms.control_flow import api

    return api.map(f, xs, batch_size=batch_size)
