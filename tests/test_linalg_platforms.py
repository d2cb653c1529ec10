"""Linear algebra lowered per platform: ftrans's cuda/rocm/cpu modules make the calls jax's do.

No GPU is needed: both systems lower for a named platform without compiling
(``jit(f).trace(x).lower(lowering_platforms=("cuda",))``).  Both modules are
parsed with jaxlib's MLIR bindings and every linear-algebra op (the
``stablehlo.custom_call``s, ``stablehlo.triangular_solve``,
``stablehlo.cholesky``) is compared: target, operand and result types,
layouts, ``backend_config``, aliases, batch count and Shardy rule.  The CPU
modules are also run and compared with jax's values.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from jax import lax
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir

import ftrans
import ftrans.numpy as fnp
from ftrans import lax as flax
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.lowering import compat
from tests.hypothesis_budget import examples

LINALG_OPS = ("stablehlo.custom_call", "stablehlo.triangular_solve", "stablehlo.cholesky")
# Attributes that printers leave out when they hold their default value.
DEFAULTS = {"api_version": "1 : i32", "called_computations": "[]", "has_side_effect": "false"}


def linalg_ops(module) -> list[tuple]:
    """(op name, operand types, result types, attributes) of each linear-algebra op, in program order, of a
    module's text or of the ``ir.Module`` ``Lowered.compiler_ir()`` gives (no printing and re-parsing)."""
    out = []
    with (mlir.make_ir_context() if isinstance(module, str) else module.context):
        if isinstance(module, str):
            module = ir.Module.parse(module)

        def walk(op):
            for region in op.regions:
                for block in region.blocks:
                    for o in block.operations:
                        o = o.operation
                        if o.name in LINALG_OPS:
                            attrs = {n: str(o.attributes[n]) for n in o.attributes}
                            for k, v in DEFAULTS.items():
                                if attrs.get(k) == v:
                                    del attrs[k]
                            out.append((o.name, [str(v.type) for v in o.operands],
                                        [str(r.type) for r in o.results], attrs))
                        walk(o)

        walk(module.operation)
    return out


def both(jf, ff, args, platform):
    (ops,) = both_on(jf, ff, args, (platform,))
    return ops


def both_on(jf, ff, args, platforms):
    """``both`` for each platform, from one trace of each function (a trace costs a third of a lowering)."""
    jt, ft = jax.jit(jf).trace(*args), ftrans.jit(ff).trace(*args)
    return [(linalg_ops(jt.lower(lowering_platforms=(p,)).compiler_ir()),
             linalg_ops(ft.lower(lowering_platforms=(p,)).compiler_ir())) for p in platforms]


# (name, jax function, ftrans function, shape of the operand from (m, n) and batch)
CASES = {
    "cholesky": (lambda a: lax.linalg.cholesky(a, symmetrize_input=False),
                 lambda a: flax.linalg.cholesky(a, symmetrize_input=False), "square"),
    "triangular_solve": (lambda a: lax.linalg.triangular_solve(a, a, left_side=True, lower=True),
                         lambda a: flax.linalg.triangular_solve(a, a, left_side=True, lower=True), "square"),
    "triangular_solve_adjoint": (
        lambda a: lax.linalg.triangular_solve(a, a, left_side=False, lower=False, transpose_a=True,
                                              conjugate_a=True, unit_diagonal=True),
        lambda a: flax.linalg.triangular_solve(a, a, left_side=False, lower=False, transpose_a=True,
                                               conjugate_a=True, unit_diagonal=True), "square"),
    "triangular_solve_conj": (
        lambda a: lax.linalg.triangular_solve(a, a, left_side=True, lower=False, conjugate_a=True),
        lambda a: flax.linalg.triangular_solve(a, a, left_side=True, lower=False, conjugate_a=True), "square"),
    "lu": (lax.linalg.lu, flax.linalg.lu, "any"),
    "qr": (lambda a: lax.linalg.qr(a, full_matrices=False), lambda a: flax.linalg.qr(a, full_matrices=False), "any"),
    "qr_full": (lambda a: lax.linalg.qr(a, full_matrices=True), lambda a: flax.linalg.qr(a, full_matrices=True),
                "any"),
    "eigh": (lambda a: lax.linalg.eigh(a, symmetrize_input=False, lower=False),
             lambda a: flax.linalg.eigh(a, symmetrize_input=False, lower=False), "square"),
    "svd": (lambda a: lax.linalg.svd(a, full_matrices=False), lambda a: flax.linalg.svd(a, full_matrices=False),
            "any"),
    "svd_full": (lambda a: lax.linalg.svd(a, full_matrices=True), lambda a: flax.linalg.svd(a, full_matrices=True),
                 "any"),
    "svd_values": (lambda a: lax.linalg.svd(a, compute_uv=False), lambda a: flax.linalg.svd(a, compute_uv=False),
                   "any"),
    "eig": (lax.linalg.eig, flax.linalg.eig, "square"),
    "eig_right": (lambda a: lax.linalg.eig(a, compute_left_eigenvectors=False),
                  lambda a: flax.linalg.eig(a, compute_left_eigenvectors=False), "square"),
    "eigvals": (lambda a: lax.linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False),
                lambda a: flax.linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False),
                "square"),
    "jnp_solve": (lambda a: jnp.linalg.solve(a, a), lambda a: fnp.linalg.solve(a, a), "square"),
    "jnp_inv": (jnp.linalg.inv, fnp.linalg.inv, "square"),
    "jnp_det": (jnp.linalg.det, fnp.linalg.det, "square"),
}
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _operand(kind, m, n, batch, dtype):
    shape = batch + ((m, m) if kind == "square" else (m, n))
    return np.zeros(shape, dtype)


# Two drawn operands and a batched complex one per call in the quick run (each traces both systems and lowers
# for three platforms; the drawn shapes and dtypes take one lowering rule per call, and the derandomized
# draws are real); larger profiles draw a hundred.
@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=examples(2), deadline=None)
@example(m=3, n=4, batch=(2, 3), dtype=np.complex64)
@given(m=st.sampled_from([1, 3, 6, 40]), n=st.sampled_from([1, 4, 33, 50]),
       batch=st.sampled_from([(), (2,), (2, 3)]), dtype=st.sampled_from(DTYPES))
def test_linalg_calls_match_jax(name, m, n, batch, dtype):
    # Every drawn operand on all three platforms: both systems trace each operand once and lower
    # that trace for each platform (tracing is a third of the cost of a lowering).
    jf, ff, kind = CASES[name]
    if dtype in (np.float64, np.complex128) and not jax.config.jax_enable_x64:
        dtype = np.float32 if dtype == np.float64 else np.complex64
    if name == "jnp_det" and m == 1:
        m = 6  # jax's 1x1 det is slogdet's formula, ftrans's an LU (the same value)
    runs = [(("cuda", "rocm", "cpu"), dtype)]
    if name.startswith("jnp_") and dtype in (np.complex64, np.complex128):
        # keep the jnp cases to the primitives above on the GPUs; complex is covered by lax
        runs = [(("cuda", "rocm"), np.float32), (("cpu",), dtype)]
    for platforms, pdtype in runs:
        x = _operand(kind, m, n, batch, pdtype)
        for platform, (want, got) in zip(platforms, both_on(jf, ff, (x,), platforms)):
            # 2x2 and 3x3 determinants are the expansion formula in both: no call at all.
            assert want or (name == "jnp_det" and m <= 3), "jax's module has no linear-algebra op to compare"
            assert got == want, platform


@pytest.mark.parametrize("shape", [(1100, 1030), (1030, 1100), (2, 1030, 1100), (2, 1100, 1030)])
@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("compute_uv", [False, True])
def test_large_svd_uses_gesvd_like_jax(shape, full_matrices, compute_uv):
    """Past 1024 in either dimension the GPU SVD is gesvd, a wide matrix passed transposed (row-major)."""
    x = np.zeros(shape, np.float32)
    for platform, (want, got) in zip(("cuda", "rocm"), both_on(
            lambda a: lax.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv),
            lambda a: flax.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv), (x,), ("cuda", "rocm"))):
        assert any("gesvd_ffi" in op[3]["call_target_name"] for op in want), platform
        assert got == want, platform


def test_cusolver_geev_when_the_solver_has_it(monkeypatch):
    """With cuSOLVER >= 11.7.1 and no left eigenvectors, eig is cusolver_geev_ffi plus the pair unpacking."""
    import jax._src.lax.linalg as jlinalg

    class _Versions:
        @staticmethod
        def cusolver_get_version():
            return 11701

    monkeypatch.setattr(jlinalg, "cuda_versions", _Versions)
    monkeypatch.setattr(compat, "cusolver_version", lambda: 11701)
    for dtype in (np.float32, np.complex64):
        x = np.zeros((2, 5, 5), dtype)
        want, got = both(lambda a: lax.linalg.eig(a, compute_left_eigenvectors=False),
                         lambda a: flax.linalg.eig(a, compute_left_eigenvectors=False), (x,), "cuda")
        assert [op[3]["call_target_name"] for op in want] == ['"cusolver_geev_ffi"']
        assert got == want
    # Left eigenvectors: cuSOLVER has none, so the hybrid kernel as before.
    x = np.zeros((5, 5), np.float32)
    want, got = both(lax.linalg.eig, flax.linalg.eig, (x,), "cuda")
    assert [op[3]["call_target_name"] for op in got] == ['"cuhybrid_eig_real"'] and got == want


def _unpack_reference(w, v):
    """LAPACK's packed real eigenvectors as complex ones, written out per column."""
    out = v.astype(np.complex128)
    j = 0
    n = w.shape[-1]
    while j < n:
        if w[j].imag != 0 and j + 1 < n:
            out[:, j] = v[:, j] + 1j * v[:, j + 1]
            out[:, j + 1] = v[:, j] - 1j * v[:, j + 1]
            j += 2
        else:
            j += 1
    return out


@settings(max_examples=examples(20), deadline=None)
@given(n=st.integers(1, 7), seed=st.integers(0, 2**16))
def test_geev_unpacking_program_matches_lapack_convention(n, seed):
    """The program that unpacks cuSOLVER's real geev output, run on the CPU on LAPACK's packed output."""
    import scipy.linalg.lapack

    from ftrans.core.avals import ShapedArray
    from ftrans.core.jaxpr_api import eval_jaxpr
    from ftrans.lowering.rules import linalg as rules

    a = np.random.default_rng(seed).standard_normal((n, n))
    wr, wi, _, packed, info = scipy.linalg.lapack.dgeev(a, compute_vl=0)
    assert info == 0
    w = wr + 1j * wi
    closed = rules._unpack_program(ShapedArray((n,), np.dtype(np.complex128)),
                                   ShapedArray((n, n), np.dtype(np.float64)))
    (got,) = eval_jaxpr(closed.jaxpr, closed.consts, w, packed)
    got = np.asarray(got)
    np.testing.assert_allclose(got, _unpack_reference(w, packed), rtol=1e-12, atol=1e-12)
    # They are eigenvectors: A v = w v.
    np.testing.assert_allclose(a @ got, got * w[None, :], rtol=1e-8, atol=1e-8)


# ---------------------------------------------------------------- the platform a lowering is for


def test_default_platform_is_the_devices():
    a = np.eye(3, dtype=np.float32)
    f = ftrans.jit(flax.linalg.lu)

    def unlocated(text):  # each trace records the line that made it
        return re.sub(r' loc\((?:[^()]|\([^()]*\))*\)', "", text)  # also loc("name"("file":1:0))

    here = compat.lowering_platform(ftrans.devices()[0])  # "cpu", or "cuda" on an NVIDIA GPU
    text = unlocated(f.lower(a).as_text())
    target = {"cpu": "lapack_sgetrf_ffi", "cuda": "cusolver_getrf_ffi"}[here]
    assert f"stablehlo.custom_call @{target}" in text
    assert unlocated(f.trace(a).lower().as_text()) == text
    assert unlocated(f.trace(a).lower(lowering_platforms=(here,)).as_text()) == text
    cpu = f.trace(a).lower(lowering_platforms=("cpu",)).as_text()
    assert "stablehlo.custom_call @lapack_sgetrf_ffi" in cpu and "cusolver" not in cpu
    cuda = f.trace(a).lower(lowering_platforms=("cuda",)).as_text()
    assert "stablehlo.custom_call @cusolver_getrf_ffi" in cuda and "lapack" not in cuda


def test_cpu_results_unchanged():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 4, 4)).astype(np.float32)
    spd = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4, dtype=np.float32)
    for jf, ff, x in [(jnp.linalg.cholesky, fnp.linalg.cholesky, spd), (jnp.linalg.inv, fnp.linalg.inv, a),
                      (lambda x: jnp.linalg.svd(x, compute_uv=False), lambda x: fnp.linalg.svd(x, compute_uv=False), a),
                      (lambda x: jnp.linalg.eigh(x)[0], lambda x: fnp.linalg.eigh(x)[0], spd),
                      (lambda x: jax.scipy.linalg.solve_triangular(x, x[..., :1], lower=True),
                       lambda x: ftrans.scipy.linalg.solve_triangular(x, x[..., :1], lower=True), spd)]:
        np.testing.assert_allclose(np.asarray(ftrans.jit(ff)(x)), np.asarray(jax.jit(jf)(x)), rtol=2e-4, atol=2e-4)


def test_gpu_lowered_module_does_not_compile_on_the_cpu():
    # (on a GPU machine: a module lowered for the CPU does not compile on the GPU)
    a = np.eye(3, dtype=np.float32)
    here = compat.lowering_platform(ftrans.devices()[0])
    other = "cuda" if here == "cpu" else "cpu"
    lowered = ftrans.jit(fnp.linalg.cholesky).trace(a).lower(lowering_platforms=(other,))
    with pytest.raises(FtransValueError, match=rf"lowered for {other}.*{here}"):
        lowered.compile()


@pytest.mark.parametrize("bad, err, match", [
    (("cuda", "cpu"), FtransValueError, "one platform at a time"),
    (("vulkan",), FtransValueError, "unknown platform 'vulkan'"),
    ("cuda", FtransTypeError, "tuple of platform names"),
])
def test_bad_lowering_platforms(bad, err, match):
    a = np.eye(3, dtype=np.float32)
    with pytest.raises(err, match=match):
        ftrans.jit(fnp.linalg.cholesky).trace(a).lower(lowering_platforms=bad)


def test_gpu_alias_needs_a_gpu():
    a = np.eye(3, dtype=np.float32)
    if ftrans.default_backend() == "gpu":  # the GPU present says which: its own platform
        here = compat.lowering_platform(ftrans.devices()[0])
        assert (ftrans.jit(fnp.linalg.cholesky).trace(a).lower(lowering_platforms=("gpu",)).as_text()
                == ftrans.jit(fnp.linalg.cholesky).trace(a).lower(lowering_platforms=(here,)).as_text())
        return
    with pytest.raises(FtransValueError, match="CUDA or ROCm"):
        ftrans.jit(fnp.linalg.cholesky).trace(a).lower(lowering_platforms=("gpu",))


def test_tpu_has_no_factorizations_but_has_xla_ops():
    a = np.eye(3, dtype=np.float32)
    text = ftrans.jit(lambda x: flax.linalg.triangular_solve(x, x, lower=True)).trace(a).lower(
        lowering_platforms=("tpu",)).as_text()
    assert "stablehlo.triangular_solve" in text
    assert "stablehlo.cholesky" in ftrans.jit(flax.linalg.cholesky).trace(a).lower(
        lowering_platforms=("tpu",)).as_text()
    with pytest.raises(FtransValueError, match="cpu, cuda and rocm, not for tpu"):
        ftrans.jit(flax.linalg.lu).trace(a).lower(lowering_platforms=("tpu",))


def test_platform_independent_program_lowers_the_same_everywhere():
    x = np.ones((3,), np.float32)
    texts = {p: ftrans.jit(lambda v: fnp.sin(v) * 2).trace(x).lower(lowering_platforms=(p,)).as_text()
             for p in ("cpu", "cuda", "rocm")}
    assert len(set(texts.values())) == 1


def test_batch_sharded_factorizations_stay_sharded():
    """The Shardy rule on each call lets XLA split a stack of matrices over devices, as in jax."""
    from ftrans.sharding import NamedSharding, P

    n_dev = min(4, len(ftrans.devices()))
    if n_dev < 2:
        pytest.skip("needs several devices")
    mesh = ftrans.make_mesh((n_dev,), ("b",))
    jmesh = jax.make_mesh((n_dev,), ("b",))
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2 * n_dev, 5, 5)).astype(np.float32)
    spd = a @ np.swapaxes(a, -1, -2) + 5 * np.eye(5, dtype=np.float32)

    def f(x, lib):
        c = lib.linalg.cholesky(x)
        return c, lib.linalg.svd(x, compute_uv=False), lib.linalg.eigh(x)[0]

    sh = NamedSharding(mesh, P("b"))
    got = ftrans.jit(lambda x: f(x, fnp), in_shardings=sh, out_shardings=sh)(spd)
    want = jax.jit(lambda x: f(x, jnp), in_shardings=jax.sharding.NamedSharding(jmesh, jax.sharding.PartitionSpec("b")),
                   out_shardings=jax.sharding.NamedSharding(jmesh, jax.sharding.PartitionSpec("b")))(spd)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-4, atol=2e-4)
        assert tuple(g.sharding.spec)[:1] == ("b",)
    text = ftrans.jit(lambda x: f(x, fnp), in_shardings=sh, out_shardings=sh).lower(spd).as_text()
    assert "sdy.op_sharding_rule" in text


@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 5])
def test_schur_call_matches_jax_on_cpu(batch, dtype, n):
    """schur is LAPACK's gees on the CPU (JAX has it nowhere else); ftrans refuses other platforms."""
    if dtype in (np.float64, np.complex128) and not jax.config.jax_enable_x64:
        dtype = np.float32 if dtype == np.float64 else np.complex64
    x = np.zeros(batch + (n, n), dtype)
    want, got = both(lax.linalg.schur, flax.linalg.schur, (x,), "cpu")
    assert want and got == want
    with pytest.raises(FtransValueError, match="CPU only"):
        ftrans.jit(flax.linalg.schur).trace(x).lower(lowering_platforms=("cuda",))
