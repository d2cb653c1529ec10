"""``shard_map`` called outside ``jit``: the body runs device by device, as JAX's eager ``shard_map``.

Each value of the body is held for every device of the mesh at once: either *stacked* (a global array
of shape ``(mesh.size, *block)``, one block per device along a leading axis split over every mesh axis,
in the order of ``mesh.devices``) or the same block on every device (a constant of the body).  Every
primitive applied in the body runs at once as a one-equation ``shard_map`` over the mesh (compiled once
per primitive, parameters and types), so collectives talk across the devices as in the compiled body,
and the values are concrete: ``print(x)`` shows each device's block ("On cpu:0 at mesh coordinates
(x, y,) = (0, 0): ..."), ``jax.debug.print`` prints once per device, and Python control flow works
on a value the same on every device (its manual-axes type varies along none of them, under
``check_vma``), as in JAX.  Transforms inside the body (``grad``, ``vmap``, ``jit``) run above this
trace; a ``shard_map`` under a transform is staged as before (``transforms/shard_map.py``).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from ftrans.core import pytrees as tree_util
from ftrans.core import trace as _trace
from ftrans.core.avals import ShapedArray
from ftrans.core.config import config as _config
from ftrans.core.ir import hoist_consts
from ftrans.core.prims.shard_map import (
    _body_env,
    eager_body,
    local_aval,
    names_of_spec,
    shard_map_p,
    with_ur_names,
)
from ftrans.core.ref import Ref
from ftrans.core.trace import Trace, Tracer, aval_of, new_main, stage

__all__ = ["eager_shard_map"]

_EMPTY: frozenset = frozenset()


class _Ctx:
    __slots__ = ("mesh", "manual", "check")

    def __init__(self, mesh: Any, manual: frozenset, check: bool):
        self.mesh, self.manual, self.check = mesh, manual, check


class EagerShardMapTracer(Tracer):
    """A value of an eager ``shard_map`` body: ``val`` for every device (``names`` None: stacked over the
    devices; otherwise one block, the same on every device) and the manual axes it varies along."""

    __slots__ = ("val", "names", "vma", "_aval")

    def __init__(self, trace: Trace, val: Any, names: Any, vma: frozenset, ur: Any = None):
        self._trace = trace
        self.val, self.names, self.vma = val, names, vma
        a = aval_of(val)
        if names is None:
            a = ShapedArray(tuple(a.shape[1:]), a.dtype, a.weak_type)
        elif type(a) is not ShapedArray:
            a = ShapedArray(tuple(a.shape), a.dtype, a.weak_type)
        if vma or ur:  # (``ur``: the unreduced and reduced manual axes, JAX's ``mat``)
            from ftrans.core.avals import VaryingAval

            a = VaryingAval(a, vma, *(ur or (_EMPTY, _EMPTY)))
        self._aval = a

    @property
    def aval(self) -> ShapedArray:
        return self._aval

    def to_concrete_value(self) -> Any:
        # As JAX's: a value known to be the same on every device (checked types) is that value.
        ctx = self._trace.main.payload
        if not ctx.check or self.vma:
            return None
        return self._blocks()[0]

    def _blocks(self) -> list:
        n = self._trace.main.payload.mesh.size
        with _isolated():
            v = np.asarray(self.val)
        return list(v) if self.names is None else [v] * n

    def __str__(self) -> str:
        mesh = self._trace.main.payload.mesh
        axis_names = f"({', '.join(map(str, mesh.axis_names))},)"
        return "\n".join(f"On {dev} at mesh coordinates {axis_names} = {idx}:\n{block}\n"
                         for (idx, dev), block in zip(np.ndenumerate(mesh.devices), self._blocks()))

    __repr__ = __str__  # for debuggers, as JAX's


class EagerShardMapTrace(Trace):
    __slots__ = ()

    def pure(self, val: Any) -> EagerShardMapTracer:
        from ftrans.transforms.shard_map import check_closed_over

        check_closed_over(val)
        a = aval_of(val)
        return EagerShardMapTracer(self, val, ((),) * len(a.shape), _EMPTY)

    lift = pure  # only the eager trace lies below

    def process_primitive(self, prim: Any, tracers: list, params: dict) -> Any:
        from ftrans.core.sharding import size_one_axes
        from ftrans.transforms.shard_map import body_types, check_vma_match, manual_axes_here

        ctx: _Ctx = self.main.payload
        urs = None
        outs = _run(ctx.mesh, ("prim", prim, _params_key(params)), _prim_body(prim, params),
                    [t.val for t in tracers], tuple(t.names for t in tracers), None)
        if ctx.check:  # (a nested shard_map run inline here makes more axes manual while its body runs)
            if not _config.auto_pcast:  # (JAX's: no implicit pvary, so the operands' types must agree)
                check_vma_match(prim, params, [t.aval for t in tracers])
            vmas, urs = body_types(prim, params, [t.aval for t in tracers], len(outs),
                                   (manual_axes_here() | ctx.manual) - size_one_axes(ctx.mesh))
        else:
            vmas = [_EMPTY] * len(outs)
        res = [EagerShardMapTracer(self, o, None, v, urs[k] if urs else None) for k, (o, v) in enumerate(
            zip(outs, vmas))]
        return res if prim.multiple_results else res[0]


def _prim_body(prim: Any, params: dict) -> Any:
    def body(*xs: Any) -> list:
        out = prim.bind(*xs, **params)
        return list(out) if prim.multiple_results else [out]

    return body


def _identity(*xs: Any) -> list:
    return list(xs)


def _params_key(params: dict) -> Any:
    try:
        key = tuple(sorted(params.items(), key=lambda kv: kv[0]))
        hash(key)
        return key
    except TypeError:
        return None


@contextlib.contextmanager
def _isolated() -> Any:
    """Run concrete code with no transform on this thread (the eager body's trace set aside)."""
    st = _trace.state
    saved = (st.stack, st.dynamic, st.eval_only, st.vma_hook, st.vma_insert)
    st.stack, st.dynamic, st.eval_only, st.vma_hook, st.vma_insert = [st.base], st.base, True, None, None
    try:
        yield
    finally:
        st.stack, st.dynamic, st.eval_only, st.vma_hook, st.vma_insert = saved


_CACHE: dict = {}


def _run(mesh: Any, key: Any, body: Any, vals: list, in_names: tuple, out_names: Any, lay_out: Any = None) -> list:
    """``body`` (flat blocks -> flat blocks) run on every device: operand ``i`` laid out as ``in_names[i]``
    says (None: stacked), each result as ``out_names`` say (None: all stacked); ``lay_out`` (a PartitionSpec,
    for one result): the result's sharding is exactly that spec as the user wrote it (size-1 mesh axes kept and
    no entries added, as JAX's eager results)."""
    full = None if key[-1] is None else (key, in_names, out_names, mesh, lay_out)
    fn = _CACHE.get(full) if full is not None else None
    if fn is None:
        from ftrans.transforms.jit import jit

        def run(*xs: Any) -> list:
            block_avals = [local_aval(ShapedArray(tuple(a.shape), a.dtype, a.weak_type), ns, mesh)
                           for a, ns in zip((aval_of(x) for x in xs), in_names)]
            with _body_env({"mesh": mesh, "check_vma": False}):
                closed, _ = stage(body, block_avals)
            jaxpr, consts = hoist_consts(closed)
            outs = out_names if out_names is not None else (None,) * len(closed.out_avals)
            return shard_map_p.bind(*consts, *xs, jaxpr=jaxpr, mesh=mesh,
                                    in_names=tuple(((),) * np.ndim(c) for c in consts) + tuple(in_names),
                                    out_names=tuple(outs), check_vma=False, name="eager")

        if lay_out is not None:
            from ftrans.core.sharding import NamedSharding

            fn = jit(run, out_shardings=NamedSharding(mesh, lay_out))
        else:
            fn = jit(run)
        if full is not None:
            if len(_CACHE) > 2048:
                _CACHE.clear()
            _CACHE[full] = fn
    with _isolated():
        return list(fn(*vals))


def eager_shard_map(sm: Any, args: tuple) -> Any:
    """Call the shard_mapped function ``sm`` (a ``_ShardMapped``) on concrete ``args``, device by device."""
    from ftrans.transforms import shard_map as S

    fname, mesh, manual, auto, specs, avals, all_leaves, dyn, in_tree, leaves = sm._prepare(args)
    check = bool(sm._check_vma)
    body_axes = frozenset(manual or mesh.axis_names)
    ctx = _Ctx(mesh, body_axes, check)
    eager_body.depth += 1
    eager_body.trace_type = EagerShardMapTrace
    try:
        with new_main(EagerShardMapTrace, ctx, dynamic=True) as main, \
                _body_env({"mesh": mesh, "check_vma": check}, manual), S._body_mesh(mesh, manual, check):
            # (in a function: no tracer of this trace is left referenced when it ends, for the leak checker)
            out_tree, out_specs, outs = _run_body(main.trace, sm, fname, mesh, avals, all_leaves, dyn, in_tree,
                                                  leaves, check, body_axes)
        skeleton = tree_util.tree_unflatten(out_tree, [0] * len(outs))
        out_names = []
        for k, (s, (_, _, _, a)) in enumerate(zip(out_specs, outs)):
            if len(s) > len(a.shape):
                raise S._spec_rank_error(fname, "out_specs", sm._out_specs, skeleton, k, s, a)
            S._check_known(fname, "out_specs", s, mesh)
            S.check_spec(s, mesh, f"shard_map({fname}) out_specs", len(a.shape), a.shape)
            S._check_unreduced("out_specs", mesh, manual, s)
            out_names.append(with_ur_names(names_of_spec(s, len(a.shape)), s))
            S._check_manual(fname, "out_specs", s, out_names[-1], auto)
        if check:
            # (a value cast unreduced counts as varying there, as the out_specs check's inference has it)
            S._raise_out_vma(fname, mesh, out_specs, out_names,
                             [vma | a.unreduced | a.reduced for _, _, vma, a in outs],
                             [ShapedArray(a.shape, a.dtype, a.weak_type) for _, _, _, a in outs],
                             not any(map(S._unreduced_in, leaves)))
        full_manual = not manual or set(manual) == set(mesh.axis_names)
        res = [_run(mesh, ("out",), _identity, [val], (names,), (ns,), s if full_manual else None)[0]
               for (val, names, _, _), ns, s in zip(outs, out_names, out_specs)]
    finally:
        eager_body.depth -= 1
    return tree_util.tree_unflatten(out_tree, res)


def _run_body(trace: Any, sm: Any, fname: str, mesh: Any, avals: list, all_leaves: list, dyn: list, in_tree: Any,
              leaves: list, check: bool, body_axes: frozenset) -> tuple:
    """The user's body on every device's blocks: its output structure, out_specs and, per result, its values
    (val, names, vma, aval)."""
    from ftrans.transforms import shard_map as S

    ins = []
    for x, (_a, ns) in zip(leaves, avals):
        (v,) = _run(mesh, ("in",), _identity, [x], (ns,), None)
        vma = frozenset(n for ax in ns for n in ax) & body_axes if check else _EMPTY
        ur = S._spec_ur(ns, body_axes) if check else None
        if check and S.config.remove_size_one_mesh_axis_from_type:  # (JAX's switch: none varies along them)
            one = S.size_one_axes(mesh)
            vma, ur = vma - one, ur and (ur[0] - one, ur[1] - one)
        ins.append(EagerShardMapTracer(trace, v, None, vma, ur if ur and any(ur) else None))
    it = iter(ins)
    xs = [next(it) if d else x for x, d in zip(all_leaves, dyn)]
    out = sm._fun(*tree_util.tree_unflatten(in_tree, xs))
    flat, out_tree = tree_util.tree_flatten(out)
    out_specs = S._broadcast_specs(fname, "out_specs", sm._out_specs, out, len(flat))
    outs = []
    for o in flat:
        if isinstance(o, Ref):
            from ftrans.errors import FtransValueError

            raise FtransValueError(
                f"Eager shard_map cannot return a `jax.Ref`: shard_map({fname}) returned {o!r}, created in its "
                "body. Return its value (`ftrans.freeze(ref)` or `ref[...]`), or jit the body")
        t = trace.full_raise(o)
        outs.append((t.val, t.names, t.vma, t.aval))
    return out_tree, out_specs, outs
