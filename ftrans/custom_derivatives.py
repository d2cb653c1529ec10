"""``jax.custom_derivatives``'s names: user-defined JVP and VJP rules."""

from ftrans.core.prims.calls import custom_jvp_call_p, custom_vjp_call_p  # noqa: F401  (their equations' primitives)
from ftrans.transforms.custom_derivatives import (  # noqa: F401
    CustomVJPPrimal,
    SymbolicZero,
    closure_convert,
    custom_gradient,
    custom_jvp,
    custom_vjp,
    custom_vjp_primal_tree_values,
    linear_call,
    zero_from_primal,
)  # noqa: F401

__all__ = ["CustomVJPPrimal", "SymbolicZero", "closure_convert", "custom_gradient", "custom_jvp", "custom_vjp",
           "custom_vjp_primal_tree_values", "linear_call", "zero_from_primal", "custom_jvp_call_p", "custom_vjp_call_p"]
