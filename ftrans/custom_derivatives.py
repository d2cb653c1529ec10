"""``jax.custom_derivatives``'s names: user-defined JVP and VJP rules."""

from ftrans.transforms.custom_derivatives import (  # noqa: F401
    SymbolicZero,
    closure_convert,
    custom_gradient,
    custom_jvp,
    custom_vjp,
)  # noqa: F401

__all__ = ["SymbolicZero", "closure_convert", "custom_gradient", "custom_jvp", "custom_vjp"]
