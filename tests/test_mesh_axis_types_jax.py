"""Mesh axis types against jax: ftrans's AxisType members equal jax's of the same name (a jax mesh's types
are its ftrans twin's), ``make_mesh`` refuses one AxisType for several axes, and ``ShapedArray.update(sharding=)``
keeps the spec's Explicit axes only."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import ftrans
from ftrans.core.avals import ShapedArray


def test_axis_types_equal_jax_members():
    A, JA = ftrans.sharding.AxisType, jax.sharding.AxisType
    assert (A.Manual, A.Explicit) == (JA.Manual, JA.Explicit) and A.Auto != JA.Explicit
    assert {A.Auto: 1}[A.Auto] == 1 and hash(A.Auto) == hash(A.Auto)


@pytest.mark.parametrize("lib", [ftrans, jax])
def test_make_mesh_one_axis_type_for_two_axes_raises(lib):
    with pytest.raises(ValueError, match="Number of axis names should match the number of axis_types"):
        lib.make_mesh((1, 1), ("data", "model"), axis_types=lib.sharding.AxisType.Explicit)


@pytest.mark.parametrize("spec", [(("a", "b", "c"), "d"), (("a", "c"), "b", "d"), (("a", "d"), "b", "c")])
def test_update_sharding_keeps_explicit_axes_like_jax(spec):
    out = {}
    for lib, aval in ((ftrans, ShapedArray((16, 8, 4, 2), np.float32)),
                      (jax, jax.core.ShapedArray((16, 8, 4, 2), np.float32))):
        A = lib.sharding.AxisType
        mesh = lib.sharding.AbstractMesh((2, 2, 2, 2), ("a", "b", "c", "d"),
                                         axis_types=(A.Explicit, A.Explicit, A.Auto, A.Manual))
        s = lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec(*spec))
        out[lib.__name__] = tuple(aval.update(sharding=s).sharding.spec)
    assert out["ftrans"] == out["jax"]


def test_update_with_a_jax_sharding_takes_its_twin():
    A = jax.sharding.AxisType
    mesh = jax.sharding.AbstractMesh((2, 2), ("a", "b"), axis_types=(A.Explicit, A.Auto))
    out = ShapedArray((4, 4), np.float32).update(sharding=jax.sharding.NamedSharding(mesh, jax.P(("a", "b"))))
    assert tuple(out.sharding.spec) == ("a", None)
