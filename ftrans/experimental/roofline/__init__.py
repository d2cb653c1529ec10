"""``ftrans.experimental.roofline``: JAX's ``jax.experimental.roofline`` over ftrans programs -- an estimate of a
function's FLOPs, HBM bytes, interconnect bytes and peak live memory, added up from its traced IR."""

from ftrans.experimental.roofline import rooflines as _rooflines  # noqa: F401  (registers the built-in rules)
from ftrans.experimental.roofline.roofline import (
    RooflineResult,
    RooflineRuleContext,
    RooflineShape,
    register_roofline,
    register_standard_roofline,
    roofline,
    roofline_and_grad,
)

__all__ = ["RooflineResult", "RooflineRuleContext", "RooflineShape", "register_roofline",
           "register_standard_roofline", "roofline", "roofline_and_grad"]
