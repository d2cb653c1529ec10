"""Reverse mode and the derivative API built on it.

``vjp`` = ``linearize`` (``partial_eval.linearize_flat``) + ``backward_pass``
(``transpose.py``).  ``grad``/``value_and_grad`` seed the pullback with 1.0;
``jacrev`` runs the pullback once per output element, ``jacfwd`` the JVP once
per input element, ``hessian`` is ``jacfwd(jacrev)``.  ``linearize`` and
``linear_transpose`` expose the two halves.  Every pullback is an ordinary
function of its cotangent, so ``make_jaxpr`` of it prints the backward program.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import building, dtypes
from ftrans.core import pytrees as tree_util
from ftrans.core import ref as _ref
from ftrans.core import traceback_util as _tb
from ftrans.core.array import Array, jax_array_argument, jax_array_argument_error
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr, Jaxpr, dce_jaxpr
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.operands import dtype_weak
from ftrans.core.prims import structural as S
from ftrans.core.prims.elementwise import real_p
from ftrans.core.trace import (
    Tracer,
    aval_of,
    check_outputs,
    describe_pair_candidate,
    invalid_value_error,
    is_eager,
    is_jax_value,
    stage,
    transform_name_stack,
)
from ftrans.core.trace import state as _trace_state
from ftrans.core.wrapping import fun_name, wraps
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.transforms.ad import (
    float0,
    given_scalars,
    instantiate,
    is_python_scalar,
    jvp,
    rewritten_primal,
    tangent_aval,
)
from ftrans.transforms.partial_eval import linearize_flat
from ftrans.transforms.transpose import UndefinedPrimal, backward_pass

__all__ = ["vjp", "fwd_and_bwd", "grad", "value_and_grad", "linearize", "linear_transpose", "jacfwd", "jacrev", "hessian"]


def _fname(fun: Callable) -> str:
    return fun_name(fun, type(fun).__name__)


_DOCS = {
    "grad": "Gradient of {fun} with respect to positional argument(s) {argnums}. Takes the same arguments as "
            "{fun} but returns the gradient, which has the same shape as the arguments at positions {argnums}.",
    "value_and_grad": "Value and gradient of {fun} with respect to positional argument(s) {argnums}. Takes the "
                      "same arguments as {fun} but returns a two-element tuple where the first element is the "
                      "value of {fun} and the second element is the gradient, which has the same shape as the "
                      "arguments at positions {argnums}.",
    "jac": "Jacobian of {fun} with respect to positional argument(s) {argnums}. Takes the same arguments as {fun} "
           "but returns the jacobian of the output with respect to the arguments at positions {argnums}.",
}


def _describe(wrapper: Callable, fun: Callable, kind: str, argnums: Any) -> Callable:
    """Give a differentiated function JAX's docstring for it (what it computes, of which function)."""
    if not isinstance(argnums, int):
        argnums = tuple(argnums)
    wrapper.__doc__ = _DOCS[kind].format(fun=_fname(fun), argnums=argnums)
    return wrapper


def _operand(where: str, path: str, x: Any) -> Any:
    from ftrans.core.operands import as_operand

    if isinstance(x, (Array, Tracer)):
        return x
    if jax_array_argument(x):
        raise jax_array_argument_error(f"{where}: argument {path}")
    try:
        return as_operand(x)
    except TypeError:
        raise invalid_value_error(f"{where}: argument {path}", x) from None


def _float0_zeros(aval: ShapedArray) -> np.ndarray:
    return np.zeros(aval.shape, float0)


class NotNeeded:
    """Stands in ``vjp``'s ``args_res`` for a primal input the backward pass does not read (JAX's
    ``api.NotNeeded``): a pytree with no leaves."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NotNeeded)

    def __hash__(self) -> int:
        return hash(NotNeeded)

    def __repr__(self) -> str:
        return "NotNeeded()"


tree_util.register_pytree_node(NotNeeded, lambda _: ((), None), lambda _aux, _children: NotNeeded())


def _is_not_needed(x: Any) -> bool:
    return isinstance(x, NotNeeded)


class _Marker:
    """A stateless tag (JAX's ``jax.ad`` classes): every instance equals every other of its class."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class GradValue(_Marker):
    """``pullback.with_refs`` argument: return this input's cotangent (what a plain call does)."""


class DontWant(_Marker):
    """``pullback.with_refs`` argument: this input's cotangent is not wanted, so the backward pass
    leaves out the work that only it needs; the pullback returns :class:`DidntWant` in its place."""


class DidntWant(_Marker):
    """What a ``with_refs`` pullback returns for an input marked :class:`DontWant` (a pytree with no
    leaves, so it can leave a ``jit``)."""


class GradRef(_Marker):
    """What a ``with_refs`` pullback returns for an input whose cotangent it added into the ref it was
    given (a pytree with no leaves)."""


for _cls in (DidntWant, GradRef):
    tree_util.register_pytree_node(_cls, lambda _: ((), None), lambda _aux, _children, _c=_cls: _c())


def _wants_of(name: str, in_tree: Any, wants: tuple) -> tuple:
    """One flag per input leaf, from ``with_refs``'s arguments (one per positional primal, each a
    ``GradValue()``, ``DontWant()`` or a ref to add the cotangent into, or a pytree of them matching
    that primal; any other non-array placeholder counts as ``GradValue()``, as in JAX): True, False, or
    the ref (which counts as wanted)."""
    leaves, tree = tree_util.tree_flatten(wants, is_leaf=lambda x: isinstance(x, (_Marker, _ref.Ref)))
    if tree != in_tree:
        raise FtransValueError(
            f"{name}.with_refs: expected one GradValue() or DontWant() per primal input leaf, structured "
            f"as the primals ({in_tree}), got {tree}")
    out = []
    for i, x in enumerate(leaves):
        if isinstance(x, (GradValue, DontWant)):
            out.append(isinstance(x, GradValue))
        elif isinstance(x, _ref.Ref):
            out.append(x)  # the cotangent is added into this ref
        elif hasattr(x, "aval") or hasattr(x, "shape"):
            raise FtransTypeError(
                f"{name}.with_refs: input {i} is given an array; to accumulate its cotangent pass a ref "
                "(ftrans.new_ref(jnp.zeros_like(x))), else GradValue() or DontWant()")
        else:  # any other placeholder asks for the value, as JAX's with_refs reads it
            out.append(True)
    return tuple(out)


def _split_residuals(lin: ClosedJaxpr, leaves: list, in_tree: Any) -> tuple[Jaxpr, list, list, list[int]]:
    """Sort a linear jaxpr's residuals into the primal inputs they are and the rest, as JAX's ``vjp`` does.

    Returns ``(jaxpr, args_res, opaque_residuals, used)``: ``jaxpr`` is the linear program with its
    constvars reordered to the inputs it reads (in argument order) followed by the other residuals;
    ``args_res`` has one entry per positional primal, that argument with its containers as tuples and each
    leaf either the input (a residual) or :class:`NotNeeded`; ``opaque_residuals`` lists the other
    residuals; ``used`` the indices of the input leaves that are residuals.
    """
    pos = {id(x): i for i, x in enumerate(leaves)}
    j = lin.jaxpr
    by_leaf: dict[int, Any] = {}
    opaque: list = []
    opaque_vars: list = []
    for v, c in zip(j.constvars, lin.consts):
        i = pos.get(id(c))
        if i is not None and i not in by_leaf:
            by_leaf[i] = v
        else:
            opaque_vars.append(v)
            opaque.append(c)
    used = sorted(by_leaf)
    if by_leaf:
        j = Jaxpr([by_leaf[i] for i in used] + opaque_vars, j.invars, j.eqns, j.outvars)
    tagged = [x if i in by_leaf else NotNeeded() for i, x in enumerate(leaves)]
    as_tuples = in_tree.walk(lambda xs, _: tuple(xs), lambda x: x, tagged)
    return j, list(as_tuples), opaque, used


class _Pullback:
    """The function ``vjp`` returns: cotangents of the outputs -> cotangents of the primals.

    Like JAX's (``api.VJP``) it keeps its residuals in two public lists: ``args_res``, one entry per
    positional primal holding the inputs the backward pass reads (the others :class:`NotNeeded`), and
    ``opaque_residuals``, everything else it saved.  A caller may drop an input from ``args_res`` (set
    it to ``None``) while it holds the pullback and put it back before calling it, so a large input
    (a sharded weight) need not stay alive twice.  It is a pytree whose leaves are those two lists, so a
    pullback can be returned from ``jit``, passed into one, carried through ``scan``/``while_loop`` and
    called later.
    """

    def __init__(self, name: str, jaxpr: Jaxpr, diff: list[bool], zero_out: list[bool], in_avals: list,
                 in_tree: Any, out_avals: list, out_tree: Any, args_res: list, opaque_residuals: list,
                 used: list[int], wants: tuple[bool, ...] | None = None):
        self._name = name
        self._wants = wants  # None: every input's cotangent; else one flag per input leaf (with_refs)
        self._jaxpr = jaxpr
        self._diff = diff
        self._zero_out = zero_out
        self._in_avals = in_avals
        self._in_tree = in_tree
        self._out_avals = out_avals
        self._out_tree = out_tree
        self._used = used  # the primal input leaves that are residuals, in order (the leading constvars)
        self.args_res = args_res
        self.opaque_residuals = opaque_residuals
        self.__name__ = f"vjp({name})"

    @classmethod
    def _of(cls, name: str, lin: ClosedJaxpr, diff: list[bool], zero_out: list[bool], leaves: list,
            in_tree: Any, out_avals: list, out_tree: Any) -> _Pullback:
        jaxpr, args_res, opaque, used = _split_residuals(lin, leaves, in_tree)
        return cls(name, jaxpr, diff, zero_out, _primal_avals(leaves), in_tree, out_avals, out_tree,
                   args_res, opaque, used)

    def _residuals(self) -> list:
        if not self._used:
            return list(self.opaque_residuals)
        args = tree_util.tree_leaves(self.args_res, is_leaf=_is_not_needed)
        if len(args) != len(self._in_avals):
            raise FtransValueError(
                f"{self.__name__}: args_res must hold the {len(self._in_avals)} primal input(s) it was built "
                f"with (put back every input that was removed before calling it), but it has {len(args)} leaves")
        out = []
        for i in self._used:
            x = args[i]
            if isinstance(x, NotNeeded):
                raise FtransValueError(
                    f"{self.__name__}: the backward pass reads primal input {i}, but args_res holds "
                    f"{x!r} there; put the input back before calling the pullback")
            x = _operand(self.__name__, f"args_res leaf {i}", x)
            got, want = aval_of(x), self._in_avals[i]
            if (tuple(got.shape), got.dtype) != (tuple(want.shape), want.dtype):
                raise FtransValueError(
                    f"{self.__name__}: args_res leaf {i} has type {got.str_short()} but the primal input it "
                    f"replaces had type {want.str_short()}")
            out.append(x)
        return out + list(self.opaque_residuals)

    @property
    def linear_jaxpr(self) -> ClosedJaxpr:
        """The linearized forward program this pullback transposes (its constants are the residuals)."""
        return ClosedJaxpr(self._jaxpr, self._residuals())

    @property
    def jaxpr(self) -> Jaxpr:
        """JAX's ``VJP.jaxpr``: the linear program (its constvars are the residuals)."""
        return self._jaxpr

    def with_refs(self, *wants: Any) -> _Pullback:
        """JAX's ``VJP.with_refs``: this pullback, told per primal input whether its cotangent is
        wanted (``GradValue()``) or not (``DontWant()``).  The backward pass is then staged, the work
        only unwanted cotangents need is dropped from it (dead-code elimination), and the result has
        ``DidntWant()`` for those inputs.  JAX also accepts a mutable ref there to accumulate into;
        ftrans has no refs and says so."""
        flags = _wants_of(self.__name__, self._in_tree, wants)
        return _Pullback(self._name, self._jaxpr, list(self._diff), list(self._zero_out), list(self._in_avals),
                         self._in_tree, list(self._out_avals), self._out_tree, self.args_res,
                         self.opaque_residuals, list(self._used), flags)

    def _backward(self, cts: list) -> list:
        """One cotangent per differentiable input (symbolic zeros allowed); with ``with_refs``
        flags, the unwanted ones are None and nothing is computed for them alone."""
        j = self._jaxpr
        res = self._residuals()
        if self._wants is None or all(w is not False for w in self._wants):
            args = [UndefinedPrimal(v.aval) for v in j.invars]
            with transform_name_stack("transpose"):
                return list(backward_pass(j, res, args, cts))
        wanted = [w is not False for w, d in zip(self._wants, self._diff) if d]

        def bwd(*cts_in: Any) -> list:
            args = [UndefinedPrimal(v.aval) for v in j.invars]
            with transform_name_stack("transpose"):
                outs = backward_pass(j, res, args, list(cts_in))
            return [instantiate(c) for c, w in zip(outs, wanted) if w]

        closed, _ = stage(bwd, [aval_of(c) for c in cts])
        pruned, _ = dce_jaxpr(closed.jaxpr, [True] * len(closed.jaxpr.outvars))
        got = iter(eval_jaxpr(ClosedJaxpr(pruned, closed.consts), closed.consts, *cts))
        return [next(got) if w else None for w in wanted]

    @_tb.api_boundary
    def __call__(self, ct: Any, *extra: Any) -> tuple:
        if extra:
            raise FtransTypeError(
                f"vjp({self._name}) pullback: the function returned by vjp applied to {self._name} was called "
                f"with {1 + len(extra)} arguments, but it takes one, the cotangent of {self._name}'s output "
                f"(structured as that output, {self._out_tree}: when {self._name} returns a tuple, pass one "
                "tuple of cotangents)")
        leaves, tree = tree_util.tree_flatten(ct)
        if tree != self._out_tree:  # JAX raises ValueError for a wrong cotangent (structure, shape, dtype)
            raise FtransValueError(
                f"vjp({self._name}) pullback: unexpected tree structure of the cotangent: it must have the "
                f"structure of the function's output, {self._out_tree}, but it has structure {tree}"
            )
        cts = []
        for i, (c, want, z) in enumerate(zip(leaves, self._out_avals, self._zero_out)):
            tan = tangent_aval(want)
            if tan.dtype == float0:
                continue  # integer outputs: their cotangent carries nothing
            given = c if is_python_scalar(c) else None  # (the user's bwd sees it as given, as in JAX)
            c = _operand(f"vjp({self._name}) pullback", f"cotangent[{i}]", c)
            got = aval_of(c)
            if tuple(got.shape) != tuple(tan.shape):
                raise FtransValueError(
                    f"vjp({self._name}) pullback: unexpected JAX type (shape/dtype) for the cotangent: "
                    f"cotangent {i} has shape {tuple(got.shape)} but the output it belongs to has shape "
                    f"{tuple(tan.shape)} (dtype {tan.dtype.name})"
                )
            if got.dtype != tan.dtype:
                raise FtransValueError(
                    f"vjp({self._name}) pullback: unexpected JAX type (shape/dtype) for the cotangent: "
                    f"cotangent {i} has dtype {got.dtype.name} but the output it belongs to has dtype "
                    f"{tan.dtype.name}; convert it with .astype"
                )
            if not z:
                cts.append(c if given is None or self._wants is not None else given)
        in_cts = iter(self._backward(cts))
        wants = self._wants or (True,) * len(self._in_avals)
        out: list = []
        for aval, d, w in zip(self._in_avals, self._diff, wants):
            ct_in = next(in_cts) if d else None
            if w is False:
                out.append(DidntWant())
            elif isinstance(w, _ref.Ref):  # with_refs: accumulate into the ref given for this input
                if d:
                    w.addupdate(instantiate(ct_in))
                out.append(GradRef())
            else:
                out.append(_typed_as_primal(instantiate(ct_in), aval) if d else _float0_zeros(tangent_aval(aval)))
        return tree_util.tree_unflatten(self._in_tree, out)


def _primal_avals(leaves: list) -> list:
    """The primal inputs' abstract values, typed where an input is laid out over Explicit mesh axes."""
    from ftrans.core.sharding_rules import array_aval

    return [array_aval(x) for x in leaves]


def _typed_as_primal(ct: Any, aval: ShapedArray) -> Any:
    """An eagerly computed cotangent laid out as its primal's sharding type (JAX's cotangents have their
    primals' types); under a trace, or for an untyped primal, as it is."""
    sh = aval.typed_sharding
    if sh is not None and (sh.spec.unreduced or sh.spec.reduced):  # JAX's cotangent type: the sets swapped
        sh = sh.update(spec=sh.spec.to_ct_spec())
    if sh is None or not isinstance(ct, Array) or not is_eager() or getattr(ct, "sharding", None) == sh:
        return ct
    from ftrans.devices import device_put

    return device_put(ct, sh)


def _pullback_flatten(pb: _Pullback) -> tuple[tuple, tuple]:
    aux = (pb._name, pb._jaxpr, tuple(pb._diff), tuple(pb._zero_out), tuple(pb._in_avals), pb._in_tree,
           tuple(pb._out_avals), pb._out_tree, tuple(pb._used), pb._wants)
    return (pb.args_res, pb.opaque_residuals), aux


def _pullback_unflatten(aux: tuple, children: Any) -> _Pullback:
    name, jaxpr, diff, zero_out, in_avals, in_tree, out_avals, out_tree, used, wants = aux
    args_res, opaque = children
    return _Pullback(name, jaxpr, list(diff), list(zero_out), list(in_avals), in_tree, list(out_avals), out_tree,
                     list(args_res), list(opaque), list(used), wants)


tree_util.register_pytree_node(_Pullback, _pullback_flatten, _pullback_unflatten)


def _vjp_flat_setup(fun: Callable, primals: tuple, has_aux: bool, where: str):
    leaves_paths, in_tree = tree_util.tree_flatten_with_path(tuple(primals))
    leaves = [_operand(where, "primals" + tree_util.keystr(p), x) for p, x in leaves_paths]
    out_tree_box: list = []
    name = _fname(fun)

    def flat_fun(*ins: Any) -> tuple[list, Any]:
        args = tree_util.tree_unflatten(in_tree, ins)
        out = fun(*args)
        aux = None
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise FtransTypeError(
                    f"{where}({name}) with has_aux=True: the function must return a pair: a two-element tuple (output, "
                    f"aux), got {describe_pair_candidate(out)}"
                )
            out, aux = out
        flat, tree = tree_util.tree_flatten(out)
        if not all(map(is_jax_value, flat)):
            check_outputs(out, fun, where)
        out_tree_box.append(tree)
        return flat, aux

    return leaves, in_tree, flat_fun, out_tree_box


@_tb.api_boundary
def vjp(fun: Callable, *primals: Any, has_aux: bool = False, reduce_axes: Sequence = ()) -> tuple:
    """JAX's ``vjp``: ``(fun(*primals), pullback)`` (and ``aux``), the pullback mapping output cotangents to
    a tuple with one cotangent per primal.

    The pullback is a pytree whose leaves are the residuals (as JAX's ``tree_util.Partial``), so it can be
    returned from ``jit``, passed into one, or carried through ``scan``/``while_loop``."""
    if reduce_axes:
        raise NotImplementedError("vjp: reduce_axes is not supported (it was removed from JAX too)")
    if not callable(fun):
        raise FtransTypeError(f"vjp: expected a function as the first argument, got {type(fun).__name__}")
    if any(_passed_through(x) for x in tree_util.tree_leaves(primals)):
        return _vjp_with_ref_primals(fun, primals, has_aux)
    leaves, in_tree, flat_fun, out_tree_box = _vjp_flat_setup(fun, primals, has_aux, "vjp")
    given = given_scalars(tree_util.tree_leaves(tuple(primals)))
    p_out, lin, diff, zero_out, aux = linearize_flat(rewritten_primal(flat_fun, leaves, out_tree_box), leaves,
                                                     given, transform="jvp")
    out_tree = out_tree_box[0]
    out_avals = [ShapedArray(x.shape, float0) if isinstance(x, np.ndarray) and x.dtype == float0 else aval_of(x)
                 for x in p_out]
    pullback = _Pullback._of(_fname(fun), lin, diff, zero_out, leaves, in_tree, out_avals, out_tree)
    out = tree_util.tree_unflatten(out_tree, p_out)
    if has_aux:
        return out, pullback, aux
    return out, pullback


def _passed_through(x: Any) -> bool:
    """A primal ``vjp`` hands to the function undifferentiated: a mutable ref, or a ``float0`` array (the
    cotangent of an integer value, as a pullback's own argument in a higher-order ``vjp``)."""
    return (_ref.created and isinstance(x, _ref.Ref)) or (isinstance(x, np.ndarray) and x.dtype == float0)


def _vjp_with_ref_primals(fun: Callable, primals: tuple, has_aux: bool) -> tuple:
    """``vjp`` with mutable refs (or ``float0`` arrays) among the primals: they are passed through to ``fun``
    undifferentiated (a ``custom_vjp`` inside may save a ref for its backward pass), and the pullback gives,
    in a ref's place, a fresh ref holding a zero cotangent, in a ``float0`` array's place ``float0`` zeros,
    as JAX's does."""
    leaves, tree = tree_util.tree_flatten(tuple(primals))
    is_ref = [_passed_through(x) for x in leaves]

    def rebuilt(vals: Sequence) -> list:
        it = iter(vals)
        return [x if r else next(it) for x, r in zip(leaves, is_ref)]

    def g(*vals: Any) -> Any:
        return fun(*tree_util.tree_unflatten(tree, rebuilt(vals)))

    g.__name__ = _fname(fun)
    got = vjp(g, *[x for x, r in zip(leaves, is_ref) if not r], has_aux=has_aux)
    pb = got[1]

    def pullback(ct: Any) -> tuple:
        it = iter(pb(ct))
        out = [(np.zeros(x.shape, float0) if isinstance(x, np.ndarray) else
                _ref.new_ref(Array._new(np.zeros(x.shape, x.dtype), x.weak_type))) if r else next(it)
               for x, r in zip(leaves, is_ref)]
        return tuple(tree_util.tree_unflatten(tree, out))

    return (got[0], pullback, *got[2:])


# ----------------------------------------------------------------------------
# grad and value_and_grad


def _argnums_tuple(argnums: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(argnums, int):
        return (argnums,)
    try:
        t = tuple(argnums)
    except TypeError:
        raise FtransTypeError(f"argnums must be an int or a sequence of ints, got {argnums!r}") from None
    if not all(isinstance(i, int) for i in t):
        raise FtransTypeError(f"argnums must be an int or a sequence of ints, got {argnums!r}")
    return t


def _refuse_strings(where: str, path: str, aval: ShapedArray) -> None:
    """A string array (refused as an input below) is no JAX value at all: JAX's error for that first."""
    from ftrans.core import strings

    if strings.is_string_dtype(aval.dtype):
        raise FtransTypeError(f"Argument {path} of type {aval.str_short()} is not a valid JAX type: {where} "
                              "takes no string arrays (they hold data only)")


def _check_input_dtype(where: str, path: str, aval: ShapedArray, holomorphic: bool, allow_int: bool) -> None:
    # Each message opens with JAX's sentence (what users and JAX's tests match on), then says which argument.
    d = aval.dtype
    if holomorphic:
        if not dtypes.issubdtype(d, np.complexfloating):
            _refuse_strings(where, path, aval)
            raise FtransTypeError(
                f"{where} with holomorphic=True requires inputs with complex dtype, but got {d.name} "
                f"(argument {path})"
            )
        return
    if where == "jacfwd":  # JAX's jacfwd: real inputs only (complex ones need holomorphic=True), no allow_int
        if not dtypes.issubdtype(d, np.floating):
            _refuse_strings(where, path, aval)
            raise FtransTypeError(
                f"jacfwd requires real-valued inputs (input dtype that is a sub-dtype of np.floating), but got "
                f"{d.name} (argument {path}). For complex inputs of a holomorphic function pass "
                "holomorphic=True; otherwise use jvp directly, or leave the argument out of argnums."
            )
        return
    if dtypes.issubdtype(d, np.inexact):
        return
    if allow_int and (dtypes.issubdtype(d, np.integer) or d == np.bool_):
        return
    _refuse_strings(where, path, aval)
    raise FtransTypeError(
        f"{where} requires real- or complex-valued inputs (input dtype that is a sub-dtype of np.inexact), but "
        f"got {d.name} (argument {path}). To differentiate with respect to an integer or bool input, pass "
        "allow_int=True (its gradient is a float0 zero), or use vjp; to leave it out, change argnums."
    )


def _check_jac_outputs(where: str, name: str, avals: list[ShapedArray], holomorphic: bool) -> None:
    """JAX's output rules: holomorphic needs complex outputs; jacrev otherwise needs real floating ones."""
    for i, a in enumerate(avals):
        d = a.dtype
        if holomorphic and not dtypes.issubdtype(d, np.complexfloating):
            raise FtransTypeError(
                f"{where} with holomorphic=True requires outputs with complex dtype, but got {d.name} "
                f"(output {i} of {name})"
            )
        if not holomorphic and where == "jacrev" and not dtypes.issubdtype(d, np.floating):
            raise FtransTypeError(
                f"{where} requires real-valued outputs (output dtype that is a sub-dtype of np.floating), but "
                f"got {d.name} (output {i} of {name}, shape {tuple(a.shape)}). For complex outputs of a "
                "holomorphic function pass holomorphic=True; otherwise use vjp directly."
            )


def _check_scalar_output(where: str, name: str, out: Any, holomorphic: bool) -> None:
    # As JAX's, the messages open with "Gradient only defined for scalar-output functions." and with
    # "grad requires real-valued outputs ..." (what users and JAX's tests match on).
    leaves = tree_util.tree_leaves(out)
    if len(leaves) != 1 or not isinstance(leaves[0], (Array, Tracer, np.ndarray, np.generic, float, int, complex)):
        raise FtransTypeError(
            f"Gradient only defined for scalar-output functions. Output was {_short_repr(out)}. "
            f"{where}({name}) needs the function to return a single scalar array; use jacrev or vjp for "
            "other outputs"
        )
    aval = aval_of(leaves[0])
    if aval.shape != ():
        raise FtransTypeError(
            f"Gradient only defined for scalar-output functions. Output had shape: {tuple(aval.shape)}. "
            f"{where}({name}): reduce the output to a scalar (e.g. .sum()), or use jacrev (the full "
            "Jacobian) or vjp (a cotangent of your choice)."
        )
    d = aval.dtype
    if holomorphic:
        if not dtypes.issubdtype(d, np.complexfloating):
            raise FtransTypeError(
                f"{where} with holomorphic=True requires outputs with complex dtype, but got {d.name} "
                f"(the output of {name})"
            )
    elif not dtypes.issubdtype(d, np.floating):
        raise FtransTypeError(
            f"{where} requires real-valued outputs (output dtype that is a sub-dtype of np.floating), but got "
            f"{d.name} (the output of {name}). For a complex output pass holomorphic=True, or use vjp (or "
            "jacrev) directly."
        )


def _short_repr(out: Any) -> str:
    """The returned value for an error message: its repr, or its type and leaf count when that is long."""
    try:
        r = repr(out)
    except Exception:  # noqa: BLE001 - a repr that fails: describe the value instead
        r = ""
    if r and len(r) <= 200:
        return r
    return f"a {type(out).__name__} with {len(tree_util.tree_leaves(out))} leaves"


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False, allow_int: bool = False,
                   reduce_axes: Sequence = ()) -> Callable[..., Any]:
    """JAX's ``value_and_grad``: a function returning ``(fun(*args), gradient)`` (``((value, aux), grad)`` with
    ``has_aux``); the gradient has the structure of the ``argnums`` arguments."""
    if reduce_axes:
        raise NotImplementedError("value_and_grad: reduce_axes is not supported (it was removed from JAX too)")
    if not callable(fun):
        raise FtransTypeError(f"value_and_grad: expected a function, got {type(fun).__name__}")
    nums = _argnums_tuple(argnums)
    name = _fname(fun)
    return _make_value_and_grad(fun, name, argnums, nums, has_aux, holomorphic, allow_int, "value_and_grad")


def _make_value_and_grad(fun: Callable, name: str, argnums: Any, nums: tuple, has_aux: bool, holomorphic: bool,
                         allow_int: bool, where: str) -> Callable:
    @wraps(fun)
    @_tb.api_boundary
    def value_and_grad_f(*args: Any, **kwargs: Any) -> Any:
        n = len(args)
        for i in nums:
            if not -n <= i < n:  # like JAX: TypeError for too few arguments, ValueError for i < -n
                raise (FtransTypeError if i >= 0 else FtransValueError)(
                    f"{where}({name}): differentiating with respect to argnums={argnums} requires at least "
                    f"{max(nums) + 1 if i >= 0 else -i} positional arguments to be passed by the caller, but "
                    f"got only {n} positional arguments."
                )
        idx = tuple(i % n for i in nums)
        dyn = tuple(args[i] for i in idx)
        for i, a in zip(idx, dyn):
            for p, leaf in tree_util.tree_flatten_with_path(a)[0]:
                _check_input_dtype(where, f"{i}{tree_util.keystr(p)}", _leaf_aval(where, i, leaf),
                                   holomorphic, allow_int)

        def restricted(*d: Any) -> Any:
            full = list(args)
            for i, v in zip(idx, d):
                full[i] = v
            return fun(*full, **kwargs)

        restricted.__name__ = name  # errors raised while tracing name the user's function
        restricted.__wrapped__ = fun  # ... and point at its definition
        leaves, in_tree, flat_fun, out_tree_box = _vjp_flat_setup(restricted, dyn, has_aux, where)
        p_out, lin, diff, zero_out, aux = linearize_flat(rewritten_primal(flat_fun, leaves, out_tree_box), leaves,
                                                         given_scalars(tree_util.tree_leaves(tuple(dyn))),
                                                         transform="jvp")
        out = tree_util.tree_unflatten(out_tree_box[0], p_out)
        _check_scalar_output(where, name, out, holomorphic)
        pullback = _Pullback(name, lin.jaxpr, diff, zero_out, _primal_avals(leaves), in_tree,
                             [aval_of(x) for x in p_out], out_tree_box[0], [], list(lin.consts), [])
        o_aval = aval_of(p_out[0])
        one = Array._new(np.ones((), o_aval.dtype), o_aval.weak_type)  # JAX's seed keeps the output's weak type
        g = pullback(tree_util.tree_unflatten(out_tree_box[0], [one]))
        g = g[0] if isinstance(argnums, int) else g
        value = (out, aux) if has_aux else out
        return value, g

    return _describe(value_and_grad_f, fun, "value_and_grad", argnums)


def _leaf_aval(where: str, i: int, leaf: Any) -> ShapedArray:
    if jax_array_argument(leaf):
        raise jax_array_argument_error(f"{where}: argument {i}")
    try:
        return aval_of(leaf)
    except TypeError:
        raise invalid_value_error(f"{where}: argument {i}", leaf) from None


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, holomorphic: bool = False,
         allow_int: bool = False, reduce_axes: Sequence = ()) -> Callable[..., Any]:
    """JAX's ``grad``: the gradient of a scalar-output ``fun`` with respect to the ``argnums`` arguments
    (``(grad, aux)`` with ``has_aux``)."""
    if reduce_axes:
        raise NotImplementedError("grad: reduce_axes is not supported (it was removed from JAX too)")
    if not callable(fun):
        raise FtransTypeError(f"grad: expected a function, got {type(fun).__name__}")
    nums = _argnums_tuple(argnums)
    vg = _make_value_and_grad(fun, _fname(fun), argnums, nums, has_aux, holomorphic, allow_int, "grad")

    @wraps(fun)
    @_tb.api_boundary
    def grad_f(*args: Any, **kwargs: Any) -> Any:
        value, g = vg(*args, **kwargs)
        if has_aux:
            return g, value[1]
        return g

    return _describe(grad_f, fun, "grad", argnums)


def fwd_and_bwd(fun: Callable, argnums: int | Sequence[int], has_aux: bool = False,
                jitted: bool = True) -> tuple[Callable, Callable]:
    """JAX's ``fwd_and_bwd``: ``vjp`` split into two functions that can each be compiled once.

    ``fwd(*args)`` is ``vjp`` of ``fun`` with respect to the ``argnums`` arguments: ``(out, residuals)``
    (``(out, residuals, aux)`` with ``has_aux``), where ``residuals`` is the pullback, a pytree of arrays.
    ``bwd(residuals, cotangent)`` applies it: the cotangents of the ``argnums`` arguments (one value when
    ``argnums`` is an int, else a tuple). With ``jitted`` (the default) both are ``jit``-ed, so a loop
    calling them compiles each once, where ``jit(f_vjp)`` of a fresh pullback compiles every iteration.
    """
    if not callable(fun):
        raise FtransTypeError(f"fwd_and_bwd: expected a function, got {type(fun).__name__}")
    nums = _argnums_tuple(argnums)
    name = _fname(fun)

    def fwd(*args: Any) -> Any:
        n = len(args)
        for i in nums:
            if not -n <= i < n:
                raise FtransTypeError(
                    f"fwd_and_bwd({name}): differentiating with respect to argnums={argnums!r} requires at least "
                    f"{max(i + 1 if i >= 0 else -i for i in nums)} positional arguments to be passed by the "
                    f"caller, but got only {n} positional arguments.")
        pos = [i % n for i in nums]

        def partial_fun(*dyn: Any) -> Any:
            full = list(args)
            for i, v in zip(pos, dyn):
                full[i] = v
            return fun(*full)

        partial_fun.__name__ = name
        return vjp(partial_fun, *[args[i] for i in pos], has_aux=has_aux)

    def bwd(f_vjp: Callable, cotangent: Any) -> Any:
        g = f_vjp(cotangent)
        return g[0] if isinstance(argnums, int) else g

    fwd.__name__, bwd.__name__ = f"fwd_{name}", f"bwd_{name}"
    if jitted:
        from ftrans.transforms.jit import jit

        return jit(fwd), jit(bwd)
    return fwd, bwd


# ----------------------------------------------------------------------------
# linearize and linear_transpose


@_tb.api_boundary
def linearize(fun: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """JAX's ``linearize``: ``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` evaluates the linear map
    without recomputing the primal; ``f_jvp`` runs a jaxpr you can print (``make_jaxpr(f_jvp)``) and, like
    ``vjp``'s pullback, is a pytree whose leaves are the residuals."""
    if not callable(fun):
        raise FtransTypeError(f"linearize: expected a function, got {type(fun).__name__}")
    leaves, in_tree, flat_fun, out_tree_box = _vjp_flat_setup(fun, primals, has_aux, "linearize")
    given = given_scalars(tree_util.tree_leaves(tuple(primals)))
    p_out, lin, diff, zero_out, aux = linearize_flat(rewritten_primal(flat_fun, leaves, out_tree_box), leaves,
                                                     given, transform="jvp")
    out_tree = out_tree_box[0]
    in_avals = [aval_of(x) for x in leaves]
    out_avals = [_out_aval(x) for x in p_out]
    f_jvp = _Linearized(_fname(fun), lin, diff, zero_out, in_avals, in_tree, out_avals, out_tree)
    out = tree_util.tree_unflatten(out_tree, p_out)
    if has_aux:
        return out, f_jvp, aux
    return out, f_jvp


def _inconsistent_tangent(name: str, i: int, t: Any, aval: ShapedArray) -> FtransValueError:
    def short(shape: tuple, d: np.dtype) -> str:
        return f"float0{list(shape)}" if d == float0 else ShapedArray(tuple(shape), d, False).str_short()

    want = tangent_aval(aval)
    d = np.asarray(t).dtype if isinstance(t, np.ndarray) else aval_of(t).dtype
    hint = (" (an integer or bool primal's tangent is numpy.zeros(shape, dtype=ftrans.dtypes.float0))"
            if want.dtype == float0 else "")
    return FtransValueError(  # JAX: ValueError
        f"linearize({name}): linearized function called on tangent values inconsistent with "
        f"the original primal values: tangent {i} has type {short(np.shape(t), d)} but its primal has type "
        f"{aval.str_short()}, so the tangent must be {short(want.shape, want.dtype)}{hint}")


def _vma_mismatch(name: str, i: int, ta: Any, aval: Any, tv: frozenset, pv: frozenset) -> FtransValueError:
    fixes = []
    if left := tv - pv:
        fixes.append(f"applying `jax.lax.pcast(..., {tuple(sorted(left, key=str))}, to='varying')` to the primal "
                     "value passed to `jax.linearize`")
    if left := pv - tv:
        fixes.append(f"applying `jax.lax.pcast(..., {tuple(sorted(left, key=str))}, to='varying')` to the tangent "
                     "value passed to the callable `f_jvp` returned by `jax.linearize`")
    return FtransValueError(
        f"linearize({name}): linearized function called on tangent values inconsistent with the original primal "
        f"values:\nGot tangent aval {ta.str_short()} for primal aval {aval.str_short()} (tangent {i}: in a "
        "shard_map body the tangent must vary along the same manual mesh axes as its primal). \nThis might be "
        "fixed by:\n" + "\n".join(f"  * {d};" for d in fixes))


def _lift_linearized(jaxpr: Jaxpr, meta: tuple, consts: list, *tangents: Any) -> Any:
    """Evaluate a linearized function's linear program on ``tangents`` (the body of ``linearize``'s
    ``f_jvp``, which holds it as ``functools.partial(_lift_linearized, jaxpr, meta)`` as JAX does)."""
    name, diff, in_avals, in_tree, out_avals, zero_out, out_tree = meta
    t_leaves, t_tree = tree_util.tree_flatten(tuple(tangents))
    if t_tree != in_tree:
        raise FtransTypeError(
            f"linearize({name}): the tangents must have the structure of the primals, {in_tree}, "
            f"but have structure {t_tree}"
        )
    ins = []
    for i, (t, aval, d) in enumerate(zip(t_leaves, in_avals, diff)):
        if not d:
            # An integer or bool primal: its tangent is a float0 zero of the primal's shape.
            if not (isinstance(t, np.ndarray) and t.dtype == float0 and t.shape == tuple(aval.shape)):
                raise _inconsistent_tangent(name, i, t, aval)
            continue
        t = _operand(f"linearize({name})", f"tangent {i}", t)
        ta = aval_of(t)
        if (tuple(ta.shape), ta.dtype) != (tuple(aval.shape), tangent_aval(aval).dtype):
            raise _inconsistent_tangent(name, i, t, aval)
        tv, pv = getattr(ta, "vma", frozenset()), getattr(aval, "vma", frozenset())
        # in a check_vma shard_map body, JAX's type check: a tangent varying along manual axes its primal does
        # not (a tangent typed with fewer axes may come from a transform that does not type them: accepted)
        if tv - pv and _trace_state.vma_hook is not None:
            raise _vma_mismatch(name, i, ta, aval, tv, pv)
        ins.append(t)
    outs = iter(eval_jaxpr(jaxpr, list(consts), *ins))
    res = [_zero_tangent(a) if z else next(outs)
           for a, z in zip(out_avals, zero_out)]
    return tree_util.tree_unflatten(out_tree, res)


def _out_aval(x: Any) -> ShapedArray:
    """A primal output's type; a float0 output (the tangent of an integer, from a jvp inside) included."""
    if type(x) is np.ndarray and x.dtype == float0:
        return ShapedArray(x.shape, float0, False)
    return aval_of(x)


def _zero_tangent(aval: ShapedArray) -> Any:
    """The instantiated zero tangent of an output of type ``aval``: weakly typed where the output is (JAX's
    ``zeros_like_aval`` of the tangent type); an integer, bool or float0 output's is a float0 NumPy array."""
    ta = tangent_aval(aval)
    if ta.dtype == float0:
        return np.zeros(aval.shape, float0)
    return Array._new(np.zeros(aval.shape, ta.dtype), bool(ta.weak_type))


class _Linearized:
    """The function ``linearize`` returns: tangents of the primals -> tangents of the outputs.

    It evaluates the linear jaxpr (``make_jaxpr`` of it prints that program) and, like the pullback, is
    a pytree whose leaves are the residuals.  Its shape is that of JAX's ``tree_util.Partial``:
    ``f_jvp.func`` is a ``functools.partial`` whose first argument is the linear jaxpr (its constvars are
    the residuals) and ``f_jvp.args`` is ``(residuals,)``.
    """

    def __init__(self, name: str, lin: ClosedJaxpr, diff: list[bool], zero_out: list[bool], in_avals: list,
                 in_tree: Any, out_avals: list, out_tree: Any):
        self._name = name
        self._lin = lin
        self._meta = (name, tuple(diff), tuple(in_avals), in_tree, tuple(out_avals), tuple(zero_out), out_tree)
        self.__name__ = f"linearize({name})"

    @property
    def linear_jaxpr(self) -> ClosedJaxpr:
        """The linear program (its constants are the residuals)."""
        return self._lin

    @property
    def func(self) -> functools.partial:
        return functools.partial(_lift_linearized, self._lin.jaxpr, self._meta)

    @property
    def args(self) -> tuple:
        return (list(self._lin.consts),)

    @property
    def keywords(self) -> dict:
        return {}

    @_tb.api_boundary
    def __call__(self, *tangents: Any) -> Any:
        return _lift_linearized(self._lin.jaxpr, self._meta, self._lin.consts, *tangents)


def _linearized_flatten(f: _Linearized) -> tuple[list, tuple]:
    return list(f._lin.consts), (f._lin.jaxpr, f._meta)



def _linearized_unflatten(aux: tuple, leaves: Any) -> _Linearized:
    jaxpr, meta = aux
    name, diff, in_avals, in_tree, out_avals, zero_out, out_tree = meta
    return _Linearized(name, ClosedJaxpr(jaxpr, list(leaves)), list(diff), list(zero_out), list(in_avals), in_tree,
                       list(out_avals), out_tree)


tree_util.register_pytree_node(_Linearized, _linearized_flatten, _linearized_unflatten)


@_tb.api_boundary
def linear_transpose(fun: Callable, *primals: Any, reduce_axes: Sequence = ()) -> Callable:
    """``jax.linear_transpose``: the transpose of a linear ``fun``; ``primals`` give only shapes and dtypes.

    As in JAX the function is linear over floating/complex values, or over integers (``2 * x`` on
    int32 transposes to ``2 * ct``), never a mix of the two.
    """
    if reduce_axes:
        raise NotImplementedError("linear_transpose: reduce_axes is not supported")
    leaves, in_tree = tree_util.tree_flatten(tuple(primals))
    in_avals = []
    for x in leaves:
        # a weakly typed primal (a Python scalar) traces the function on a weak input, as JAX's does
        a = x if isinstance(x, ShapedArray) else _shape_dtype(x)
        b = ShapedArray(tuple(a.shape), a.dtype, bool(a.weak_type))
        vma = getattr(x.aval, "vma", None) if isinstance(x, Tracer) else getattr(x, "vma", None)
        if vma and _trace_state.vma_hook is not None:  # in a check_vma shard_map body: the primal's type, as JAX's
            from ftrans.core.avals import VaryingAval

            b = VaryingAval(b, vma)
        in_avals.append(b)
    out_tree_box: list = []
    name = _fname(fun)

    def flat_fun(*ins: Any) -> list:
        out = fun(*tree_util.tree_unflatten(in_tree, ins))
        flat, tree = tree_util.tree_flatten(out)
        if not all(map(is_jax_value, flat)):
            check_outputs(out, fun, "linear_transpose")
        out_tree_box.append(tree)
        return flat

    closed, _ = stage(flat_fun, in_avals)
    out_avals = closed.out_avals
    in_d = [a.dtype for a in in_avals]
    out_d = [a.dtype for a in out_avals]
    if not (all(dtypes.issubdtype(d, np.inexact) for d in in_d + out_d)
            or all(dtypes.issubdtype(d, np.integer) for d in in_d + out_d)):
        raise FtransTypeError(
            f"linear_transpose({name}): linear_transpose only supports [float or complex] -> [float or complex], "
            f"and integer -> integer functions, but got {[d.name for d in in_d]} -> {[d.name for d in out_d]}; "
            "pass primals of the dtype the function is linear in")
    return _Transposed(name, closed, in_avals, in_tree, list(out_avals), out_tree_box[0])


class _Transposed:
    """The function ``linear_transpose`` returns: output cotangents -> input cotangents.

    Like the ``vjp`` pullback (and JAX's ``Partial``) it is a pytree whose leaves are the constants of
    the linear program, so it can be returned from ``jit`` and passed into one.
    """

    def __init__(self, name: str, closed: ClosedJaxpr, in_avals: list, in_tree: Any, out_avals: list,
                 out_tree: Any):
        self._name, self._closed = name, closed
        self._in_avals, self._in_tree = in_avals, in_tree
        self._out_avals, self._out_tree = out_avals, out_tree
        self.__name__ = f"transpose({name})"

    @_tb.api_boundary
    def __call__(self, ct: Any) -> tuple:
        name, closed = self._name, self._closed
        c_leaves, c_tree = tree_util.tree_flatten(ct)
        if c_tree != self._out_tree:
            raise FtransTypeError(
                f"linear_transpose({name}): cotangent tree does not match function output: it must have the "
                f"output's structure {self._out_tree}, got {c_tree}"
            )
        cts = []
        for i, (c, a) in enumerate(zip(c_leaves, self._out_avals)):
            c = _operand(f"linear_transpose({name})", f"cotangent {i}", c)
            ca = aval_of(c)
            if (tuple(ca.shape), ca.dtype) != (tuple(a.shape), a.dtype):
                raise FtransTypeError(
                    f"linear_transpose({name}): cotangent type does not match function output: cotangent {i} "
                    f"has type {ca.str_short()} but the output has type {a.str_short()}"
                )
            cts.append(c)
        args = [UndefinedPrimal(a) for a in self._in_avals]
        with transform_name_stack("transpose"):
            outs = backward_pass(closed.jaxpr, closed.consts, args, cts)
        return tree_util.tree_unflatten(self._in_tree, [instantiate(o) for o in outs])


def _transposed_flatten(t: _Transposed) -> tuple[list, tuple]:
    return list(t._closed.consts), (t._name, t._closed.jaxpr, tuple(t._in_avals), t._in_tree,
                                    tuple(t._out_avals), t._out_tree)


def _transposed_unflatten(aux: tuple, leaves: Any) -> _Transposed:
    name, jaxpr, in_avals, in_tree, out_avals, out_tree = aux
    return _Transposed(name, ClosedJaxpr(jaxpr, list(leaves)), list(in_avals), in_tree, list(out_avals), out_tree)


tree_util.register_pytree_node(_Transposed, _transposed_flatten, _transposed_unflatten)


def _shape_dtype(x: Any) -> ShapedArray:
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return ShapedArray(tuple(x.shape), dtypes.canonicalize(np.dtype(x.dtype)), bool(getattr(x, "weak_type", False)))
    return aval_of(x)


# ----------------------------------------------------------------------------
# Jacobians and the Hessian


def _std_basis(avals: list[ShapedArray]) -> tuple[int, list]:
    """The standard basis over all flat inputs, one leading-axis-stacked array per input: ``(n, basis)``.

    Row ``k`` of the stack is one-hot in the ``k``-th element of the inputs taken together.
    """
    sizes = [int(np.prod(a.shape, dtype=int)) for a in avals]
    n = sum(sizes)
    out, start = [], 0
    for a, size in zip(avals, sizes):
        block = np.zeros((n, size), a.dtype)
        block[start:start + size] = np.eye(size, dtype=a.dtype)
        out.append(Array._new(block.reshape((n,) + tuple(a.shape)), a.weak_type))
        start += size
    return n, out


def std_basis(pytree: Any) -> Any:
    """JAX's ``jax._std_basis``: the standard basis of ``pytree``'s flattened leaves, as a pytree like it.

    Each leaf becomes an array ``[n, *leaf.shape]`` (``n`` the total number of elements) in the
    leaves' promoted dtype; row ``k`` is one-hot in the ``k``-th element of all leaves together.
    """
    from ftrans.core.operands import result_type, shape_of

    leaves, tree = tree_util.tree_flatten(pytree)
    dtype = result_type(*leaves)
    _, basis = _std_basis([ShapedArray(tuple(shape_of(x)), dtype, False) for x in leaves])
    return tree_util.tree_unflatten(tree, basis)


def _split_blocks(stacked: Any, axis_first: bool, inner_shape: tuple, avals: list[ShapedArray]) -> list:
    """Split a Jacobian slab along its basis axis into one block per basis leaf.

    ``stacked`` has the basis axis first (``axis_first``, jacrev: [n, *inner_shape]) or last
    (jacfwd: [*inner_shape, n]); block ``i`` gets shape ``inner_shape + leaf_i.shape``
    (jacfwd) or ``leaf_i.shape + inner_shape`` (jacrev).
    """
    sa = aval_of(stacked)
    axis = 0 if axis_first else len(sa.shape) - 1
    sizes = [int(np.prod(a.shape, dtype=int)) for a in avals]
    # JAX's split primitive, whose transpose keeps a weakly typed piece's zeros weak (slices' pad strong ones)
    parts = (S.split_p.bind(stacked, sizes=tuple(sizes), axis=axis)
             if len(avals) > 1 and getattr(sa, "typed_sharding", None) is None else None)
    blocks, start = [], 0
    for k, a in enumerate(avals):
        size = sizes[k]
        part = parts[k] if parts is not None else _slice_axis(stacked, axis, start, start + size)
        if axis_first:
            blocks.append(building.reshape(part, tuple(a.shape) + tuple(inner_shape)))
        else:
            blocks.append(building.reshape(part, tuple(inner_shape) + tuple(a.shape)))
        start += size
    return blocks


def _like_example(block: Any, example: ShapedArray) -> Any:
    """A Jacobian block in its example leaf's dtype and weak type, as JAX returns them.

    The example is the output leaf for ``jacfwd`` and the input leaf for ``jacrev``: the Jacobian of a
    function of a Python float, which stays weakly typed, is weakly typed too; a complex block whose
    example is real keeps its real part.
    """
    bd, bw = dtype_weak(block)
    if np.issubdtype(bd, np.complexfloating) and not np.issubdtype(example.dtype, np.complexfloating):
        block = real_p.bind(block)
        bd, bw = dtype_weak(block)
    if bd == example.dtype and bw == example.weak_type:
        return block
    return S.convert_element_type_p.bind(block, new_dtype=np.dtype(example.dtype), weak_type=example.weak_type)


def _slice_axis(x: Any, axis: int, start: int, stop: int) -> Any:
    """``x[..., start:stop, ...]`` along ``axis`` (``x`` itself when that is all of it)."""
    shape = tuple(aval_of(x).shape)
    if start == 0 and stop == shape[axis]:
        return x
    starts = tuple(start if i == axis else 0 for i in range(len(shape)))
    limits = tuple(stop if i == axis else d for i, d in enumerate(shape))
    return S.slice_p.bind(x, start_indices=starts, limit_indices=limits, strides=None)


def _jac_setup(where: str, fun: Callable, argnums: Any, args: tuple, kwargs: dict, holomorphic: bool,
               allow_int: bool) -> tuple[Callable, list, Any]:
    nums = _argnums_tuple(argnums)
    n = len(args)
    for i in nums:
        if not -n <= i < n:
            raise FtransValueError(
                f"{where}({_fname(fun)}): differentiating with respect to argnums={argnums} requires at least "
                f"{max(nums) + 1 if i >= 0 else -i} positional arguments to be passed by the caller, but got "
                f"only {n} positional arguments."
            )
    idx = tuple(i % n for i in nums)
    dyn = tuple(args[i] for i in idx)
    for i, a in zip(idx, dyn):
        for p, leaf in tree_util.tree_flatten_with_path(a)[0]:
            _check_input_dtype(where, f"{i}{tree_util.keystr(p)}", _leaf_aval(where, i, leaf), holomorphic,
                               allow_int)

    def restricted(*d: Any) -> Any:
        full = list(args)
        for i, v in zip(idx, d):
            full[i] = v
        return fun(*full, **kwargs)

    restricted.__name__ = _fname(fun)  # errors raised while tracing name the user's function
    restricted.__wrapped__ = fun  # ... and point at its definition
    return restricted, list(dyn), idx


def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """``jax.jacfwd``: the Jacobian by forward mode, the JVP vmapped over the standard basis of the inputs."""
    from ftrans.transforms.batching import vmap

    @wraps(fun)
    @_tb.api_boundary
    def jac_f(*args: Any, **kwargs: Any) -> Any:
        restricted, dyn, _ = _jac_setup("jacfwd", fun, argnums, args, kwargs, holomorphic, False)
        d_leaves, d_tree = tree_util.tree_flatten(tuple(dyn))
        d_leaves = [_operand("jacfwd", f"{k}", x) for k, x in enumerate(d_leaves)]
        in_avals = [aval_of(x) for x in d_leaves]
        n, basis = _std_basis(in_avals)
        primals = tree_util.tree_unflatten(d_tree, d_leaves)

        def push(*t_leaves: Any) -> Any:
            tangents = tree_util.tree_unflatten(d_tree, list(t_leaves))
            res = jvp(restricted, tuple(primals), tuple(tangents), has_aux=has_aux)
            return [t for t, k in zip(tree_util.tree_leaves(res[1]), o_inexact) if k]

        res = jvp(restricted, tuple(primals), tuple(tree_util.tree_map(_zeros_like, primals)), has_aux=has_aux)
        out, aux = res[0], (res[2] if has_aux else None)
        o_leaves, o_tree = tree_util.tree_flatten(out)
        _check_jac_outputs("jacfwd", _fname(fun), [aval_of(o) for o in o_leaves], holomorphic)
        o_inexact = [dtypes.is_inexact(aval_of(o).dtype) for o in o_leaves]
        if n:
            t_out = iter(vmap(push, in_axes=0, out_axes=-1)(*basis))
            t_leaves = [next(t_out) if k else building.zeros(tuple(aval_of(o).shape) + (n,), aval_of(o).dtype)
                        for o, k in zip(o_leaves, o_inexact)]
        else:
            t_leaves = [building.zeros(tuple(aval_of(o).shape) + (0,), aval_of(o).dtype) for o in o_leaves]
        blocks_per_out = []
        for o, t in zip(o_leaves, t_leaves):
            blocks = [_like_example(b, aval_of(o)) for b in _split_blocks(t, False, tuple(aval_of(o).shape), in_avals)]
            ins_tree = tree_util.tree_unflatten(d_tree, blocks)
            blocks_per_out.append(ins_tree[0] if isinstance(argnums, int) else ins_tree)
        jac = tree_util.tree_unflatten(o_tree, blocks_per_out)
        return (jac, aux) if has_aux else jac

    return _describe(jac_f, fun, "jac", argnums)


def _zeros_like(x: Any) -> Any:
    a = aval_of(x)
    return Array._new(np.zeros(a.shape, tangent_aval(a).dtype), False)


def jacrev(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, holomorphic: bool = False,
           allow_int: bool = False) -> Callable:
    """``jax.jacrev``: the Jacobian by reverse mode, the pullback vmapped over the standard basis of the outputs."""
    from ftrans.transforms.batching import vmap

    @wraps(fun)
    @_tb.api_boundary
    def jac_f(*args: Any, **kwargs: Any) -> Any:
        restricted, dyn, _ = _jac_setup("jacrev", fun, argnums, args, kwargs, holomorphic, allow_int)
        res = vjp(restricted, *dyn, has_aux=has_aux)
        out, pullback = res[0], res[1]
        aux = res[2] if has_aux else None
        o_leaves, o_tree = tree_util.tree_flatten(out)
        o_avals = [aval_of(o) for o in o_leaves]
        _check_jac_outputs("jacrev", _fname(fun), o_avals, holomorphic)
        d_leaves, d_tree = tree_util.tree_flatten(tuple(dyn))
        in_avals = [aval_of(x) for x in d_leaves]
        n, basis = _std_basis([tangent_aval(a) for a in o_avals])
        in_inexact = [dtypes.is_inexact(a.dtype) for a in in_avals]

        def pull(*ct_leaves: Any) -> Any:
            cts = tree_util.tree_leaves(pullback(tree_util.tree_unflatten(o_tree, list(ct_leaves))))
            return [c for c, k in zip(cts, in_inexact) if k]  # float0 cotangents cannot be batched

        if n:
            pulled = iter(vmap(pull)(*basis))  # one stacked cotangent per input leaf: [n, *in.shape]
            rows = [next(pulled) if k else building.zeros((n,) + tuple(a.shape), a.dtype)
                    for a, k in zip(in_avals, in_inexact)]
        else:
            rows = [building.zeros((0,) + tuple(a.shape), a.dtype) for a in in_avals]
        per_in = [[_like_example(b, a) for b in _split_blocks(r, True, tuple(a.shape), o_avals)]
                  for r, a in zip(rows, in_avals)]
        blocks_per_out = []
        for oi in range(len(o_avals)):
            ins_tree = tree_util.tree_unflatten(d_tree, [per_in[ii][oi] for ii in range(len(in_avals))])
            blocks_per_out.append(ins_tree[0] if isinstance(argnums, int) else ins_tree)
        jac = tree_util.tree_unflatten(o_tree, blocks_per_out)
        return (jac, aux) if has_aux else jac

    return _describe(jac_f, fun, "jac", argnums)


def hessian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable:
    """``jax.hessian``: ``jacfwd(jacrev(fun))``."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums, has_aux=has_aux,
                  holomorphic=holomorphic)
