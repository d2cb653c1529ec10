"""``ftrans.experimental.source_mapper``: source maps from what ftrans generates back to your Python lines
(JAX's ``jax.experimental.source_mapper``).

``generate_sourcemaps(f, passes)(*args)`` runs each pass over ``f`` and returns one ``SourceMapDump`` per pass:
the generated text (``generated_code``) and a TC39 ``SourceMap`` (``source_map.to_json()`` for tools) whose
``mappings`` give, per generated line, where in ``sources`` it came from. The registered passes are
``jaxpr`` (``make_jaxpr``'s printout), ``hlo:stable-hlo`` (``jit(f).lower(...).as_text(debug_info=True)``),
``hlo:original`` (the HLO XLA is given) and ``hlo:optimized`` (the HLO it compiled; ``xla_compiler_flags=``
adds XLA options); ``filter_passes(regex)`` picks some, ``register_pass(Pass(...))`` adds your own.
"""

from ftrans.experimental.source_mapper import hlo, jaxpr
from ftrans.experimental.source_mapper.common import (
    Pass,
    SourceMapDump,
    all_passes,
    compile_with_env,
    filter_passes,
    register_pass,
)
from ftrans.experimental.source_mapper.generate_map import generate_sourcemaps
from ftrans.experimental.source_mapper.jaxpr import canonicalize_filename
from ftrans.experimental.source_mapper.mlir import create_mlir_sourcemap
from ftrans.experimental.source_mapper.sourcemap import MappingsGenerator, Segment, SourceMap

__all__ = ["MappingsGenerator", "Pass", "Segment", "SourceMap", "SourceMapDump", "all_passes", "canonicalize_filename",
           "compile_with_env", "create_mlir_sourcemap", "filter_passes", "generate_sourcemaps", "register_pass"]

for _p in (*jaxpr.PASSES, *hlo.PASSES):  # the built-in passes, in JAX's order
    register_pass(_p)
del _p
