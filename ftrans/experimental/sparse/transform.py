"""``sparsify``: run ordinary ftrans.numpy code on BCOO arguments (JAX's ``sparse.sparsify``).

How it works: the function is staged to ftrans's IR with each sparse argument
standing in as a dense value of its shape and dtype; the IR is then interpreted
equation by equation.  An equation whose operands are all dense is bound as
usual (so outer ``jit``/``grad``/``vmap`` see it); an equation with a sparse
operand runs the sparse rule of its primitive, which produces a sparse or a
dense result.  A primitive without a sparse rule raises ``NotImplementedError``
naming it, rather than silently densifying.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ftrans.core import pytrees as tree_util
from ftrans.core.array import Array
from ftrans.core.avals import ShapeDtypeStruct
from ftrans.core.ir import ClosedJaxpr, Literal, subjaxprs
from ftrans.core.jaxpr_api import make_jaxpr
from ftrans.core.trace import Tracer
from ftrans.experimental.sparse import bcoo as _bcoo
from ftrans.experimental.sparse._base import JAXSparse
from ftrans.experimental.sparse.bcoo import BCOO
from ftrans.experimental.sparse.bcsr import BCSR

__all__ = ["sparsify", "sparsify_raw", "SparsifyEnv", "SparsifyValue", "SparseTracer", "arrays_to_spvalues",
           "spvalues_to_arrays"]

# The traces that ``sparsify(f, use_tracer=True)`` is staging ``f`` on (one per call in progress).
_tracer_mode_traces: list = []


class _SparseTracerType(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        trace = getattr(obj, "_trace", None)
        return isinstance(obj, Tracer) and any(trace is t for t in _tracer_mode_traces)


class SparseTracer(metaclass=_SparseTracerType):
    """The type of the values ``f`` sees inside ``sparsify(f, use_tracer=True)`` (JAX's ``SparseTracer``):
    ``isinstance(x, SparseTracer)`` holds for them.  ftrans stages ``f`` and interprets the IR either way
    (the sparse operations are the same); without ``use_tracer`` its values are not SparseTracers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("SparseTracer cannot be created directly: it is the type of the values inside "
                        "sparsify(f, use_tracer=True)")


def _is_sparse(x: Any) -> bool:
    return isinstance(x, JAXSparse)


def _as_bcoo(x: Any) -> BCOO:
    if isinstance(x, BCOO):
        return x
    if hasattr(x, "to_bcoo"):
        return x.to_bcoo()
    raise NotImplementedError(f"sparsify: {type(x).__name__} operands are supported only through BCOO")


def sparsify(f: Callable, use_tracer: bool = False) -> Callable:
    """``f`` made to accept BCOO arrays wherever it accepts arrays (for the operations with sparse rules).

    ``use_tracer=True`` only makes the values inside ``f`` instances of ``SparseTracer``, as in JAX."""

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        leaves, tree = tree_util.tree_flatten((args, kwargs), is_leaf=_is_sparse)
        if not use_tracer and not any(_is_sparse(x) for x in leaves):
            return f(*args, **kwargs)
        # Python scalars stay static (``x ** 2`` keeps its integer exponent); arrays become inputs.
        dyn = [i for i, x in enumerate(leaves) if not isinstance(x, (bool, int, float, complex))]
        placeholders = [ShapeDtypeStruct(leaves[i].shape, leaves[i].dtype) if _is_sparse(leaves[i]) else leaves[i]
                        for i in dyn]
        out_box: list = []

        def flat_fun(*flat: Any) -> Any:
            if use_tracer:
                _tracer_mode_traces.extend({id(t): t for t in (getattr(v, "_trace", None) for v in flat)
                                            if t is not None}.values())
            full = list(leaves)
            for i, v in zip(dyn, flat):
                full[i] = v
            a, kw = tree_util.tree_unflatten(tree, full)
            out = f(*a, **kw)
            out_leaves, out_tree = tree_util.tree_flatten(out)
            out_box.append(out_tree)
            return out_leaves

        n_traces = len(_tracer_mode_traces)
        try:
            closed = make_jaxpr(flat_fun)(*placeholders)
        finally:
            del _tracer_mode_traces[n_traces:]
        outs = _eval_sparse(closed, [leaves[i] for i in dyn])  # BCSR operands stay BCSR for the rules that keep the format
        return tree_util.tree_unflatten(out_box[0], outs)

    return wrapped


def _read(env: dict, a: Any) -> Any:
    if isinstance(a, Literal):
        return Array._new(np.asarray(a.val, a.aval.dtype), a.aval.weak_type)
    return env[id(a)]


def _eval_sparse(closed: ClosedJaxpr, args: list) -> list:
    jaxpr = closed.jaxpr
    env: dict[int, Any] = {}
    for v, c in zip(jaxpr.constvars, closed.consts):
        env[id(v)] = c
    for v, a in zip(jaxpr.invars, args):
        env[id(v)] = a
    for eqn in jaxpr.eqns:
        ins = [_read(env, a) for a in eqn.invars]
        if any(_is_sparse(x) for x in ins):
            outs = _apply_sparse_rule(eqn, ins)
        else:
            outs = eqn.primitive.bind(*ins, **eqn.params)
            if not eqn.primitive.multiple_results:
                outs = [outs]
        for v, o in zip(eqn.outvars, outs):
            env[id(v)] = o
    return [_read(env, a) for a in jaxpr.outvars]


# Elementwise primitives with f(0) == 0: on a sparse operand they apply to the stored values.  The
# linear ones commute with the summing of duplicate entries and keep the index buffers as they are;
# the others first sum duplicate entries (f(a) + f(b) != f(a + b) in general).
_ZERO_PRESERVING_LINEAR = {"neg", "copy", "real", "imag", "conj"}
_ZERO_PRESERVING = _ZERO_PRESERVING_LINEAR | {
    "neg", "sin", "tan", "abs", "sign", "sqrt", "expm1", "log1p", "tanh", "real", "imag", "conj", "sinh",
    "asin", "atan", "asinh", "atanh", "copy", "floor", "ceil", "round", "integer_pow", "convert_element_type",
    "reduce_precision", "erf", "erf_inv", "square", "cbrt", "bessel_i1e",
}


# Elementwise primitives with f(0) != 0: a sparse operand would give a dense result.
_DENSIFYING = {
    "cos", "cosh", "exp", "exp2", "log", "acos", "acosh", "logistic", "rsqrt", "erfc", "lgamma", "digamma",
    "bessel_i0e", "is_finite", "not", "eq", "ge", "le",
}


def _apply_sparse_rule(eqn: Any, ins: list) -> list:
    name = eqn.primitive.name
    p = eqn.params
    if name in _ZERO_PRESERVING:
        (x,) = ins
        if name == "integer_pow" and p["y"] <= 0:
            raise NotImplementedError(f"sparse rule for integer_pow with non-positive exponent {p['y']} is not "
                                      "implemented because it would result in dense output")
        if name not in _ZERO_PRESERVING_LINEAR and not x.unique_indices:
            x = x.sum_duplicates(nse=x.nse, remove_zeros=False)
        data = eqn.primitive.bind(x.data, **p)
        if isinstance(x, BCSR):
            return [BCSR((data, x.indices, x.indptr), **x._info._asdict())]
        x = _as_bcoo(x)
        return [BCOO((data, x.indices), **x._info._asdict())]
    rule = _RULES.get(name)
    if rule is None:
        subs = subjaxprs(eqn)
        if len(subs) == 1 and name in ("jit_call", "pjit", "remat2", "custom_jvp_call", "custom_vjp_call",
                                       "closed_call", "core_call"):
            sub = subs[0]
            closed = sub if isinstance(sub, ClosedJaxpr) else ClosedJaxpr(sub, [])
            return _eval_sparse(closed, ins)
        if name in _DENSIFYING:
            raise NotImplementedError(f"sparse rule for {name} is not implemented because it would result in dense "
                                      "output. Convert the operand with .todense() first.")
        raise NotImplementedError(f"sparse rule for {name} is not implemented.")
    out = rule(*ins, **p)
    return out if isinstance(out, list) else [out]


def _dot_general(lhs: Any, rhs: Any, *, dimension_numbers: Any, precision: Any = None,
                 preferred_element_type: Any = None, **_: Any) -> Any:
    lhs = _as_bcoo(lhs) if _is_sparse(lhs) else lhs
    rhs = _as_bcoo(rhs) if _is_sparse(rhs) else rhs
    return _bcoo.bcoo_dot_general(lhs, rhs, dimension_numbers=dimension_numbers,
                                  preferred_element_type=preferred_element_type)


def _same_pattern(a: BCOO, b: BCOO) -> bool:
    return a.indices is b.indices and a.shape == b.shape and a.data.shape == b.data.shape


def _mul(lhs: Any, rhs: Any) -> Any:
    if _is_sparse(lhs) and _is_sparse(rhs):
        a, b = _as_bcoo(lhs), _as_bcoo(rhs)
        if _same_pattern(a, b) and a.unique_indices:
            return BCOO((a.data * b.data, a.indices), **a._info._asdict())
        return _bcoo.bcoo_multiply_sparse(a, b)
    sp, dn = (lhs, rhs) if _is_sparse(lhs) else (rhs, lhs)
    sp = _as_bcoo(sp)
    data = _bcoo.bcoo_multiply_dense(sp, dn)
    return BCOO((data, sp.indices), **sp._info._asdict())


def _add(lhs: Any, rhs: Any, *, negate: bool = False) -> Any:
    if _is_sparse(lhs) and _is_sparse(rhs):
        a, b = _as_bcoo(lhs), _as_bcoo(rhs)
        if a.shape != b.shape:
            raise NotImplementedError(f"sparsify: addition of sparse arrays of shapes {a.shape} and {b.shape} "
                                      "(broadcasting is not supported)")
        if _same_pattern(a, b):
            data = a.data - b.data if negate else a.data + b.data
            return BCOO((data, a.indices), **a._info._asdict())
        if negate:
            b = BCOO((-b.data, b.indices), **b._info._asdict())
        nb = min(a.n_batch, b.n_batch)
        nd = min(a.n_dense, b.n_dense)
        a = _bcoo.bcoo_update_layout(a, n_batch=nb, n_dense=nd, on_inefficient=None)
        b = _bcoo.bcoo_update_layout(b, n_batch=nb, n_dense=nd, on_inefficient=None)
        batch = tuple(a.shape[:nb])
        import ftrans.numpy as jnp
        data = jnp.concatenate([_bcoo._broadcast_batch(a.data, batch), _bcoo._broadcast_batch(b.data, batch)], nb)
        idx = jnp.concatenate([_bcoo._broadcast_batch(a.indices, batch),
                               _bcoo._broadcast_batch(b.indices, batch)], nb)
        return BCOO((data, idx), shape=a.shape)
    # sparse + dense: the result is dense, but only when the dense operand already has the result's shape.
    sp, dn = (lhs, rhs) if _is_sparse(lhs) else (rhs, lhs)
    if np.shape(dn) != np.broadcast_shapes(sp.shape, np.shape(dn)):
        raise NotImplementedError(
            f"Addition between a sparse array X and a dense array Y is not implemented when the output shape is "
            f"larger than Y.shape (X: {tuple(sp.shape)}, Y: {np.shape(dn)}). This is to prevent silent densification "
            "of a large sparse array. If this is your intent, you can explicitly cast the sparse array to a dense "
            "matrix.")
    lhs = _as_bcoo(lhs).todense() if _is_sparse(lhs) else lhs
    rhs = _as_bcoo(rhs).todense() if _is_sparse(rhs) else rhs
    return lhs - rhs if negate else lhs + rhs


def _sub(lhs: Any, rhs: Any) -> Any:
    return _add(lhs, rhs, negate=True)


def _div(lhs: Any, rhs: Any) -> Any:
    if _is_sparse(rhs):
        raise NotImplementedError("sparsify: division by a sparse array")
    sp = _as_bcoo(lhs)
    import ftrans.numpy as jnp
    rhs = jnp.asarray(rhs)
    if rhs.ndim == 0:
        return BCOO((sp.data / rhs, sp.indices), **sp._info._asdict())
    data = _bcoo.bcoo_multiply_dense(sp, 1 / rhs)
    return BCOO((data, sp.indices), **sp._info._asdict())


def _reduce_sum(x: Any, *, axes: Any, **_: Any) -> Any:
    out = _bcoo.bcoo_reduce_sum(_as_bcoo(x), axes=axes)
    return out.data.sum() if out.shape == () else out  # a full reduction is a dense scalar, as in JAX


def _transpose(x: Any, *, permutation: Any) -> Any:
    return _as_bcoo(x).transpose(permutation)


def _reshape(x: Any, *, new_sizes: Any, dimensions: Any = None, **_: Any) -> Any:
    return _bcoo.bcoo_reshape(_as_bcoo(x), new_sizes=new_sizes, dimensions=dimensions)


def _expand_dims(x: Any, *, dimensions: Any) -> Any:
    x = _as_bcoo(x)
    ndim = x.ndim + len(dimensions)
    dims = sorted(d % ndim for d in dimensions)
    shape = list(x.shape)
    for d in dims:
        shape.insert(d, 1)
    keep = [k for k in range(ndim) if k not in dims]
    return _bcoo.bcoo_broadcast_in_dim(x, shape=tuple(shape), broadcast_dimensions=tuple(keep))


def _squeeze(x: Any, *, dimensions: Any) -> Any:
    return _bcoo.bcoo_squeeze(_as_bcoo(x), dimensions=dimensions)


def _broadcast_in_dim(x: Any, *dyn: Any, shape: Any, broadcast_dimensions: Any, **_: Any) -> Any:
    return _bcoo.bcoo_broadcast_in_dim(_as_bcoo(x), shape=shape, broadcast_dimensions=broadcast_dimensions)


def _concatenate(*xs: Any, dimension: int) -> Any:
    if not all(_is_sparse(x) for x in xs):
        import ftrans.numpy as jnp
        return jnp.concatenate([_as_bcoo(x).todense() if _is_sparse(x) else x for x in xs], dimension)
    return _bcoo.bcoo_concatenate([_as_bcoo(x) for x in xs], dimension=dimension)


def _slice(x: Any, *, start_indices: Any, limit_indices: Any, strides: Any = None) -> Any:
    return _bcoo.bcoo_slice(_as_bcoo(x), start_indices=start_indices, limit_indices=limit_indices, strides=strides)


def _rev(x: Any, *, dimensions: Any) -> Any:
    return _bcoo.bcoo_rev(_as_bcoo(x), dimensions=dimensions)


_RULES: dict[str, Callable] = {
    "dot_general": _dot_general,
    "mul": _mul,
    "add": _add,
    "add_any": _add,
    "sub": _sub,
    "div": _div,
    "reduce_sum": _reduce_sum,
    "transpose": _transpose,
    "reshape": _reshape,
    "expand_dims": _expand_dims,
    "squeeze": _squeeze,
    "broadcast_in_dim": _broadcast_in_dim,
    "concatenate": _concatenate,
    "slice": _slice,
    "rev": _rev,
}


def _gather(operand: Any, start_indices: Any, *, dimension_numbers: Any, slice_sizes: Any, mode: Any = None,
            fill_value: Any = None, **_: Any) -> Any:
    """JAX's ``lax`` ``gather`` of a BCOO operand: one dynamic slice per start index, mapped with ``vmap``."""
    import ftrans.numpy as jnp
    from ftrans.core.avals import ShapeDtypeStruct
    from ftrans.lax import gather as lax_gather
    from ftrans.transforms.batching import vmap
    from ftrans.transforms.jit import eval_shape
    if _is_sparse(start_indices):
        raise NotImplementedError("sparsify: gather with sparse indices")
    op = _as_bcoo(operand)
    dn = dimension_numbers
    if getattr(dn, "operand_batching_dims", ()):
        raise NotImplementedError("sparsify: gather with batching dimensions of a sparse operand")
    if "FILL" in str(mode).upper():
        raise NotImplementedError(f"sparsify: gather of a sparse operand with mode={mode}")
    out_aval = eval_shape(lambda o, i: lax_gather(o, i, dn, slice_sizes, mode=mode, fill_value=fill_value),
                          ShapeDtypeStruct(op.shape, op.dtype), start_indices)
    start_indices = jnp.asarray(start_indices)
    batch_shape = tuple(start_indices.shape[:-1])
    flat = start_indices.reshape(-1, start_indices.shape[-1])
    sizes = [int(s) for s in slice_sizes]

    def one(row):
        starts = [jnp.zeros((), flat.dtype)] * op.ndim
        for i, d in enumerate(dn.start_index_map):
            starts[d] = row[i]
        sl = _bcoo.bcoo_dynamic_slice(op, starts, sizes)
        return _bcoo.bcoo_squeeze(sl, dimensions=tuple(dn.collapsed_slice_dims)) if dn.collapsed_slice_dims else sl

    res = vmap(one)(flat)
    res = _bcoo.bcoo_reshape(res, new_sizes=batch_shape + tuple(res.shape[1:]))
    out_ndim = len(out_aval.shape)
    offset = tuple(dn.offset_dims)
    gather_batch = tuple(d for d in range(out_ndim) if d not in offset)
    perm = np.zeros(out_ndim, dtype=int)
    perm[np.array(gather_batch + offset, dtype=int)] = np.arange(out_ndim)
    if out_ndim and tuple(perm) != tuple(range(out_ndim)):
        res = res.transpose(tuple(int(p) for p in perm))
    if tuple(res.shape) != tuple(out_aval.shape):
        res = _bcoo.bcoo_reshape(res, new_sizes=tuple(out_aval.shape))
    return res


_RULES["gather"] = _gather
_RULES["todense"] = lambda x: x.todense()  # ``sparse.todense`` of a value that is sparse here


# Control flow: the primitive is bound again through ftrans.lax with the sparse operands as pytrees (their
# data and index buffers become the loop's or branches' operands), each body interpreted sparsely.


def _closed(j: Any) -> ClosedJaxpr:
    return j if isinstance(j, ClosedJaxpr) else ClosedJaxpr(j, [])


def _cond(index: Any, *ops: Any, branches: Any, **_: Any) -> list:
    from ftrans import lax

    trees: list = []

    def branch(b: Any) -> Callable:
        def run(*vals: Any) -> list:
            out = _eval_sparse(_closed(b), list(vals))
            trees.append(tree_util.tree_structure(out))
            return out
        return run

    fns = [branch(b) for b in branches]
    try:
        return list(lax.switch(index, fns, *ops))
    except Exception:
        if len(trees) >= len(fns) and len(set(map(str, trees))) > 1:
            trees = trees[:len(fns)]  # one per branch, in branch order
            if len(fns) == 2:
                msg = (f"sparsified true_fun output must have same type structure as sparsified false_fun output: "
                       f"{trees[1]} and {trees[0]}")
            else:
                msg = f"sparsified branch outputs must have the same type structure; got {trees}"
            from ftrans.errors import FtransTypeError

            raise FtransTypeError(msg + " (make every branch return sparse or dense values alike)") from None
        raise


def _while(*ins: Any, cond_jaxpr: Any, body_jaxpr: Any, cond_nconsts: int, body_nconsts: int, **_: Any) -> list:
    from ftrans import lax

    cconsts, bconsts = list(ins[:cond_nconsts]), list(ins[cond_nconsts:cond_nconsts + body_nconsts])
    init = list(ins[cond_nconsts + body_nconsts:])
    pred = lambda carry: _eval_sparse(_closed(cond_jaxpr), cconsts + list(carry))[0]  # noqa: E731
    body = lambda carry: _eval_sparse(_closed(body_jaxpr), bconsts + list(carry))  # noqa: E731
    return list(lax.while_loop(pred, body, init))


def _scan(*ins: Any, jaxpr: Any, num_consts: int, num_carry: int, length: int, reverse: bool = False,
          unroll: Any = 1, **_: Any) -> list:
    from ftrans import lax

    consts, carry, xs = list(ins[:num_consts]), list(ins[num_consts:num_consts + num_carry]), \
        list(ins[num_consts + num_carry:])
    if any(_is_sparse(x) for x in xs):
        raise NotImplementedError("sparse rule for scan over sparse xs is not implemented.")

    def step(c: Any, x: Any) -> tuple:
        out = _eval_sparse(_closed(jaxpr), consts + list(c) + list(x))
        return out[:num_carry], out[num_carry:]

    c_out, ys = lax.scan(step, carry, xs, length=length, reverse=reverse, unroll=unroll)
    return list(c_out) + list(ys)


_RULES.update({"cond": _cond, "while": _while, "scan": _scan})


def _dynamic_slice(x: Any, *starts: Any, slice_sizes: Any) -> Any:
    if any(_is_sparse(s) for s in starts):
        raise NotImplementedError("sparse rule for dynamic_slice with sparse start indices is not implemented.")
    return _bcoo.bcoo_dynamic_slice(_as_bcoo(x), list(starts), tuple(slice_sizes))


def _conv(lhs: Any, rhs: Any, **params: Any) -> Any:
    lhs = _as_bcoo(lhs) if _is_sparse(lhs) else lhs
    rhs = _as_bcoo(rhs) if _is_sparse(rhs) else rhs
    dn = params.get("dimension_numbers")
    ident = tuple(range(len(lhs.shape)))
    if dn is not None and all(tuple(getattr(dn, f)) == ident for f in ("lhs_spec", "rhs_spec", "out_spec")):
        params = {**params, "dimension_numbers": None}  # the default layout, as the sparse rule takes it
    return _bcoo.bcoo_conv_general_dilated(lhs, rhs, **params)


_RULES.update({"dynamic_slice": _dynamic_slice, "conv_general_dilated": _conv})


def _getitem(x: Any, idx: Any) -> Any:
    return sparsify(lambda a: a[idx])(x)


# The lower-level interface JAX exposes beside ``sparsify``: arrays named by positions in a shared list of
# buffers (``SparsifyEnv``), so two sparse values can share one indices buffer, which the sparse rules then
# recognise as the same sparsity pattern (``x + y`` adds the data instead of concatenating).


class SparsifyValue(NamedTuple):
    """A dense or sparse array as positions in a ``SparsifyEnv``'s buffers: ``indices_ref`` None is dense;
    ``indptr_ref`` set is BCSR."""

    shape: tuple
    data_ref: int | None
    indices_ref: int | None = None
    indptr_ref: int | None = None
    indices_sorted: bool | None = False
    unique_indices: bool | None = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_sparse(self) -> bool:
        return self.indices_ref is not None

    def is_dense(self) -> bool:
        return self.indices_ref is None

    def is_bcoo(self) -> bool:
        return self.is_sparse() and self.indptr_ref is None

    def is_bcsr(self) -> bool:
        return self.is_sparse() and self.indptr_ref is not None


class SparsifyEnv:
    """The buffers that ``SparsifyValue``s point into (several values may share one)."""

    def __init__(self, bufs: Any = ()):
        self._buffers = list(bufs)

    def _push(self, arr: Any) -> int:
        import ftrans.numpy as jnp

        self._buffers.append(jnp.asarray(arr))
        return len(self._buffers) - 1

    def _get(self, ref: int | None, what: str) -> Any:
        if ref is None:
            raise ValueError(f"SparsifyEnv: this value has no {what} buffer ({what}_ref is None)")
        return self._buffers[ref]

    def data(self, spvalue: SparsifyValue) -> Any:
        return self._get(spvalue.data_ref, "data")

    def indices(self, spvalue: SparsifyValue) -> Any:
        return self._get(spvalue.indices_ref, "indices")

    def indptr(self, spvalue: SparsifyValue) -> Any:
        return self._get(spvalue.indptr_ref, "indptr")

    def dense(self, data: Any) -> SparsifyValue:
        """A new dense value holding ``data``."""
        return SparsifyValue(np.shape(data), self._push(data))

    def sparse(self, shape: Any, data: Any = None, indices: Any = None, indptr: Any = None, *,
               data_ref: int | None = None, indices_ref: int | None = None, indptr_ref: int | None = None,
               indices_sorted: bool = False, unique_indices: bool = False) -> SparsifyValue:
        """A new sparse value: each buffer given either as an array (added) or as the position of one already
        here (shared)."""

        def ref(arr: Any, r: int | None, what: str, required: bool) -> int | None:
            if arr is not None:
                if r is not None:
                    raise ValueError(f"SparsifyEnv.sparse: give {what} or {what}_ref, not both")
                return self._push(arr)
            if r is None:
                if required:
                    raise ValueError(f"SparsifyEnv.sparse: {what} or {what}_ref is required")
                return None
            if not 0 <= r < len(self._buffers):
                raise ValueError(f"SparsifyEnv.sparse: {what}_ref={r} is not one of the {len(self._buffers)} buffers")
            return r

        d = ref(data, data_ref, "data", True)
        i = ref(indices, indices_ref, "indices", True)
        p = ref(indptr, indptr_ref, "indptr", False)
        return SparsifyValue(tuple(shape), d, i, p, indices_sorted=indices_sorted, unique_indices=unique_indices)


def _is_spvalue(x: Any) -> bool:
    return isinstance(x, SparsifyValue)


def arrays_to_spvalues(spenv: SparsifyEnv, args: Any) -> Any:
    """A pytree of (BCOO, BCSR or dense) arrays as the same pytree of ``SparsifyValue``s in ``spenv``."""

    def one(a: Any) -> SparsifyValue:
        if isinstance(a, BCSR):
            return spenv.sparse(a.shape, a.data, a.indices, a.indptr, indices_sorted=a.indices_sorted,
                                unique_indices=a.unique_indices)
        if isinstance(a, BCOO):
            return spenv.sparse(a.shape, a.data, a.indices, indices_sorted=a.indices_sorted,
                                unique_indices=a.unique_indices)
        return spenv.dense(a)

    return tree_util.tree_map(one, args, is_leaf=_is_sparse)


def spvalues_to_arrays(spenv: SparsifyEnv, spvalues: Any) -> Any:
    """The inverse of ``arrays_to_spvalues``: values sharing a buffer get the very same array object."""

    def one(v: SparsifyValue) -> Any:
        if v.is_bcsr():
            return BCSR((spenv.data(v), spenv.indices(v), spenv.indptr(v)), shape=v.shape,
                        indices_sorted=bool(v.indices_sorted), unique_indices=bool(v.unique_indices))
        if v.is_bcoo():
            return BCOO((spenv.data(v), spenv.indices(v)), shape=v.shape, indices_sorted=bool(v.indices_sorted),
                        unique_indices=bool(v.unique_indices))
        return spenv.data(v)

    return tree_util.tree_map(one, spvalues, is_leaf=_is_spvalue)


def sparsify_raw(f: Callable) -> Callable:
    """``f`` on ``SparsifyValue``s: ``sparsify_raw(f)(spenv, *spvalues, **params)`` returns the flat list of the
    result's values (their buffers added to ``spenv``) and the result's tree structure."""

    def wrapped(spenv: SparsifyEnv, *spvalues: SparsifyValue, **params: Any) -> tuple[list, Any]:
        args = spvalues_to_arrays(spenv, spvalues)
        out = sparsify(f)(*args, **params)
        leaves, out_tree = tree_util.tree_flatten(out, is_leaf=_is_sparse)
        return list(arrays_to_spvalues(spenv, leaves)), out_tree

    return wrapped
