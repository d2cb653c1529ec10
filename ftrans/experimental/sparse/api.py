"""Format-generic helpers: ``empty``, ``eye``, ``todense`` and the sparse-aware ``grad``/``value_and_grad``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ftrans.numpy as jnp
from ftrans.core import pytrees as tree_util
from ftrans.core.primitive import Primitive, first_weak
from ftrans.core.trace import Tracer
from ftrans.errors import FtransValueError
from ftrans.experimental.sparse._base import JAXSparse
from ftrans.experimental.sparse.bcoo import BCOO
from ftrans.lowering.lower import register_lowering
from ftrans.transforms import reverse as _reverse
from ftrans.transforms.ad import defjvp_linear
from ftrans.transforms.batching import register_batching, vmap
from ftrans.transforms.transpose import register_transpose

__all__ = ["empty", "eye", "todense", "todense_p", "grad", "value_and_grad", "jacfwd", "jacrev", "jacobian"]


def _format(sparse_format: str) -> type:
    from ftrans.experimental.sparse.bcsr import BCSR
    from ftrans.experimental.sparse.coo import COO
    from ftrans.experimental.sparse.csr import CSC, CSR
    formats = {"bcoo": BCOO, "bcsr": BCSR, "coo": COO, "csr": CSR, "csc": CSC}
    if sparse_format not in formats:
        raise FtransValueError(f"sparse_format={sparse_format!r} must be one of {sorted(formats)}")
    return formats[sparse_format]


def empty(shape: Sequence[int], dtype: Any = None, index_dtype: Any = "int32", sparse_format: str = "bcoo",
          **kwds: Any) -> JAXSparse:
    """An all-zero sparse array of ``shape`` (no stored elements unless ``nse`` is given)."""
    return _format(sparse_format)._empty(shape, dtype=dtype, index_dtype=index_dtype, **kwds)


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None, index_dtype: Any = "int32",
        sparse_format: str = "bcoo", **kwds: Any) -> JAXSparse:
    """A sparse ``N x M`` matrix with ones on diagonal ``k`` (``ftrans.numpy.eye`` in sparse form)."""
    return _format(sparse_format)._eye(N, N if M is None else M, k, dtype=dtype, index_dtype=index_dtype, **kwds)


def todense(arr: Any) -> Any:
    """``arr.todense()`` for a sparse array; a dense array unchanged.

    A traced dense array goes through ``todense_p`` (the identity on dense arrays), so that code staged by
    ``sparsify`` with a sparse array standing in as a dense value densifies it there, as in JAX."""
    if isinstance(arr, JAXSparse):
        return arr.todense()
    if isinstance(arr, Tracer):
        return todense_p.bind(arr)
    return jnp.asarray(arr)


# JAX's ``todense_p``: on a dense operand the identity (every rule below is); ``sparsify``'s interpreter
# (``transform.py``) gives a sparse operand its ``.todense()``.
todense_p = Primitive("todense")
todense_p.def_weak_type(first_weak)


@todense_p.def_abstract_eval
def _todense_abstract(x: Any) -> Any:
    return x


@todense_p.def_impl
def _todense_impl(x: Any) -> Any:
    return x


defjvp_linear(todense_p)


@register_transpose(todense_p)
def _todense_transpose(ct: Any, x: Any) -> list:
    return [ct]


@register_batching(todense_p)
def _todense_batch(vals: list, dims: list, **params: Any) -> tuple[Any, Any]:
    return todense_p.bind(vals[0]), dims[0]


@register_lowering(todense_p)
def _todense_lowering(ctx: Any, x: Any) -> Any:
    return x


def _is_sparse(x: Any) -> bool:
    return isinstance(x, JAXSparse)


def _split(args: tuple, argnums: Sequence[int]) -> tuple[list, list]:
    """Replace each argument in ``argnums`` by its leaves, a sparse leaf by its stored values."""
    new, templates = list(args), []
    for i in argnums:
        leaves, tree = tree_util.tree_flatten(args[i], is_leaf=_is_sparse)
        templates.append((tree, leaves))
        new[i] = [x.data if _is_sparse(x) else x for x in leaves]
    return new, templates


def _rebuild(flat: list, template: tuple) -> Any:
    """Derivatives with respect to the leaves back in the argument's structure.

    A sparse leaf's derivative is a sparse array with the leaf's indices; extra
    leading axes (a Jacobian's output axes) become batch axes.
    """
    tree, leaves = template
    out = []
    for x, g in zip(leaves, flat):
        if _is_sparse(x):
            children, aux = x.tree_flatten()
            cls = type(x)

            def rebuild_one(gi, children=children, aux=aux, cls=cls):
                return cls.tree_unflatten(aux, (gi, *children[1:]))

            for _ in range(g.ndim - children[0].ndim):
                rebuild_one = vmap(rebuild_one)
            out.append(rebuild_one(g))
        else:
            out.append(g)
    return tree_util.tree_unflatten(tree, out)


def _sparse_ad(transform: Callable, fun: Callable, argnums: int | Sequence[int], has_aux: bool,
               kwargs: dict) -> Callable:
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)

    def wrapped(*args: Any) -> Any:
        new, templates = _split(args, nums)

        def inner(*a: Any) -> Any:
            full = list(a)
            for i, t in zip(nums, templates):
                full[i] = _assemble(a[i], t)
            return fun(*full)

        out = transform(inner, argnums=nums, has_aux=has_aux, **kwargs)(*new)
        return out, templates, single

    return wrapped


def _assemble(leaves: list, template: tuple) -> Any:
    """The argument rebuilt from (possibly traced) leaves, a sparse leaf from its stored values."""
    tree, orig = template
    out = []
    for x, v in zip(orig, leaves):
        if _is_sparse(x):
            children, aux = x.tree_flatten()
            out.append(type(x).tree_unflatten(aux, (v, *children[1:])))
        else:
            out.append(v)
    return tree_util.tree_unflatten(tree, out)


def _post(grads: tuple, templates: list, single: bool) -> Any:
    rebuilt = tuple(_rebuild(g, t) for g, t in zip(grads, templates))
    return rebuilt[0] if single else rebuilt


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, **kwargs: Any) -> Callable:
    """``value_and_grad`` where a sparse argument is differentiated with respect to its stored values.

    The gradient of a sparse argument is a sparse array with the argument's indices.
    """
    run = _sparse_ad(_reverse.value_and_grad, fun, argnums, has_aux, kwargs)

    def wrapped(*args: Any) -> Any:
        (val, g), templates, single = run(*args)
        return val, _post(g, templates, single)

    return wrapped


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, **kwargs: Any) -> Callable:
    """``grad`` where a sparse argument is differentiated with respect to its stored values."""
    run = _sparse_ad(_reverse.grad, fun, argnums, has_aux, kwargs)

    def wrapped(*args: Any) -> Any:
        out, templates, single = run(*args)
        if has_aux:
            return _post(out[0], templates, single), out[1]
        return _post(out, templates, single)

    return wrapped


def _jacobian(transform: Callable, fun: Callable, argnums: int | Sequence[int], has_aux: bool,
              kwargs: dict) -> Callable:
    run = _sparse_ad(transform, fun, argnums, has_aux, kwargs)

    def wrapped(*args: Any) -> Any:
        out, templates, single = run(*args)
        if has_aux:
            return _post(out[0], templates, single), out[1]
        return _post(out, templates, single)

    return wrapped


def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, **kwargs: Any) -> Callable:
    """``jacfwd`` where a sparse argument is differentiated with respect to its stored values (dense outputs)."""
    return _jacobian(_reverse.jacfwd, fun, argnums, has_aux, kwargs)


def jacrev(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, **kwargs: Any) -> Callable:
    """``jacrev`` where a sparse argument is differentiated with respect to its stored values (dense outputs)."""
    return _jacobian(_reverse.jacrev, fun, argnums, has_aux, kwargs)


jacobian = jacrev
