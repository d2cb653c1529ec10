"""IR passes run by ``jit`` between tracing and lowering (see ``pipeline``).

Registered, in order: ``cse`` (common subexpressions), ``simplify`` (algebraic identities),
``fold_constants``, ``stability`` (numerically stable forms), ``merge_dots`` (products sharing an operand), ``licm`` (loop-invariant
code motion and batched hoisting out of ``scan``), ``dce`` (dead-code elimination).  Switch one off with
``ftrans.config.update("disabled_passes", ["dce"])`` (or the environment variable
``FTRANS_DISABLED_PASSES=dce``); see what the pipeline changed with
``last_report()`` or ``report_for(jit(f).trace(x).jaxpr)``.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.config import config
from ftrans.transforms.passes.cse import CommonSubexpressionElimination
from ftrans.transforms.passes.dce import DeadCodeElimination
from ftrans.transforms.passes.fold import ConstantFolding
from ftrans.transforms.passes.licm import LoopInvariantCodeMotion
from ftrans.transforms.passes.merge_dots import MergeDots
from ftrans.transforms.passes.pipeline import (
    Pass,
    PassContext,
    PassError,
    PassReport,
    Rewrite,
    check_pass_names,
    last_report,
    partitioned,
    pipeline_state,
    primal_rewriter,
    register_pass,
    registered_passes,
    report_for,
    resolve_optimizations,
    run_pipeline,
)
from ftrans.transforms.passes.simplify import AlgebraicSimplification
from ftrans.transforms.passes.stability import StabilityRewrites

__all__ = [
    "Pass", "PassContext", "PassError", "PassReport", "Rewrite", "last_report", "partitioned", "pipeline_state", "register_pass",
    "registered_passes", "report_for", "resolve_optimizations", "run_pipeline", "primal_rewriter", "DeadCodeElimination",
    "CommonSubexpressionElimination", "AlgebraicSimplification", "ConstantFolding", "StabilityRewrites", "LoopInvariantCodeMotion", "MergeDots",
]

register_pass(CommonSubexpressionElimination())
register_pass(AlgebraicSimplification())
register_pass(ConstantFolding())
register_pass(StabilityRewrites())
register_pass(MergeDots())
register_pass(LoopInvariantCodeMotion())
register_pass(DeadCodeElimination())

config.register_validator("disabled_passes", check_pass_names)
config.register_validator("optimizations",
                          lambda v: v is None or check_pass_names(v, option="optimizations"))


def _on_config_change(name: str, value: Any) -> None:
    # Executables already compiled ran the old pipeline: jitted functions must trace again.
    if name in ("disabled_passes", "optimizations"):
        from ftrans.transforms import jit as _jit

        for f in list(_jit._all_jitted):
            f.clear_cache()


config._listeners.append(_on_config_change)
