"""Session 43 "lowerx": HLO passes in the executable caches, ``experimental.source_mapper``,
``debug.inspect_array_sharding`` under ``jit`` and three weak-type differences, each against jax."""

from __future__ import annotations

import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.lowering import compat, disk_cache
from ftrans.lowering import executable as X

jax = pytest.importorskip("jax")
jjnp = pytest.importorskip("jax.numpy")

# ----------------------------------------------------------------------------- HLO passes (ftrans.extend.xla)

try:
    import jax.extend.xla as jex_xla
    from jax._src.lib import hlo as _hlo
except ImportError:  # pragma: no cover - jaxlib without the pass registry
    jex_xla = _hlo = None

needs_passes = pytest.mark.skipif(jex_xla is None or compat.hlo_pass_api() is None,
                                  reason="jaxlib without XLA's HLO pass registry")


def _sin_to_cos(serialized: bytes) -> bytes | None:
    module = _hlo.HloModule.from_serialized_hlo_module_proto(serialized)
    changed = False
    for comp in module.computations():
        for inst in comp.instructions():
            if inst.opcode == _hlo.HloOpcode.kSin:
                comp.replace_instruction(inst, comp.create_unary_instruction(_hlo.HloOpcode.kCos,
                                                                             inst.operands()[0]))
                changed = True
    return module.as_serialized_hlo_module_proto() if changed else None


XS = np.array([0.0, 1.0, 2.0], np.float32)


@pytest.fixture
def passes():
    """Registered names are cleared after the test, whatever happens."""
    names: list = []
    yield names
    for api, name, stage in names:
        api.clear_hlo_module_transformation(name, stage)
    assert compat.hlo_passes() == ()


def _register(api, names, name, stage=None, **kw):
    stage = api.PipelineStage.PRE_SCHEDULER if stage is None else stage
    api.register_hlo_module_transformation(_sin_to_cos, name=name, stage=stage, **kw)
    names.append((api, name, stage))


def _clear(api, names, name, stage=None):
    stage = api.PipelineStage.PRE_SCHEDULER if stage is None else stage
    names.remove((api, name, stage))
    return api.clear_hlo_module_transformation(name, stage)


@needs_passes
@pytest.mark.parametrize("via", ["ftrans", "jax"])
def test_cleared_pass_recompiles_as_jax(passes, via):
    """Registered, the pass turns sin into cos in both; cleared (and the jit cache emptied), both compute sin
    again: ftrans compiles anew instead of reusing the executable its shared cache held."""
    import ftrans.extend.xla as fx

    api = fx if via == "ftrans" else jex_xla
    _register(api, passes, f"lowerx_s2c_{via}")

    def f(x):
        return jnp.sin(x)

    def jf(x):
        return jjnp.sin(x)

    ff, jff = ftrans.jit(f), jax.jit(jf)
    np.testing.assert_allclose(np.asarray(ff(XS)), np.asarray(jff(XS)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ff(XS)), np.cos(XS), rtol=1e-6)
    assert _clear(api, passes, f"lowerx_s2c_{via}") is True
    ff.clear_cache()
    jff.clear_cache()
    np.testing.assert_allclose(np.asarray(ff(XS)), np.asarray(jff(XS)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ff(XS)), np.sin(XS), rtol=1e-6)


@needs_passes
def test_pass_registered_after_compile_applies_to_a_new_jit(passes):
    """A program compiled before the pass was registered is not reused for another function lowering to the
    same module after it (a jitted function's own cache keeps its executables, in both)."""
    import ftrans.extend.xla as fx

    def f(x):
        return jnp.sin(x) + 0.0

    def g(x):
        return jnp.sin(x) + 0.0

    def jf(x):
        return jjnp.sin(x) + 0.0

    def jg(x):
        return jjnp.sin(x) + 0.0

    ff, jff = ftrans.jit(f), jax.jit(jf)
    np.testing.assert_allclose(np.asarray(ff(XS)), np.sin(XS), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jff(XS)), np.sin(XS), rtol=1e-6)
    _register(fx, passes, "lowerx_s2c_late")
    np.testing.assert_allclose(np.asarray(ftrans.jit(g)(XS)), np.asarray(jax.jit(jg)(XS)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ftrans.jit(g)(XS)), np.cos(XS), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ff(XS)), np.asarray(jff(XS)), rtol=1e-6)  # kept: sin in both


@needs_passes
def test_pass_for_another_platform_changes_no_key(passes):
    import ftrans.extend.xla as fx

    try:
        _register(fx, passes, "lowerx_s2c_tpu", platforms="tpu")
    except Exception as e:  # jax 0.11 refuses a platform that has no plugin here
        passes.clear()
        pytest.skip(f"this jax cannot register a pass for an absent platform: {e}")
    assert compat.hlo_passes("cpu") == ()

    def f(x):
        return jnp.sin(x) * 1.0

    np.testing.assert_allclose(np.asarray(ftrans.jit(f)(XS)), np.sin(XS), rtol=1e-6)


@needs_passes
def test_program_under_a_pass_skips_the_disk_cache(passes, tmp_path):
    """The disk cache neither returns a program compiled without the pass nor stores one compiled with it."""
    import ftrans.extend.xla as fx

    disk_cache.flush()
    old, background = ftrans.config.compilation_cache_dir, disk_cache.background_writes
    ftrans.config.update("compilation_cache_dir", str(tmp_path / "c"))
    disk_cache.background_writes = False
    try:
        def f(x):
            return jnp.sin(x) * 3.0

        ftrans.clear_caches()
        X._xla_cache.clear()
        np.testing.assert_allclose(np.asarray(ftrans.jit(f)(XS)), 3 * np.sin(XS), rtol=1e-6)
        n_files = len(list((tmp_path / "c").iterdir()))
        assert n_files == 1
        _register(fx, passes, "lowerx_s2c_disk")
        ftrans.clear_caches()
        X._xla_cache.clear()
        np.testing.assert_allclose(np.asarray(ftrans.jit(f)(XS)), 3 * np.cos(XS), rtol=1e-6)
        assert len(list((tmp_path / "c").iterdir())) == n_files
    finally:
        disk_cache.background_writes = background
        ftrans.config.update("compilation_cache_dir", old)


@needs_passes
def test_pass_api_errors_as_jax():
    import ftrans.extend.xla as fx

    with pytest.raises(TypeError, match="PipelineStage"):
        fx.register_hlo_module_transformation(_sin_to_cos, name="x", stage=0)
    with pytest.raises((TypeError, AttributeError)):  # jax 0.11 no longer checks the type itself
        jex_xla.register_hlo_module_transformation(_sin_to_cos, name="x", stage=0)
    with pytest.raises(TypeError, match="PipelineStage"):
        fx.clear_hlo_module_transformation("x", 1)
    assert fx.clear_hlo_module_transformation("lowerx_never_registered") is False
    assert jex_xla.clear_hlo_module_transformation("lowerx_never_registered") is False
    assert [s.name for s in fx.PipelineStage] == [s.name for s in jex_xla.PipelineStage]
