"""JAX's ``experimental.jet``: Taylor-mode higher-order automatic differentiation.

``jet(fun, primals, series)`` propagates a truncated Taylor series through
``fun`` in one pass.  The transform, its rule table (``jet_rules``) and the
rules live in ``ftrans.transforms.jet``; this module is the public name.
"""

from ftrans.transforms.jet import (
    ZeroSeries,
    ZeroTerm,
    _logistic_taylor,
    deflinear,
    defzero,
    fact,
    jet,
    jet2,
    jet_rules,
    register_jet,
    zero_series,
    zero_term,
)

__all__ = ["jet", "jet2", "fact", "zero_series", "zero_term", "ZeroSeries", "ZeroTerm", "jet_rules",
           "register_jet", "defzero", "deflinear", "_logistic_taylor"]
