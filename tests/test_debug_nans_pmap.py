"""``debug_nans`` checks a ``pmap``'s outputs, as JAX does (with or without donated inputs)."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp


@pytest.mark.parametrize("donate", [False, True])
def test_debug_nans_checks_pmap_outputs_like_jax(donate):
    got = []
    for lib, np_ in ((jax, jjnp), (ftrans, jnp)):
        g = lib.pmap(lambda x: 0. / x, donate_argnums=(0,) if donate else ())
        g(np_.array([1.]))
        with lib.debug_nans(True):
            with pytest.raises(FloatingPointError, match=r"Invalid value \(nan\) encountered in sharded computation"):
                g(np_.array([0.])).block_until_ready()
        got.append(np.isnan(np.asarray(g(np_.array([0.])))).tolist())  # off again: no check
    assert got[1] == got[0] == [True]


def _mesh(lib):
    return lib.sharding.Mesh(np.array(lib.devices()[:1]), ("x",))


def test_debug_nans_shard_map_and_mapped_pullbacks_like_jax():
    """A NaN out of an eager shard_map, or out of the pullback of a pmap / shard_map (bound eagerly), is
    reported as JAX reports it, without re-running the mapped body on the whole operands (which needs the
    body's named axes)."""
    for lib, np_ in ((jax, jjnp), (ftrans, jnp)):
        P = lib.sharding.PartitionSpec
        mesh = _mesh(lib)
        f = lib.shard_map(lambda x: 0. / x, mesh=mesh, in_specs=P("x"), out_specs=P("x"))
        f(np_.array([1.]))

        def g(x, np_=np_):
            return np_.log(x ** 2)

        with lib.debug_nans(True):
            with pytest.raises(FloatingPointError, match=r"Invalid value \(nan\) encountered in sharded computation"):
                f(np_.array([0.])).block_until_ready()
            for mapped in (lib.pmap(lib.jit(g)), lib.shard_map(lib.jit(g), mesh=mesh, in_specs=P("x"),
                                                                out_specs=P("x"))):
                _, pullback = lib.vjp(mapped, np_.zeros([1]))
                with pytest.raises(FloatingPointError, match=r"Invalid value \(nan\) encountered"):
                    pullback(np_.ones([1]))[0].block_until_ready()
