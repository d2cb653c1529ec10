"""The docstrings of ``ftrans.numpy``: JAX's section check, and their examples run with doctest.

JAX's ``test_lax_numpy_docstrings`` (tests/lax_numpy_test.py) asks every public function of
``jnp`` for a docstring with "Args:", "Returns:" and "Examples:" sections ("Alias of ..." for
the aliases).  ``test_docstring_sections`` applies the same rule; the names not written yet are
listed in ``_NOT_YET``, which may only shrink: a name there whose docstring is now complete fails
the test, so the list stays honest.  ``test_docstring_examples`` runs every docstring's ``>>>``
examples with doctest and fails on any output that differs.
"""

from __future__ import annotations

import doctest
import re

import numpy as np

import ftrans
import ftrans.numpy as jnp

_UNIMPLEMENTED = {"fromfile", "fromiter"}
_ALIASES = {"abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "atan2", "amax", "amin", "around",
            "bitwise_invert", "bitwise_left_shift", "bitwise_not", "bitwise_right_shift", "conj", "degrees",
            "divide", "get_printoptions", "mod", "pow", "printoptions", "radians", "round_",
            "set_printoptions"}
_SKIP_ARGS_CHECK = {"vsplit", "hsplit", "dsplit", "array_split"}  # as JAX's test
_NO_EXAMPLES = {"frompyfunc", "isdtype", "promote_types"}

# Names whose docstrings do not have every section yet.  This set must only shrink.
_NOT_YET: set[str] = set()


def _public_functions():
    for name in dir(jnp):
        if name.startswith("_") or name in _UNIMPLEMENTED:
            continue
        obj = getattr(jnp, name)
        if isinstance(obj, type) or not callable(obj):
            continue
        if hasattr(np, name) and obj is getattr(np, name):
            continue  # NumPy's own function, re-exported (as in JAX)
        yield name, obj


def _missing_sections(name, obj) -> list[str]:
    doc = obj.__doc__ or ""
    if name in _ALIASES:
        return [] if "Alias of" in doc else ["Alias of"]
    if not doc.strip():
        return ["docstring"]
    need = ["Args:", "Returns:"] + ([] if name in _NO_EXAMPLES else ["Examples:"])
    return [s for s in need if s not in doc]


def test_docstring_sections():
    missing = {}
    for name, obj in _public_functions():
        if name in _SKIP_ARGS_CHECK:
            continue
        gaps = _missing_sections(name, obj)
        if gaps and name not in _NOT_YET:
            missing[name] = gaps
    assert not missing, f"docstrings without JAX's sections: {missing}"
    done = sorted(n for n in _NOT_YET if hasattr(jnp, n) and not _missing_sections(n, getattr(jnp, n)))
    assert not done, f"complete now, remove from _NOT_YET: {done}"


_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


class _UlpTolerantChecker(doctest.OutputChecker):
    """Doctest's check, then the same text with each printed float allowed a few float32 ulps: NumPy's
    float32 kernels round the last digit differently on CPUs with and without AVX-512."""

    def check_output(self, want: str, got: str, optionflags: int) -> bool:
        if super().check_output(want, got, optionflags):
            return True
        if "".join(_NUMBER.sub("#", want).split()) != "".join(_NUMBER.sub("#", got).split()):
            return False
        a = [float(t) for t in _NUMBER.findall(want)]
        b = [float(t) for t in _NUMBER.findall(got)]
        return len(a) == len(b) and all(abs(x - y) <= 4e-7 * max(abs(x), abs(y), 1e-30) for x, y in zip(a, b))


def test_docstring_examples():
    finder = doctest.DocTestFinder(recurse=False, exclude_empty=True)
    flags = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
    failures, count = [], 0
    with ftrans.enable_x64(False):  # the printed dtypes are the 32-bit defaults, whatever ran before
        for name, obj in _public_functions():
            globs = {"jnp": jnp, "np": np, "ftrans": ftrans}
            for test in finder.find(obj, f"jnp.{name}", module=False, globs=globs):
                out: list[str] = []
                runner = doctest.DocTestRunner(checker=_UlpTolerantChecker(), optionflags=flags)
                result = runner.run(test, out=out.append)
                count += result.attempted
                if result.failed:
                    failures.append("".join(out))
    assert count > 0
    assert not failures, "\n".join(failures)
