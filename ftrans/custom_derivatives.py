"""``jax.custom_derivatives``'s names: user-defined JVP and VJP rules."""

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
           "custom_vjp_primal_tree_values", "linear_call", "zero_from_primal"]
