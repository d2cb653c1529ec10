"""``lax.custom_linear_solve`` and ``lax.custom_root``: solves differentiated implicitly at the solution.

``custom_linear_solve`` stages ``matvec``, ``solve`` and, when reverse mode is possible, ``vecmat`` (the
transpose of ``matvec``, from ``linear_transpose``) and ``transpose_solve``, and binds one
``custom_linear_solve`` primitive (``core/prims/control_flow.py``; its JVP, transpose and batching rules sit
in each table's ``control_flow.py``).  ``custom_root`` needs no primitive: it is a ``custom_jvp`` function whose
rule applies the implicit function theorem with the user's ``tangent_solve``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from ftrans.core import pytrees as tree_util
from ftrans.core import traceback_util as _tb
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.prims.control_flow import linear_solve_p
from ftrans.core.trace import aval_of
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.lax._control_flow import _flatten_operands, _trace, _tuple_tree
from ftrans.transforms.ad import Zero, jvp, tangent_aval
from ftrans.transforms.custom_derivatives import custom_jvp
from ftrans.transforms.reverse import linear_transpose, linearize

__all__ = ["custom_linear_solve", "custom_root", "linear_solve_p"]


def _shapes_checked(fun: Callable, name: str, b_leaves: list, has_aux: bool) -> Callable:
    want = [tuple(x.aval.shape) for x in b_leaves]

    def f(x: Any) -> Any:
        out = fun(x)
        y = out[0] if has_aux else out
        got = [tuple(getattr(v, "shape", ())) for v in tree_util.tree_leaves(y)]
        if got != want:
            raise FtransValueError(f"{name}() output shapes must match b, got {got} and {want}")
        return out

    return f


def _check_tree(name: str, what: str, tree: Any, want: Any, has_aux: bool) -> None:
    if has_aux:
        if tree.num_nodes == 1 or len(tree.children()) != 2:
            raise FtransTypeError(f"{name}() must return a pair (solution, aux) when has_aux=True, got {tree}")
        tree = tree.children()[0]
    if tree != want:
        raise FtransTypeError(f"{name}() output pytree structure must match {what}, got {tree} and {want}")


def _jaxpr_fun(traced: Any) -> Callable:
    return lambda *args: eval_jaxpr(traced.jaxpr, [], *args)


@_tb.api_boundary
def custom_linear_solve(matvec: Callable, b: Any, solve: Callable, transpose_solve: Callable | None = None,
                        symmetric: bool = False, has_aux: bool = False) -> Any:
    """JAX's ``lax.custom_linear_solve``: ``solve(matvec, b)``, differentiated as the solution of
    ``matvec(x) == b`` (``dx = A^{-1} (db - dA x)``) rather than through ``solve``.

    Reverse mode needs ``transpose_solve(vecmat, ct)`` (``vecmat`` is ``matvec``'s transpose), or
    ``symmetric=True`` to use ``solve`` for it.  With ``has_aux`` the solvers return ``(x, aux)``.
    """
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    b_leaves, tree = _flatten_operands(b, "custom_linear_solve: b")
    in_tree = _tuple_tree(tree)
    avals = [x.aval for x in b_leaves]
    mv = _trace(_shapes_checked(matvec, "matvec", b_leaves, False), in_tree, avals, "matvec")
    _check_tree("matvec", "b", mv.out_tree, tree, False)
    sv = _trace(_shapes_checked(partial(solve, matvec), "solve", b_leaves, has_aux), in_tree, avals, "solve")
    _check_tree("solve", "b", sv.out_tree, tree, has_aux)
    if transpose_solve is None:
        jaxprs = (mv.jaxpr, sv.jaxpr)
        groups = [mv.consts, [], sv.consts, []]
    else:
        if symmetric:
            vecmat, vm = matvec, mv
        else:
            transposed = linear_transpose(matvec, tree_util.tree_unflatten(tree, b_leaves))

            def vecmat(y: Any) -> Any:
                return transposed(y)[0]

            vm = _trace(vecmat, in_tree, avals, "vecmat")
        ts = _trace(_shapes_checked(partial(transpose_solve, vecmat), "transpose_solve", b_leaves, has_aux),
                    in_tree, avals, "transpose_solve")
        _check_tree("transpose_solve", "b", ts.out_tree, tree, has_aux)
        jaxprs = (mv.jaxpr, vm.jaxpr, sv.jaxpr, ts.jaxpr)
        groups = [mv.consts, vm.consts, sv.consts, ts.consts]
    consts = [c for g in groups for c in g]
    outs = linear_solve_p.bind(*consts, *b_leaves, const_lengths=tuple(len(g) for g in groups), jaxprs=jaxprs)
    return tree_util.tree_unflatten(sv.out_tree, list(outs))


# ----------------------------------------------------------------------------
# custom_root


def _split(args: tuple, lengths: tuple) -> tuple[list[list], list]:
    groups, start = [], 0
    for k in lengths:
        groups.append(list(args[start:start + k]))
        start += k
    return groups, list(args[start:])


@partial(custom_jvp, nondiff_argnums=(0, 1))
def _root(lengths: tuple, jaxprs: tuple, *args: Any) -> list:
    (_, solve_consts, _), guess = _split(args, lengths)
    return _jaxpr_fun(jaxprs[1])(*solve_consts, *guess)


@_root.defjvp
def _root_jvp(lengths: tuple, jaxprs: tuple, primals: tuple, tangents: tuple) -> tuple:
    # F(m, u*(m)) = 0 around the solution, so  dF/dm dm + dF/du du* = 0  and  du* = -(dF/du)^{-1} (dF/dm dm):
    # the right-hand side is F's JVP in its consts at the solution, the inverse is the user's tangent_solve.
    (f_consts, _, ls_consts), _ = _split(primals, lengths)
    (f_dots, _, _), _ = _split(tangents, lengths)
    f_traced, _, ls_traced = jaxprs
    sol = list(_root(lengths, jaxprs, *primals))
    n = len(f_traced.out_avals)
    x, aux = sol[:n], sol[n:]
    f = _jaxpr_fun(f_traced)
    if f_consts:
        _, rhs = jvp(lambda *m: f(*m, *x), f_consts, f_dots)
    else:
        rhs = [v * 0 for v in x]
    dx = _jaxpr_fun(ls_traced)(*ls_consts, *x, *rhs)
    return sol, [-d for d in dx] + [Zero(tangent_aval(aval_of(a))) for a in aux]


@_tb.api_boundary
def custom_root(f: Callable, initial_guess: Any, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False) -> Any:
    """JAX's ``lax.custom_root``: ``solve(f, initial_guess)``, differentiated by the implicit function theorem
    with respect to what ``f`` closes over, assuming ``f(solution) == 0``.

    ``tangent_solve(g, y)`` solves ``g(x) == y`` for the linear ``g`` (``f`` linearized at the root); for a
    scalar, ``lambda g, y: y / g(1.0)``.  With ``has_aux``, ``solve`` returns ``(solution, aux)``.
    """
    g_leaves, tree = _flatten_operands(initial_guess, "custom_root: initial_guess")
    in_tree = _tuple_tree(tree)
    avals = [x.aval for x in g_leaves]
    ft = _trace(f, in_tree, avals, "f")
    _check_tree("f", "initial_guess", ft.out_tree, tree, False)
    st = _trace(partial(solve, f), in_tree, avals, "solve")
    _check_tree("solve", "initial_guess", st.out_tree, tree, has_aux)

    def linearize_and_solve(x: Any, b: Any) -> Any:
        _, f_jvp = linearize(f, x)
        return tangent_solve(f_jvp, b)

    lt = _trace(linearize_and_solve, _tuple_tree(tree, tree), avals + avals, "tangent_solve")
    _check_tree("tangent_solve", "x", lt.out_tree, tree, False)
    lengths = (len(ft.consts), len(st.consts), len(lt.consts))
    outs = _root(lengths, (ft, st, lt), *ft.consts, *st.consts, *lt.consts, *g_leaves)
    return tree_util.tree_unflatten(st.out_tree, list(outs))
