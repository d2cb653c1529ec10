"""``check``, ``debug_check`` and ``check_error``: the ``check`` primitive and its rules.

``check_error(err)`` binds the ``check`` primitive on the leaves of an :class:`Error` (its structure,
keys and messages, is the ``err_tree`` parameter); ``check(pred, msg, ...)`` is ``check_error`` of a
one-check error. The primitive is an effect with no results:

* eagerly (its NumPy rule) it raises :class:`JaxRuntimeError` with the first error's message;
* under ``jvp``/``grad`` it checks the primal values and has no tangent;
* under ``vmap`` the batched error is reduced to its first failing element and checked;
* staged by ``jit`` (or a control-flow body) it cannot run: lowering it is JAX's ``ValueError``
  saying to functionalize it with ``checkify.checkify`` first (a ``debug_check`` lowers to nothing);
* ``checkify`` removes it, merging its error into the functional error value
  (``_transform.py``).

The rules sit beside the primitive because the primitive belongs to this experimental module (the
rule tables are the transforms' own; this module only registers into them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import pytrees as tree_util
from ftrans.core.ir import effectful_primitives
from ftrans.core.primitive import Primitive, never_weak
from ftrans.errors import FtransTypeError, FtransValueError, user_location
from ftrans.experimental.checkify._errors import (
    Error,
    FailedCheckError,
    JaxRuntimeError,
    assert_func,
    init_error,
)
from ftrans.lowering.lower import register_lowering
from ftrans.transforms.ad import register_jvp
from ftrans.transforms.batching import broadcast_batch, moveaxis, not_mapped, register_batching
from ftrans.transforms.transpose import register_transpose

__all__ = ["check", "debug_check", "check_error", "check_p", "ErrTree", "reduce_any_error"]


class ErrTree:
    """The ``err_tree`` parameter of ``check``: the pytree structure of the Error whose leaves are the
    operands (its keys and its messages). Equal when the structures are."""

    __slots__ = ("treedef",)

    def __init__(self, treedef: Any):
        self.treedef = treedef

    def unflatten(self, leaves: Any) -> Error:
        return tree_util.tree_unflatten(self.treedef, list(leaves))

    def sites(self) -> str:
        err = self.unflatten([None] * self.treedef.num_leaves)
        wheres = sorted({m.where for m in err._metadata.values() if m.where})
        return ", ".join(wheres) or "<unknown location>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ErrTree) and self.treedef == other.treedef

    def __hash__(self) -> int:
        return hash(self.treedef)

    def __repr__(self) -> str:
        err = self.unflatten([None] * self.treedef.num_leaves)
        return "{" + ", ".join(f"{c}: {type(m).__name__}" for c, m in sorted(err._metadata.items())) + "}"


check_p = Primitive("check", multiple_results=True)
check_p.def_weak_type(never_weak)
effectful_primitives.add(check_p)


@check_p.def_abstract_eval
def _check_abstract(*avals: Any, err_tree: ErrTree, debug: bool) -> list:
    return []


@check_p.def_impl
def _check_impl(*vals: Any, err_tree: ErrTree, debug: bool) -> list:
    if debug:  # a debug_check only acts when checkify functionalizes it
        return []
    exc = err_tree.unflatten(vals).get_exception()
    if exc is not None:
        raise JaxRuntimeError(str(exc)) from exc
    return []


@register_jvp(check_p)
def _check_jvp(primals: list, tangents: list, **params: Any) -> tuple[list, list]:
    check_p.bind(*primals, **params)  # the primal values are checked; nothing to differentiate
    return [], []


@register_transpose(check_p)
def _check_transpose(cts: list, *args: Any, **params: Any) -> list:
    return [None] * len(args)  # no results, so no cotangent for anything


@register_batching(check_p)
def _check_batch(vals: list, dims: list, *, frame: Any, err_tree: ErrTree, debug: bool) -> tuple[list, list]:
    size = next(np.shape(v)[d] for v, d in zip(vals, dims) if d is not not_mapped)
    front = [broadcast_batch(v, size, 0) if d is not_mapped else moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    _check_error(err_tree.unflatten(front), debug)
    return [], []


@register_lowering(check_p)
def _check_lowering(ctx: Any, *args: str, err_tree: ErrTree, debug: bool) -> list[str]:
    if debug:
        return []
    raise FtransValueError(
        "Cannot abstractly evaluate a checkify.check which was not functionalized: the check at "
        f"{err_tree.sites()} is inside a staged program (jit, scan, while_loop, cond, pmap, ...) with no "
        "checkify.checkify around it. Wrap the function in checkify.checkify (then read or raise the error it "
        "returns with err.get() / err.throw()), or use checkify.debug_check, which is dropped when not checkified")


def reduce_any_error(err: Error) -> Error:
    """A batched error (leading axes on every leaf) reduced to its first failing element, per key."""
    from ftrans import numpy as jnp

    pred, code, payload = {}, {}, {}
    for k in err._pred:
        p = jnp.asarray(err._pred[k])
        batch = p.ndim
        flat = jnp.reshape(p, (-1,))
        i = jnp.argmax(flat)
        pred[k] = flat[i]
        code[k] = jnp.reshape(jnp.asarray(err._code[k]), (-1,))[i]
        payload[k] = tuple(jnp.reshape(jnp.asarray(v), (-1, *np.shape(v)[batch:]))[i] for v in err._payload[k])
    return Error(pred, code, err._metadata, payload)


def _check_error(err: Error, debug: bool = False) -> None:
    if any(np.ndim(v) for v in err._pred.values()):
        err = reduce_any_error(err)
    leaves, treedef = tree_util.tree_flatten(err)
    check_p.bind(*leaves, err_tree=ErrTree(treedef), debug=bool(debug))


def check_error(error: Error) -> None:
    """Raise ``error`` (a :class:`JaxRuntimeError` with its message) if it holds one.

    Like ``check``, this is an effect that ``checkify`` functionalizes: inside a checkified function
    the error is merged into the returned one instead of raised, so an ``Error`` made by an inner
    ``checkify`` (under ``jit``, or stacked by ``scan``) can be re-raised or passed outwards."""
    if not isinstance(error, Error):
        raise FtransTypeError(f"check_error takes an Error as argument, got type {type(error)} instead")
    _check_error(error)


def _is_scalar_pred(pred: Any) -> bool:
    from ftrans.core.array import Array
    from ftrans.core.trace import Tracer

    return isinstance(pred, bool) or (isinstance(pred, (Array, Tracer)) and pred.shape == ()
                                      and pred.dtype == np.dtype(bool))


def _check(pred: Any, msg: str, debug: bool, fmt_args: tuple, fmt_kwargs: dict) -> None:
    from ftrans import numpy as jnp
    from ftrans.core.array import Array
    from ftrans.core.trace import Tracer

    if not _is_scalar_pred(pred):
        name = "debug_check" if debug else "check"
        raise FtransTypeError(f"{name} takes a scalar pred as argument, got {pred!r}: reduce it first "
                              "(jnp.all(x > 0), say)")
    leaves, tree = tree_util.tree_flatten((fmt_args, fmt_kwargs))
    for a in leaves:
        if not isinstance(a, (Array, Tracer, np.ndarray)):
            raise FtransTypeError(f"Formatting arguments to checkify.check need to be PyTrees of arrays, but got "
                                  f"{a!r} of type {type(a)}; pass jnp.asarray(...) of it, or put it in the message")
    site = FailedCheckError(user_location(), str(msg), tree)
    err = assert_func(init_error, jnp.logical_not(pred), site, tuple(jnp.asarray(a) for a in leaves))
    _check_error(err, debug)


def check(pred: Any, msg: str, *fmt_args: Any, debug: bool = False, **fmt_kwargs: Any) -> None:
    """Fail with ``msg`` when ``pred`` (a scalar boolean) is False.

    ``msg`` is a format string filled with ``fmt_args``/``fmt_kwargs`` (pytrees of arrays, traced
    ones included) at run time. Outside any transform a failing check raises
    :class:`JaxRuntimeError` at once; inside ``jit`` or a control-flow body it must be
    functionalized with :func:`checkify` (otherwise compiling raises a ``ValueError``)."""
    _check(pred, msg, debug, fmt_args, fmt_kwargs)


def debug_check(pred: Any, msg: str, *fmt_args: Any, **fmt_kwargs: Any) -> None:
    """A ``check`` that only acts under :func:`checkify` and is dropped everywhere else (eagerly, under
    ``jit``, ``vmap``, ``grad``)."""
    _check(pred, msg, True, fmt_args, fmt_kwargs)
