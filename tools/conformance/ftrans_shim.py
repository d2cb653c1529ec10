"""pytest plugin: run JAX's own test files against ftrans (the routed copy of ../shared/conformance's shim).

This copy also routes ``jax.scipy``/``jax.experimental``/``jax.example_libraries``/``jax.interpreters``
imports to ftrans's modules, keeps ``import jax.<sub>`` from rebinding ``jax`` to real JAX, shims any test
file named in FTRANS_SHIM_TARGETS, and passes JAX's configuration (``config.update`` and the option context
managers) on to ftrans (FTRANS_SHIM_CONFIG=0 turns that off); see README.md here. The text below is the
original shim's.

Loaded with ``-p ftrans_shim`` (this folder on PYTHONPATH). With FTRANS_SHIM=1 it installs an
import hook that rewrites the *import lines* of the listed JAX test modules before they execute,
so that every name the test code uses for JAX's public API resolves to ftrans:

  jnp / jax.numpy -> ftrans.numpy      lax / jax.lax -> ftrans.lax
  jax.random -> ftrans.random          jax.scipy -> ftrans.scipy      jax.nn -> ftrans.nn
  jax.<transform> (jit, grad, vmap, jvp, vjp, make_jaxpr, ...) -> ftrans.<transform>
  from jax import jit, grad, ...        -> the same names from ftrans
  jax.test_util.check_grads            -> ftrans.test_util.check_grads
  jtu._CompileAndCheck's jit           -> ftrans.jit

Test infrastructure stays real JAX: jax._src.test_util (jtu: the test case class, the
parameter sampling, the dtype lists, assertAllClose), jax.config and its context managers
(numpy_rank_promotion, default_matmul_precision, ...), jax.tree_util, and the jax._src.*
internals that the tests import (core, dtypes, lax_internal, ...). A public name that ftrans
lacks raises AttributeError("ftrans lacks jax.X") at the point of use, so such a test fails
(it never silently falls back to JAX).

Without FTRANS_SHIM=1 the plugin does nothing (the JAX baseline run).
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import os
import re
import sys
import types

SHIM = os.environ.get("FTRANS_SHIM") == "1"
TARGETS = {
    "lax_numpy_test", "lax_test", "lax_autodiff_test", "api_test",
    "lax_control_flow_test", "batching_test", "lax_numpy_reducers_test",
    "lax_numpy_operators_test", "lax_numpy_indexing_test", "lax_vmap_test",
} | set(filter(None, os.environ.get("FTRANS_SHIM_TARGETS", "").split(",")))

# jax.<name> that stay real JAX: configuration, pytrees, internals.
INFRA = {
    "config", "numpy_rank_promotion", "numpy_dtype_promotion", "default_matmul_precision",
    "enable_x64", "transfer_guard", "checking_leaks", "debug_key_reuse", "legacy_prng_key",
    "log_compiles", "enable_checks", "_src", "tree", "tree_util", "interpreters",
    "debug_nans", "debug_infs", "explain_cache_misses", "make_user_context",
}
# jax.<name> -> ftrans.<name> first, real JAX's attribute second (constant-like modules).
MIXED = {"dtypes", "errors"}


class _Missing:
    pass


class _Mixed(types.ModuleType):
    def __init__(self, ft, real):
        super().__init__(real.__name__)
        self._ft, self._real = ft, real

    def __getattr__(self, name):
        v = getattr(self._ft, name, _Missing)
        return getattr(self._real, name) if v is _Missing else v


class NS(types.ModuleType):
    """Wraps an ftrans module (ftrans.numpy, ftrans.lax, ...): a missing attribute gives a
    MissingName (which raises "ftrans lacks jnp.X" when used) instead of failing at import time,
    so a module-level reference to an absent function fails only the tests that use it."""

    def __init__(self, mod, label, real=None):
        super().__init__(mod.__name__)
        self._mod, self._label, self._real = mod, label, real

    def __getattr__(self, name):
        v = getattr(self._mod, name, _Missing)
        if v is _Missing:
            if name.startswith("__"):
                raise AttributeError(name)
            return _missing(self._real, name, self._label)
        if isinstance(v, types.ModuleType) and v.__name__.startswith("ftrans"):
            return NS(v, f"{self._label}.{name}", getattr(self._real, name, None))
        return v

    def __dir__(self):
        return dir(self._mod)


def ns(modname, label):
    import importlib
    real = importlib.import_module("jax" + modname[len("ftrans"):])
    return NS(importlib.import_module(modname), label, real)


class JaxProxy(types.ModuleType):
    """Stands for ``jax`` inside a shimmed test module."""

    def __init__(self):
        super().__init__("jax")
        import jax

        import ftrans
        self._ft, self._jax = ftrans, jax

    def __getattr__(self, name):
        import jax

        import ftrans
        if name in INFRA or name.startswith("__"):
            return getattr(jax, name)
        if name in MIXED:
            return _Mixed(getattr(ftrans, name), getattr(jax, name))
        if name == "test_util":
            return ftrans.test_util
        v = getattr(ftrans, name, _Missing)
        if v is _Missing:
            return _missing(jax, name, "jax")
        if isinstance(v, types.ModuleType) and v.__name__.startswith("ftrans"):
            return NS(v, f"jax.{name}", getattr(jax, name, None))
        return v


def _names_from(src_mod: str, names: str) -> str:
    """``from jax import a, b as c`` -> ``a = _shim_get('a'); c = _shim_get('b')``."""
    out = []
    for part in names.replace("(", "").replace(")", "").split(","):
        part = part.strip()
        if not part:
            continue
        if " as " in part:
            n, alias = (p.strip() for p in part.split(" as "))
        else:
            n = alias = part
        out.append(f"{alias} = _ftrans_shim.get({src_mod!r}, {n!r})")
    return "; ".join(out)


class MissingName:
    """Stands for a public name ftrans lacks; calling it raises AttributeError("ftrans lacks X").
    Attribute access gives a nested MissingName and ``__name__`` works, so module-level
    references (parameter lists, ``op.__name__``) import, and only the tests that use the name
    fail."""

    def __init__(self, qualname):
        self._q = qualname
        self.__name__ = self.__qualname__ = qualname.rsplit(".", 1)[-1]

    def _raise(self, *a, **k):
        raise AttributeError(f"ftrans lacks {self._q}")

    def __call__(self, *a, **k):
        if _IMPORTING:
            # Module-level code (class bodies building parameter lists) calls it while the
            # test module is being imported: that computes test parameters, not results under
            # test, so use JAX's function there and record it.
            real = _real_attr(self._q)
            if real is not _Missing:
                FALLBACKS.add(self._q + " (called at import)")
                return real(*a, **k)
        self._raise()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return MissingName(f"{self._q}.{name}")

    def __repr__(self):
        return f"<ftrans lacks {self._q}>"


_IMPORTING = False


def _real_attr(qualname):
    import importlib
    head, *rest = qualname.split(".")
    mod = {"jnp": "jax.numpy", "lax": "jax.lax", "jax": "jax"}.get(head, head)
    try:
        v = importlib.import_module(mod)
        for r in rest:
            v = getattr(v, r)
        return v
    except (ImportError, AttributeError):
        return _Missing


# Missing names whose JAX value is only a type tag (a dtype, a scalar type, an enum, a
# NamedTuple) fall back to JAX's value: they name things and carry no computation.
FALLBACKS: set[str] = set()


def _type_tag(v) -> bool:
    import enum

    import numpy as np
    if isinstance(v, np.dtype):
        return True
    if isinstance(v, type):
        if hasattr(v, "dtype") or issubclass(v, (np.generic, enum.Enum)):
            return True
        if issubclass(v, tuple) and hasattr(v, "_fields"):
            return True
    return False


def _missing(real_mod, name, label):
    real = getattr(real_mod, name, _Missing) if real_mod is not None else _Missing
    if real is not _Missing and _type_tag(real):
        FALLBACKS.add(f"{label}.{name}")
        return real
    return MissingName(f"{label}.{name}")


def get(src_mod: str, name: str):
    import jax

    import ftrans
    if src_mod == "jax":
        return getattr(_proxy(), name)
    if src_mod == "jax.test_util":
        return getattr(ftrans.test_util, name)
    if src_mod == "jax.tree_util":
        return getattr(jax.tree_util, name)
    if src_mod == "jax.errors":  # ftrans's exception of that name where it has one (it raises its own classes)
        import ftrans.errors
        return getattr(ftrans.errors, name, None) or getattr(jax.errors, name)
    if src_mod.startswith(("jax.scipy", "jax.experimental", "jax.example_libraries", "jax.interpreters")):
        import importlib
        try:
            importlib.import_module("ftrans" + src_mod[3:])
        except ImportError:
            return MissingName(f"{src_mod}.{name}")
        try:
            importlib.import_module("ftrans" + src_mod[3:] + "." + name)  # a submodule, imported
        except ImportError:
            pass
        try:
            return getattr(ns("ftrans" + src_mod[3:], src_mod), name)
        except ImportError:
            return MissingName(f"{src_mod}.{name}")
    raise ImportError(src_mod)


_PROXY = None


def _proxy():
    global _PROXY
    if _PROXY is None:
        _PROXY = JaxProxy()
    return _PROXY


_LINE_RULES = [
    (re.compile(r"^import jax$"), "jax = _ftrans_shim._proxy()"),
    (re.compile(r"^import jax\.numpy as (\w+)"), r"\1 = _ftrans_shim.ns('ftrans.numpy', 'jnp')"),
    (re.compile(r"^from jax import numpy as (\w+)"), r"\1 = _ftrans_shim.ns('ftrans.numpy', 'jnp')"),
    (re.compile(r"^from jax import lax$"), "lax = _ftrans_shim.ns('ftrans.lax', 'lax')"),
    (re.compile(r"^from jax import random$"), "random = _ftrans_shim.ns('ftrans.random', 'jax.random')"),
    (re.compile(r"^import jax\.scipy as (\w+)"), r"\1 = _ftrans_shim.ns('ftrans.scipy', 'jax.scipy')"),
    (re.compile(r"^from jax\.scipy import (\w+) as (\w+)$"), r"\2 = _ftrans_shim.ns('ftrans.scipy.\1', 'jax.scipy.\1')"),
    (re.compile(r"^from jax\.scipy import (\w+)$"), r"\1 = _ftrans_shim.ns('ftrans.scipy.\1', 'jax.scipy.\1')"),
    (re.compile(r"^from jax import scipy as (\w+)$"), r"\1 = _ftrans_shim.ns('ftrans.scipy', 'jax.scipy')"),
    (re.compile(r"^import jax\.scipy\.(\w+) as (\w+)$"), r"\2 = _ftrans_shim.ns('ftrans.scipy.\1', 'jax.scipy.\1')"),
    (re.compile(r"^import (jax\.[\w.]+)$"), r"import \1 as _ftrans_shim_unused"),
    (re.compile(r"^from jax import dtypes$"), "dtypes = _ftrans_shim._proxy().dtypes"),
    (re.compile(r"^from jax import checkpoint_policies$"),
     "checkpoint_policies = _ftrans_shim._proxy().checkpoint_policies"),
    (re.compile(r"^from jax import tree_util$"), "from jax import tree_util"),
]


def rewrite(src: str) -> str:
    lines = src.split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        done = False
        for pat, rep in _LINE_RULES:
            if pat.match(line):
                out.append(pat.sub(rep, line))
                done = True
                break
        if not done and re.match(r"^from jax\._src import .*\bapi\b", line):
            # jax._src.api is where jax's public transforms live (api_test.py calls
            # api.jit/api.grad/api.make_jaxpr ~300 times): give it the proxy too.
            out.append(line + "; api = _ftrans_shim._proxy()")
            done = True
        if not done:
            m = re.match(r"^from (jax|jax\.test_util|jax\.scipy\.\w+(?:\.\w+)?|jax\.errors|jax\.(?:experimental|example_libraries|scipy|interpreters)(?:\.\w+)*) import (.*)$", line)
            if m and m.group(2).strip() not in ("lax", "tree_util"):
                names = m.group(2)
                # multi-line parenthesised import
                while names.count("(") > names.count(")"):
                    i += 1
                    names += " " + lines[i].split("#")[0].strip()
                names = names.split("#")[0]
                out.append(_names_from(m.group(1), names))
                done = True
        if not done:
            out.append(line)
        i += 1
    return "\n".join(out)


class _Loader(importlib.abc.SourceLoader):
    def __init__(self, path):
        self.path = path

    def get_filename(self, fullname):
        return self.path

    def get_data(self, path):
        with open(path, encoding="utf-8") as f:
            return rewrite(f.read()).encode()

    def exec_module(self, module):
        global _IMPORTING
        module._ftrans_shim = sys.modules[__name__]
        _IMPORTING = True
        try:
            super().exec_module(module)
        finally:
            _IMPORTING = False


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname.rsplit(".", 1)[-1] not in TARGETS:
            return None
        for d in sys.path:
            p = os.path.join(d or ".", fullname.replace(".", "/") + ".py")
            if os.path.exists(p):
                return importlib.util.spec_from_file_location(fullname, p, loader=_Loader(p))
        return None


def _patch_jtu():
    from jax._src import test_util as jtu

    import ftrans

    class _Api(types.SimpleNamespace):
        def __getattr__(self, name):
            return getattr(self._real, name)

    jtu.api = _Api(jit=ftrans.jit, _real=jtu.api)
    jtu.check_grads = ftrans.test_util.check_grads


def _route_config():
    """jax's config options, set by ``config.update`` or by their context managers (``jtu.with_config``,
    ``jax.debug_nans(False)``), also set ftrans's option of the same name where ftrans has one."""
    import threading

    import jax
    from jax._src import config as jcfg

    import ftrans
    from ftrans.core import config as fcfg

    real_update = jax.config.update

    def update(name, value):
        real_update(name, value)
        try:
            ftrans.config.update(name, value)
        except Exception:
            pass

    jax.config.update = update
    scm = jcfg.StateContextManager
    enter0, exit0 = scm.__enter__, scm.__exit__
    local = threading.local()

    def enter(self):
        enter0(self)
        cm = None
        try:
            cm = fcfg.config_context(self.state.name)(self.new_val)
            cm.__enter__()
        except Exception:
            cm = None
        local.__dict__.setdefault(id(self), []).append(cm)

    def exit_(self, *exc):
        st = local.__dict__.get(id(self))
        cm = st.pop() if st else None
        if cm is not None:
            try:
                cm.__exit__(None, None, None)
            except Exception:
                pass
        return exit0(self, *exc)

    scm.__enter__, scm.__exit__ = enter, exit_


if SHIM:
    sys.meta_path.insert(0, _Finder())
    _patch_jtu()
    if os.environ.get("FTRANS_SHIM_CONFIG", "1") == "1":
        _route_config()


def pytest_sessionfinish(session, exitstatus):
    if SHIM and FALLBACKS:
        out = os.environ.get("FTRANS_SHIM_FALLBACKS")
        if out:
            with open(out, "a") as f:
                f.write("\n".join(sorted(FALLBACKS)) + "\n")


def pytest_report_header(config):
    return f"ftrans_shim: {'ON (jax public API -> ftrans)' if SHIM else 'off (real jax)'}"
