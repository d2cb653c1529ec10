"""``ftrans.extend.source_info_util``: where in the user's code traced operations came from, and how the
tracebacks of exceptions leaving ftrans are filtered (JAX's ``jax.extend.source_info_util``).

* :class:`SourceInfo` and :class:`Traceback`: an equation's user frames (``eqn.source_info``).
* :func:`register_exclusion`: treat another library's files as library frames, left out of filtered
  tracebacks as ftrans's own are.
* :class:`JaxStackTraceBeforeTransformation`: the cause an exception gets when an operation fails after it
  was traced (a ``debug_nans`` re-run, a transposed equation); its traceback is where it was traced.
"""

from ftrans.core.ir import SourceInfo, Traceback
from ftrans.core.traceback_util import (
    JaxStackTraceBeforeTransformation,
    SimplifiedTraceback,
    UnfilteredStackTrace,
    api_boundary,
    has_user_context,
    register_exclusion,
)

__all__ = ["SourceInfo", "Traceback", "JaxStackTraceBeforeTransformation", "SimplifiedTraceback",
           "UnfilteredStackTrace", "api_boundary", "has_user_context", "register_exclusion"]
