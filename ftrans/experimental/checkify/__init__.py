"""JAX's ``jax.experimental.checkify``: run-time checks (user ``check``s, NaNs, division by zero,
out-of-bounds indices) functionalized into an error value that works under ``jit``, ``vmap``,
``grad`` and control flow.

``checkify(f, errors=...)`` returns a function giving ``(err, out)``; ``err.get()`` is the first
error's message (naming the user's line) or None, ``err.throw()`` raises it as a
:class:`JaxRuntimeError`. See ``docs/debugging.md``.
"""

from ftrans.experimental.checkify._check import check, check_error, debug_check
from ftrans.experimental.checkify._errors import (
    DivisionByZeroError,
    Error,
    ErrorCategory,
    FailedCheckError,
    JaxException,
    JaxRuntimeError,
    NaNError,
    OOBError,
    init_error,
)
from ftrans.experimental.checkify._transform import (
    all_checks,
    automatic_checks,
    checkify,
    div_checks,
    float_checks,
    index_checks,
    nan_checks,
    user_checks,
)

__all__ = ["checkify", "check", "check_error", "debug_check", "Error", "ErrorCategory", "JaxRuntimeError",
           "JaxException", "FailedCheckError", "NaNError", "DivisionByZeroError", "OOBError", "init_error",
           "user_checks", "nan_checks", "div_checks", "index_checks", "float_checks", "automatic_checks",
           "all_checks"]
