"""``ftrans.experimental.sparse`` against ``jax.experimental.sparse``: BCOO layouts and buffers, products
(sparse x dense, dense x sparse, sparse x sparse, sampled), structure operations, ``sparsify``, gradients
with respect to stored values and dense operands, ``vmap`` over batch dimensions, ``jit`` with BCOO
arguments, BCSR/COO/CSR/CSC basics, and the errors."""

from __future__ import annotations

import functools
import itertools

import jax
import jax.experimental.sparse as jsparse
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans.errors import ConcretizationTypeError
from ftrans.experimental import sparse


def rand_sparse(shape, seed=0, density=0.5, dtype=np.float32):
    rng = np.random.RandomState(seed)
    x = rng.randn(*shape).astype(dtype)
    x[rng.rand(*shape) > density] = 0
    return x


def layouts(ndim):
    for n_batch in range(ndim + 1):
        for n_dense in range(ndim + 1 - n_batch):
            yield n_batch, n_dense


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# jax's oracle programs are compiled without LLVM's optimizing passes (level 0; the suite's default is 1): less
# compile time, the same values up to float rounding (which the tolerances are for).  ftrans's compile as always.
_ORACLE_OPTIONS = {"xla_backend_optimization_level": 0}


@functools.cache
def _jax_fromdense(nse, n_batch, n_dense):
    return jax.jit(lambda x: jsparse.BCOO.fromdense(x, nse=nse, n_batch=n_batch, n_dense=n_dense),
                   compiler_options=_ORACLE_OPTIONS)


def _jax_count_stored(x, n_batch, n_dense):
    from jax.experimental.sparse.bcoo import _count_stored_elements

    return _count_stored_elements(x, n_batch, n_dense)


def twins(x, n_batch=0, n_dense=0):
    """ftrans's BCOO of ``x`` and jax's, the latter built by one compiled jax program (eager jax compiles each
    step); jax's ``nse`` is ftrans's, which ``test_fromdense_buffers_match_jax`` checks against jax's own."""
    f = sparse.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
    return f, _jax_fromdense(f.nse, n_batch, n_dense)(x)


def jjit(fun, *args):
    """``fun(*args)`` as one compiled jax program (the jax oracle)."""
    return jax.jit(fun, compiler_options=_ORACLE_OPTIONS)(*args)


@pytest.mark.parametrize("shape,cases", [((5,), [(0, 0), (1, 0), (0, 1)]), ((3, 4), [(0, 0), (1, 0), (0, 1), (1, 1)]),
                                         ((2, 3, 4), [(1, 0), (1, 1)])])
def test_fromdense_buffers_match_jax(shape, cases):
    x = rand_sparse(shape)
    for n_batch, n_dense in cases:
        f = sparse.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
        # jax's own nse (the count jax's eager fromdense makes), then its buffers: two compiled jax programs
        nse = int(jax.jit(_jax_count_stored, static_argnums=(1, 2))(x, n_batch, n_dense))
        j = _jax_fromdense(nse, n_batch, n_dense)(x)
        assert (f.n_batch, f.n_sparse, f.n_dense, f.nse) == (j.n_batch, j.n_sparse, j.n_dense, j.nse)
        np.testing.assert_array_equal(np.asarray(f.indices), np.asarray(j.indices))
        np.testing.assert_array_equal(np.asarray(f.data), np.asarray(j.data))
        np.testing.assert_array_equal(np.asarray(f.todense()), x)
        assert f.indices_sorted and f.unique_indices


def test_padding_and_duplicates_in_todense():
    data = np.array([1.0, 2.0, 3.0, 100.0], np.float32)
    indices = np.array([[0, 1], [0, 1], [2, 0], [3, 0]], np.int32)  # a duplicate and an out-of-bounds pad
    f = sparse.BCOO((data, indices), shape=(3, 2))
    j = jsparse.BCOO((data, indices), shape=(3, 2))
    np.testing.assert_array_equal(np.asarray(f.todense()), np.asarray(jjit(lambda j: j.todense(), j)))
    fs, js = f.sum_duplicates(), j.sum_duplicates()
    assert fs.nse == js.nse
    np.testing.assert_array_equal(np.asarray(fs.indices), np.asarray(js.indices))
    np.testing.assert_array_equal(np.asarray(fs.data), np.asarray(js.data))
    fo, jo = sparse.bcoo_sort_indices(f), jjit(jsparse.bcoo_sort_indices, j)
    np.testing.assert_array_equal(np.asarray(fo.indices), np.asarray(jo.indices))


DOT_CASES = [
    # lhs shape, rhs shape, n_batch, n_dense, dimension_numbers
    ((3, 4), (4, 2), 0, 0, (([1], [0]), ([], []))),
    ((3, 4), (4,), 0, 0, (([1], [0]), ([], []))),
    ((3, 4), (5, 3), 0, 0, (([0], [1]), ([], []))),
    ((3, 4), (3, 2), 0, 1, (([0], [0]), ([], []))),
    ((2, 3, 4), (2, 4, 5), 1, 0, (([2], [1]), ([0], [0]))),
    ((2, 3, 4), (4, 5), 1, 0, (([2], [0]), ([], []))),
    ((2, 3, 4), (2, 5), 1, 0, (([0], [0]), ([], []))),
    ((2, 3, 4), (3, 4), 0, 0, (([1, 2], [0, 1]), ([], []))),
    ((2, 3, 4), (2, 4, 3), 2, 0, (([2], [1]), ([0], [0]))),
]


@pytest.mark.parametrize("lhs_shape,rhs_shape,n_batch,n_dense,dn", DOT_CASES)
def test_dot_general_sparse_dense_and_dense_sparse(lhs_shape, rhs_shape, n_batch, n_dense, dn):
    x = rand_sparse(lhs_shape, seed=1)
    y = np.random.RandomState(2).randn(*rhs_shape).astype(np.float32)
    f, j = twins(x, n_batch, n_dense)
    rdn = ((dn[0][1], dn[0][0]), (dn[1][1], dn[1][0]))
    want, want_r = jjit(lambda j, y: (jsparse.bcoo_dot_general(j, y, dimension_numbers=dn),
                                      jsparse.bcoo_dot_general(y, j, dimension_numbers=rdn)), j, y)
    close(sparse.bcoo_dot_general(f, y, dimension_numbers=dn), want)
    close(sparse.bcoo_dot_general(y, f, dimension_numbers=rdn), want_r)


def test_matmul_operators_and_jit():
    x = rand_sparse((4, 5))
    v = np.arange(5, dtype=np.float32)
    w = np.arange(8, dtype=np.float32).reshape(2, 4)
    f, j = twins(x)
    dn = (([1], [1]), ([], []))
    mv, wm, twice, times_x, tr, gram = jjit(
        lambda j, v, w, x: (j @ v, jjnp.asarray(w) @ j, (j * 2.0).todense(), (j * x).todense(), j.T.todense(),
                            jsparse.bcoo_dot_general(j, j, dimension_numbers=dn).todense()), j, v, w, x)
    close(f @ v, mv)
    close(w @ f, wm)
    close(fjnp.asarray(w) @ f, w @ x)
    close(ftrans.jit(lambda m, v: m @ v)(f, v), mv)
    close((f * 2.0).todense(), twice)
    close((f * x).todense(), times_x)
    close(f.T.todense(), tr)
    close((f @ f.T).todense(), gram)
    out = ftrans.jit(lambda m: m.T)(f)
    assert isinstance(out, sparse.BCOO) and out.shape == (5, 4)
    f.block_until_ready()


def test_mixed_dtype_products_promote_like_jax():
    # A sparse operand times a dense (or sparse) one of another dtype computes in the promoted dtype,
    # as JAX's bcoo_dot_general does; the @ operator of BCOO reaches it through sparsify(jnp.matmul).
    x = rand_sparse((3, 4))
    f, j = twins(x)
    fc, jc = twins((x * (1 + 1j)).astype(np.complex64))
    v = np.arange(4, dtype=np.int32)
    w = np.arange(6, dtype=np.int16).reshape(2, 3)
    si = np.array([[1, 0], [0, 2], [0, 0], [3, 0]], np.int32)
    fsi, jsi = twins(si)
    dn = (([1], [0]), ([], []))
    want = jjit(lambda j, jc, jsi, v, w: (j @ v, jc @ v, w @ j, jsparse.bcoo_dot_general(w, jc, dimension_numbers=dn),
                                          (j @ jsi).todense()), j, jc, jsi, v, w)
    got = (f @ v, fc @ v, w @ f, sparse.bcoo_dot_general(w, fc, dimension_numbers=dn), (f @ fsi).todense())
    for g, e in zip(got, want):
        assert g.dtype == e.dtype
        close(g, e)


def test_grad_wrt_data_and_dense_operand():
    x = rand_sparse((4, 5))
    v = np.random.RandomState(3).randn(5).astype(np.float32)
    f, j = twins(x)

    def loss_f(data, v):
        m = sparse.BCOO((data, f.indices), shape=f.shape)
        return fjnp.sum(sparse.bcoo_dot_general(m, v, dimension_numbers=(([1], [0]), ([], []))) ** 2)

    def loss_j(data, v):
        m = jsparse.BCOO((data, j.indices), shape=j.shape)
        return jjnp.sum(jsparse.bcoo_dot_general(m, v, dimension_numbers=(([1], [0]), ([], []))) ** 2)

    gf = ftrans.grad(loss_f, argnums=(0, 1))(f.data, v)
    gj = jax.jit(jax.grad(loss_j, argnums=(0, 1)))(j.data, v)
    close(gf[0], gj[0], 1e-4)
    close(gf[1], gj[1], 1e-4)
    # sparse.grad: the gradient of a sparse argument is sparse, with its indices
    sg = sparse.grad(lambda m, v: (m @ v).sum())(f, v)
    jg = jax.jit(jsparse.grad(lambda m, v: (m @ v).sum()))(j, v)
    assert isinstance(sg, sparse.BCOO)
    close(sg.data, jg.data)
    close(sg.todense(), jg.todense())


def test_vmap_over_batched_bcoo():
    x = rand_sparse((3, 4, 5))
    v = np.random.RandomState(4).randn(3, 5).astype(np.float32)
    f, j = twins(x, n_batch=1)
    close(ftrans.vmap(lambda m, u: m @ u)(f, v), jax.jit(jax.vmap(lambda m, u: m @ u))(j, v))
    close(ftrans.vmap(lambda m: m.todense())(f), x)
    out = ftrans.vmap(lambda m: m * 2.0)(f)  # BCOO in, BCOO out: the batch axis comes back
    assert isinstance(out, sparse.BCOO) and out.shape == (3, 4, 5) and out.n_batch == 1
    close(out.todense(), 2 * x)


@pytest.mark.parametrize("n_batch,n_dense", list(layouts(3)))
def test_structure_operations(n_batch, n_dense):
    # Dense references from NumPy (JAX's own sparse functions compile slowly); buffers against JAX above.
    x = rand_sparse((2, 3, 4), seed=5)
    f = sparse.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
    for axes in [(0,), (1,), (2,), (0, 2), (0, 1, 2)]:
        close(sparse.bcoo_reduce_sum(f, axes=axes).todense(), x.sum(axes))
    close(sparse.bcoo_slice(f, start_indices=(0, 1, 1), limit_indices=(2, 3, 4), strides=(1, 1, 2)).todense(),
          x[0:2, 1:3, 1:4:2])
    close(sparse.bcoo_dynamic_slice(f, (1, 1, 5), (1, 2, 2)).todense(), x[1:2, 1:3, 2:4])  # start clamped
    close(sparse.bcoo_rev(f, dimensions=(0, 2)).todense(), x[::-1, :, ::-1])
    expanded = sparse.bcoo_broadcast_in_dim(f, shape=(5, 2, 3, 4), broadcast_dimensions=(1, 2, 3))
    close(expanded.todense(), np.broadcast_to(x, (5, 2, 3, 4)))
    for nb2, nd2 in layouts(3):
        u = sparse.bcoo_update_layout(f, n_batch=nb2, n_dense=nd2, on_inefficient=None)
        assert (u.n_batch, u.n_dense) == (nb2, nd2)
        close(u.todense(), x)
    for axis in range(3):
        close(sparse.bcoo_concatenate([f, f * 2.0], dimension=axis).todense(), np.concatenate([x, 2 * x], axis))
    sq = sparse.bcoo_squeeze(sparse.bcoo_broadcast_in_dim(f, shape=(1, 2, 3, 4), broadcast_dimensions=(1, 2, 3)),
                             dimensions=(0,))
    close(sq.todense(), x)
    perm = tuple(range(n_batch))[::-1] + tuple(range(n_batch, 3 - n_dense))[::-1] + tuple(range(3 - n_dense, 3))[::-1]
    close(sparse.bcoo_transpose(f, permutation=perm).todense(), x.transpose(perm))
    close(f.transpose((2, 0, 1)).todense(), x.transpose((2, 0, 1)))


def test_reshape():
    x = rand_sparse((2, 3, 4), seed=6)
    cases = [(0, 0, (4, 6), (0, 2, 0)), (0, 0, (24,), (0, 1, 0)), (1, 0, (2, 12), (1, 1, 0)),
             (0, 1, (6, 4), (0, 1, 1)), (1, 1, (2, 3, 4), (1, 1, 1)), (1, 0, (2, 1, 3, 4), (2, 2, 0))]
    for n_batch, n_dense, new, layout in cases:
        out = sparse.bcoo_reshape(sparse.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense), new_sizes=new)
        assert (out.n_batch, out.n_sparse, out.n_dense) == layout
        close(out.todense(), x.reshape(new))
    f = sparse.BCOO.fromdense(x, n_batch=1)
    with pytest.raises(ValueError, match="cannot mix batch and sparse dimensions"):
        f.reshape(3, 2, 4)


def test_extract_sampled_and_sparse_products():
    x = rand_sparse((3, 4), seed=7)
    y = rand_sparse((3, 4), seed=8)
    f, j = twins(x)
    g, k = twins(y)
    dense = np.random.RandomState(9).randn(3, 4).astype(np.float32)
    a = np.random.RandomState(10).randn(3, 5).astype(np.float32)
    b = np.random.RandomState(11).randn(5, 4).astype(np.float32)
    dn = (([1], [0]), ([], []))
    extracted, sampled, multiplied, ref = jjit(
        lambda j, k, dense, a, b: (jsparse.bcoo_extract(j, dense).data,
                                   jsparse.bcoo_dot_general_sampled(a, b, j.indices, dimension_numbers=dn),
                                   jsparse.bcoo_multiply_sparse(j, k).todense(),
                                   jsparse.bcoo_dot_general(j, k, dimension_numbers=(([1], [1]), ([], [])))),
        j, k, dense, a, b)
    close(sparse.bcoo_extract(f, dense).data, extracted)
    close(sparse.bcoo_dot_general_sampled(a, b, f.indices, dimension_numbers=dn), sampled)
    close(sparse.bcoo_multiply_sparse(f, g).todense(), multiplied)
    close((f * g).todense(), x * y)
    close((f + g).todense(), x + y)
    close((f - g).todense(), x - y)
    prod = sparse.bcoo_dot_general(f, g, dimension_numbers=(([1], [1]), ([], [])))
    assert prod.nse == ref.nse
    close(prod.todense(), ref.todense())


def test_multiply_with_duplicates_is_not_elementwise_on_data():
    indices = np.array([[0, 1], [0, 1], [1, 0]], np.int32)
    data = np.array([1, 2, 3], np.int32)
    f = sparse.BCOO((data, indices), shape=(2, 2))
    np.testing.assert_array_equal(np.asarray((f * f).todense()), np.asarray(f.todense()) ** 2)


def test_sparsify_runs_numpy_code():
    x = rand_sparse((4, 3), seed=12)
    v = np.ones(3, np.float32)
    f, j = twins(x)

    def fun(m, v):
        return (fjnp.matmul(m, v), (2.0 * m).T, fjnp.sum(m, axis=0), fjnp.sum(m), -m)

    def jfun(m, v):
        return (jjnp.matmul(m, v), (2.0 * m).T, jjnp.sum(m, axis=0), jjnp.sum(m), -m)

    outs = sparse.sparsify(fun)(f, v)
    refs = jax.jit(jsparse.sparsify(jfun))(j, v)
    for o, r in zip(outs, refs):
        assert isinstance(o, sparse.BCOO) == isinstance(r, jsparse.BCOO)
        close(sparse.todense(o), r.todense() if isinstance(r, jsparse.BCOO) else r)
    with pytest.raises(NotImplementedError, match="^sparse rule for exp is not implemented because it would "
                       "result in dense output"):
        sparse.sparsify(fjnp.exp)(f)
    with pytest.raises(NotImplementedError, match=r"^sparse rule for complex is not implemented\.$"):
        sparse.sparsify(ftrans.lax.complex)(f, f)


@pytest.mark.parametrize("fmt", ["BCOO", "BCSR"])
@pytest.mark.parametrize("op", ["sin", "neg", "integer_pow", "convert_element_type"])
def test_sparsify_unary_duplicate_indices(fmt, op):
    # Entries stored twice at one index: a nonlinear op sums them first (sin(a)+sin(b) != sin(a+b)), a linear
    # one keeps the stored entries as they are; a BCSR operand gives a BCSR result.
    kw = {"integer_pow": {"y": 2}, "convert_element_type": {"new_dtype": np.dtype("complex64")}}.get(op, {})
    data = np.array([1.0, 2.0, 3.0], np.float32)
    if fmt == "BCOO":
        idx = np.array([[0, 1], [0, 1], [1, 0]], np.int32)
        f, j = sparse.BCOO((data, idx), shape=(2, 3)), jsparse.BCOO((data, idx), shape=(2, 3))
    else:
        idx, ptr = np.array([1, 1, 0], np.int32), np.array([0, 2, 3], np.int32)
        f, j = sparse.BCSR((data, idx, ptr), shape=(2, 3)), jsparse.BCSR((data, idx, ptr), shape=(2, 3))
    out = sparse.sparsify(functools.partial(getattr(ftrans.lax, op), **kw))(f)
    ref = jsparse.sparsify(functools.partial(getattr(jax.lax, op), **kw))(j)
    assert type(out).__name__ == type(ref).__name__ == fmt
    close(sparse.todense(out), ref.todense())
    if op == "neg":
        np.testing.assert_array_equal(np.asarray(out.indices), np.asarray(ref.indices))


def test_sparse_pow():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    close((sparse.BCOO.fromdense(x) ** 2).todense(), (jsparse.BCOO.fromdense(x) ** 2).todense())
    with pytest.raises(NotImplementedError, match="integer_pow with non-positive exponent"):
        _ = sparse.BCOO.fromdense(x) ** -1


def test_jit_needs_static_nse():
    x = rand_sparse((3, 3))
    with pytest.raises(ConcretizationTypeError):
        ftrans.jit(lambda a: sparse.BCOO.fromdense(a))(x)
    out = ftrans.jit(lambda a: sparse.BCOO.fromdense(a, nse=9))(x)
    assert out.nse == 9
    close(out.todense(), x)


def test_update_layout_inefficient_errors():
    f = sparse.BCOO.fromdense(rand_sparse((3, 4)))
    with pytest.raises(sparse.SparseEfficiencyError):
        sparse.bcoo_update_layout(f, n_batch=1)
    with pytest.warns(sparse.SparseEfficiencyWarning):
        sparse.bcoo_update_layout(f, n_dense=1, on_inefficient="warn")


def test_bad_shapes_are_reported():
    with pytest.raises(ValueError, match="nse"):
        sparse.BCOO((np.ones(3, np.float32), np.zeros((2, 1), np.int32)), shape=(4,))
    with pytest.raises(TypeError, match="integer"):
        sparse.BCOO((np.ones(2, np.float32), np.zeros((2, 1), np.float32)), shape=(4,))


def test_empty_eye_random_and_pytree():
    for shape, n_batch, n_dense in [((3, 4), 0, 0), ((2, 3, 4), 1, 0), ((2, 3, 4), 0, 1)]:
        f = sparse.empty(shape, n_batch=n_batch, n_dense=n_dense)
        j, j_dense = jjit(lambda: (lambda j: (j, j.todense()))(jsparse.empty(shape, n_batch=n_batch,
                                                                               n_dense=n_dense)))
        assert f.data.shape == j.data.shape and f.indices.shape == j.indices.shape
        close(f.todense(), j_dense)
    for (n, m, k), fmt in itertools.product([(3, 3, 0), (3, 5, 1), (4, 3, -2)], ["bcoo", "bcsr", "csr", "coo"]):
        close(sparse.eye(n, m, k, sparse_format=fmt).todense(), np.eye(n, m, k))
    r = sparse.random_bcoo(ftrans.random.key(0), (4, 5), nse=0.3, n_batch=1)
    assert r.shape == (4, 5) and r.n_batch == 1 and r.nse == 2
    leaves, tree = jax.tree_util.tree_flatten(r)
    r2 = jax.tree_util.tree_unflatten(tree, leaves)
    assert r2.shape == r.shape and r2.nse == r.nse
    assert "BCOO(float32[4, 5], nse=2, n_batch=1)" == repr(r)


def test_bcsr_coo_csr_basics():
    x = rand_sparse((4, 5), seed=13)
    v = np.arange(5, dtype=np.float32)
    # jax's side as one compiled program per layout (nse as ftrans's: test_fromdense_buffers_match_jax checks it)
    b = sparse.BCSR.fromdense(x)
    jb, jbv = jjit(lambda x, v: (lambda m: (m, m @ v))(jsparse.BCSR.fromdense(x, nse=b.nse)), x, v)
    np.testing.assert_array_equal(np.asarray(b.indices), np.asarray(jb.indices))
    np.testing.assert_array_equal(np.asarray(b.indptr), np.asarray(jb.indptr))
    close(b.todense(), x)
    close(b @ v, jbv)
    xb = rand_sparse((2, 4, 5), seed=14)
    bb = sparse.BCSR.fromdense(xb, n_batch=1)
    jbb = jjit(lambda x: jsparse.BCSR.fromdense(x, nse=bb.nse, n_batch=1), xb)
    np.testing.assert_array_equal(np.asarray(bb.indptr), np.asarray(jbb.indptr))
    close(bb.todense(), xb)
    close(sparse.BCSR.from_bcoo(sparse.BCOO.fromdense(x)).todense(), x)
    for cls in (sparse.COO, sparse.CSR, sparse.CSC):
        m = cls.fromdense(x)
        jmv = jjit(lambda x, v, name=cls.__name__: getattr(jsparse, name).fromdense(x, nse=m.nse) @ v, x, v)
        close(m.todense(), x)
        close(m @ v, jmv)
        close(m.T.todense(), x.T)
        leaves, tree = jax.tree_util.tree_flatten(m)
        assert jax.tree_util.tree_unflatten(tree, leaves).shape == m.shape


def test_documented_differences_from_jax():
    # docs/differences.md, "Sparse arrays": sparse - dense is dense, as sparse + dense is in both; JAX raises.
    x = rand_sparse((3, 4), seed=15)
    d = np.ones((3, 4), np.float32)
    f, j = twins(x)
    close(f + d, jjit(lambda j, d: j + d, j, d))
    out = f - d
    assert not isinstance(out, sparse.BCOO)
    close(out, x - d)
    with pytest.raises(NotImplementedError):
        j - d
    # broadcasting a size-1 sparse dimension repeats the stored elements; JAX raises.
    col = rand_sparse((3, 1), seed=16, density=1.0)
    wide = sparse.bcoo_broadcast_in_dim(sparse.BCOO.fromdense(col), shape=(3, 4), broadcast_dimensions=(0, 1))
    close(wide.todense(), np.broadcast_to(col, (3, 4)))
    with pytest.raises(NotImplementedError):
        jsparse.bcoo_broadcast_in_dim(twins(col)[1], shape=(3, 4), broadcast_dimensions=(0, 1))


def test_grad_of_data_through_vmapped_matvec():
    a = np.array([[4.0, -1, 0, 0], [-1, 4, -1, 0], [0, -1, 4, -1], [0, 0, -1, 4]], np.float32)
    b = np.array([[1.0, 0, 2], [0, 1, 1], [1, 1, 0], [0, 2, 1]], np.float32)
    f, j = twins(a)

    def objective(lib, vmap, jnp, m):
        def obj(data):
            mat = lib.BCOO((data, m.indices), shape=m.shape)
            return jnp.sum(vmap(lambda col: mat @ col, in_axes=1, out_axes=1)(b) ** 2)
        return obj

    gf = ftrans.grad(objective(sparse, ftrans.vmap, fjnp, f))(f.data)
    gj = jax.jit(jax.grad(objective(jsparse, jax.vmap, jjnp, j)))(j.data)
    assert gf.shape == f.data.shape
    close(gf, gj, 1e-4)


def test_spsolve_matches_jax():
    rng = np.random.RandomState(17)
    a = rand_sparse((6, 6), seed=18) + 6 * np.eye(6, dtype=np.float32)
    rhs = rng.randn(6).astype(np.float32)
    m = sparse.CSR.fromdense(a)
    x = sparse.linalg.spsolve(m.data, m.indices, m.indptr, rhs)
    jm = jsparse.CSR.fromdense(a)
    close(x, jax.jit(jsparse.linalg.spsolve)(jm.data, jm.indices, jm.indptr, rhs), 1e-4)
    g = ftrans.grad(lambda d: sparse.linalg.spsolve(d, m.indices, m.indptr, rhs).sum())(m.data)
    gj = jax.jit(jax.grad(lambda d: jsparse.linalg.spsolve(d, jm.indices, jm.indptr, rhs).sum()))(jm.data)
    close(g, gj, 1e-3)


@pytest.mark.parametrize("padding", ["SAME", "VALID", [(3, 3)]])
def test_conv_1d_matches_jax(padding):
    lhs = rand_sparse((1, 1, 10), seed=19)
    rhs = rand_sparse((1, 1, 5), seed=20)
    kw = dict(window_strides=(1,), padding=padding)
    ref = jax.jit(lambda a, b: jax.lax.conv_general_dilated(a, b, **kw))(lhs, rhs)
    sp_l, sp_r = sparse.BCOO.fromdense(lhs, n_batch=2), sparse.BCOO.fromdense(rhs, n_batch=2)
    for a, b in [(sp_l, rhs), (lhs, sp_r), (sp_l, sp_r)]:
        out = sparse.bcoo_conv_general_dilated(a, b, **kw)
        assert isinstance(out, sparse.BCOO)
        close(out.todense(), ref, 1e-4)


def test_sparsify_control_flow_matches_jax():
    # cond, while_loop and fori_loop (a scan) with sparse operands: the bodies run sparsely.
    x = np.arange(5.0, dtype=np.float32)
    m = np.arange(25.0, dtype=np.float32).reshape(5, 5)

    def progs(lax, jnp):
        return [
            (lambda a: lax.cond(False, lambda v: v, lambda v: 2 * v, a), (x,)),
            (lambda a: lax.while_loop(lambda p: p[0] < 3, lambda p: (p[0] + 1, 2 * p[1]), (0, a))[1], (x,)),
            (lambda a, v: lax.fori_loop(0, 2, lambda i, c: (a @ c) / 5, v), (m, x)),
        ]

    def dense(out):  # (jax's side: inside its one program)
        return out.todense() if isinstance(out, jsparse.BCOO) else out

    for (fp, args), (jp, _) in zip(progs(ftrans.lax, fjnp), progs(jax.lax, jjnp)):
        fa, ja = twins(args[0])
        got = sparse.sparsify(fp)(fa, *args[1:])
        want = jjit(lambda *a: dense(jsparse.sparsify(jp)(*a)), ja, *args[1:])  # noqa: B023 - called at once
        close(sparse.todense(got) if isinstance(got, sparse.BCOO) else got, want)
    f = sparse.sparsify(lambda a, b: ftrans.lax.cond(False, lambda t: t[0], lambda t: t[1], (a, b)))
    with pytest.raises(TypeError, match="sparsified true_fun output must have same type structure as "
                                        "sparsified false_fun output"):
        f(sparse.BCOO.fromdense(x), x)


def test_sparsify_dynamic_slice_and_convolve_match_jax():
    m = np.arange(24).reshape(2, 3, 4).astype(np.int32)  # the start is clamped, as in lax

    def ds(lax):
        return lambda a: lax.dynamic_slice(a, (0, 1, 2), (1, 1, 3))

    fm, jm = twins(m)  # (jax's side of each: one compiled program)
    got = ftrans.jit(sparse.sparsify(ds(ftrans.lax)))(fm)
    want = jjit(lambda a: jsparse.sparsify(ds(jax.lax))(a).todense(), jm)
    np.testing.assert_array_equal(np.asarray(sparse.todense(got)), np.asarray(want))
    x = np.array([0, 1, 0, 2, 0, 0, 3, 0], np.float32)
    k = np.arange(3.0, dtype=np.float32)
    fx, jx = twins(x)
    got = sparse.sparsify(lambda a, b: fjnp.convolve(a, b, mode="full"))(fx, k)
    want = jjit(lambda a, b: jsparse.sparsify(lambda a, b: jjnp.convolve(a, b, mode="full"))(a, b).todense(), jx, k)
    close(sparse.todense(got), want)


def test_sparsify_raw_env_and_values_match_jax():
    # JAX's lower-level sparsify interface: values as positions in a shared buffer list; two values sharing
    # one indices buffer are one sparsity pattern (added/multiplied without concatenating).
    import operator

    from jax.experimental.sparse import transform as jt

    from ftrans.experimental.sparse import transform as ft

    x = np.arange(5, dtype=np.float32)
    ours = ft.arrays_to_spvalues(env := ft.SparsifyEnv(), (fjnp.asarray(x), sparse.BCOO.fromdense(x),
                                                          sparse.BCSR.fromdense(x.reshape(1, 5))))
    theirs = jt.arrays_to_spvalues(jenv := jt.SparsifyEnv(), (jjnp.asarray(x), jsparse.BCOO.fromdense(x),
                                                               jsparse.BCSR.fromdense(x.reshape(1, 5))))
    assert [tuple(v)[:4] for v in ours] == [tuple(v)[:4] for v in theirs]  # (BCSR.fromdense's flags differ)
    assert ours[:2] == tuple(theirs[:2])
    assert len(env._buffers) == len(jenv._buffers) == 6
    back = ft.spvalues_to_arrays(env, ours)
    np.testing.assert_array_equal(back[0], x)
    np.testing.assert_array_equal(back[1].todense(), x)
    np.testing.assert_array_equal(back[2].todense(), x.reshape(1, 5))
    assert isinstance(back[2], sparse.BCSR) and ours[2].is_bcsr() and ours[0].is_dense() and ours[1].ndim == 1

    a, b = sparse.BCOO.fromdense(3 * x), sparse.BCOO.fromdense(x)
    for op, unique in ((operator.add, False), (operator.sub, False), (operator.mul, True), (operator.mul, False)):
        env = ft.SparsifyEnv([a.indices, a.data, b.data])
        vals = [env.sparse(a.shape, data_ref=1, indices_ref=0, unique_indices=unique),
                env.sparse(b.shape, data_ref=2, indices_ref=0, unique_indices=unique)]
        outs, tree = ft.sparsify_raw(op)(env, *vals)
        (out,) = ft.spvalues_to_arrays(env, outs)
        np.testing.assert_allclose(out.todense(), op(3 * x, x))
        if op is not operator.mul or unique:
            assert out.nse == a.nse and out.indices is a.indices  # the shared pattern, kept
    with pytest.raises(ValueError, match="indices_ref=7"):
        ft.SparsifyEnv([x]).sparse((5,), data_ref=0, indices_ref=7)


def test_sparsify_sparse_plus_dense_never_densifies_silently():
    # As in JAX: sparse + dense gives a dense result only when the dense operand has the result's shape;
    # a smaller one (a scalar) would densify the whole sparse array, so it raises.
    import operator

    x = sparse.BCOO.fromdense(np.arange(6.0, dtype=np.float32)).reshape(2, 3)
    y = np.ones((2, 3), np.float32)
    for a, b in ((x, y), (y, x)):
        np.testing.assert_allclose(sparse.sparsify(operator.add)(a, b), np.arange(6.0).reshape(2, 3) + 1)
    jx = jsparse.BCOO.fromdense(jjnp.arange(6.0)).reshape(2, 3)
    with pytest.raises(NotImplementedError, match="Addition between a sparse array X and a dense array Y"):
        jsparse.sparsify(operator.add)(jx, 1.0)
    with pytest.raises(NotImplementedError, match="Addition between a sparse array X and a dense array Y"):
        sparse.sparsify(operator.add)(x, 1.0)


@pytest.mark.parametrize("fmt", ["BCOO", "BCSR"])
def test_sparsify_todense_densifies_like_jax(fmt):
    # ``sparse.todense`` inside sparsified code densifies the value a sparse argument stands for (JAX's
    # todense_p), so a scalar can be added to it afterwards.
    m = np.arange(4.0, dtype=np.float32).reshape(2, 3 - 1)
    fsp = getattr(sparse, fmt).fromdense(m)
    jsp = getattr(jsparse, fmt).fromdense(jjnp.asarray(m))
    f = lambda a: sparse.todense(a) * 2 + 1  # noqa: E731
    jf = lambda a: jsparse.todense(a) * 2 + 1  # noqa: E731
    want = jsparse.sparsify(jf)(jsp)
    np.testing.assert_array_equal(sparse.sparsify(f)(fsp), want)
    np.testing.assert_array_equal(sparse.sparsify(f)(m), jsparse.sparsify(jf)(m))
    # on a dense traced value it is the identity under every transform
    x = np.arange(3.0, dtype=np.float32)
    assert "todense" in str(ftrans.make_jaxpr(sparse.todense)(x))
    np.testing.assert_array_equal(ftrans.jit(f)(x), jax.jit(jf)(x))
    np.testing.assert_array_equal(ftrans.grad(lambda v: f(v).sum())(x), jax.grad(lambda v: jf(v).sum())(x))
    np.testing.assert_array_equal(ftrans.vmap(f)(np.ones((2, 3), np.float32)), jax.vmap(jf)(np.ones((2, 3))))
    np.testing.assert_array_equal(ftrans.linear_transpose(sparse.todense, x)(x)[0], x)


def test_sparse_tracer_isinstance_matches_jax():
    # Inside sparsify(f, use_tracer=True) the values are SparseTracers (dense or sparse arguments alike),
    # inside plain sparsify they are not, as in JAX.
    def seen(mod, use_tracer, x):
        out = []
        mod.sparsify(lambda v: out.append((isinstance(v, mod.SparseTracer), isinstance(v * 2, mod.SparseTracer))),
                     use_tracer=use_tracer)(x)
        return out

    for use_tracer in (False, True):
        assert seen(sparse, use_tracer, fjnp.arange(5)) == seen(jsparse, use_tracer, jjnp.arange(5))
        assert (seen(sparse, use_tracer, sparse.BCOO.fromdense(np.arange(5.0)))
                == seen(jsparse, use_tracer, jsparse.BCOO.fromdense(jjnp.arange(5.0))))
    x = sparse.BCOO.fromdense(np.arange(6.0, dtype=np.float32))
    np.testing.assert_array_equal(sparse.sparsify(lambda v: (v * 2).sum(), use_tracer=True)(x), 30.0)
    with pytest.raises(TypeError, match="cannot be created directly"):
        sparse.SparseTracer()
