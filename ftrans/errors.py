"""Exceptions users can cause, each naming the user's own source line.

They subclass the built-in exception JAX raises in the same situation
(``TypeError`` for a shape or dtype mismatch, ``ValueError`` for a bad value,
``IndexError`` for an index out of range) so ``except TypeError`` code written
for JAX keeps working, and every message ends with where in the user's code the
failing call was made.
"""

from __future__ import annotations

import os
import sys
import sysconfig

_FTRANS_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _library_dirs() -> tuple[str, ...]:
    """ftrans's own directory and jax's: a frame in either is never the user's line.

    ftrans calls back into user code through ``jax.tree_util`` (``tree_map``),
    so the frame under an ftrans frame can be jax's; the user's is further out.
    """
    import jax

    return (_FTRANS_DIR, os.path.dirname(os.path.abspath(jax.__file__)) + os.sep)


LIBRARY_DIRS = _library_dirs()
# The standard library's directories: not the user's frames either, when a traceback is recorded (as JAX's).
STDLIB_DIRS = tuple(sorted({sysconfig.get_path("stdlib"), os.path.dirname(os.__file__)}))


def user_frame():
    """The innermost stack frame that is not inside ftrans or jax (or None)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(LIBRARY_DIRS):
        f = f.f_back
    return f


# ftrans's library functions, built on ``jnp`` (as opposed to ``jnp`` and the array's operators themselves, and
# the machinery that traces, transforms and dispatches: core, transforms, lowering).
_LIBRARY_IMPLEMENTATIONS = tuple(
    [_FTRANS_DIR + d + os.sep for d in ("scipy", "nn", "experimental", "lax", "random", "image", "example_libraries")]
    + [_FTRANS_DIR + os.path.join("numpy", f) for f in ("linalg.py", "fft.py")])


def library_internal() -> bool:
    """Whether the failing promotion check in progress is one of ftrans's library functions' own arithmetic
    (``scipy``, ``nn``, ``lax``'s composites, ``experimental.sparse``, ...) rather than a ``jnp`` function or
    array operator applied to the user's operands.

    JAX's test suite runs with ``numpy_rank_promotion='raise'`` and ``numpy_dtype_promotion='strict'``, and
    JAX's library code is written not to trip them: the options constrain the user's operands. ftrans's
    library functions build on ``jnp`` and may promote implicitly inside. So the frames above the check are
    read outwards: a library function's frame before the first frame of the user's code (a function the
    user passed in included) means its internals, checked under standard promotion. Called on the failure
    path only."""
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if name.startswith(_LIBRARY_IMPLEMENTATIONS):
            return True
        if not name.startswith(LIBRARY_DIRS):
            return False
        f = f.f_back
    return False


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` in the caller point at the user's line (the first
    frame outside ftrans and jax), however many of ftrans's wrappers sit between."""
    f, level = sys._getframe(1), 1
    while f is not None and f.f_code.co_filename.startswith(LIBRARY_DIRS):
        f, level = f.f_back, level + 1
    return level


def user_location() -> str:
    f = user_frame()
    if f is None:
        return "<unknown location>"
    return f"{f.f_code.co_filename}:{f.f_lineno}"


def _with_location(msg: str) -> str:
    if not isinstance(msg, str):  # an object instead of a message (JAX's tracer-taking form): described
        try:
            msg = str(msg)
        except Exception:  # noqa: BLE001 - an object that cannot print itself
            msg = _describe_tracer(msg)
    if "\n  (in your code at " in msg:  # re-raised with context: keep the one location
        return msg
    return f"{msg}\n  (in your code at {user_location()})"


class FtransError(Exception):
    """Base of ftrans's own exception types."""


class _Located:
    def __init__(self, msg: str = ""):
        super().__init__(_with_location(msg))


class FtransTypeError(_Located, FtransError, TypeError):
    """A shape, dtype or argument-type problem (JAX raises ``TypeError`` here)."""


class FtransValueError(_Located, FtransError, ValueError):
    """A bad value: an axis out of range, a bad size, an unknown option."""


class NoMeshError(FtransValueError, RuntimeError):
    """A bare ``PartitionSpec`` where no mesh is current: a ``ValueError``, and the ``RuntimeError`` JAX raises."""


class TypePromotionError(FtransValueError):
    """Two dtypes with no implicit promotion path (JAX's ``jax.dtypes.TypePromotionError``, also a
    ``ValueError``): the narrow floats and integers, or any mixed pair under strict promotion."""


class FtransShapeError(_Located, FtransError, TypeError, ValueError):
    """Operand shapes that do not broadcast together.

    JAX raises ``TypeError`` here and NumPy ``ValueError``; this is both, so
    handlers written for either keep working.
    """


class FtransAttributeError(_Located, FtransError, AttributeError):
    """Something missing on an object the user defined: a ``custom_vmap`` function without a vmap rule."""


class FtransConfigError(_Located, FtransError, AttributeError, ValueError):
    """An unknown configuration option: JAX raises ``AttributeError`` here, and ftrans used to raise
    ``ValueError``; this is both."""


class FtransOverflowError(_Located, FtransError, OverflowError):
    """A Python int outside the range of the integer type it must become (as JAX raises)."""


class FtransIndexError(_Located, FtransError, IndexError):
    """A static index out of range."""


class FtransKeyError(_Located, FtransError, KeyError):
    """A name that is not there: a ``debug.print`` placeholder with no keyword argument of that name."""

    def __str__(self) -> str:  # KeyError would show the message quoted, as a key
        return str(self.args[0]) if self.args else ""


class FtransNameError(_Located, FtransError, NameError):
    """An unbound name: a collective's axis name that no enclosing ``vmap``/``pmap`` binds."""


# JAX's page explaining each of its error classes (what causes it, how to fix it); it holds for ftrans's
# classes of the same names, whose messages end with a link to their entry, as JAX's do.
ERROR_PAGE = "https://docs.jax.dev/en/latest/errors.html"
_JAX_DOCUMENTED = frozenset({
    "JAXTypeError", "JAXIndexError", "ConcretizationTypeError", "NonConcreteBooleanIndexError",
    "TracerArrayConversionError", "TracerIntegerConversionError", "TracerBoolConversionError",
    "UnexpectedTracerError", "KeyReuseError"})


def _describe_tracer(tracer) -> str:
    """``tracer`` in a message: its type and abstract value when it has one (never raising)."""
    try:
        aval = tracer.aval
        short = aval.str_short() if hasattr(aval, "str_short") else str(aval)
        return f"traced array with type {short} ({type(tracer).__name__})"
    except Exception:  # noqa: BLE001 - a tracer of another library, or one without a value yet
        return f"a traced value ({type(tracer).__name__})"


class _JaxDocumented:
    """Messages ending with the entry of JAX's errors page for the class (or its nearest JAX-named base).

    As JAX's, the classes that are about one traced value also take it instead of a message
    (``ConcretizationTypeError(tracer, context="")``) and describe it."""

    _about_tracer = "A traced value was used where ftrans needs a concrete one: {t}"

    def __init__(self, msg="", context: str = ""):
        if not isinstance(msg, str):
            msg = self._about_tracer.format(t=_describe_tracer(msg))
        if context:
            msg = f"{msg}\n{context}"
        if f"{ERROR_PAGE}#" not in msg:  # the link before the location, which ends every message
            name = next(c.__name__ for c in type(self).__mro__ if c.__name__ in _JAX_DOCUMENTED)
            link = f"\nSee {ERROR_PAGE}#jax.errors.{name}"
            at = msg.find("\n  (in your code at ")
            msg = msg + link if at < 0 else msg[:at] + link + msg[at:]
        super().__init__(msg)


class JAXTypeError(_JaxDocumented, FtransTypeError):
    """JAX's ``jax.errors.JAXTypeError``: the base of the tracing errors that are ``TypeError``s
    (concretization, tracer conversion, escaped tracers, key reuse)."""


class ShardingTypeError(JAXTypeError):
    """JAX's ``ShardingTypeError``: operands whose sharding types (over Explicit mesh axes) an operation
    cannot combine, or a result whose type would name one mesh axis twice."""


class ForbiddenCollectiveError(Exception):
    """JAX's ``ForbiddenCollectiveError`` (jax 0.12, defined in its core module): inside
    ``sharding.no_collectives(axes)``, an operation whose sharding types would need a collective across
    one of ``axes`` (a reduction or reshard that drops the axis without marking the result unreduced, or a
    reshard that moves the axis to another dimension)."""


class JAXIndexError(_JaxDocumented, FtransIndexError):
    """JAX's ``jax.errors.JAXIndexError``: the base of the indexing errors (a boolean mask only known at run
    time)."""


class KeyReuseError(JAXTypeError):
    """JAX's ``jax.errors.KeyReuseError``: a PRNG key consumed twice, found by the key-reuse checker
    (``ftrans.experimental.key_reuse``; on with the ``debug_key_reuse`` option or ``check_key_reuse``)."""


class InconclusiveDimensionOperation(_Located, FtransError):
    """JAX's ``jax.errors.InconclusiveDimensionOperation``: a comparison or conversion of symbolic dimensions
    (shape polymorphism, ``export.symbolic_shape``) whose result depends on their values."""


class UnsupportedDtypeError(FtransTypeError, NotImplementedError):
    """An operation with no implementation for a dtype (LAPACK's factorizations of float16 matrices): a
    ``TypeError`` and, as JAX raises there, a ``NotImplementedError``."""


class FtransNotImplementedError(_Located, FtransError, NotImplementedError):
    """A combination JAX does not implement either and reports with ``NotImplementedError`` (a callback's
    ``sharding`` inside a ``shard_map`` body)."""


class ConcretizationTypeError(JAXTypeError):
    """A traced value was used where Python needs a concrete one."""


class TracerBoolConversionError(ConcretizationTypeError):
    _about_tracer = "A traced value was converted to a Python bool (if, while, and, or, not): {t}"


class TracerIntegerConversionError(ConcretizationTypeError):
    _about_tracer = "A traced value was used as a Python integer or index (__index__): {t}"


class TracerArrayConversionError(ConcretizationTypeError):
    _about_tracer = "A traced value was converted to a NumPy array (__array__): {t}"


class NonConcreteBooleanIndexError(JAXIndexError):
    """A boolean mask whose pattern is only known at run time."""

    _about_tracer = "A boolean index must be concrete (its pattern fixes the result's shape): {t}"


class UnexpectedTracerError(JAXTypeError):
    """A tracer was used after the transform that created it finished (a ``TypeError``, as in JAX)."""


class FtransRuntimeError(_Located, FtransError, RuntimeError):
    """Something the current settings forbid at run time (``no_tracing``, ``no_execution``), as JAX's
    ``RuntimeError``."""


class JaxRuntimeError(FtransError, RuntimeError):
    """JAX's ``jax.errors.JaxRuntimeError``: XLA refused to compile or run a program (a bad
    ``compiler_options`` entry, a module it cannot take). ``except jax.errors.JaxRuntimeError``
    written for JAX catches ftrans's."""


class CompilerOptionError(FtransValueError, JaxRuntimeError):
    """XLA refused a ``compiler_options`` entry (an unknown name, a value of the wrong kind): JAX's
    ``JaxRuntimeError``, and a ``ValueError`` (a bad option value)."""


class DeletedArrayError(_Located, FtransError, RuntimeError):
    """An Array whose buffer was donated (or deleted) was used again."""


class DistributedInitError(_Located, FtransError, RuntimeError):
    """``ftrans.distributed.initialize`` could not join the processes (an unreachable coordinator, a second
    call, a backend that already started)."""


class JaxprTypeError(FtransError, TypeError):
    """An ill-typed IR program (a bug in a pass, or a hand-built jaxpr)."""


def shapes_str(*xs) -> str:
    """``f32[3], i32[2,2]`` for error messages."""
    from ftrans.core.avals import type_str

    out = []
    for x in xs:
        aval = getattr(x, "aval", None)
        if aval is not None:
            out.append(type_str(aval.shape, aval.dtype))
        elif hasattr(x, "shape") and hasattr(x, "dtype"):
            out.append(type_str(tuple(x.shape), x.dtype))
        else:
            out.append(type(x).__name__)
    return ", ".join(out)
