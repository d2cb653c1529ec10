"""A griffe extension for the docs site: the functions of ``ftrans.numpy._elementwise``.

That module builds most of its functions with factories (``sin = _unary(...)``), fills its
``__all__`` at import time and takes their docstrings from the ``_elementwise_docs`` table, none of
which griffe's static analysis sees.  This extension gives griffe what the running module has: the
exported names, each factory-made function as a function with its real signature, and every
docstring of the table, so ``::: ftrans.numpy`` documents them like the other functions.
"""

from __future__ import annotations

import inspect
from typing import Any

import griffe

_MODULE = "ftrans.numpy._elementwise"


def _parameters(fn: Any) -> griffe.Parameters:
    kinds = {
        inspect.Parameter.POSITIONAL_ONLY: griffe.ParameterKind.positional_only,
        inspect.Parameter.POSITIONAL_OR_KEYWORD: griffe.ParameterKind.positional_or_keyword,
        inspect.Parameter.VAR_POSITIONAL: griffe.ParameterKind.var_positional,
        inspect.Parameter.KEYWORD_ONLY: griffe.ParameterKind.keyword_only,
        inspect.Parameter.VAR_KEYWORD: griffe.ParameterKind.var_keyword,
    }
    params = []
    for p in inspect.signature(fn).parameters.values():
        default = None if p.default is inspect.Parameter.empty else repr(p.default)
        annotation = p.annotation if isinstance(p.annotation, str) else "Any"
        params.append(griffe.Parameter(p.name, kind=kinds[p.kind], default=default, annotation=annotation))
    return griffe.Parameters(*params)


class ElementwiseDocs(griffe.Extension):
    """Document ``ftrans.numpy._elementwise`` as it is at run time."""

    def on_module_members(self, *, mod: griffe.Module, **kwargs: Any) -> None:
        if mod.path != _MODULE:
            return
        import importlib
        import sys
        from pathlib import Path

        root = str(Path(__file__).resolve().parent.parent)  # this checkout's ftrans, not another install
        if root not in sys.path:
            sys.path.insert(0, root)
        runtime = importlib.import_module(_MODULE)
        docs = runtime._DOCS
        mod.exports = list(runtime.__all__)
        for name in runtime.__all__:
            doc = docs.get(name)
            member = mod.members.get(name)
            if doc is None or member is None or member.is_alias:
                continue
            fn = getattr(runtime, name)
            if member.is_function:
                member.docstring = griffe.Docstring(doc, parent=member, parser="google")
            elif member.is_attribute:
                func = griffe.Function(name, parameters=_parameters(fn), returns="Any", lineno=member.lineno,
                                       endlineno=member.endlineno)
                func.docstring = griffe.Docstring(doc, parent=func, parser="google")
                mod.set_member(name, func)
