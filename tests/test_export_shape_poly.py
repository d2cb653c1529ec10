"""Shape polymorphism in ``export`` (symbolic dimensions), against ``jax.export`` on the same programs."""

from __future__ import annotations

import re

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans import export
from ftrans.errors import InconclusiveDimensionOperation
from tests.backend_util import cpu_only, on_cpu


def _both(spec: str, constraints=()):
    return (export.symbolic_shape(spec, constraints=constraints),
            jax.export.symbolic_shape(spec, constraints=constraints))


def test_dimension_expressions_print_and_compare_as_jax():
    (a, b), (ja, jb) = _both("a, b")
    pairs = [(lambda a, b: a + 2 * b, None), (lambda a, b: (a + 1) * (b - 1), None), (lambda a, b: 2 * a // 2, None),
             (lambda a, b: (2 * a + 1) // 2, None), (lambda a, b: (2 * a + 1) % 2, None), (lambda a, b: a // 3, None),
             (lambda a, b: a - a, None), (lambda a, b: (a * a - b * b) // (a - b), None)]
    for f, _ in pairs:
        assert str(f(a, b)) == str(f(ja, jb))
    assert str(export.symbolic_shape("(a + 2*b, a, a + b + c)")) == str(jax.export.symbolic_shape(
        "(a + 2*b, a, a + b + c)"))
    for f in (lambda a, b: a + b == b + a, lambda a, b: a == b, lambda a, b: a >= 1, lambda a, b: a + b >= 2,
              lambda a, b: 2 * a + 1 > a, lambda a, b: a != 3, lambda a, b: a - 1 >= 0):
        assert f(a, b) == f(ja, jb)
    with pytest.raises(InconclusiveDimensionOperation, match="'a' >= '2' is inconclusive"):
        a >= 2  # noqa: B015
    with pytest.raises(jax.errors.InconclusiveDimensionOperation):  # the oracle agrees
        ja >= 2  # noqa: B015
    (c, d), (jc, jd) = _both("c, d", constraints=("c >= d", "d >= 16"))
    assert (c - d >= 0, d >= 10) == (jc - jd >= 0, jd >= 10)
    assert hash(a + 1) == hash(1 + a) and {a + 1: 0}[1 + a] == 0


def _shapes(np_, x):
    y = x.reshape(-1) + np_.arange(x.shape[0] * 4, dtype=np.float32)
    return np_.concatenate([y[1:], y[-2:], np_.zeros(x.shape[0])]), x.mean(axis=0), x[:x.shape[0] - x.shape[0] % 2], x[::2]


def _mlp_transforms(np_, x):
    vmap, grad = (jax.vmap, jax.grad) if np_ is jjnp else (ftrans.vmap, ftrans.grad)
    h = np_.tanh(x @ (np_.ones((4, 3), np.float32) * 0.5)) + x.shape[0]
    return vmap(lambda r: (r * r).sum())(h), grad(lambda y: (np_.sin(y) * y.shape[0]).sum())(x)


@pytest.mark.parametrize("prog", [_shapes, _mlp_transforms], ids=lambda p: p.__name__)
def test_export_once_call_at_two_sizes_like_jax(prog):
    fexp = export.export(ftrans.jit(lambda x: prog(jnp, x)))(
        ftrans.ShapeDtypeStruct(export.symbolic_shape("b, 4"), np.float32))
    jexp = jax.export.export(jax.jit(lambda x: prog(jjnp, x)))(
        jax.ShapeDtypeStruct(jax.export.symbolic_shape("b, 4"), np.float32))
    assert str(fexp.in_avals) == str(jexp.in_avals) and str(fexp.out_avals) == str(jexp.out_avals)
    for n in (2, 5):
        x = np.random.RandomState(n).randn(n, 4).astype(np.float32)
        for got, want in zip(jax.tree_util.tree_leaves(fexp.call(x)), jax.tree_util.tree_leaves(jexp.call(x))):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_module_has_dynamic_dims_serialization_and_jit_calls():
    exp = export.export(ftrans.jit(lambda x: jnp.ones_like(x) * x.sum()))(
        ftrans.ShapeDtypeStruct(export.symbolic_shape("b, 2*w"), np.float32))
    text = exp.mlir_module()
    assert "tensor<?x?xf32>" in text and "jax.uses_shape_polymorphism = true" in text
    assert "stablehlo.get_dimension_size" in text and "dynamic_broadcast_in_dim" in text
    assert exp.uses_global_constants
    back = export.deserialize(exp.serialize())
    assert str(back.in_avals) == str(exp.in_avals) == "(ShapedArray(float32[b,2*w]),)"
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(np.asarray(ftrans.jit(back.call)(x)), np.full((3, 4), x.sum()))


@pytest.mark.parametrize("spec, shape", [("3,4,a+1", (3, 4, 1)), ("3,4,6*a", (3, 4, 13)),
                                         ("(a + 2*b, a, a + b)", (8, 2, 6)), ("3,4,12", (3, 4, 13))])
def test_shape_assertion_errors_match_jax(spec, shape):
    f = lambda np_: (lambda x: np_.reshape(x, (-1, x.shape[1])))  # noqa: E731
    x = np.zeros(shape, np.float32)
    jexp = jax.export.export(jax.jit(f(jjnp)))(jax.ShapeDtypeStruct(jax.export.symbolic_shape(spec), np.float32))
    with pytest.raises(Exception) as jerr:
        jexp.call(x)
    fexp = export.export(ftrans.jit(f(jnp)))(ftrans.ShapeDtypeStruct(export.symbolic_shape(spec), np.float32))
    want = str(jerr.value).split(" Please see")[0].split("\n")[0]
    with pytest.raises(ValueError, match=re.escape(want)):
        fexp.call(x)


def test_unsolvable_and_mixed_scopes_are_refused_as_jax():
    with pytest.raises(ValueError, match=re.escape("Cannot solve for values of dimension variables {'c'}")):
        export.export(ftrans.jit(lambda x: x))(ftrans.ShapeDtypeStruct(export.symbolic_shape("a, c*c"), np.float32))
    x = ftrans.ShapeDtypeStruct(export.symbolic_shape("w, h1"), np.float32)
    y = ftrans.ShapeDtypeStruct(export.symbolic_shape("w, h2"), np.float32)
    with pytest.raises(ValueError, match="Invalid mixing of symbolic scopes when exporting"):
        export.export(ftrans.jit(lambda x, y: x))(x, y)


def test_nested_polymorphic_call_and_grad_through_the_export():
    inner = lambda np_: (lambda x: np_.reshape(x, (-1, x.shape[1])) * 2.0)  # noqa: E731
    iexp = export.export(ftrans.jit(inner(jnp)))(ftrans.ShapeDtypeStruct(export.symbolic_shape("3,a,a+b"),
                                                                          np.float32))
    oexp = export.export(ftrans.jit(lambda x: iexp.call(x) + inner(jnp)(x)))(
        ftrans.ShapeDtypeStruct(export.symbolic_shape("3,c,c+2"), np.float32))
    assert str(oexp.out_avals) == "(ShapedArray(float32[3*c + 6,c]),)"
    arg = np.arange(3 * 4 * 6, dtype=np.float32).reshape(3, 4, 6)
    want = np.arange(arg.size, dtype=np.float32).reshape(-1, 4) * 2.0
    np.testing.assert_allclose(np.asarray(oexp.call(arg)), 2 * want)
    g = ftrans.grad(lambda x: iexp.call(x).sum())(arg)  # through the exported VJP, itself polymorphic
    np.testing.assert_allclose(np.asarray(g), np.full(arg.shape, 2.0))


def test_what_is_not_supported_names_the_primitive_and_the_line():
    spec = ftrans.ShapeDtypeStruct(export.symbolic_shape("b, 4"), np.float32)
    with pytest.raises(InconclusiveDimensionOperation, match=r"(?s)Symbolic dimension 'b'.*test_export_shape_poly"):
        export.export(ftrans.jit(lambda x: jnp.fft.fft(x, axis=0)))(spec)  # (JAX raises too)
    with pytest.raises(InconclusiveDimensionOperation, match=r"(?s)'b' >= '3' is inconclusive.*test_export_shape_poly"):
        export.export(ftrans.jit(lambda x: x if x.shape[0] >= 3 else -x))(spec)
    jspec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("b, 4"), np.float32)
    with pytest.raises(ValueError, match="jnp.squeeze with axis=None is not supported with shape polymorphism"):
        jax.export.export(jax.jit(jjnp.squeeze))(jspec)  # the oracle's message
    with pytest.raises(ValueError, match="jnp.squeeze with axis=None is not supported with shape polymorphism"):
        export.export(ftrans.jit(jnp.squeeze))(spec)


def _indexing(np_, x, i):
    b = x.shape[1]
    return (x[::-2], x[b:1:-b], x[-b::-1], x[2:b:b], x[1], x[-1], x[i], np_.take(x, i, axis=1), x[:, 0:0:b])


def test_symbolic_indexing_negative_steps_static_and_array_indices_like_jax():
    x = np.arange(7 * 3, dtype=np.float32).reshape(7, 3)
    i = np.array([0, -1, 2, 1], np.int32)
    specs = ["c, b", "n"]
    fexp = export.export(ftrans.jit(lambda x, i: _indexing(jnp, x, i)))(*export.symbolic_args_specs((x, i), specs))
    jexp = jax.export.export(jax.jit(lambda x, i: _indexing(jjnp, x, i)))(
        *jax.export.symbolic_args_specs((x, i), specs))
    assert str(fexp.out_avals[2]) == str(jexp.out_avals[2]) == "float32[max(- 1, c - b) + 1,b]"
    for n in (2,):
        got, want = fexp.call(x[:n], i[:n]), jexp.call(x[:n], i[:n])
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def _lax_sizes(np_, lax, x, i):
    b = x.shape[0]
    return (lax.broadcast_in_dim(x[0], (b, 4), (1,)), lax.full((b, 2), 3.0), lax.iota(np.int32, b),
            lax.slice_in_dim(x, 1, b, 2), lax.index_in_dim(x, b - 1), lax.index_in_dim(x, -1, keepdims=False),
            lax.dynamic_slice(x, (i, 1), (b - 1, 2)), lax.dynamic_slice_in_dim(x, -1, b, axis=0),
            np_.tile(x, (1, b)), np_.repeat(x, b, axis=0), np_.repeat(x, 3, axis=0))


def test_symbolic_sizes_in_lax_shapes_slices_tile_and_repeat_like_jax():
    x = np.arange(5 * 4, dtype=np.float32).reshape(5, 4)
    i = np.array(-2, np.int32)
    fexp = export.export(ftrans.jit(lambda x, i: _lax_sizes(jnp, ftrans.lax, x, i)))(
        *export.symbolic_args_specs((x, i), ["b, 4", None]))
    jexp = jax.export.export(jax.jit(lambda x, i: _lax_sizes(jjnp, jax.lax, x, i)))(
        *jax.export.symbolic_args_specs((x, i), ["b, 4", None]))
    assert str(fexp.out_avals) == str(jexp.out_avals)
    for n in (2,):
        for g, w in zip(fexp.call(x[:n], i), jexp.call(x[:n], i)):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    with pytest.raises(ValueError, match="non-constant `repeats` is supported only when `total_repeat_length`"):
        export.export(ftrans.jit(lambda x: jnp.repeat(x, x.shape[0], total_repeat_length=8)))(
            *export.symbolic_args_specs((x,), "b, 4"))


def _windows(lax, x, k):
    conv = lax.conv_general_dilated(x, k, (2,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"))
    return conv, lax.reduce_window(x, np.array(-np.inf, np.float32), lax.max, (1, 2, 1), (1, 1, 1), "VALID")


def test_symbolic_convolution_padding_and_reduce_window_like_jax():
    x = np.random.RandomState(0).randn(1, 7, 3).astype(np.float32)
    k = np.random.RandomState(1).randn(3, 3, 2).astype(np.float32)
    fexp = export.export(ftrans.jit(lambda x, k: _windows(ftrans.lax, x, k)))(
        *export.symbolic_args_specs((x, k), ["1, b, 3", None]))
    jexp = jax.export.export(jax.jit(lambda x, k: _windows(jax.lax, x, k)))(
        *jax.export.symbolic_args_specs((x, k), ["1, b, 3", None]))
    assert str(fexp.out_avals) == str(jexp.out_avals)
    assert "stablehlo.dynamic_conv" in fexp.mlir_module()
    for n in (4,):
        for g, w in zip(fexp.call(x[:, :n], k), jexp.call(x[:, :n], k)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


def _pad_einsum(np_, x, y):
    b = x.shape[0]
    return (np_.pad(x, ((b, 0), (2, 1))), np_.pad(x, ((1, b), (0, 0)), constant_values=2.0),
            np_.einsum("ij,jk,kl->il", x, y, y.T), np_.einsum("ij,ij->i", x, x))


def test_symbolic_pad_widths_and_einsum_paths_like_jax():
    x = np.random.RandomState(0).randn(4, 3).astype(np.float32)
    y = np.random.RandomState(1).randn(3, 5).astype(np.float32)
    fexp = export.export(ftrans.jit(lambda x, y: _pad_einsum(jnp, x, y)))(
        *export.symbolic_args_specs((x, y), ["b, 3", None]))
    jexp = jax.export.export(jax.jit(lambda x, y: _pad_einsum(jjnp, x, y)))(
        *jax.export.symbolic_args_specs((x, y), ["b, 3", None]))
    assert str(fexp.out_avals) == str(jexp.out_avals)
    for n in (2,):
        for g, w in zip(fexp.call(x[:n], y), jexp.call(x[:n], y)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


def test_symbolic_arange_steps_and_bounds_like_jax():
    def f(np_, x):
        b = x.shape[0]
        return np_.arange(b, 0, -2), np_.arange(0, 10, b), np_.arange(10, 0, -b), np_.arange(b, 5 * b + 2, 2) + 0 * b

    x = np.zeros(3, np.float32)
    fexp = export.export(ftrans.jit(lambda x: f(jnp, x)))(*export.symbolic_args_specs((x,), "b"))
    jexp = jax.export.export(jax.jit(lambda x: f(jjnp, x)))(*jax.export.symbolic_args_specs((x,), "b"))
    assert str(fexp.out_avals) == str(jexp.out_avals)
    for n in (4,):
        for g, w in zip(fexp.call(np.zeros(n, np.float32)), jexp.call(np.zeros(n, np.float32))):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    for step, err in ((0.5, "must be either dimension expressions or integers"), (0, "arange has step == 0")):
        with pytest.raises(ValueError, match=err):
            export.export(ftrans.jit(lambda x, s=step: jnp.arange(0, x.shape[0], s)))(
                *export.symbolic_args_specs((x,), "b"))
    with pytest.raises(InconclusiveDimensionOperation, match="must be resolved statically if it is > 0 or < 0"):
        export.export(ftrans.jit(lambda x: jnp.arange(0, x.shape[0], x.shape[0] - 2)))(
            *export.symbolic_args_specs((x,), "b"))


def test_symbolic_one_hot_classes_like_jax():
    x = np.array([0, 2, 1], np.int32)
    fexp = export.export(ftrans.jit(lambda x: ftrans.nn.one_hot(x, x.shape[0])))(*export.symbolic_args_specs((x,), "b"))
    jexp = jax.export.export(jax.jit(lambda x: jax.nn.one_hot(x, x.shape[0])))(
        *jax.export.symbolic_args_specs((x,), "b"))
    assert str(fexp.out_avals) == str(jexp.out_avals)
    np.testing.assert_array_equal(np.asarray(fexp.call(x)), np.asarray(jexp.call(x)))


def test_symbolic_roll_decides_mod_by_a_dimension_like_jax():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    fexp = export.export(ftrans.jit(lambda x: jnp.roll(x, 2, axis=0)))(*export.symbolic_args_specs((x,), "b, 4"))
    jexp = jax.export.export(jax.jit(lambda x: jjnp.roll(x, 2, axis=0)))(*jax.export.symbolic_args_specs((x,), "b, 4"))
    for n in (1,):
        np.testing.assert_array_equal(np.asarray(fexp.call(x[:n])), np.asarray(jexp.call(x[:n])))


def _both_exports(prog, args, specs, constraints=()):
    """``prog(np_, lax, random, *args)`` exported with symbolic shapes by ftrans and by jax.export."""
    fexp = export.export(ftrans.jit(lambda *a: prog(jnp, ftrans.lax, ftrans.random, *a)))(
        *export.symbolic_args_specs(args, specs, constraints=constraints))
    jexp = jax.export.export(jax.jit(lambda *a: prog(jjnp, jax.lax, jax.random, *a)))(
        *jax.export.symbolic_args_specs(args, specs, constraints=constraints))
    assert str(fexp.out_avals) == str(jexp.out_avals)
    return fexp, jexp


def _agree(fexp, jexp, args, tol=1e-4, magnitudes=False):
    for g, w in zip(jax.tree_util.tree_leaves(fexp.call(*args)), jax.tree_util.tree_leaves(jexp.call(*args))):
        g, w = np.asarray(g), np.asarray(w)
        if magnitudes:  # factors defined up to the signs (phases) of their columns
            g, w = np.abs(g), np.abs(w)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _factorizations(np_, lax, random, x, s):
    la = lax.linalg
    return (la.cholesky(s), la.eigh(s), la.schur(x), la.eig(x, compute_left_eigenvectors=False)[0],
            la.triangular_solve(s, x, left_side=True, lower=True), np_.linalg.inv(s), np_.linalg.slogdet(x))


@cpu_only("the factorizations include schur (LAPACK gees), CPU-only in JAX as in ftrans")
def test_symbolic_batch_and_matrix_sizes_in_factorizations_like_jax():
    # Custom calls of symbolic result sizes take their shapes as operands (indices_of_shape_operands).
    rs = np.random.RandomState(0)
    x = rs.randn(3, 4, 4).astype(np.float32)
    s = x @ x.transpose(0, 2, 1) + 4 * np.eye(4, dtype=np.float32)
    fexp, jexp = _both_exports(_factorizations, (x, s), ["b, n, n", "b, n, n"])
    assert "indices_of_shape_operands" in fexp.mlir_module()
    for b, n in ((3, 4), (2, 3)):
        _agree(fexp, jexp, (x[:b, :n, :n], s[:b, :n, :n]), tol=2e-3, magnitudes=True)


def _rectangular(np_, lax, random, a):
    la = lax.linalg
    return la.qr(a, full_matrices=False), la.qr(a, full_matrices=True), la.lu(a), la.svd(a, full_matrices=False)


@pytest.mark.parametrize("shape, constraint", [((2, 5, 3), "n <= m"), ((2, 3, 5), "m + 1 <= n")])
def test_symbolic_rectangular_qr_lu_svd_like_jax(shape, constraint):
    # min(m, n) as a dimension expression; lu's pivot loop gets m and n as dimension arguments.
    a = np.random.RandomState(1).randn(*shape).astype(np.float32)
    fexp, jexp = _both_exports(_rectangular, (a,), ["b, m, n"], constraints=[constraint])
    # a tall lu: the permutation's size m is no size of the pivots the loop's function takes
    # (the CPU's lowering: a GPU's lu is cuSOLVER's, whose permutation comes from a custom call, not that loop)
    assert ("jax.global_constant" in fexp.mlir_module()) == (shape[1] > shape[2]) or not on_cpu()
    _agree(fexp, jexp, (a,), tol=2e-3, magnitudes=True)


@pytest.mark.parametrize("shape, constraint", [((2, 5, 3), "n <= m"), ((2, 3, 5), "m + 1 <= n")])
def test_gpu_svd_of_symbolic_sizes_calls_gesvd_like_jax(shape, constraint):
    """Lowered for CUDA (no GPU needed), an SVD whose sizes may pass Jacobi's limit calls gesvd, as JAX's."""
    a = np.ones(shape, np.float32)

    def targets(text):
        return re.findall(r"cusolver_\w+_ffi", text)

    fexp = export.export(ftrans.jit(lambda a: ftrans.lax.linalg.svd(a, full_matrices=False)), platforms=("cuda",))(
        *export.symbolic_args_specs((a,), "b, m, n", constraints=[constraint]))
    jexp = jax.export.export(jax.jit(lambda a: jax.lax.linalg.svd(a, full_matrices=False)), platforms=("cuda",))(
        *jax.export.symbolic_args_specs((a,), "b, m, n", constraints=[constraint]))
    assert targets(fexp.mlir_module()) == targets(jexp.mlir_module()) == ["cusolver_gesvd_ffi"]
    assert str(fexp.out_avals) == str(jexp.out_avals)


def _draws(np_, lax, random, key, x):
    k = random.wrap_key_data(key)
    return (random.uniform(k, x.shape), random.normal(k, (x.shape[0], 2)), random.bits(k, x.shape),
            random.key_data(random.split(k, 2 * x.shape[0])), random.categorical(k, x, axis=1),
            random.choice(k, x, shape=(2,), axis=0))


def test_symbolic_random_draws_like_jax():
    key = np.array([0, 42], np.uint32)
    x = np.random.RandomState(2).randn(4, 6).astype(np.float32)
    fexp, jexp = _both_exports(_draws, (key, x), [None, "b, 2*c"])
    for b in (4, 3):
        _agree(fexp, jexp, (key, x[:b]), tol=1e-6)


def test_symbolic_choice_without_replacement_uses_the_constraints_like_jax():
    key = np.array([1, 2], np.uint32)
    a, r = np.arange(12, dtype=np.float32), np.zeros((2, 3), np.float32)
    fexp, jexp = _both_exports(lambda np_, lax, random, k, a, r: random.choice(
        random.wrap_key_data(k), a, shape=r.shape, replace=False), (key, a, r), [None, None, "b3, b4"],
        constraints=["12 >= b3*b4"])  # b3*b4 > 12 is decided False from above by the constraint
    _agree(fexp, jexp, (key, a, r))


def _segments_and_triangles(np_, lax, random, x, ids):
    ops = jax.ops if np_ is jjnp else ftrans.ops
    return (ops.segment_sum(x, ids, num_segments=x.shape[1]), ops.segment_max(x, ids, num_segments=x.shape[1],
                                                                              bucket_size=x.shape[0] // 2),
            np_.tril(x[0], k=x.shape[1] - 4), lax.top_k(x, 2), lax.cumsum(x, axis=2))


def test_symbolic_segments_triangles_top_k_and_cumulative_reductions_like_jax():
    x = np.random.RandomState(3).randn(8, 5, 3).astype(np.float32)
    ids = np.array([0, 0, 0, 1, 1, 3, 3, 3], np.int32)
    fexp, jexp = _both_exports(_segments_and_triangles, (x, ids), ["2*b, s, 3", "2*b"])
    _agree(fexp, jexp, (x, ids), tol=1e-5)


def test_symbolic_average_counts_and_linspace_samples_like_jax():
    x = np.random.RandomState(4).randn(3, 4).astype(np.float32)
    fexp, jexp = _both_exports(lambda np_, lax, random, x: (np_.average(x, axis=0), np_.average(x, returned=True)),
                               (x,), ["b, ..."])
    _agree(fexp, jexp, (x,), tol=1e-6)
    y = np.zeros(9, np.float32)
    fexp, jexp = _both_exports(lambda np_, lax, random, y: np_.linspace(0, 100, y.shape[0]), (y,), ["b"],
                               constraints=["b >= 2"])  # a symbolic number of samples
    _agree(fexp, jexp, (y[:5],), tol=1e-5)


def test_private_functions_take_dimension_arguments():
    # The nested jit (a private function, called in the loop's body, which is lowered inline in the loop's
    # region) needs 'n', which none of its arguments is sized by; the loop's condition needs it too.
    def f(x):
        n = x.shape[1]
        g = ftrans.jit(lambda v: v * n)
        return ftrans.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, g(c[1])), (0, x[:, 0]))[1]

    x = np.ones((2, 5), np.float32)
    fexp = export.export(ftrans.jit(f))(*export.symbolic_args_specs((x,), "b, n"))
    assert 'jax.global_constant = "n"' in fexp.mlir_module()
    np.testing.assert_array_equal(np.asarray(fexp.call(x)), np.full(2, 5.0 ** 5, np.float32))
    np.testing.assert_array_equal(np.asarray(fexp.call(x[:, :3])), np.full(2, 27.0, np.float32))


def test_permutation_of_a_symbolic_size_names_what_it_lacks():
    key = np.array([0, 42, 1, 5], np.uint32)
    x = np.zeros((3, 8), np.float32)
    with pytest.raises(NotImplementedError, match="`permutation` or `shuffle` for arrays of non-constant size: b"):
        export.export(ftrans.jit(lambda k, x: ftrans.random.permutation(ftrans.random.wrap_key_data(k[:2]), x)))(
            *export.symbolic_args_specs((key, x), [None, "b, 8"]))
