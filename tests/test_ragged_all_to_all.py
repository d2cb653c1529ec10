"""``lax.ragged_all_to_all`` under ``shard_map`` on 8 host devices, and ``psend``/``precv``.

XLA on CPU has no ragged all-to-all (JAX's own program fails there with "HLO opcode `ragged-all-to-all` is not
supported by XLA:CPU"), so ftrans lowers it to a dense ``all_to_all`` on CPU.  The oracle for values is a NumPy
model of JAX's documented semantics (and the examples of JAX's docstring and tests); jax is the oracle for the
argument checks (which run while tracing, so on CPU too) and for the custom call emitted for GPU.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest
from jax.sharding import Mesh as JMesh
from jax.sharding import PartitionSpec as JP

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.sharding import Mesh, P

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")


def reference(operand, output, io, ss, oo, rs):
    """Each member's result (arrays stacked over members along axis 0), as JAX documents the op."""
    n, k = io.shape
    spd = k // n
    result = output.copy()
    for s in range(n):
        for i in range(k):
            dst = i // spd
            rows = operand[s, io[s, i]:io[s, i] + ss[s, i]]
            result[dst, oo[s, i]:oo[s, i] + ss[s, i]] = rows
    return result


def ragged_fn(n, names=("x",), axis_name="x"):
    mesh = Mesh(np.array(ftrans.devices()[:n]).reshape(-1), names) if len(names) == 1 else \
        Mesh(np.array(ftrans.devices()[:n]).reshape(2, n // 2), names)

    def body(*args):
        return flax.ragged_all_to_all(*[a[0] for a in args], axis_name=axis_name)[None]

    spec = P(names if len(names) > 1 else names[0])
    return ftrans.shard_map(body, mesh=mesh, in_specs=spec, out_specs=spec)


def random_case(rng, n, spd, rest=(3,), dtype=np.float32):
    """Consistent offsets and sizes: member s sends ss[s, i] rows to member i // spd, packed without gaps."""
    k = n * spd
    ss = rng.integers(0, 3, size=(n, k)).astype(np.int32)
    io = np.zeros((n, k), np.int32)
    io[:, 1:] = np.cumsum(ss, axis=1)[:, :-1]
    recv = ss.reshape(n, n, spd).transpose(1, 0, 2).reshape(n, k)  # what each member receives, by sender
    rs = recv
    starts = np.zeros((n, k), np.int32)
    starts[:, 1:] = np.cumsum(recv, axis=1)[:, :-1]  # where the receiver puts each incoming slice
    oo = starts.reshape(n, n, spd).transpose(1, 0, 2).reshape(n, k)  # told to the sender
    n_rows = int(io[:, -1].max() + ss[:, -1].max()) + 1
    m_rows = int(recv.sum(axis=1).max()) + 2
    operand = (rng.normal(size=(n, n_rows, *rest)) * 10).astype(dtype)
    output = np.full((n, m_rows, *rest), -1, dtype)
    return operand, output, io, ss, oo, rs


def test_the_example_of_jax_docstring():
    f = ftrans.jit(ragged_fn(2))
    args = (np.array([[1, 2, 2], [3, 4, 0]], np.int32), np.zeros((2, 4), np.int32),
            np.array([[0, 1], [0, 1]], np.int32), np.array([[1, 2], [1, 1]], np.int32),
            np.array([[0, 0], [1, 2]], np.int32), np.array([[1, 1], [2, 1]], np.int32))
    np.testing.assert_array_equal(np.asarray(f(*args)), [[1, 3, 0, 0], [2, 2, 4, 0]])
    np.testing.assert_array_equal(np.asarray(f(*args)), reference(*args))


@pytest.mark.parametrize("n,spd,rest,dtype", [(2, 1, (3,), np.float32), (4, 2, (2, 2), np.int32),
                                              (8, 1, (), np.float32), (8, 3, (2,), np.float32)])
def test_random_cases_match_the_reference(n, spd, rest, dtype):
    rng = np.random.default_rng(n * 10 + spd)
    args = random_case(rng, n, spd, rest, dtype)
    out = ftrans.jit(ragged_fn(n))(*args)
    np.testing.assert_array_equal(np.asarray(out), reference(*args))


def test_int64_offsets_and_mixed_index_dtypes():
    with ftrans.enable_x64(True):
        rng = np.random.default_rng(3)
        operand, output, io, ss, oo, rs = random_case(rng, 4, 2)
        args = (operand, output, io.astype(np.int64), ss, oo.astype(np.int64), rs)
        out = ftrans.jit(ragged_fn(4))(*args)
        np.testing.assert_array_equal(np.asarray(out), reference(*args))


def test_two_axis_names_act_as_one_axis():
    rng = np.random.default_rng(5)
    args = random_case(rng, 4, 1)
    out = ftrans.jit(ragged_fn(4, names=("x", "y"), axis_name=("x", "y")))(*args)
    np.testing.assert_array_equal(np.asarray(out), reference(*args))


def test_grad_is_the_adjoint():
    """<f(op, out), w> has gradient w routed back: check against finite differences of the linear map."""
    rng = np.random.default_rng(7)
    operand, output, io, ss, oo, rs = random_case(rng, 4, 2)
    f = ragged_fn(4)
    w = rng.normal(size=output.shape).astype(np.float32)

    def loss(op, out):
        return (f(op, out, io, ss, oo, rs) * w).sum()

    g_op, g_out = ftrans.jit(ftrans.grad(loss, argnums=(0, 1)))(operand, output)
    # The map is linear in (op, out): its gradient is the map's transpose applied to w.
    want_op = np.zeros_like(operand)
    want_out = w.copy()
    n, k = io.shape
    for s in range(n):
        for i in range(k):
            dst = i // (k // n)
            want_op[s, io[s, i]:io[s, i] + ss[s, i]] += w[dst, oo[s, i]:oo[s, i] + ss[s, i]]
            want_out[dst, oo[s, i]:oo[s, i] + ss[s, i]] = 0
    np.testing.assert_allclose(np.asarray(g_op), want_op, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g_out), want_out, rtol=1e-6)


def test_jvp_is_the_op_on_tangents():
    rng = np.random.default_rng(8)
    operand, output, io, ss, oo, rs = random_case(rng, 2, 2)
    f = ragged_fn(2)
    t_op = rng.normal(size=operand.shape).astype(np.float32)
    t_out = rng.normal(size=output.shape).astype(np.float32)
    out, tan = ftrans.jit(lambda a, b, ta, tb: ftrans.jvp(lambda x, y: f(x, y, io, ss, oo, rs), (a, b), (ta, tb)))(
        operand, output, t_op, t_out)
    np.testing.assert_array_equal(np.asarray(out), reference(operand, output, io, ss, oo, rs))
    np.testing.assert_allclose(np.asarray(tan), reference(t_op, t_out, io, ss, oo, rs), rtol=1e-6)


def test_vmap_over_another_axis_batches_each_example():
    rng = np.random.default_rng(9)
    cases = [random_case(rng, 2, 2) for _ in range(3)]
    # Pad each example to the same shapes.
    n_rows = max(c[0].shape[1] for c in cases)
    m_rows = max(c[1].shape[1] for c in cases)
    cases = [(np.pad(c[0], ((0, 0), (0, n_rows - c[0].shape[1]), (0, 0))),
              np.pad(c[1], ((0, 0), (0, m_rows - c[1].shape[1]), (0, 0)), constant_values=-1), *c[2:])
             for c in cases]
    batched = [np.stack(a, axis=1) for a in zip(*cases)]  # (members, batch, ...)
    mesh = Mesh(np.array(ftrans.devices()[:2]), ("x",))

    def body(*args):
        per = ftrans.vmap(lambda *a: flax.ragged_all_to_all(*a, axis_name="x"))
        return per(*[a[0] for a in args])[None]

    out = ftrans.jit(ftrans.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x")))(*batched)
    for b, c in enumerate(cases):
        np.testing.assert_array_equal(np.asarray(out)[:, b], reference(*c))


def test_vmap_over_its_own_axis_is_not_supported_as_in_jax():
    x = np.zeros((2, 3), np.float32)
    idx = np.zeros((2, 2), np.int32)
    with pytest.raises(NotImplementedError, match="bound by vmap itself"):
        ftrans.vmap(lambda *a: flax.ragged_all_to_all(*a, axis_name="i"), axis_name="i")(x, x, idx, idx, idx, idx)
    with pytest.raises(NotImplementedError):
        jax.vmap(lambda *a: jax.lax.ragged_all_to_all(*a, axis_name="i"), axis_name="i")(x, x, idx, idx, idx, idx)


BAD = [
    ("float offsets", lambda z, i: (z(3), z(4), z(2), i(2), i(2), i(2)), "input_offsets must be integer type"),
    ("2-D sizes", lambda z, i: (z(3), z(4), i(2), i(1, 2), i(2), i(2)), "send_sizes must be rank 1"),
    ("empty recv sizes", lambda z, i: (z(3), z(4), i(2), i(2), i(2), i(0)), "recv_sizes must be rank 1"),
]


@pytest.mark.parametrize("name,build,match", BAD, ids=[b[0] for b in BAD])
def test_argument_errors_match_jax(name, build, match):
    fm = Mesh(np.array(ftrans.devices()[:2]), ("x",))
    jm = JMesh(np.array(jax.devices()[:2]), ("x",))

    def fz(*s):
        return fjnp.zeros(s, fjnp.float32)

    def fi(*s):
        return fjnp.zeros(s, fjnp.int32)

    def jz(*s):
        return jax.numpy.zeros(s, jax.numpy.float32)

    def ji(*s):
        return jax.numpy.zeros(s, jax.numpy.int32)

    with pytest.raises(ValueError, match=match):
        jax.make_jaxpr(jax.shard_map(lambda: jax.lax.ragged_all_to_all(*build(jz, ji), axis_name="x"), mesh=jm,
                                     in_specs=(), out_specs=JP(), check_vma=False))()
    with pytest.raises(ValueError, match=match) as info:
        ftrans.make_jaxpr(ftrans.shard_map(lambda: flax.ragged_all_to_all(*build(fz, fi), axis_name="x"), mesh=fm,
                                           in_specs=(), out_specs=P()))()
    assert os.path.abspath(__file__) in str(info.value)


def test_outside_a_mapped_context_is_an_error():
    """JAX's eager rule says it needs a mapped context (RuntimeError); ftrans checks the name first, as for every
    collective (JAX's NameError for an unbound axis name)."""
    x = np.zeros((2,), np.float32)
    i = np.zeros((1,), np.int32)
    with pytest.raises(RuntimeError, match="mapped context"):
        jax.lax.ragged_all_to_all(x, x, i, i, i, i, axis_name="x")
    with pytest.raises(NameError, match="'x'"):
        flax.ragged_all_to_all(x, x, i, i, i, i, axis_name="x")


def test_cpu_lowering_is_dense_and_gpu_lowering_is_xla_custom_call(monkeypatch):
    """On CPU: all_to_all, no custom call. For GPU: JAX's custom call, with its replica groups."""
    args = (np.zeros((2, 3), np.float32), np.zeros((2, 4), np.float32)) + (np.zeros((2, 2), np.int32),) * 4
    f = ftrans.jit(ragged_fn(2))
    text = f.lower(*args).as_text()
    assert "stablehlo.all_to_all" in text and "custom_call" not in text
    jm = JMesh(np.array(jax.devices()[:2]), ("x",))
    jf = jax.jit(jax.shard_map(lambda *a: jax.lax.ragged_all_to_all(*[x[0] for x in a], axis_name="x")[None],
                               mesh=jm, in_specs=JP("x"), out_specs=JP("x"), check_vma=False))
    jtext = jf.lower(*args).as_text()
    from ftrans.lowering import compat

    monkeypatch.setattr(compat, "lowering_platform", lambda device: "cuda")
    gtext = ftrans.jit(ragged_fn(2)).lower(*args).as_text()
    assert "stablehlo.custom_call @ragged_all_to_all" in jtext
    assert "stablehlo.custom_call @ragged_all_to_all" in gtext, gtext
    assert "stablehlo.all_to_all" not in gtext
    for needle in ("backend_config = {channel_id = 1 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}",
                   "api_version = 4 : i32"):
        assert needle in jtext
        assert needle in gtext, gtext


def test_psend_and_precv_say_which_backend_lacks_them():
    mesh = Mesh(np.array(ftrans.devices()[:2]), ("x",))
    with pytest.warns(DeprecationWarning, match="psend is deprecated"):  # (jax 0.12's deprecation)
        psend = flax.psend
    with pytest.warns(DeprecationWarning, match="precv is deprecated"):
        precv = flax.precv
    f = ftrans.shard_map(lambda a: psend(a, "x", [(0, 1)]), mesh=mesh, in_specs=P("x"), out_specs=P("x"))
    with pytest.raises(NotImplementedError, match="only on GPU.*'cpu'"):
        f(np.zeros((2,), np.float32))
    g = ftrans.shard_map(lambda a: precv(a, jax.ShapeDtypeStruct((1,), np.float32), "x", [(0, 1)]),
                         mesh=mesh, in_specs=P("x"), out_specs=P("x"))
    with pytest.raises(NotImplementedError, match="precv"):
        g(np.zeros((2,), np.float32))


def test_under_pmap_and_eager_shard_map():
    args = (np.array([[1, 2, 2], [3, 4, 0]], np.int32), np.zeros((2, 4), np.int32),
            np.array([[0, 1], [0, 1]], np.int32), np.array([[1, 2], [1, 1]], np.int32),
            np.array([[0, 0], [1, 2]], np.int32), np.array([[1, 1], [2, 1]], np.int32))
    out = ftrans.pmap(lambda *a: flax.ragged_all_to_all(*a, axis_name="i"), axis_name="i")(*args)
    np.testing.assert_array_equal(np.asarray(out), reference(*args))
    np.testing.assert_array_equal(np.asarray(ragged_fn(2)(*args)), reference(*args))
