"""StableHLO lowering of the linear-algebra primitives, per platform.

XLA has operations for only two of these (``stablehlo.cholesky`` and
``stablehlo.triangular_solve``); every other factorization is a typed-FFI
custom call into a vendor library that jaxlib registers with XLA.  Which one
depends on the platform the module is lowered for (``ctx.platform``), as it
does in JAX, whose lowering ftrans's emits the same calls as:

* ``cpu``: LAPACK, ``lapack_?potrf_ffi``, ``?trsm``, ``?getrf``, ``?geqrf`` +
  ``?orgqr``/``?ungqr``, ``?syevd``/``?heevd``, ``?gesdd``, ``?geev`` (``?``
  the type letter ``s d c z``), with character options (``uplo = 76 : ui8``).
* ``cuda`` / ``rocm``: cuSOLVER / hipSOLVER, ``cusolver_potrf_ffi``,
  ``_getrf``, ``_geqrf`` + ``_orgqr``, ``_syevd``, ``_gesvdj`` (matrices up to
  1024x1024) or ``_gesvd``; ``cu_lu_pivots_to_permutation`` for the pivots;
  for ``eig`` cuSOLVER's ``geev`` (cuSOLVER >= 11.7.1, right eigenvectors
  only) or the hybrid kernel ``cuhybrid_eig_real``/``_comp`` (LAPACK or MAGMA
  on the host); boolean options (``lower = true``).  ``triangular_solve`` is
  ``stablehlo.triangular_solve``, which XLA's GPU backend runs as cuBLAS trsm.

The operands are passed column-major (``operand_layouts``), batch axes leading
(``num_batch_dims``), and each factorization returns its ``info``; a matrix
whose factorization failed is replaced by NaNs, as in JAX.  Each call carries a
Shardy rule (``sdy.sharding_rule``) saying its batch axes may be split across
devices.  On the CPU the permutation of ``lu`` (and
``lu_pivots_to_permutation``) is an ftrans ``while`` loop over the pivots,
lowered by the ordinary rules.
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
from ftrans.core.prims.sorting import cumsum_p
from ftrans.core.shape_poly import is_poly_shape, is_symbolic_dim, min_dim
from ftrans.core.trace import stage
from ftrans.errors import FtransNotImplementedError, FtransValueError, InconclusiveDimensionOperation
from ftrans.lowering import compat
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, register_lowering

_I32 = np.dtype(np.int32)
_BOOL = np.dtype(np.bool_)
_LETTER = {dtypes.float32: "s", dtypes.float64: "d", dtypes.complex64: "c", dtypes.complex128: "z"}
_GPU_PREFIX = {"cuda": "cu", "rocm": "hip"}
# cuSOLVER's first release with a non-symmetric eigensolver (cusolverDnXgeev): 11.7.1.
_CUSOLVER_GEEV = 11701


def _gpu(ctx: LoweringContext, name: str) -> str | None:
    """The GPU target prefix (``cu``, ``hip``) when lowering for a GPU, None for the CPU; others refused."""
    plat = ctx.platform
    if plat == "cpu":
        return None
    prefix = _GPU_PREFIX.get(plat)
    if prefix is None:
        raise FtransValueError(
            f"{name}: ftrans lowers its linear algebra for cpu, cuda and rocm, not for {plat}; lower this "
            "program for one of those (lowering_platforms=('cpu',)), or run it on such a device")
    compat.ensure_gpu_solver_targets()
    return prefix


def _char(c: str) -> str:
    """A LAPACK character option as the CPU kernels take it (``uplo = 76 : ui8``)."""
    return f"{ord(c)} : ui8"


def _bool(b: bool) -> str:
    return mt.bool_attr(bool(b))


def _layout(ndim: int, matrix: bool) -> str:
    if matrix and ndim >= 2:  # column-major matrices, batch axes major to minor
        dims = [ndim - 2, ndim - 1] + list(range(ndim - 3, -1, -1))
    else:
        dims = list(range(ndim - 1, -1, -1))
    body = "" if not dims else (str(dims[0]) if len(dims) == 1 else "[" + ", ".join(map(str, dims)) + "]")
    return f"dense<{body}> : tensor<{ndim}xindex>"


def _factor_name(i: int) -> str:
    # Shardy's printed factor names: i, j, ..., z, then z_1, z_2, ...
    return chr(ord("i") + i) if i < 18 else f"z_{i - 17}"


def _sharding_rule(avals_in: list[ShapedArray], avals_out: list[ShapedArray], nbatch: int) -> str:
    """The Shardy rule of a batched linear-algebra call: batch axes are shared factors, the rest private."""
    sizes = list(avals_in[0].shape[:nbatch])

    def dims(a: ShapedArray) -> str:
        if a.ndim < nbatch:
            return "[]"
        names = [_factor_name(k) for k in range(nbatch)]
        for d in a.shape[nbatch:]:
            names.append(_factor_name(len(sizes)))
            sizes.append(d)
        return "[" + ", ".join(names) + "]"

    lhs = ", ".join(dims(a) for a in avals_in)
    rhs = ", ".join(dims(a) for a in avals_out)
    factors = ", ".join(f"{_factor_name(k)}={n}" for k, n in enumerate(sizes))
    return f"#sdy.op_sharding_rule<({lhs})->({rhs}) {{{factors}}}, custom>"


def _custom_call(ctx: LoweringContext, target: str, operands: list[tuple[str, ShapedArray, bool]],
                 results: list[tuple[ShapedArray, bool]], config: dict[str, str], nbatch: int,
                 aliases: dict[int, int] | None = None) -> list[str]:
    """One typed-FFI call of ``target``.

    ``operands``/``results`` carry (aval, is_matrix) for their layouts (a matrix
    is column-major); ``config`` maps attribute names to their MLIR text;
    ``aliases`` maps a result's index to the operand whose buffer it may reuse.
    """
    if ctx.platform == "cpu":
        compat.ensure_lapack_targets()
    cfg = ", ".join(f"{k} = {v}" for k, v in sorted(config.items()))
    layouts = [_layout(a.ndim, m) for _, a, m in operands]
    ops = [o for o, _, _ in operands]
    symbolic = any(is_poly_shape(a.shape) for a, _ in results)
    if symbolic:  # results of symbolic sizes: their shapes as operands, which shape refinement reads (JAX's)
        shape_ops = [ctx.fn.shape_tensor(a.shape) for a, _ in results]
        shape_idx = list(range(len(ops), len(ops) + len(shape_ops)))
        ops += shape_ops
        layouts += [_layout(1, False)] * len(shape_ops)
    attrs = {
        "api_version": "1 : i32",
        "backend_config": '""',
        "call_target_name": f'"{target}"',
        "called_computations": "[]",
        "has_side_effect": "false",
        "operand_layouts": "[" + ", ".join(layouts) + "]",
        "result_layouts": "[" + ", ".join(_layout(a.ndim, m) for a, m in results) + "]",
        "mhlo.backend_config": "{" + cfg + "}",
        "mhlo.frontend_attributes": f'{{num_batch_dims = "{nbatch}"}}',
    }
    if symbolic:
        attrs["indices_of_shape_operands"] = mt.i64_elements(shape_idx)
    else:  # (JAX's module has no Shardy rule for a call of symbolic sizes)
        attrs["sdy.sharding_rule"] = _sharding_rule([a for _, a, _ in operands], [a for a, _ in results], nbatch)
    if aliases:
        idx = (lambda r: f"[{r}]") if len(results) > 1 else (lambda r: "[]")
        attrs["output_operand_aliases"] = "[" + ", ".join(
            f"#stablehlo.output_operand_alias<output_tuple_indices = {idx(r)}, operand_index = {o}, "
            "operand_tuple_indices = []>" for r, o in sorted(aliases.items())) + "]"
    return ctx.emit("stablehlo.custom_call", ops, [mt.aval_type(a) for a, _ in results], attrs)


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
    info_aval = ShapedArray(batch, _I32)
    if ctx.platform == "tpu":  # XLA's own Cholesky (JAX's lowering off CPU and GPU); it reports no failures
        out = ctx.emit1("stablehlo.cholesky", [a], mt.aval_type(aval), {"lower": "true"})
        return _zero_outside(ctx, out, aval, lower=True)
    gpu = _gpu(ctx, "cholesky")
    if gpu is None:
        target, config = f"lapack_{_LETTER[aval.dtype]}potrf_ffi", {"uplo": _char("L")}
    else:
        target, config = f"{gpu}solver_potrf_ffi", {"lower": _bool(True)}
    out, info = _custom_call(ctx, target, [(a, aval, True)], [(aval, True), (info_aval, False)], config, nb, {0: 0})
    # The solvers leave the upper triangle as it was; a failed factorization is NaN on and below the
    # diagonal (JAX's).
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
    adjoint = conjugate_a and a_aval.dtype.kind == "c"
    if ctx.platform != "cpu":
        # XLA's own op: on GPU it becomes cuBLAS's (hipBLAS's) batched trsm, as in JAX.
        transpose = "NO_TRANSPOSE" if not transpose_a else ("ADJOINT" if adjoint else "TRANSPOSE")
        return ctx.emit1("stablehlo.triangular_solve", [a, b], mt.aval_type(b_aval), {
            "left_side": _bool(left_side), "lower": _bool(lower),
            "transpose_a": f"#stablehlo<transpose {transpose}>", "unit_diagonal": _bool(unit_diagonal)})
    trans = "N" if not transpose_a else ("C" if adjoint else "T")
    (out,) = _custom_call(
        ctx, f"lapack_{_LETTER[a_aval.dtype]}trsm_ffi", [(a, a_aval, True), (b, b_aval, True)], [(b_aval, True)],
        {"diag": _char("U" if unit_diagonal else "N"), "side": _char("L" if left_side else "R"),
         "trans_x": _char(trans), "uplo": _char("L" if lower else "U")}, a_aval.ndim - 2, {0: 1})
    return out


# ---------------------------------------------------------------- lu


def _i32_value(d) -> object:
    """``d`` (an int or a symbolic dimension) as an int32 scalar of a program being staged."""
    if not is_symbolic_dim(d):
        return np.int32(d)
    return S.convert_element_type_p.bind(S.dim_as_value_p.bind(dim=d), new_dtype=_I32, weak_type=False)


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
        cj, cc = hoist_consts(stage(lambda i, *_: [E.lt_p.bind(i, _i32_value(k))], avals)[0])
        bj, bc = hoist_consts(stage(body, avals)[0])
        outs = while_p.bind(*cc, *bc, *carry, cond_jaxpr=cj, body_jaxpr=bj, cond_nconsts=len(cc),
                            body_nconsts=len(bc))
        return [outs[2]]

    return stage(run, [pivots_aval])[0]


def _pivots_to_perm(ctx: LoweringContext, pivots: str, pivots_aval: ShapedArray, size: int) -> str:
    out_aval = ShapedArray(pivots_aval.shape[:-1] + (size,), _I32)
    gpu = _gpu(ctx, "lu_pivots_to_permutation")
    if gpu is not None and pivots_aval.size and size:
        (perm,) = _custom_call(ctx, f"{gpu}_lu_pivots_to_permutation", [(pivots, pivots_aval, False)],
                               [(out_aval, False)], {}, pivots_aval.ndim - 1)
        return perm
    closed = _p2p_program(pivots_aval, size)
    consts = [ctx.constant(np.asarray(c)) for c in closed.consts]
    sym = ctx.module.function(closed.jaxpr, "lu_pivots_to_permutation")
    return ctx.fn.emit("func.call", consts + [pivots], [mt.aval_type(out_aval)], {"callee": f"@{sym}"})[0]


@register_lowering(L.lu_pivots_to_permutation_p)
def _p2p_lowering(ctx: LoweringContext, pivots: str, *, permutation_size: int) -> str:
    return _pivots_to_perm(ctx, pivots, ctx.avals_in[0], permutation_size)


@register_lowering(L.lu_p)
def _lu_lowering(ctx: LoweringContext, a: str) -> list[str]:
    (aval,) = ctx.avals_in
    lu_aval, piv_aval, _ = ctx.avals_out
    batch = aval.shape[:-2]
    nb = len(batch)
    gpu = _gpu(ctx, "lu")
    if aval.size == 0:
        piv = ctx.broadcast(ctx.scalar(0, _I32), ShapedArray((), _I32), piv_aval.shape)
        return [a, piv, _pivots_to_perm(ctx, piv, piv_aval, aval.shape[-2])]
    info_aval = ShapedArray(batch, _I32)
    target = f"lapack_{_LETTER[aval.dtype]}getrf_ffi" if gpu is None else f"{gpu}solver_getrf_ffi"
    lu, piv, info = _custom_call(ctx, target, [(a, aval, True)],
                                 [(lu_aval, True), (piv_aval, False), (info_aval, False)], {}, nb, {0: 0})
    one = ctx.broadcast(ctx.scalar(1, _I32), ShapedArray((), _I32), piv_aval.shape)
    piv = ctx.emit1("stablehlo.subtract", [piv, one], mt.aval_type(piv_aval))
    lu = _nan_unless(ctx, lu, lu_aval, _info_ok(ctx, info, batch, "GE"), nb)
    return [lu, piv, _pivots_to_perm(ctx, piv, piv_aval, aval.shape[-2])]


# ---------------------------------------------------------------- qr


def _slice_cols(ctx: LoweringContext, x: str, aval: ShapedArray, rows: int, cols: int) -> tuple[str, ShapedArray]:
    """``x[..., :rows, :cols]``, zero-padded where ``x`` is smaller (sizes may be symbolic)."""
    shape = aval.shape
    nd = len(shape)
    r0, c0 = shape[-2:]
    out_aval = aval.update(shape=shape[:-2] + (rows, cols))
    if (r0, c0) == (rows, cols):
        return x, aval
    r1, c1 = min_dim(rows, r0), min_dim(cols, c0)
    if (r1, c1) != (r0, c0):  # the part of x kept
        aval = aval.update(shape=shape[:-2] + (r1, c1))
        starts, limits, strides = [0] * nd, list(shape[:-2]) + [r1, c1], [1] * nd
        if is_poly_shape(limits):
            f = ctx.fn
            x = ctx.emit1("stablehlo.real_dynamic_slice", [x, f.shape_tensor(starts), f.shape_tensor(limits),
                                                           f.shape_tensor(strides)], mt.aval_type(aval))
        else:
            x = ctx.emit1("stablehlo.slice", [x], mt.aval_type(aval), {
                "start_indices": mt.i64_array(starts), "limit_indices": mt.i64_array(limits),
                "strides": mt.i64_array(strides)})
    if (r1, c1) == (rows, cols):
        return x, out_aval
    zero = ctx.scalar(0, aval.dtype)
    lo, hi = [0] * nd, [0] * (nd - 2) + [rows - r1, cols - c1]
    if is_poly_shape(hi) or is_poly_shape(out_aval.shape):
        f = ctx.fn
        return ctx.emit1("stablehlo.dynamic_pad", [x, zero, f.shape_tensor(lo), f.shape_tensor(hi),
                                                   f.shape_tensor(lo)], mt.aval_type(out_aval)), out_aval
    return ctx.emit1("stablehlo.pad", [x, zero], mt.aval_type(out_aval), {
        "edge_padding_low": mt.i64_array(lo),
        "edge_padding_high": mt.i64_array(hi),
        "interior_padding": mt.i64_array(lo)}), out_aval


def _eye_like(ctx: LoweringContext, aval: ShapedArray) -> str:
    z = ctx.broadcast(ctx.scalar(0, aval.dtype), aval.update(shape=()), aval.shape)
    eye = ctx.emit1("stablehlo.and", [_tri_mask(ctx, aval.shape, True), _tri_mask(ctx, aval.shape, False)],
                    mt.tensor_type(aval.shape, _BOOL))
    one = ctx.broadcast(ctx.scalar(1, aval.dtype), aval.update(shape=()), aval.shape)
    return ctx.emit1("stablehlo.select", [eye, one, z], mt.aval_type(aval))


@register_lowering(L.qr_p)
def _qr_lowering(ctx: LoweringContext, a: str, *, full_matrices: bool, pivoting: bool = False) -> list[str]:
    (aval,) = ctx.avals_in
    q_aval, r_aval = ctx.avals_out[:2]
    m, n = aval.shape[-2:]
    k = min_dim(m, n)
    batch = aval.shape[:-2]
    nb = len(batch)
    gpu = _gpu(ctx, "qr")
    perm = []
    jpvt_aval = ShapedArray(batch + (n,), _I32)
    if aval.size == 0:
        r = ctx.broadcast(ctx.scalar(0, aval.dtype), aval.update(shape=()), r_aval.shape)
        if pivoting:
            perm = [ctx.broadcast(ctx.scalar(0, _I32), ShapedArray((), _I32), jpvt_aval.shape)]
        return [_eye_like(ctx, q_aval), r, *perm]
    letter = _LETTER[aval.dtype]
    tau_aval = ShapedArray(batch + (k,), aval.dtype)
    if gpu is None:
        geqrf = f"lapack_{letter}geqrf_ffi"
        orgqr = f"lapack_{letter}{'ungqr' if aval.dtype.kind == 'c' else 'orgqr'}_ffi"
    else:  # cuSOLVER's and hipSOLVER's orgqr kernels take complex matrices too (they call ungqr)
        geqrf, orgqr = f"{gpu}solver_geqrf_ffi", f"{gpu}solver_orgqr_ffi"
    if pivoting:  # LAPACK's geqp3 (on a GPU the hybrid host kernel), one-based pivots made zero-based
        zeros = ctx.broadcast(ctx.scalar(0, _I32), ShapedArray((), _I32), jpvt_aval.shape)
        if gpu is None:
            target, cfg = f"lapack_{letter}geqp3_ffi", {}
        else:
            compat.init_gpu_hybrid_kernels()
            target, cfg = f"{gpu}hybrid_geqp3", {"magma": f'"{compat.gpu_use_magma()}"'}
        qr, jpvt, tau = _custom_call(ctx, target, [(a, aval, True), (zeros, jpvt_aval, False)],
                                     [(aval, True), (jpvt_aval, False), (tau_aval, False)], cfg, nb, {0: 0, 1: 1})
        one = ctx.broadcast(ctx.scalar(1, _I32), ShapedArray((), _I32), jpvt_aval.shape)
        perm = [ctx.emit1("stablehlo.subtract", [jpvt, one], mt.aval_type(jpvt_aval))]
    else:
        qr, tau = _custom_call(ctx, geqrf, [(a, aval, True)], [(aval, True), (tau_aval, False)], {}, nb, {0: 0})
    qcols = q_aval.shape[-1]
    qin, qin_aval = _slice_cols(ctx, qr, aval, m, qcols)
    (q,) = _custom_call(ctx, orgqr, [(qin, qin_aval, True), (tau, tau_aval, False)], [(q_aval, True)], {}, nb,
                        {0: 0})
    r, r_av = _slice_cols(ctx, qr, aval, r_aval.shape[-2], n)
    r = _zero_outside(ctx, r, r_av, lower=False)
    return [q, r, *perm]


# ---------------------------------------------------------------- eigh


@register_lowering(L.eigh_p)
def _eigh_lowering(ctx: LoweringContext, a: str, *, lower: bool) -> list[str]:
    (aval,) = ctx.avals_in
    v_aval, w_aval = ctx.avals_out
    batch = aval.shape[:-2]
    nb = len(batch)
    gpu = _gpu(ctx, "eigh")
    if aval.size == 0:
        return [a, ctx.broadcast(ctx.scalar(0, w_aval.dtype), w_aval.update(shape=()), w_aval.shape)]
    if gpu is None:
        name = "heevd" if aval.dtype.kind == "c" else "syevd"
        target = f"lapack_{_LETTER[aval.dtype]}{name}_ffi"
        config = {"mode": _char("V"), "uplo": _char("L" if lower else "U")}
    else:  # algorithm 0: the solver's default (syevd, or syevj for small batched matrices)
        target, config = f"{gpu}solver_syevd_ffi", {"algorithm": "0 : ui8", "lower": _bool(lower)}
    v, w, info = _custom_call(ctx, target, [(a, aval, True)],
                              [(v_aval, True), (w_aval, False), (ShapedArray(batch, _I32), False)], config, nb,
                              {0: 0})
    ok = _info_ok(ctx, info, batch)
    return [_nan_unless(ctx, v, v_aval, ok, nb), _nan_unless(ctx, w, w_aval, ok, nb)]


# ---------------------------------------------------------------- svd

# The GPU SVD is Jacobi's (gesvdj) up to this size in both dimensions, QR-based gesvd beyond, as in JAX
# (NVIDIA's measurements: Jacobi is the faster up to about 1024x1024).
_GESVDJ_MAX = 1024
# gesvdj's batched kernel has no economy mode; an economy SVD asks for it only past 32x32.
_GESVDJ_ECON_MIN = 32


def _transpose_last(ctx: LoweringContext, x: str, aval: ShapedArray) -> tuple[str, ShapedArray]:
    nd = aval.ndim
    out = aval.update(shape=aval.shape[:-2] + (aval.shape[-1], aval.shape[-2]))
    return ctx.emit1("stablehlo.transpose", [x], mt.aval_type(out),
                     {"permutation": mt.i64_array(list(range(nd - 2)) + [nd - 1, nd - 2])}), out


def _gesvdj_fits(m, n) -> bool:
    """Whether Jacobi's SVD takes an ``m x n`` matrix: sizes that may be larger (symbolic ones whose
    bounds do not decide it) go to gesvd, as in JAX."""
    try:
        return bool(m <= _GESVDJ_MAX and n <= _GESVDJ_MAX)
    except InconclusiveDimensionOperation:
        return False


def _gpu_svd_routine(gpu: str, algorithm, m, n) -> str:
    """The GPU solver routine for ``algorithm``, as JAX picks it: QR's gesvd, Jacobi's gesvdj, the polar
    gesvdp; by default Jacobi's for matrices up to 1024x1024, gesvd beyond."""
    if algorithm == L.SvdAlgorithm.QR:
        return "gesvd"
    if algorithm == L.SvdAlgorithm.JACOBI:
        return "gesvdj"
    if algorithm == L.SvdAlgorithm.POLAR:
        return "gesvdp"
    if algorithm == L.SvdAlgorithm.DIVIDE_AND_CONQUER:
        raise FtransNotImplementedError(
            "Divide-and-conquer SVD (SvdAlgorithm.DIVIDE_AND_CONQUER) is only supported on AMD (ROCm) GPUs, not "
            "on NVIDIA CUDA." if gpu == "cu" else
            "svd: SvdAlgorithm.DIVIDE_AND_CONQUER (hipSOLVER's gesdd) is not implemented by ftrans")
    return "gesvdj" if _gesvdj_fits(m, n) else "gesvd"


def _svd_gpu(ctx: LoweringContext, gpu: str, a: str, aval: ShapedArray, s_aval: ShapedArray,
             u_aval: ShapedArray, vt_aval: ShapedArray, full_matrices: bool, compute_uv: bool, algorithm=None):
    """cuSOLVER's / hipSOLVER's SVD: ``(s, u, vt, info)``, with ``u``/``vt`` of the shapes asked for."""
    batch = aval.shape[:-2]
    nb = len(batch)
    m, n = aval.shape[-2:]
    k = min_dim(m, n)
    info_aval = ShapedArray(batch, _I32)
    routine = _gpu_svd_routine(gpu, algorithm, m, n)
    if routine in ("gesvdj", "gesvdp"):
        econ = not full_matrices
        if routine == "gesvdj":
            try:
                econ = econ and m > _GESVDJ_ECON_MIN and n > _GESVDJ_ECON_MIN
            except InconclusiveDimensionOperation:
                econ = False
        # Jacobi's and the polar method compute U and V (not V^H) whether or not they are wanted.
        uj = ShapedArray(batch + (m, k if econ else m), aval.dtype)
        vj = ShapedArray(batch + (n, k if econ else n), aval.dtype)
        _, s, u, v, info = _custom_call(
            ctx, f"{gpu}solver_{routine}_ffi", [(a, aval, True)],
            [(aval, True), (s_aval, False), (uj, True), (vj, True), (info_aval, False)],
            {"compute_uv": _bool(compute_uv), "full_matrices": _bool(not econ)}, nb, {0: 0})
        if not compute_uv:
            return s, None, None, info
        vt, vt_j = _transpose_last(ctx, v, vj)
        vt = _conj(ctx, vt, vt_j)
        if not full_matrices and not econ:
            u, _ = _slice_cols(ctx, u, uj, m, k)
            vt, _ = _slice_cols(ctx, vt, vt_j, k, n)
        return s, u, vt, info
    # gesvd wants m >= n: a wide matrix goes in transposed (row-major), and U and V^H come back swapped.
    transposed = m < n
    if not compute_uv:
        u_aval = vt_aval = ShapedArray((), aval.dtype)
    outs = [(u_aval, not transposed), (vt_aval, not transposed)]
    if transposed:
        outs.reverse()
    _, s, x, y, info = _custom_call(
        ctx, f"{gpu}solver_gesvd_ffi", [(a, aval, not transposed)],
        [(aval, not transposed), (s_aval, False), *outs, (info_aval, False)],
        {"compute_uv": _bool(compute_uv), "full_matrices": _bool(full_matrices), "transposed": _bool(transposed)},
        nb, {0: 0})
    if not compute_uv:
        return s, None, None, info
    return (s, y, x, info) if transposed else (s, x, y, info)


@register_lowering(L.svd_p)
def _svd_lowering(ctx: LoweringContext, a: str, *, full_matrices: bool, compute_uv: bool,
                  algorithm=None) -> list[str]:
    (aval,) = ctx.avals_in
    m, n = aval.shape[-2:]
    k = min_dim(m, n)
    batch = aval.shape[:-2]
    nb = len(batch)
    s_aval = ShapedArray(batch + (k,), L.real_dtype(aval.dtype))
    ku, kv = (m, n) if full_matrices else (k, k)
    u_aval = ShapedArray(batch + (m, ku), aval.dtype)
    vt_aval = ShapedArray(batch + (kv, n), aval.dtype)
    gpu = _gpu(ctx, "svd")
    if aval.size == 0:
        s = ctx.broadcast(ctx.scalar(0, s_aval.dtype), s_aval.update(shape=()), s_aval.shape)
        if not compute_uv:
            return [s]
        return [s, _eye_like(ctx, u_aval), _eye_like(ctx, vt_aval)]
    if gpu is None:
        L.check_svd_algorithm(algorithm)
        mode = ("A" if full_matrices else "S") if compute_uv else "N"
        driver = "gesvd" if algorithm == L.SvdAlgorithm.QR else "gesdd"
        _, s, u, vt, info = _custom_call(
            ctx, f"lapack_{_LETTER[aval.dtype]}{driver}_ffi", [(a, aval, True)],
            [(aval, True), (s_aval, False), (u_aval, True), (vt_aval, True), (ShapedArray(batch, _I32), False)],
            {"mode": _char(mode)}, nb, {0: 0})
    else:
        s, u, vt, info = _svd_gpu(ctx, gpu, a, aval, s_aval, u_aval, vt_aval, full_matrices, compute_uv, algorithm)
    ok = _info_ok(ctx, info, batch)
    s = _nan_unless(ctx, s, s_aval, ok, nb)
    if not compute_uv:
        return [s]
    return [s, _nan_unless(ctx, u, u_aval, ok, nb), _nan_unless(ctx, vt, vt_aval, ok, nb)]


# ---------------------------------------------------------------- eig


def _unpack_program(w_aval: ShapedArray, v_aval: ShapedArray):
    """An ftrans program turning a real solver's packed eigenvectors into complex ones.

    As LAPACK does, cuSOLVER's real ``geev`` stores a complex-conjugate pair of
    eigenvectors as two real columns, the real part then the imaginary part:
    for the pair starting at column ``j``, ``v_j = x_j + i x_{j+1}`` and
    ``v_{j+1} = x_j - i x_{j+1}``.  A pair starts where an odd number of
    non-real eigenvalues has been seen so far.
    """
    nd = v_aval.ndim
    r = v_aval.dtype
    wdims = tuple(d for d in range(nd) if d != nd - 2)  # w's axes within v's: all but the row axis

    def run(w, v):
        # A zero of the real dtype (a NumPy float64 literal would be narrowed to float32 without x64).
        zero = S.convert_element_type_p.bind(np.int32(0), new_dtype=r, weak_type=False)
        im = E.imag_p.bind(w)
        nonreal = E.ne_p.bind(im, zero)
        count = cumsum_p.bind(S.convert_element_type_p.bind(nonreal, new_dtype=_I32, weak_type=False),
                              axis=nd - 2, reverse=False)
        start = E.eq_p.bind(E.rem_p.bind(count, np.int32(2)), np.int32(1))
        real_b = S.broadcast_in_dim_p.bind(E.not_p.bind(nonreal), shape=v_aval.shape, broadcast_dimensions=wdims)
        start_b = S.broadcast_in_dim_p.bind(start, shape=v_aval.shape, broadcast_dimensions=wdims)
        cfg = [(0, 0, 0)] * nd
        left = S.pad_p.bind(v, zero, padding_config=tuple(cfg[:-1] + [(-1, 1, 0)]))   # column j+1 at j
        right = S.pad_p.bind(v, zero, padding_config=tuple(cfg[:-1] + [(1, -1, 0)]))  # column j-1 at j
        re = S.select_n_p.bind(E.or_p.bind(real_b, start_b), right, v)
        imv = S.select_n_p.bind(start_b, E.neg_p.bind(v), left)
        imv = S.select_n_p.bind(real_b, imv, S.broadcast_in_dim_p.bind(zero, shape=v_aval.shape,
                                                                       broadcast_dimensions=()))
        return [E.complex_p.bind(re, imv)]

    return stage(run, [w_aval, v_aval])[0]


def _unpack(ctx: LoweringContext, w: str, w_aval: ShapedArray, v: str, v_aval: ShapedArray) -> str:
    closed = _unpack_program(w_aval, v_aval)
    consts = [ctx.constant(np.asarray(c)) for c in closed.consts]
    sym = ctx.module.function(closed.jaxpr, "unpack_eigenvectors")
    out_t = mt.tensor_type(v_aval.shape, w_aval.dtype)
    return ctx.fn.emit("func.call", consts + [w, v], [out_t], {"callee": f"@{sym}"})[0]


def _eig_gpu(ctx: LoweringContext, gpu: str, a: str, aval: ShapedArray, c: np.dtype, left: bool, right: bool):
    """``(w, vl, vr, info)`` from cuSOLVER's geev where it has one, else the hybrid (host LAPACK/MAGMA) kernel.

    ``c`` is the complex dtype of the results.
    """
    batch = aval.shape[:-2]
    nb = len(batch)
    n = aval.shape[-1]
    real = aval.dtype.kind != "c"
    w_aval = ShapedArray(batch + (n,), c)
    info_aval = ShapedArray(batch, _I32)
    version = compat.cusolver_version() if gpu == "cu" else None
    if version is not None and version >= _CUSOLVER_GEEV and not left:
        v_aval = ShapedArray(aval.shape, aval.dtype)
        _, w, vl, vr, info = _custom_call(
            ctx, f"{gpu}solver_geev_ffi", [(a, aval, True)],
            [(aval, True), (w_aval, False), (v_aval, True), (v_aval, True), (info_aval, False)],
            {"left": _bool(left), "right": _bool(right)}, nb)
        if real and right:
            vr = _unpack(ctx, w, w_aval, vr, v_aval)
        return w, vl, vr, info
    compat.init_gpu_hybrid_kernels()
    cv_aval = ShapedArray(aval.shape, c)
    config = {"left": _bool(left), "magma": f'"{compat.gpu_use_magma()}"', "right": _bool(right)}
    if real:
        rw = ShapedArray(batch + (n,), aval.dtype)
        wr, wi, vl, vr, info = _custom_call(
            ctx, f"{gpu}hybrid_eig_real", [(a, aval, True)],
            [(rw, False), (rw, False), (cv_aval, True), (cv_aval, True), (info_aval, False)], config, nb)
        w = ctx.emit1("stablehlo.complex", [wr, wi], mt.aval_type(w_aval))
    else:
        w, vl, vr, info = _custom_call(
            ctx, f"{gpu}hybrid_eig_comp", [(a, aval, True)],
            [(w_aval, False), (cv_aval, True), (cv_aval, True), (info_aval, False)], config, nb)
    return w, vl, vr, info


@register_lowering(L.eig_p)
def _eig_lowering(ctx: LoweringContext, a: str, *, compute_left_eigenvectors: bool,
                  compute_right_eigenvectors: bool, enable_eigvec_derivs: bool = False) -> list[str]:
    (aval,) = ctx.avals_in
    batch = aval.shape[:-2]
    nb = len(batch)
    n = aval.shape[-1]
    c = ctx.avals_out[0].dtype
    w_aval = ShapedArray(batch + (n,), c)
    v_aval = ShapedArray(aval.shape, c)
    info_aval = ShapedArray(batch, _I32)
    gpu = _gpu(ctx, "eig")
    config = {"compute_left": _char("V" if compute_left_eigenvectors else "N"),
              "compute_right": _char("V" if compute_right_eigenvectors else "N")}
    if gpu is not None:
        w, vl, vr, info = _eig_gpu(ctx, gpu, a, aval, c, compute_left_eigenvectors, compute_right_eigenvectors)
    elif aval.dtype.kind == "c":
        w, vl, vr, info = _custom_call(
            ctx, f"lapack_{_LETTER[aval.dtype]}geev_ffi", [(a, aval, True)],
            [(w_aval, False), (v_aval, True), (v_aval, True), (info_aval, False)], config, nb)
    else:
        rw = ShapedArray(batch + (n,), aval.dtype)
        wr, wi, vl, vr, info = _custom_call(
            ctx, f"lapack_{_LETTER[aval.dtype]}geev_ffi", [(a, aval, True)],
            [(rw, False), (rw, False), (v_aval, True), (v_aval, True), (info_aval, False)], config, nb)
        w = ctx.emit1("stablehlo.complex", [wr, wi], mt.aval_type(w_aval))
    ok = _info_ok(ctx, info, batch)
    outs = [_nan_unless(ctx, w, w_aval, ok, nb)]
    if compute_left_eigenvectors:
        outs.append(_nan_unless(ctx, vl, v_aval, ok, nb))
    if compute_right_eigenvectors:
        outs.append(_nan_unless(ctx, vr, v_aval, ok, nb))
    return outs


# ---------------------------------------------------------------- schur


@register_lowering(L.schur_p)
def _schur_lowering(ctx: LoweringContext, a: str) -> list[str]:
    (aval,) = ctx.avals_in
    batch = aval.shape[:-2]
    nb = len(batch)
    if ctx.platform != "cpu":
        raise FtransValueError(
            f"schur: the Schur decomposition is implemented for the CPU only (LAPACK's gees), as in JAX; this "
            f"program is being lowered for {ctx.platform}")
    if aval.size == 0:
        return [a, a]
    w_aval = ShapedArray(batch + (aval.shape[-1],), aval.dtype)
    info_aval = ShapedArray(batch, _I32)
    config = {"mode": _char("V"), "sort": _char("N")}
    results = [(aval, True), (aval, True), (w_aval, False)]
    if aval.dtype.kind != "c":
        results.append((w_aval, False))  # real and imaginary parts of the eigenvalues
    results += [(info_aval, False), (info_aval, False)]  # selected-eigenvalue count, info
    outs = _custom_call(ctx, f"lapack_{_LETTER[aval.dtype]}gees_ffi", [(a, aval, True)], results, config, nb,
                        {0: 0})
    ok = _info_ok(ctx, outs[-1], batch)
    return [_nan_unless(ctx, outs[0], aval, ok, nb), _nan_unless(ctx, outs[1], aval, ok, nb)]


# ---------------------------------------------------------------- programs lowered as private functions


def _call_program(ctx: LoweringContext, closed, name: str, operands: list[str]) -> list[str]:
    """Call the staged ftrans program ``closed`` (its constants hoisted) as a private function."""
    consts = [ctx.constant(np.asarray(c)) for c in closed.consts]
    sym = ctx.module.function(closed.jaxpr, name)
    types = [mt.aval_type(v.aval) for v in closed.jaxpr.outvars]
    return ctx.fn.emit("func.call", consts + operands, types, {"callee": f"@{sym}"})


# ---------------------------------------------------------------- tridiagonal


@register_lowering(L.tridiagonal_p)
def _tridiagonal_lowering(ctx: LoweringContext, a: str, *, lower: bool) -> list[str]:
    (aval,) = ctx.avals_in
    batch = aval.shape[:-2]
    nb = len(batch)
    a_out, d_aval, e_aval, tau_aval = ctx.avals_out
    gpu = _gpu(ctx, "tridiagonal")
    if gpu is None:
        name = "hetrd" if aval.dtype.kind == "c" else "sytrd"
        target, config = f"lapack_{_LETTER[aval.dtype]}{name}_ffi", {"uplo": _char("L" if lower else "U")}
    else:
        target, config = f"{gpu}solver_sytrd_ffi", {"lower": _bool(lower)}
    info_aval = ShapedArray(batch, _I32)
    outs = _custom_call(ctx, target, [(a, aval, True)],
                        [(a_out, True), (d_aval, False), (e_aval, False), (tau_aval, False), (info_aval, False)],
                        config, nb, {0: 0})
    ok = _info_ok(ctx, outs[-1], batch)
    return [_nan_unless(ctx, x, v, ok, nb) for x, v in zip(outs[:4], ctx.avals_out)]


# ---------------------------------------------------------------- tridiagonal_solve


def _tridiagonal_small_program(avals: list[ShapedArray]):
    """Cramer's rule for systems of one or two rows (cuSPARSE's gtsv2 needs three or more)."""
    dl_aval, _, _, b_aval = avals
    m = dl_aval.shape[-1]
    nd = b_aval.ndim
    col = tuple(range(nd - 1))

    def row(v, i):  # v[..., i] broadcast against b's rows' shape [..., 1, n]
        sl = S.slice_p.bind(v, start_indices=(0,) * (nd - 2) + (i,), limit_indices=v.shape[:-1] + (i + 1,),
                            strides=None)
        return S.broadcast_in_dim_p.bind(sl, shape=b_aval.shape[:-2] + (1, b_aval.shape[-1]), broadcast_dimensions=col)

    def brow(i):
        return S.slice_p.bind(b_aval_var[0], start_indices=(0,) * (nd - 2) + (i, 0),
                              limit_indices=b_aval.shape[:-2] + (i + 1, b_aval.shape[-1]), strides=None)

    b_aval_var = [None]

    def run(dl, d, du, b):
        b_aval_var[0] = b
        if m == 1:
            return [E.div_p.bind(b, row(d, 0))]
        d0, d1, u0, l1 = row(d, 0), row(d, 1), row(du, 0), row(dl, 1)
        b0, b1 = brow(0), brow(1)
        det = E.sub_p.bind(E.mul_p.bind(d0, d1), E.mul_p.bind(u0, l1))
        x0 = E.div_p.bind(E.sub_p.bind(E.mul_p.bind(d1, b0), E.mul_p.bind(u0, b1)), det)
        x1 = E.div_p.bind(E.sub_p.bind(E.mul_p.bind(d0, b1), E.mul_p.bind(l1, b0)), det)
        return [S.concatenate_p.bind(x0, x1, dimension=nd - 2)]

    return stage(run, list(avals))[0]


@register_lowering(L.tridiagonal_solve_p)
def _tridiagonal_solve_lowering(ctx: LoweringContext, dl: str, d: str, du: str, b: str, *,
                                perturb_singular: bool) -> str:
    dl_aval, d_aval, du_aval, b_aval = ctx.avals_in
    batch = b_aval.shape[:-2]
    nb = len(batch)
    m = d_aval.shape[-1]
    if b_aval.size == 0 or m == 0:
        return ctx.broadcast(ctx.scalar(0, b_aval.dtype), b_aval.update(shape=()), b_aval.shape)
    ops = [(dl, dl_aval, False), (d, d_aval, False), (du, du_aval, False), (b, b_aval, True)]
    gpu = _gpu(ctx, "tridiagonal_solve")
    if perturb_singular:
        target = "tridiagonal_solve_perturbed_ffi" if gpu is None else f"{gpu}_tridiagonal_solve_perturbed"
        (x,) = _custom_call(ctx, target, ops, [(b_aval, True)], {}, nb)
        return x
    if gpu is not None:
        if m <= 2:
            (x,) = _call_program(ctx, _tridiagonal_small_program(list(ctx.avals_in)), "tridiagonal_solve",
                                 [dl, d, du, b])
            return x
        (x,) = _custom_call(ctx, f"{gpu}sparse_gtsv2_ffi", ops, [(b_aval, True)], {}, nb, {0: 3})
        return x
    info_aval = ShapedArray(batch, _I32)
    *_, x, info = _custom_call(ctx, f"lapack_{_LETTER[b_aval.dtype]}gtsv_ffi", ops,
                               [(dl_aval, False), (d_aval, False), (du_aval, False), (b_aval, True),
                                (info_aval, False)], {}, nb, {0: 0, 1: 1, 2: 2, 3: 3})
    return _nan_unless(ctx, x, b_aval, _info_ok(ctx, info, batch), nb)


# ---------------------------------------------------------------- hessenberg, householder_product, ormqr


@register_lowering(L.hessenberg_p)
def _hessenberg_lowering(ctx: LoweringContext, a: str) -> list[str]:
    (aval,) = ctx.avals_in
    a_out, tau_aval = ctx.avals_out
    if ctx.platform != "cpu":
        raise FtransValueError(
            f"hessenberg: the Hessenberg reduction is implemented for the CPU only (LAPACK's gehrd), as in JAX; "
            f"this program is being lowered for {ctx.platform}")
    batch = aval.shape[:-2]
    nb = len(batch)
    n = aval.shape[-1]
    if aval.size == 0:
        return [a, ctx.broadcast(ctx.scalar(0, aval.dtype), aval.update(shape=()), tau_aval.shape)]
    info_aval = ShapedArray(batch, _I32)
    h, tau, info = _custom_call(ctx, f"lapack_{_LETTER[aval.dtype]}gehrd_ffi", [(a, aval, True)],
                                [(a_out, True), (tau_aval, False), (info_aval, False)],
                                {"low": "1 : i32", "high": f"{n} : i32"}, nb, {0: 0})
    ok = _info_ok(ctx, info, batch)
    return [_nan_unless(ctx, h, a_out, ok, nb), _nan_unless(ctx, tau, tau_aval, ok, nb)]


@register_lowering(L.householder_product_p)
def _householder_product_lowering(ctx: LoweringContext, a: str, taus: str) -> str:
    aval, tau_aval = ctx.avals_in
    if aval.size == 0:
        return _eye_like(ctx, aval)
    gpu = _gpu(ctx, "householder_product")
    if gpu is None:
        target = f"lapack_{_LETTER[aval.dtype]}{'ungqr' if aval.dtype.kind == 'c' else 'orgqr'}_ffi"
    else:
        target = f"{gpu}solver_orgqr_ffi"
    (q,) = _custom_call(ctx, target, [(a, aval, True), (taus, tau_aval, False)], [(aval, True)], {},
                        aval.ndim - 2, {0: 0})
    return q


@register_lowering(L.ormqr_p)
def _ormqr_lowering(ctx: LoweringContext, a: str, taus: str, c: str, *, left: bool, transpose: bool) -> str:
    aval, tau_aval, c_aval = ctx.avals_in
    if c_aval.size == 0 or tau_aval.shape[-1] == 0:
        return c
    gpu = _gpu(ctx, "ormqr")
    if gpu is None:
        target = f"lapack_{_LETTER[aval.dtype]}{'unmqr' if aval.dtype.kind == 'c' else 'ormqr'}_ffi"
    else:
        target = f"{gpu}solver_ormqr_ffi"
    (out,) = _custom_call(ctx, target, [(a, aval, True), (taus, tau_aval, False), (c, c_aval, True)],
                          [(c_aval, True)], {"left": _bool(left), "transpose": _bool(transpose)},
                          aval.ndim - 2, {0: 2})
    return out


# ---------------------------------------------------------------- cholesky_update, symmetric_product


def _cholesky_update_program(r_aval: ShapedArray, w_aval: ShapedArray):
    """Givens rotations row by row (unrolled over the ``n`` rows, as JAX's reference lowering)."""
    n = r_aval.shape[-1]
    nd = r_aval.ndim
    batch = r_aval.shape[:-2]
    dt = r_aval.dtype
    vec = batch + (n,)
    bdims = tuple(range(nd - 2))

    def at(v, k):  # v[..., k] as a [...] array
        sl = S.slice_p.bind(v, start_indices=(0,) * (v.ndim - 1) + (k,), limit_indices=v.shape[:-1] + (k + 1,),
                            strides=None)
        return S.reshape_p.bind(sl, new_sizes=v.shape[:-1], dimensions=None)

    def run(r, z):
        zero = S.broadcast_in_dim_p.bind(np.zeros((), dt), shape=batch, broadcast_dimensions=())
        one = S.broadcast_in_dim_p.bind(np.ones((), dt), shape=batch, broadcast_dimensions=())
        rows = []
        for k in range(n):
            rk = S.slice_p.bind(r, start_indices=(0,) * (nd - 2) + (k, 0), limit_indices=batch + (k + 1, n),
                                strides=None)
            rk = S.reshape_p.bind(rk, new_sizes=vec, dimensions=None)
            x, y = at(rk, k), at(z, k)
            ax, ay = E.abs_p.bind(x), E.abs_p.bind(y)
            yzero = E.eq_p.bind(ay, zero)
            den = S.select_n_p.bind(yzero, E.max_p.bind(ax, ay), one)
            xs, ys = E.div_p.bind(x, den), E.div_p.bind(y, den)
            rh = E.rsqrt_p.bind(E.add_p.bind(E.mul_p.bind(xs, xs), E.mul_p.bind(ys, ys)))
            c = S.select_n_p.bind(yzero, E.mul_p.bind(xs, rh), one)
            s = S.select_n_p.bind(yzero, E.neg_p.bind(E.mul_p.bind(ys, rh)), zero)
            cb = S.broadcast_in_dim_p.bind(c, shape=vec, broadcast_dimensions=bdims)
            sb = S.broadcast_in_dim_p.bind(s, shape=vec, broadcast_dimensions=bdims)
            new_row = E.sub_p.bind(E.mul_p.bind(cb, rk), E.mul_p.bind(sb, z))
            z = E.add_p.bind(E.mul_p.bind(cb, z), E.mul_p.bind(sb, rk))
            rows.append(S.reshape_p.bind(new_row, new_sizes=batch + (1, n), dimensions=None))
        return [S.concatenate_p.bind(*rows, dimension=nd - 2)]

    return stage(run, [r_aval, w_aval])[0]


@register_lowering(L.cholesky_update_p)
def _cholesky_update_lowering(ctx: LoweringContext, r: str, w: str) -> str:
    r_aval, w_aval = ctx.avals_in
    if r_aval.size == 0:
        return r
    (out,) = _call_program(ctx, _cholesky_update_program(r_aval, w_aval), "cholesky_update", [r, w])
    return out


def _symmetric_product_program(a_aval: ShapedArray, c_aval: ShapedArray, alpha, beta):
    nd = a_aval.ndim
    dt = a_aval.dtype
    batch = tuple(range(nd - 2))

    def run(a, c):
        aat = R.dot_general_p.bind(a, a, dimension_numbers=(((nd - 1,), (nd - 1,)), (batch, batch)),
                                   precision=None, preferred_element_type=None)
        al = S.broadcast_in_dim_p.bind(np.asarray(alpha, dt), shape=c_aval.shape, broadcast_dimensions=())
        be = S.broadcast_in_dim_p.bind(np.asarray(beta, dt), shape=c_aval.shape, broadcast_dimensions=())
        return [E.add_p.bind(E.mul_p.bind(al, aat), E.mul_p.bind(be, c))]

    return stage(run, [a_aval, c_aval])[0]


@register_lowering(L.symmetric_product_p)
def _symmetric_product_lowering(ctx: LoweringContext, a: str, c: str, *, alpha, beta) -> str:
    a_aval, c_aval = ctx.avals_in
    (out,) = _call_program(ctx, _symmetric_product_program(a_aval, c_aval, alpha, beta), "symmetric_product",
                           [a, c])
    return out
