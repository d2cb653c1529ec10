"""``call_exported``: a call of a function exported with ``ftrans.export`` (JAX's ``call_exported_p``).

Its one param, ``exported``, is the ``Exported`` being called (equal only to itself): the
results are its ``out_avals``, and the StableHLO module it holds is what runs (the lowering
in ``ftrans/lowering/rules/exported.py`` embeds that module's functions in the calling
program). The arguments were checked against ``in_avals`` by ``Exported.call``, which also
gives the call its derivative (the exported VJP, through ``custom_vjp``); the primitive
itself has none.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.avals import ShapedArray
from ftrans.core.primitive import Primitive
from ftrans.core.shape_poly import solve_dim_vars, substitute
from ftrans.errors import FtransValueError

__all__ = ["call_exported_p"]

call_exported_p = Primitive("call_exported", multiple_results=True)


@call_exported_p.def_weak_type
def _call_exported_weak(weaks: tuple, *, exported: Any) -> tuple:
    return tuple(bool(a.weak_type) for a in exported._out_avals)  # as exported (JAX keeps weak types there)



def _specialized_out_avals(avals: tuple, exported: Any) -> list:
    """The results of a shape-polymorphic exported function called with arguments of concrete shapes: its
    symbolic result shapes evaluated for the dimension variables those shapes give."""
    want = exported._in_avals
    if len(avals) != len(want) or any(a.dtype != w.dtype or len(a.shape) != len(w.shape)
                                      for a, w in zip(avals, want)):
        got = ", ".join(a.str_short() for a in avals)
        raise FtransValueError(f"call_exported: the exported function '{exported.fun_name}' takes "
                               f"({', '.join(w.str_short() for w in want)}), called with ({got})")
    try:
        env = solve_dim_vars([w.shape for w in want], [a.shape for a in avals],
                             [f"args[{i}]" for i in range(len(avals))])
    except ValueError as e:
        raise FtransValueError(str(e)) from None
    return [ShapedArray(substitute(a.shape, env), a.dtype, bool(a.weak_type)) for a in exported._out_avals]


@call_exported_p.def_abstract_eval
def _call_exported_abstract(*avals: ShapedArray, exported: Any) -> list:
    want = exported._in_avals
    if getattr(exported, "_poly", False) and any(a.shape != w.shape for a, w in zip(avals, want)):
        return _specialized_out_avals(avals, exported)
    if len(avals) != len(want) or any((a.shape, a.dtype) != (w.shape, w.dtype) for a, w in zip(avals, want)):
        got = ", ".join(a.str_short() for a in avals)
        raise FtransValueError(f"call_exported: the exported function '{exported.fun_name}' takes "
                               f"({', '.join(w.str_short() for w in want)}), called with ({got})")
    return [ShapedArray(a.shape, a.dtype, bool(a.weak_type)) for a in exported._out_avals]


# Sharding in types: the results have the types of the exported out shardings (their Explicit axes, unreduced and
# reduced ones), as JAX's call_exported results do.

def _call_exported_sharding(mesh: Any, out: Any, *avals: ShapedArray, exported: Any) -> Any:
    from ftrans.core import sharding_rules as sr
    from ftrans.core.sharding import NamedSharding, spec_mesh

    shardings = getattr(exported, "out_shardings_hlo", ())
    if not any(s is not None for s in shardings):
        return None
    here = spec_mesh()
    res = []
    for o, s in zip(out, shardings):
        if s is None:
            res.append(None)
            continue
        m = here if here is not None and here.abstract_mesh == s.mesh else s.mesh  # the context's devices
        r = sr.sharding_constraint(mesh, None, o, sharding=NamedSharding(m, s.spec))
        res.append(None if r[0] is None else r)
    return res


def _call_exported_ur(name: str, mesh: Any, out_spec: Any, *avals: ShapedArray, **params: Any) -> tuple:
    return getattr(out_spec, "unreduced", frozenset()), getattr(out_spec, "reduced", frozenset())


def _register_sharding() -> None:
    from ftrans.core import sharding_rules as sr

    call_exported_p.sharding_rule = _call_exported_sharding
    call_exported_p.sets_sharding = True
    sr.UR_RULES["call_exported"] = _call_exported_ur


_register_sharding()
