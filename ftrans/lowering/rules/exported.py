"""Lowering of ``call_exported`` (``ftrans/core/prims/exported.py``) and its eager rule.

The exported module's functions are copied into the calling program once per program
(every symbol renamed with a prefix of its own, so two exported functions, or an exported
function and the caller, never clash; the exported ``main`` becomes private), and the
equation is a ``func.call`` of the copied ``main`` (given first, for a module exported for
several platforms whose programs differ, the index of the platform being lowered for). The
module must have been exported for that platform, unless the platform check was disabled
(``DisabledSafetyCheck.platform()``; the first platform's program runs then), as in JAX.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ftrans.core.prims.exported import call_exported_p
from ftrans.core.shape_poly import is_poly_shape
from ftrans.errors import FtransValueError
from ftrans.lowering import compat
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, register_lowering

_FUNC = re.compile(r"func\.func\s+(?:public|private)\s+@([A-Za-z_][\w$.]*)")
_MESH = re.compile(r"^\s*sdy\.mesh\s+@([A-Za-z_][\w$.]*)", re.M)


def module_functions(text: str, prefix: str, rename_meshes: bool = True) -> tuple[list[str], str]:
    """The functions of a module's text (``module @m attributes {...} { ... }``) with every function symbol
    (and, with ``rename_meshes``, every ``sdy.mesh`` declared) prefixed, ``main`` private; returns (the
    module's body: its mesh declarations and function texts, the new name of ``main``)."""
    lines = str(text).rstrip().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("module"))
    body = "\n".join(lines[start + 1:-1])  # between the module's braces
    names = set(_FUNC.findall(body))
    if rename_meshes:
        names |= set(_MESH.findall(body))
    if "main" not in names:
        raise FtransValueError("call_exported: the exported module has no public main function")
    sym = re.compile(r"@([A-Za-z_][\w$.]*)")
    body = sym.sub(lambda m: f"@{prefix}{m.group(1)}" if m.group(1) in names else m.group(0), body)
    body = body.replace(f"func.func public @{prefix}", f"func.func private @{prefix}")
    return [body], f"{prefix}main"


def _platform_index(exported: Any, platform: str) -> int:
    """The index of ``platform`` among the exported platforms (0 when the platform check is disabled)."""
    if platform in exported.platforms:
        return exported.platforms.index(platform)
    if any(getattr(c, "_kind", None) == "platform" for c in exported.disabled_safety_checks):
        return 0
    raise FtransValueError(f"Function '{exported.fun_name}' was exported for platforms '{exported.platforms}' but "
                           f"it is used on '{(platform,)}'.")


def _check_devices(exported: Any, module: Any) -> None:
    """A program partitioned over ``n`` devices runs only where the caller's program is partitioned over ``n``
    devices (a single-device one runs anywhere), as in JAX."""
    n, here = exported.nr_devices, module.num_partitions if module.meshes else 1
    if n != 1 and n != here:
        raise FtransValueError(
            f"Function {exported.fun_name} was exported for {n} devices and is called in a context with {here} "
            f"devices, which is not allowed (JAX's words). The module was lowered for {n} devices; call it in a "
            f"program partitioned over as many (arguments laid out over a mesh of {n} devices, or in_shardings over "
            "one)")


def _check_shardy(exported: Any) -> None:
    """A module with Shardy meshes called with ``use_shardy_partitioner`` off: refused, as JAX refuses it (ftrans
    itself always partitions with Shardy; the option changes nothing else)."""
    from ftrans.core.config import config

    if not config.read("use_shardy_partitioner") and _MESH.search(exported.mlir_module()):
        raise FtransValueError("The function was exported with shardy enabled but you are calling it with Shardy "
                               "disabled. Please enable Shardy using `--jax_use_shardy_partitioner=True`.")


def _constrain(ctx: LoweringContext, vals: list, shardings: tuple, avals: list, prefix: str) -> list:
    """``vals`` constrained to the exported shardings (over the embedded module's meshes)."""
    from ftrans.lowering.sdy import sharding_attr

    out = []
    for v, s, a in zip(vals, shardings, avals):
        if s is not None:
            attr = sharding_attr(f"{prefix}{s.symbol}", s.spec, len(a.shape))
            v = ctx.emit("sdy.sharding_constraint", [v], [mt.aval_type(a)], {"sharding": attr})[0]
        out.append(v)
    return out


@register_lowering(call_exported_p)
def _call_exported_lowering(ctx: LoweringContext, *args: str, exported: Any) -> list[str]:
    index = _platform_index(exported, ctx.platform)
    module = ctx.module
    _check_devices(exported, module)
    _check_shardy(exported)
    embedded = module.__dict__.setdefault("_exported_mains", {})
    text = exported.mlir_module()
    key: Any = id(exported)
    poly_args = getattr(exported, "_poly", False) and any(a.shape != w.shape
                                                          for a, w in zip(ctx.avals_in, exported.in_avals))
    if poly_args and any(is_poly_shape(a.shape) for a in ctx.avals_in):
        return _call_dynamic(ctx, list(args), exported, index)
    if poly_args:
        # shape polymorphism: the module specialised to the arguments' concrete shapes
        key = (id(exported), tuple(a.shape for a in ctx.avals_in))
        text = _specialized(exported, ctx.avals_in, ctx.avals_out, index)
    entry = embedded.get(key)
    if entry is None:
        prefix = f"_exported{len(embedded)}_"
        funcs, main = module_functions(text, prefix)
        module.private.extend(funcs)
        entry = embedded[key] = (main, exported)  # the Exported is kept so its id stays unique
    prefix = entry[0][:-len("main")]
    operands = _constrain(ctx, list(args), exported.in_shardings_hlo, ctx.avals_in, prefix)
    if exported._indexed and isinstance(key, int):  # a module for several platforms: main takes the platform's index first
        operands = [ctx.scalar(index, np.dtype(np.int32)), *operands]
    result_types = [mt.aval_type(a) for a in ctx.avals_out]
    outs = ctx.emit("func.call", operands, result_types, {"callee": f"@{entry[0]}"})
    return _constrain(ctx, list(outs), exported.out_shardings_hlo, ctx.avals_out, prefix)


def _call_dynamic(ctx: LoweringContext, args: list, exported: Any, index: int) -> list[str]:
    """A shape-polymorphic ``exported`` called with arguments of other symbolic shapes (while exporting a
    function that calls it): its module embedded as it is, the operands and results cast between the two
    programs' dynamic types (shape refinement makes them static when the outer program runs)."""
    module = ctx.module
    embedded = module.__dict__.setdefault("_exported_mains", {})
    entry = embedded.get(id(exported))
    if entry is None:
        prefix = f"_exported{len(embedded)}_"
        funcs, main = module_functions(exported.mlir_module(), prefix)
        module.private.extend(funcs)
        entry = embedded[id(exported)] = (main, exported)
    f = ctx.fn
    poly_in = [mt.strip_symbolic(mt.aval_type(a)) for a in exported.in_avals]
    poly_out = [mt.strip_symbolic(mt.aval_type(a)) for a in exported.out_avals]
    operands = [a if mt.strip_symbolic(f.types[a]) == t else f.emit("stablehlo.convert", [a], [t])[0]
                for a, t in zip(args, poly_in)]
    if exported._indexed:
        operands = [ctx.scalar(index, np.dtype(np.int32)), *operands]
    outs = f.emit("func.call", operands, poly_out, {"callee": f"@{entry[0]}"})
    return [o if mt.strip_symbolic(mt.aval_type(a)) == t else f.emit("stablehlo.convert", [o], [mt.aval_type(a)])[0]
            for o, t, a in zip(outs, poly_out, ctx.avals_out)]


def _specialized(exported: Any, avals_in: list, avals_out: list, index: int) -> str:
    """The module of a shape-polymorphic ``exported`` for arguments of the concrete ``avals_in``: a ``main`` of
    those static types calling the exported one, every dynamic shape then made static by StableHLO's shape
    refinement (cached on the Exported per argument shapes)."""
    key = (tuple(a.shape for a in avals_in), index)
    text = exported._specialized.get(key)
    if text is not None:
        return text
    # (its meshes keep their names: embedding the specialised module prefixes them, as the call's constraints)
    funcs, main = module_functions(exported.mlir_module(), "_poly_", rename_meshes=False)
    fn = mt.FuncEmitter()
    args = [fn.argument(mt.aval_type(a)) for a in avals_in]
    poly_in = [mt.strip_symbolic(mt.aval_type(a)) for a in exported.in_avals]
    poly_out = [mt.strip_symbolic(mt.aval_type(a)) for a in exported.out_avals]
    operands = [fn.emit("stablehlo.convert", [a], [t])[0] for a, t in zip(args, poly_in)]
    if exported._indexed:
        operands = [fn.constant(np.asarray(index, np.int32)), *operands]
    outs = fn.emit("func.call", operands, poly_out, {"callee": f"@{main}"}) if poly_out else []
    outs = [fn.emit("stablehlo.convert", [o], [mt.aval_type(a)])[0] for o, a in zip(outs, avals_out)]
    fn.emit("func.return", outs, [])
    sig = ", ".join(f"{a}: {fn.types[a]}" for a in args)
    rets = ", ".join(mt.aval_type(a) for a in avals_out)
    wrapper = f"  func.func public @main({sig}) -> ({rets}) {{\n" + "\n".join(fn.lines) + "\n  }"
    module = "module @specialized {\n" + "\n".join([wrapper, *funcs]) + "\n}\n"
    try:
        text = compat.refine_shapes(module)
    except Exception as e:  # noqa: BLE001 - the refinement's own message says which op it could not refine
        raise FtransValueError(f"call_exported: the shape-polymorphic function '{exported.fun_name}' could not "
                               f"be specialised to the argument shapes "
                               f"{[tuple(a.shape) for a in avals_in]}: {e}") from e
    exported._specialized[key] = text
    return text


def _call_exported_impl(*args: Any, exported: Any) -> list:
    """The host rule (NumPy arrays in and out): the exported program, compiled for the default device."""
    from ftrans.devices import default_device
    from ftrans.lowering import device_eager

    outs = device_eager.apply(call_exported_p, args, {"exported": exported}, default_device())
    return [np.asarray(o) for o in outs]


call_exported_p.def_impl(_call_exported_impl)
