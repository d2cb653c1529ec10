"""``Exported.in_avals``/``out_avals`` carry the sharding type of arguments and results laid out over an
Explicit mesh (a ``NamedSharding`` over the abstract mesh), also after serialization, as JAX's do.
Differential against jax."""
import jax
import numpy as np
import pytest

import ftrans


def _summary(s):
    if s is None:
        return None
    m = s.mesh
    return (tuple(m.axis_names), tuple(m.axis_sizes), tuple(t.name for t in m.axis_types), tuple(s.spec))


def _export(lib, kind, spec1, spec2):
    sh = lib.sharding
    mesh = lib.make_mesh((2, 2), ("x", "y"), axis_types=(getattr(sh.AxisType, kind),) * 2)
    x = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    with lib.set_mesh(mesh):
        a1 = lib.device_put(x, sh.NamedSharding(mesh, sh.PartitionSpec(*spec1)))
        a2 = lib.device_put(x.T, sh.NamedSharding(mesh, sh.PartitionSpec(*spec2)))
        exp = lib.export.export(lib.jit(lambda a, b: a @ b))(a1, a2)
        # (jax's serialization needs the flatbuffers package; ftrans's round trip is checked)
        back = lib.export.deserialize(exp.serialize()) if lib is ftrans else exp
        out = back.call(a1, a2)
    return exp, back, out, mesh


@pytest.mark.parametrize("spec1,spec2", [(("x", None), (None, "y")), (("x", None), (None, None)),
                                         ((None, "y"), (None, "y"))])
def test_explicit_mesh_avals_have_sharding_types_like_jax(spec1, spec2):
    if len(ftrans.devices()) < 4 or len(jax.devices()) < 4:
        pytest.skip("needs 4 devices")
    got = _export(ftrans, "Explicit", spec1, spec2)
    want = _export(jax, "Explicit", spec1, spec2)
    for g, w in zip(got[:2], want[:2]):
        assert [_summary(a.sharding) for a in g.in_avals] == [_summary(a.sharding) for a in w.in_avals]
        assert [_summary(a.sharding) for a in g.out_avals] == [_summary(a.sharding) for a in w.out_avals]
        assert [a.shape for a in g.in_avals] == [a.shape for a in w.in_avals]
    fmesh = got[3]
    amesh = ftrans.sharding.AbstractMesh(fmesh.axis_sizes, fmesh.axis_names, axis_types=fmesh.axis_types,
                                         abstract_device=fmesh.abstract_mesh.abstract_device)
    for exp in got[:2]:
        assert exp.in_avals[0].sharding == ftrans.sharding.NamedSharding(amesh, ftrans.sharding.PartitionSpec(*spec1))
    np.testing.assert_allclose(np.asarray(got[2]), np.asarray(want[2]))
    assert _summary(got[2].sharding) == _summary(want[2].sharding)
