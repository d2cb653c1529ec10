"""StableHLO lowering of the linear-algebra primitives.

``cholesky`` and ``triangular_solve`` are StableHLO operations
(``stablehlo.cholesky``, ``stablehlo.triangular_solve``), which XLA expands
on every backend.  XLA has no operation for the other factorizations; as JAX
does on CPU, they become typed-FFI custom calls into the LAPACK kernels that
jaxlib registers with XLA's CPU client (``lapack_?getrf_ffi``,
``lapack_?geqrf_ffi`` + ``lapack_?orgqr_ffi``/``?ungqr``, ``lapack_?syevd_ffi``
/``?heevd``, ``lapack_?gesdd_ffi``, ``lapack_?geev_ffi``), with ``?`` the
LAPACK type letter (``s d c z``).  The operands are passed column-major
(``operand_layouts``), batch axes leading (``num_batch_dims``), and each call
returns LAPACK's ``info``; a matrix whose factorization failed is replaced by
NaNs, as in JAX.  The permutation of ``lu`` (and ``lu_pivots_to_permutation``)
is an ftrans ``while`` loop over the pivots, lowered by the ordinary rules.
"""

from __future__ import annotations

import numpy as np

from ftrans.core import dtypes
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import hoist_consts
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import linalg as L
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.core.prims.control_flow import while_p
from ftrans.core.trace import stage
from ftrans.lowering import compat
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, register_lowering

_I32 = np.dtype(np.int32)
_BOOL = np.dtype(np.bool_)
_LETTER = {dtypes.float32: "s", dtypes.float64: "d", dtypes.complex64: "c", dtypes.complex128: "z"}


def _layout(ndim: int, matrix: bool) -> str:
    dims = ([ndim - 2, ndim - 1] + list(range(ndim - 3, -1, -1))) if matrix else list(range(ndim - 1, -1, -1))
    body = "" if not dims else (str(dims[0]) if len(dims) == 1 else "[" + ", ".join(map(str, dims)) + "]")
    return f"dense<{body}> : tensor<{ndim}xindex>"


def _custom_call(ctx: LoweringContext, target: str, operands: list[tuple[str, ShapedArray, bool]],
                 results: list[tuple[ShapedArray, bool]], config: dict[str, str], nbatch: int,
                 alias: bool = True, alias_operand: int = 0) -> list[str]:
    """One typed-FFI LAPACK call; ``operands``/``results`` carry (aval, is_matrix) for their layouts."""
    compat.ensure_lapack_targets()
    cfg = ", ".join(f"{k} = {ord(v)} : ui8" for k, v in config.items())
    attrs = {
        "api_version": "1 : i32",
        "backend_config": '""',
        "call_target_name": f'"{target}"',
        "called_computations": "[]",
        "has_side_effect": "false",
        "operand_layouts": "[" + ", ".join(_layout(a.ndim, m) for _, a, m in operands) + "]",
        "result_layouts": "[" + ", ".join(_layout(a.ndim, m) for a, m in results) + "]",
        "mhlo.backend_config": "{" + cfg + "}",
        "mhlo.frontend_attributes": f'{{num_batch_dims = "{nbatch}"}}',
    }
    if alias:
        idx = "[0]" if len(results) > 1 else "[]"
        attrs["output_operand_aliases"] = (f"[#stablehlo.output_operand_alias<output_tuple_indices = {idx}, "
                                           f"operand_index = {alias_operand}, operand_tuple_indices = []>]")
    return ctx.emit("stablehlo.custom_call", [o for o, _, _ in operands], [mt.aval_type(a) for a, _ in results],
                    attrs)


def _iota(ctx: LoweringContext, shape: tuple, dim: int, dtype: np.dtype = _I32) -> str:
    return ctx.emit1("stablehlo.iota", [], mt.tensor_type(shape, dtype), {"iota_dimension": f"{dim} : i64"})


def _tri_mask(ctx: LoweringContext, shape: tuple, lower: bool, k: int = 0) -> str:
    """A bool mask of ``shape`` keeping the lower (col <= row + k) or upper (col >= row + k) triangle."""
    m, n = shape[-2:]
    rows = _iota(ctx, (m, n), 0)
    cols = _iota(ctx, (m, n), 1)
    if k:
        rows = ctx.emit1("stablehlo.add", [rows, ctx.broadcast(ctx.scalar(k, _I32), ShapedArray((), _I32), (m, n))],
                         mt.tensor_type((m, n), _I32))
    mask = ctx.compare(rows, cols, "GE" if lower else "LE", _I32, (m, n))
    nd = len(shape)
    return ctx.broadcast(mask, ShapedArray((m, n), _BOOL), shape, (nd - 2, nd - 1))


def _zero_outside(ctx: LoweringContext, x: str, aval: ShapedArray, lower: bool, k: int = 0) -> str:
    zero = ctx.broadcast(ctx.scalar(0, aval.dtype), aval.update(shape=()), aval.shape)
    return ctx.emit1("stablehlo.select", [_tri_mask(ctx, aval.shape, lower, k), x, zero], mt.aval_type(aval))


def _nan_unless(ctx: LoweringContext, x: str, aval: ShapedArray, ok: str, nbatch: int) -> str:
    """``x`` where the batch element's ``ok`` holds, NaN elsewhere."""
    okb = ctx.broadcast(ok, ShapedArray(aval.shape[:nbatch], _BOOL), aval.shape, tuple(range(nbatch)))
    nan = ctx.broadcast(ctx.constant(np.asarray(np.nan + (0j if aval.dtype.kind == "c" else 0), aval.dtype)),
                        aval.update(shape=()), aval.shape)
    return ctx.emit1("stablehlo.select", [okb, x, nan], mt.aval_type(aval))


def _info_ok(ctx: LoweringContext, info: str, batch: tuple, direction: str = "EQ") -> str:
    zero = ctx.broadcast(ctx.scalar(0, _I32), ShapedArray((), _I32), batch)
    return ctx.compare(info, zero, direction, _I32, batch)


# ---------------------------------------------------------------- cholesky, triangular_solve


@register_lowering(L.cholesky_p)
def _cholesky_lowering(ctx: LoweringContext, a: str) -> str:
    (aval,) = ctx.avals_in
    batch = aval.shape[:-2]
    nb = len(batch)
    if aval.size == 0:
        return a
    out, info = _custom_call(ctx, f"lapack_{_LETTER[aval.dtype]}potrf_ffi", [(a, aval, True)],
                             [(aval, True), (ShapedArray(batch, _I32), False)], {"uplo": "L"}, nb)
    # LAPACK leaves the upper triangle as it was; a failed factorization is NaN on and below the diagonal (JAX's).
    out = _nan_unless(ctx, out, aval, _info_ok(ctx, info, batch), nb)
    return _zero_outside(ctx, out, aval, lower=True)


def _conj(ctx: LoweringContext, x: str, aval: ShapedArray) -> str:
    if aval.dtype.kind != "c":
        return x
    rt = mt.tensor_type(aval.shape, L.real_dtype(aval.dtype))
    re = ctx.emit1("stablehlo.real", [x], rt)
    im = ctx.emit1("stablehlo.negate", [ctx.emit1("stablehlo.imag", [x], rt)], rt)
    return ctx.emit1("stablehlo.complex", [re, im], mt.aval_type(aval))


@register_lowering(L.triangular_solve_p)
def _triangular_solve_lowering(ctx: LoweringContext, a: str, b: str, *, left_side: bool, lower: bool,
                               transpose_a: bool, conjugate_a: bool, unit_diagonal: bool) -> str:
    a_aval, b_aval = ctx.avals_in
    if b_aval.size == 0:
        return b
    if conjugate_a and not transpose_a:
        a = _conj(ctx, a, a_aval)
        conjugate_a = False
    trans = "N" if not transpose_a else ("C" if conjugate_a and a_aval.dtype.kind == "c" else "T")
    (out,) = _custom_call(
        ctx, f"lapack_{_LETTER[a_aval.dtype]}trsm_ffi", [(a, a_aval, True), (b, b_aval, True)], [(b_aval, True)],
        {"diag": "U" if unit_diagonal else "N", "side": "L" if left_side else "R", "trans_x": trans,
         "uplo": "L" if lower else "U"}, a_aval.ndim - 2, alias_operand=1)
    return out


# ---------------------------------------------------------------- lu


def _p2p_program(pivots_aval: ShapedArray, size: int):
    """An ftrans program applying the row swaps ``pivots`` to ``arange(size)``, batched over leading axes."""
    batch = pivots_aval.shape[:-1]
    k = pivots_aval.shape[-1]
    nb = len(batch)
    pshape = batch + (size,)

    def body(i, piv, perm):
        # j = piv[..., i]; swap perm[..., i] and perm[..., j] through one-hot masks (no per-batch gather needed).
        z = np.int32(0)
        j = S.dynamic_slice_p.bind(piv, *([z] * nb), i, slice_sizes=batch + (1,))
        iota = S.iota_p.bind(dtype=_I32, shape=pshape, dimension=nb)
        at_i = E.eq_p.bind(iota, S.broadcast_in_dim_p.bind(i, shape=pshape, broadcast_dimensions=()))
        at_j = E.eq_p.bind(iota, S.broadcast_in_dim_p.bind(j, shape=pshape, broadcast_dimensions=tuple(range(nb + 1))))
        zeros = S.broadcast_in_dim_p.bind(z, shape=pshape, broadcast_dimensions=())
        pi = R.reduce_sum_p.bind(S.select_n_p.bind(at_i, zeros, perm), axes=(nb,))
        pj = R.reduce_sum_p.bind(S.select_n_p.bind(at_j, zeros, perm), axes=(nb,))
        dims = tuple(range(nb))
        pib = S.broadcast_in_dim_p.bind(pi, shape=pshape, broadcast_dimensions=dims)
        pjb = S.broadcast_in_dim_p.bind(pj, shape=pshape, broadcast_dimensions=dims)
        new = S.select_n_p.bind(at_j, perm, pib)
        new = S.select_n_p.bind(at_i, new, pjb)
        return [E.add_p.bind(i, np.int32(1)), piv, new]

    def run(piv):
        perm = S.iota_p.bind(dtype=_I32, shape=pshape, dimension=nb)
        if k == 0 or size == 0:
            return [perm]
        carry = [np.int32(0), piv, perm]
        avals = [ShapedArray((), _I32), pivots_aval, ShapedArray(pshape, _I32)]
        cj, cc = hoist_consts(stage(lambda i, *_: [E.lt_p.bind(i, np.int32(k))], avals)[0])
        bj, bc = hoist_consts(stage(body, avals)[0])
        outs = while_p.bind(*cc, *bc, *carry, cond_jaxpr=cj, body_jaxpr=bj, cond_nconsts=len(cc),
                            body_nconsts=len(bc))
        return [outs[2]]

    return stage(run, [pivots_aval])[0]


def _pivots_to_perm(ctx: LoweringContext, pivots: str, pivots_aval: ShapedArray, size: int) -> str:
    closed = _p2p_program(pivots_aval, size)
    consts = [ctx.constant(np.asarray(c)) for c in closed.consts]
    sym = ctx.module.function(closed.jaxpr, "lu_pivots_to_permutation")
    out_t = mt.tensor_type(pivots_aval.shape[:-1] + (size,), _I32)
    return ctx.fn.emit("func.call", consts + [pivots], [out_t], {"callee": f"@{sym}"})[0]


@register_lowering(L.lu_pivots_to_permutation_p)
def _p2p_lowering(ctx: LoweringContext, pivots: str, *, permutation_size: int) -> str:
    return _pivots_to_perm(ctx, pivots, ctx.avals_in[0], permutation_size)


@register_lowering(L.lu_p)
def _lu_lowering(ctx: LoweringContext, a: str) -> list[str]:
    (aval,) = ctx.avals_in
    lu_aval, piv_aval, _ = ctx.avals_out
    batch = aval.shape[:-2]
    nb = len(batch)
    if aval.size == 0:
        piv = ctx.broadcast(ctx.scalar(0, _I32), ShapedArray((), _I32), piv_aval.shape)
        return [a, piv, _pivots_to_perm(ctx, piv, piv_aval, aval.shape[-2])]
    info_aval = ShapedArray(batch, _I32)
    lu, piv, info = _custom_call(ctx, f"lapack_{_LETTER[aval.dtype]}getrf_ffi", [(a, aval, True)],
                                 [(lu_aval, True), (piv_aval, False), (info_aval, False)], {}, nb)
    one = ctx.broadcast(ctx.scalar(1, _I32), ShapedArray((), _I32), piv_aval.shape)
    piv = ctx.emit1("stablehlo.subtract", [piv, one], mt.aval_type(piv_aval))
    lu = _nan_unless(ctx, lu, lu_aval, _info_ok(ctx, info, batch, "GE"), nb)
    return [lu, piv, _pivots_to_perm(ctx, piv, piv_aval, aval.shape[-2])]


# ---------------------------------------------------------------- qr


def _slice_cols(ctx: LoweringContext, x: str, aval: ShapedArray, rows: int, cols: int) -> tuple[str, ShapedArray]:
    """``x[..., :rows, :cols]``, zero-padded where ``x`` is smaller."""
    shape = aval.shape
    nd = len(shape)
    r0, c0 = shape[-2:]
    out_aval = aval.update(shape=shape[:-2] + (rows, cols))
    if (r0, c0) == (rows, cols):
        return x, aval
    if rows <= r0 and cols <= c0:
        return ctx.emit1("stablehlo.slice", [x], mt.aval_type(out_aval), {
            "start_indices": mt.i64_array([0] * nd),
            "limit_indices": mt.i64_array(list(shape[:-2]) + [rows, cols]),
            "strides": mt.i64_array([1] * nd)}), out_aval
    if rows < r0 or cols < c0:
        x, aval = _slice_cols(ctx, x, aval, min(rows, r0), min(cols, c0))
        r0, c0 = aval.shape[-2:]
    zero = ctx.scalar(0, aval.dtype)
    return ctx.emit1("stablehlo.pad", [x, zero], mt.aval_type(out_aval), {
        "edge_padding_low": mt.i64_array([0] * nd),
        "edge_padding_high": mt.i64_array([0] * (nd - 2) + [rows - r0, cols - c0]),
        "interior_padding": mt.i64_array([0] * nd)}), out_aval


@register_lowering(L.qr_p)
def _qr_lowering(ctx: LoweringContext, a: str, *, full_matrices: bool) -> list[str]:
    (aval,) = ctx.avals_in
    q_aval, r_aval = ctx.avals_out
    m, n = aval.shape[-2:]
    k = min(m, n)
    batch = aval.shape[:-2]
    nb = len(batch)
    if aval.size == 0:
        q = ctx.broadcast(ctx.scalar(0, aval.dtype), aval.update(shape=()), q_aval.shape)
        eye = _tri_mask(ctx, q_aval.shape, True)
        eye = ctx.emit1("stablehlo.and", [eye, _tri_mask(ctx, q_aval.shape, False)], mt.tensor_type(q_aval.shape, _BOOL))
        one = ctx.broadcast(ctx.scalar(1, aval.dtype), aval.update(shape=()), q_aval.shape)
        q = ctx.emit1("stablehlo.select", [eye, one, q], mt.aval_type(q_aval))
        r = ctx.broadcast(ctx.scalar(0, aval.dtype), aval.update(shape=()), r_aval.shape)
        return [q, r]
    letter = _LETTER[aval.dtype]
    tau_aval = ShapedArray(batch + (k,), aval.dtype)
    qr, tau = _custom_call(ctx, f"lapack_{letter}geqrf_ffi", [(a, aval, True)], [(aval, True), (tau_aval, False)],
                           {}, nb)
    qcols = q_aval.shape[-1]
    qin, qin_aval = _slice_cols(ctx, qr, aval, m, qcols)
    gen = "ungqr" if aval.dtype.kind == "c" else "orgqr"
    (q,) = _custom_call(ctx, f"lapack_{letter}{gen}_ffi", [(qin, qin_aval, True), (tau, tau_aval, False)],
                        [(q_aval, True)], {}, nb)
    r, r_av = _slice_cols(ctx, qr, aval, r_aval.shape[-2], n)
    r = _zero_outside(ctx, r, r_av, lower=False)
    return [q, r]


# ---------------------------------------------------------------- eigh


@register_lowering(L.eigh_p)
def _eigh_lowering(ctx: LoweringContext, a: str, *, lower: bool) -> list[str]:
    (aval,) = ctx.avals_in
    v_aval, w_aval = ctx.avals_out
    batch = aval.shape[:-2]
    nb = len(batch)
    if aval.size == 0:
        return [a, ctx.broadcast(ctx.scalar(0, w_aval.dtype), w_aval.update(shape=()), w_aval.shape)]
    name = "heevd" if aval.dtype.kind == "c" else "syevd"
    v, w, info = _custom_call(ctx, f"lapack_{_LETTER[aval.dtype]}{name}_ffi", [(a, aval, True)],
                              [(v_aval, True), (w_aval, False), (ShapedArray(batch, _I32), False)],
                              {"mode": "V", "uplo": "L" if lower else "U"}, nb)
    ok = _info_ok(ctx, info, batch)
    return [_nan_unless(ctx, v, v_aval, ok, nb), _nan_unless(ctx, w, w_aval, ok, nb)]


# ---------------------------------------------------------------- svd


@register_lowering(L.svd_p)
def _svd_lowering(ctx: LoweringContext, a: str, *, full_matrices: bool, compute_uv: bool) -> list[str]:
    (aval,) = ctx.avals_in
    m, n = aval.shape[-2:]
    k = min(m, n)
    batch = aval.shape[:-2]
    nb = len(batch)
    s_aval = ShapedArray(batch + (k,), L.real_dtype(aval.dtype))
    ku, kv = (m, n) if full_matrices else (k, k)
    u_aval = ShapedArray(batch + (m, ku), aval.dtype)
    vt_aval = ShapedArray(batch + (kv, n), aval.dtype)
    if aval.size == 0:
        s = ctx.broadcast(ctx.scalar(0, s_aval.dtype), s_aval.update(shape=()), s_aval.shape)
        if not compute_uv:
            return [s]
        outs = [s]
        for av in (u_aval, vt_aval):
            z = ctx.broadcast(ctx.scalar(0, av.dtype), av.update(shape=()), av.shape)
            eye = ctx.emit1("stablehlo.and", [_tri_mask(ctx, av.shape, True), _tri_mask(ctx, av.shape, False)],
                            mt.tensor_type(av.shape, _BOOL))
            one = ctx.broadcast(ctx.scalar(1, av.dtype), av.update(shape=()), av.shape)
            outs.append(ctx.emit1("stablehlo.select", [eye, one, z], mt.aval_type(av)))
        return outs
    mode = ("A" if full_matrices else "S") if compute_uv else "N"
    _, s, u, vt, info = _custom_call(
        ctx, f"lapack_{_LETTER[aval.dtype]}gesdd_ffi", [(a, aval, True)],
        [(aval, True), (s_aval, False), (u_aval, True), (vt_aval, True), (ShapedArray(batch, _I32), False)],
        {"mode": mode}, nb)
    ok = _info_ok(ctx, info, batch)
    s = _nan_unless(ctx, s, s_aval, ok, nb)
    if not compute_uv:
        return [s]
    return [s, _nan_unless(ctx, u, u_aval, ok, nb), _nan_unless(ctx, vt, vt_aval, ok, nb)]


# ---------------------------------------------------------------- eig


@register_lowering(L.eig_p)
def _eig_lowering(ctx: LoweringContext, a: str, *, compute_left_eigenvectors: bool,
                  compute_right_eigenvectors: bool) -> list[str]:
    (aval,) = ctx.avals_in
    batch = aval.shape[:-2]
    nb = len(batch)
    n = aval.shape[-1]
    c = ctx.avals_out[0].dtype
    w_aval = ShapedArray(batch + (n,), c)
    v_aval = ShapedArray(aval.shape, c)
    info_aval = ShapedArray(batch, _I32)
    config = {"compute_left": "V" if compute_left_eigenvectors else "N",
              "compute_right": "V" if compute_right_eigenvectors else "N"}
    if aval.dtype.kind == "c":
        w, vl, vr, info = _custom_call(
            ctx, f"lapack_{_LETTER[aval.dtype]}geev_ffi", [(a, aval, True)],
            [(w_aval, False), (v_aval, True), (v_aval, True), (info_aval, False)], config, nb, alias=False)
    else:
        rw = ShapedArray(batch + (n,), aval.dtype)
        wr, wi, vl, vr, info = _custom_call(
            ctx, f"lapack_{_LETTER[aval.dtype]}geev_ffi", [(a, aval, True)],
            [(rw, False), (rw, False), (v_aval, True), (v_aval, True), (info_aval, False)], config, nb,
            alias=False)
        w = ctx.emit1("stablehlo.complex", [wr, wi], mt.aval_type(w_aval))
    ok = _info_ok(ctx, info, batch)
    outs = [_nan_unless(ctx, w, w_aval, ok, nb)]
    if compute_left_eigenvectors:
        outs.append(_nan_unless(ctx, vl, v_aval, ok, nb))
    if compute_right_eigenvectors:
        outs.append(_nan_unless(ctx, vr, v_aval, ok, nb))
    return outs
