"""JAX's ``stages`` module: the types of ``jit``'s ahead-of-time stages, for annotations and ``isinstance``.

``jit(f)`` is a ``Wrapped``; ``.trace(...)`` gives a ``Traced``, ``.lower(...)``
a ``Lowered`` and ``.lower(...).compile()`` a ``Compiled``. The classes live
beside ``jit`` (ftrans/transforms/jit.py); this module only names them where
JAX users import them from.
"""

from __future__ import annotations

from ftrans.transforms.jit import ArgInfo, Compiled, JitWrapped, Lowered, Traced

Wrapped = JitWrapped

# The type of ``jit(..., compiler_options=...)`` and ``Lowered.compile(compiler_options)``: XLA option names
# to their values (JAX's alias).
CompilerOptions = dict[str, str | bool]

__all__ = ["ArgInfo", "CompilerOptions", "Compiled", "Lowered", "Traced", "Wrapped"]
