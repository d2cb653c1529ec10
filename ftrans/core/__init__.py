"""The core: dtypes, abstract values, the IR, primitives, tracing and arrays."""

import warnings as _warnings

# NumPy reports floating-point exceptions (overflow, invalid, divide) as
# RuntimeWarnings from the frame that called the ufunc.  XLA never warns, and
# wrapping every NumPy rule in ``np.errstate`` costs ~2 us per eager op, so we
# silence exactly the warnings raised from ftrans's own modules instead.
_warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"ftrans(\.|$)")
