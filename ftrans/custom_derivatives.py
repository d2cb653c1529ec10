"""``jax.custom_derivatives``'s names: user-defined JVP and VJP rules."""

from ftrans.transforms.custom_derivatives import SymbolicZero, custom_jvp, custom_vjp  # noqa: F401

__all__ = ["SymbolicZero", "custom_jvp", "custom_vjp"]
