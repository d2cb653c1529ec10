"""``ftrans.extend.xla``: HLO passes of your own in XLA's compiler (JAX's ``jax.extend.xla``).

A registered pass is a Python function ``(bytes) -> bytes | None`` that XLA calls
while it compiles, at the pipeline stage it was registered for, with the program
as a serialized ``HloModuleProto``; it returns the rewritten module's bytes, or
None when it changed nothing. Passes at one stage run in registration order.

ftrans's executable caches key on the passes registered when a program is
compiled: after a pass is registered or cleared (here or with JAX's
``jax.extend.xla``), the next compilation of a program (a new jitted function, or
one whose cache ``clear_cache()`` emptied) runs under the new set of passes
instead of reusing an executable compiled under the old one, and a program
compiled under a pass is never written to or read from the on-disk cache.
A jitted function's own cache keeps its executables, as JAX's does.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence

from ftrans.lowering import compat

__all__ = ["PipelineStage", "clear_hlo_module_transformation", "register_hlo_module_transformation"]


class PipelineStage(enum.Enum):
    """Where in XLA's pipeline a pass runs: before or after the scheduler."""

    PRE_SCHEDULER = 0
    POST_SCHEDULER = 1


def _api(what: str):
    api = compat.hlo_pass_api()
    if api is None:
        raise NotImplementedError(f"{what} requires jax and jaxlib >= 0.10.2 (XLA's pass registry)")
    return api


def _stage(stage: object, api) -> object:
    if not isinstance(stage, PipelineStage):
        # JAX's own enum names the same stages: take it too
        if type(stage).__name__ == "PipelineStage" and isinstance(stage, enum.Enum):
            return api.PipelineStage(stage.value)
        raise TypeError(f"stage must be a PipelineStage enum, got {type(stage)}")
    return api.PipelineStage(stage.value)


def register_hlo_module_transformation(
    callback: Callable[[bytes], bytes | None],
    *,
    name: str,
    stage: PipelineStage = PipelineStage.PRE_SCHEDULER,
    platforms: Sequence[str] | str | None = None,
) -> None:
    """Register ``callback`` as an HLO pass named ``name`` at ``stage`` for ``platforms`` (``"cpu"``, ``"tpu"``,
    ...; every backend when None). ``callback(serialized_hlo_module_proto)`` returns the rewritten module's
    serialized bytes, or None when it made no change."""
    api = _api("register_hlo_module_transformation")
    if not callable(callback):
        raise TypeError(f"register_hlo_module_transformation: callback must be callable, got {type(callback)}")
    if not isinstance(name, str):
        raise TypeError(f"register_hlo_module_transformation: name must be a str, got {type(name)}")
    api.register_hlo_module_transformation(callback, name=name, stage=_stage(stage, api), platforms=platforms)


def clear_hlo_module_transformation(
    name: str,
    stage: PipelineStage = PipelineStage.PRE_SCHEDULER,
    platforms: Sequence[str] | str | None = None,
) -> bool:
    """Remove the pass ``name`` registered at ``stage`` (for ``platforms``; every backend when None). Returns
    whether one was found and removed."""
    api = _api("clear_hlo_module_transformation")
    return bool(api.clear_hlo_module_transformation(name, _stage(stage, api), platforms))
