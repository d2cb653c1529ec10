"""The core: dtypes, abstract values, the IR, primitives, tracing and arrays."""

import warnings as _warnings

# NumPy reports floating-point exceptions (overflow, invalid, divide) as
# RuntimeWarnings from the frame that called the ufunc.  XLA never warns, and
# wrapping every NumPy rule in ``np.errstate`` costs ~2 us per eager op, so we
# silence exactly the warnings raised from ftrans's own modules instead.
_warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"ftrans(\.|$)")


def __getattr__(name: str):
    # ``jax.core.eval_jaxpr`` is public in JAX; import it on first use so that importing
    # ``ftrans.core`` (which every module does) does not pull in tracing.
    if name == "eval_jaxpr":
        from ftrans.core.jaxpr_api import eval_jaxpr

        return eval_jaxpr
    # JAX's public ``jax.core`` names (libraries test ``isinstance(x, jax.core.Tracer)`` and build abstract
    # values): the abstract value types, the tracer and trace base classes, ensure_compile_time_eval.
    if name in ("ShapedArray", "AbstractValue"):
        from ftrans.core import avals

        return getattr(avals, name)
    if name in ("Trace", "Tracer", "ensure_compile_time_eval"):
        from ftrans.core import trace

        return getattr(trace, name)
    if name in ("max_dim", "min_dim", "is_constant_dim", "is_constant_shape", "dimension_as_value"):  # jax.core's dimension helpers
        from ftrans.core import shape_poly

        return getattr(shape_poly, name)
    if name in ("JaxprPpContext", "JaxprPpSettings", "pp_kv_pair", "pp_eqn", "pp_jaxpr", "pp_toplevel_jaxpr",
                "pp_eqn_rules"):  # the IR printer's pieces (jax.core's JaxprPpContext/JaxprPpSettings)
        from ftrans.core import ir

        return getattr(ir, name)
    raise AttributeError(f"module 'ftrans.core' has no attribute {name!r}")
