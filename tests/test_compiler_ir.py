"""``Lowered.compiler_ir`` / ``as_text(dialect=...)``: the lowered program as an MLIR module or as XLA HLO,
for jit, partitioned jit and pmap, as JAX's ``Lowered`` offers them."""

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp


def _e(np_):
    return lambda x: np_.sin(np_.cos(x))


def test_compiler_ir_like_jax():
    ours = ftrans.jit(_e(jnp)).lower(2.0)
    theirs = jax.jit(_e(jjnp)).lower(2.0)
    for lowered in (ours, theirs):
        hlo = lowered.compiler_ir(dialect="hlo").as_hlo_text()
        assert " cosine" in hlo and " sine" in hlo
        stablehlo = str(lowered.compiler_ir(dialect="stablehlo"))
        assert "stablehlo.cosine" in stablehlo and "stablehlo.sine" in stablehlo
        assert str(lowered.compiler_ir()) == stablehlo
        assert "ENTRY" in lowered.as_text(dialect="hlo")
        with pytest.raises(ValueError):
            lowered.compiler_ir(dialect="foo")
    assert type(ours.compiler_ir("hlo")) is type(theirs.compiler_ir("hlo"))


def test_compiler_ir_of_pmap_and_partitioned_jit():
    x = np.ones((1, 3), np.float32)
    assert "stablehlo.sine" in str(ftrans.pmap(_e(jnp)).lower(x).compiler_ir())
    mesh = ftrans.sharding.Mesh(ftrans.devices()[:1], ("x",))
    f = ftrans.jit(_e(jnp), in_shardings=ftrans.NamedSharding(mesh, ftrans.P("x")))
    lowered = f.lower(np.ones(4, np.float32))
    assert " sine" in lowered.as_text("hlo")
    assert "stablehlo.cosine" in str(lowered.compiler_ir("stablehlo"))
