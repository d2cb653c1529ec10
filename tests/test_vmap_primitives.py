"""``ftrans.vmap`` of every primitive family against ``jax.vmap``.

The programs are the forward-mode test cases (``tests/test_jvp_*.py``), written
once against a ``(jnp, lax)`` pair, plus cases here that give the batching
rules something to batch that those programs take as constants: start
indices of ``dynamic_slice``/``dynamic_update_slice``, gather and scatter
indices, padding values, scalar ``select_n``/``clamp`` operands, integer and
boolean operands, rank-0 operands mixed with arrays.

Each program runs under ``ftrans.vmap`` with hypothesis-drawn ``in_axes`` (per
argument an axis in range, possibly negative, or ``None``; at least one
mapped), batch size and ``out_axes``; each case's values are drawn once (a
pool of batch elements per argument), since what batching acts on is the
axes.  The reference is jax:

* shape and dtype of ``jax.vmap`` of the same program (``jax.eval_shape``, of jax's jitted program);
* values of jax's program run on each batch element and stacked along the
  out axis (which is what ``jax.vmap`` computes; one compiled jax program per
  case keeps hundreds of batch configurations cheap), checked to have the
  shape and dtype ``jax.vmap`` reports, and, in the nested test, to equal the
  values of ``jax.vmap(jax.vmap(f))`` itself.

The same checks run under ``ftrans.jit(ftrans.vmap(f))`` (whose program must
also typecheck) and nested ``vmap(vmap(f))`` with different axes per level.

Explicit mapping patterns (operand only / indices only / both / updates only
for gather and the scatters, lhs/rhs/both for ``dot_general``, batched start
indices, batched padding values, scalar operands of ``select_n``/``clamp``)
are parametrized rather than left to chance.
"""

from __future__ import annotations

import functools
import itertools
import os
import zlib

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.core.ir import typecheck
from ftrans.core.primitive import Primitive
from ftrans.transforms.batching import batching_rules
from tests import test_jvp_elementwise as EW
from tests import test_jvp_reductions as RD
from tests import test_jvp_structural as SR

FT, JX = (fjnp, flax), (jjnp, jax.lax)


def _fewer(divisor: int) -> settings:
    """The loaded profile with fewer examples (for the tests that compile a program per example)."""
    return settings(settings.default, max_examples=max(2, settings.default.max_examples // divisor))


# ----------------------------------------------------------------------------
# Argument generators: gen(rng, shape) -> one batch element.


def normal(rng, shape):
    return rng.normal(size=shape).astype(np.float32)


def domain(lo_hi):
    def gen(rng, shape):
        return EW.draw_values(rng, lo_hi, shape)

    return gen


def of_kind(kind):
    def gen(rng, shape):
        return RD.values(rng, kind, shape, np.float32)

    return gen


def ints(lo, hi, dtype=np.int32):
    def gen(rng, shape):
        return rng.integers(lo, hi, size=shape).astype(dtype)

    return gen


def unique_ints(n):
    """Distinct indices into an axis of size ``n`` (``set`` scatters are deterministic only then)."""

    def gen(rng, shape):
        return rng.permutation(n)[: int(np.prod(shape))].reshape(shape).astype(np.int32)

    return gen


def bools(rng, shape):
    return rng.random(size=shape) < 0.5


def complexes(rng, shape):
    return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(np.complex64)


def bits16(rng, shape):
    return rng.integers(-30000, 30000, size=shape).astype(np.int16)


class Case:
    """A program builder ``(jnp, lax) -> f`` and its arguments: (shape, generator) pairs."""

    def __init__(self, args, build, rtol=1e-4, atol=1e-5, jax_fails=None):
        self.args = [(tuple(s), g) for s, g in args]
        self.build = build
        self.rtol, self.atol = rtol, atol
        # (in_axes, argument ranks) -> True where jax.vmap itself raises (see test_where_jax_vmap_fails)
        self.jax_fails = jax_fails or (lambda in_axes, ranks: False)

    @property
    def ranks(self):
        return [len(s) for s, _ in self.args]


def f32(*shapes, gen=normal):
    return [(s, gen) for s in shapes]


CASES: dict[str, Case] = {}

# Elementwise: every unary and binary primitive of the forward-mode tests on their smooth domains.  They
# share one batching rule, so the primitives with the same operand domains form one case (a tuple of results).


def _all_of(names):
    return lambda np_, lx: lambda *xs: tuple(getattr(lx, n)(*xs) for n in names)


def _group(table):
    """Names with equal domains together: {domains: [names]}."""
    groups: dict = {}
    for n, d in table.items():
        groups.setdefault(d, []).append(n)
    return groups


_DOMAIN_NAMES = {EW.ANY: "any", EW.POS: "pos", EW.UNIT: "unit", EW.GT1: "gt1", EW.AWAY0: "away0", EW.GAMMA: "gamma"}
for _d, _names in _group({**EW.UNARY, **{n: EW.ANY for n in EW.ZERO_DERIV}}).items():
    CASES[f"ew_unary_{_DOMAIN_NAMES[_d]}"] = Case([((2, 3), domain(_d))], _all_of(sorted(_names)))
for (_d0, _d1), _names in _group(EW.BINARY).items():
    CASES[f"ew_binary_{_DOMAIN_NAMES[_d0]}_{_DOMAIN_NAMES[_d1]}"] = Case(
        [((2, 3), domain(_d0)), ((2, 3), domain(_d1))], _all_of(sorted(_names)))


CASES.update({
    # Rank-0 operands mixed with arrays: the rule leaves an unbatched scalar to the primitive and broadcasts
    # a batched one.
    "rank0_add_rhs": Case([((3,), normal), ((), normal)], lambda np_, lx: lx.add),
    "rank0_mul_lhs": Case([((), normal), ((2, 2), normal)], lambda np_, lx: lx.mul),
    "rank0_pow": Case([((2, 3), domain(EW.POS)), ((), domain(EW.ANY))], lambda np_, lx: lx.pow),
    "rank0_atan2_both": Case([((), domain(EW.AWAY0)), ((), domain(EW.AWAY0))], lambda np_, lx: lx.atan2),
    "rank0_three_way": Case([((), normal), ((4,), normal), ((), normal)],
                            lambda np_, lx: lambda a, x, b: lx.max(lx.mul(a, x), b)),
    "weak_python_scalars": Case([((3,), normal)], lambda np_, lx: lambda x: 2.0 * x + 1 - x ** 2),
    "int_plus_weak_float": Case([((3,), ints(-5, 5))], lambda np_, lx: lambda i: i + 1.5),
    "integer_pow": Case([((2, 3), normal)], lambda np_, lx: lambda x: (lx.integer_pow(x, 3), lx.integer_pow(x, -2))),
    "nextafter": Case([((4,), normal), ((4,), normal)], lambda np_, lx: lx.nextafter),
    "complex_parts": Case([((3,), normal), ((3,), normal)], lambda np_, lx: lambda a, b: (
        lx.real(lx.complex(a, b) * lx.complex(b, a)), lx.imag(lx.conj(lx.complex(a, b))))),
    "complex_abs": Case([((2, 2), complexes)], lambda np_, lx: lambda z: (lx.abs(z), lx.exp(z), lx.sign(z))),
    "is_finite_stop_gradient": Case([((4,), normal)], lambda np_, lx: lambda x: (
        lx.is_finite(lx.div(x, lx.stop_gradient(x - x))), lx.stop_gradient(x) * 2)),
    "comparisons": Case([((2, 3), ints(-2, 3)), ((2, 3), ints(-2, 3))], lambda np_, lx: lambda a, b: (
        lx.eq(a, b), lx.ne(a, b), lx.lt(a, b), lx.le(a, b), lx.gt(a, b), lx.ge(a, b))),
    "bitwise_int": Case([((4,), ints(-100, 100)), ((4,), ints(-100, 100))], lambda np_, lx: lambda a, b: (
        lx.bitwise_and(a, b), lx.bitwise_or(a, b), lx.bitwise_xor(a, b), lx.bitwise_not(a),
        lx.population_count(a))),
    "bitwise_bool": Case([((4,), bools), ((4,), bools)], lambda np_, lx: lambda a, b: (
        lx.bitwise_and(a, b), lx.bitwise_or(a, b), lx.bitwise_xor(a, b), lx.bitwise_not(a))),
    "shifts": Case([((5,), ints(-1000, 1000)), ((5,), ints(0, 31))], lambda np_, lx: lambda a, s: (
        lx.shift_left(a, s), lx.shift_right_arithmetic(a, s), lx.shift_right_logical(a, s))),
    "rem_int": Case([((4,), ints(-20, 20)), ((4,), ints(1, 6))], lambda np_, lx: lx.rem),
    # select_n and clamp: a scalar predicate / scalar bounds, mapped or not, against array cases.
    "select_n_scalar_pred": Case([((), bools), ((3,), normal), ((3,), normal)], lambda np_, lx: lx.select_n),
    "select_n_int_pred": Case([((2, 3), ints(0, 3)), ((2, 3), normal), ((2, 3), normal), ((2, 3), normal)],
                              lambda np_, lx: lx.select_n),
    "select_n_scalar_cases": Case([((), bools), ((), normal), ((), normal)], lambda np_, lx: lx.select_n),
    "clamp_scalar_bounds": Case([((), normal), ((5,), normal), ((), normal)],
                                lambda np_, lx: lambda lo, x, hi: lx.clamp(lo, x, lo + lx.abs(hi))),
    # (jax's clamp rule fails for an unbatched scalar x and lower bound with a batched upper bound.)
    "clamp_scalar_x": Case([((), normal), ((), normal), ((), normal)],
                           lambda np_, lx: lambda lo, x, hi: lx.clamp(lo, x, lo + lx.abs(hi)),
                           jax_fails=lambda ax, ranks: ax[0] is None and ax[1] is None),
    "clamp_arrays": Case([((2, 3), normal), ((2, 3), normal), ((2, 3), normal)],
                         lambda np_, lx: lambda lo, x, hi: lx.clamp(lo, x, lo + lx.abs(hi))),
    "where_scalar_branch": Case([((4,), normal), ((), normal)], lambda np_, lx: lambda c, v: np_.where(c > 0, v, c)),
    # Conversions that change the shape.
    # (jax's widening bitcast fails when the batch dimension is last.)
    "bitcast_narrow": Case([((2, 3), normal)], lambda np_, lx: lambda x: lx.bitcast_convert_type(x, np_.uint8)),
    "bitcast_widen": Case([((3, 2), bits16)], lambda np_, lx: lambda x: lx.bitcast_convert_type(x, np_.float32),
                          jax_fails=lambda ax, ranks: ax[0] is not None and ax[0] % (ranks[0] + 1) == ranks[0]),
})

# Structural and reduction programs of the forward-mode tests.
for _n, (_shapes, _build) in SR.CASES.items():
    CASES[f"st_{_n}"] = Case(f32(*_shapes), _build, rtol=2e-2 if "16" in _n else 1e-4)
for _n, (_shapes, _kind, _build) in RD.CASES.items():
    CASES[f"rd_{_n}"] = Case(f32(*_shapes, gen=of_kind(_kind)), _build, rtol=2e-2 if _n == "dot_general_pet" else 1e-4)

GDN = "GatherDimensionNumbers"
SDN = "ScatterDimensionNumbers"

CASES.update({
    # pad: batched operand, batched padding value, or both; negative and interior padding.
    "pad_2d_value": Case([((2, 3), normal), ((), normal)],
                         lambda np_, lx: lambda x, v: lx.pad(x, v, ((1, 0, 1), (-1, 2, 0)))),
    "pad_int_value": Case([((4,), ints(-9, 9)), ((), ints(-9, 9))], lambda np_, lx: lambda x, v: lx.pad(
        x, v, ((2, 1, 2),))),
    # dynamic_slice / dynamic_update_slice with start indices as arguments (out of range ones are clamped,
    # negative ones count from the end).
    "dynamic_slice_starts": Case([((6, 4), normal), ((), ints(-8, 9)), ((), ints(-5, 6))],
                                 lambda np_, lx: lambda x, i, j: lx.dynamic_slice(x, (i, j), (3, 2))),
    "dynamic_slice_1d": Case([((7,), normal), ((), ints(-3, 9))],
                             lambda np_, lx: lambda x, i: lx.dynamic_slice(x, (i,), (4,))),
    "dynamic_index_in_dim": Case([((3, 5), normal), ((), ints(-5, 5))],
                                 lambda np_, lx: lambda x, i: lx.dynamic_index_in_dim(x, i, axis=1, keepdims=False)),
    "dynamic_update_slice_starts": Case([((5, 4), normal), ((2, 3), normal), ((), ints(-6, 7)), ((), ints(-4, 5))],
                                        lambda np_, lx: lambda x, u, i, j: lx.dynamic_update_slice(x, u, (i, j))),
    "dynamic_update_slice_1d": Case([((6,), ints(-9, 9)), ((2,), ints(-9, 9)), ((), ints(-2, 8))],
                                    lambda np_, lx: lambda x, u, i: lx.dynamic_update_slice(x, u, (i,))),
    "dynamic_slice_uint8_starts": Case([((6,), normal), ((), ints(0, 9, np.uint8))],
                                       lambda np_, lx: lambda x, i: lx.dynamic_slice(x, (i,), (2,))),
    # dot_general with batch dimensions that are not leading and free dimensions on both sides of them.
    "dot_general_inner_batch": Case([((2, 3, 4), normal), ((4, 5, 2), normal)], lambda np_, lx: lambda a, b: (
        lx.dot_general(a, b, (((2,), (0,)), ((0,), (2,)))))),
    "dot_general_middle_batch": Case([((3, 2, 4), normal), ((5, 4, 2), normal)], lambda np_, lx: lambda a, b: (
        lx.dot_general(a, b, (((2,), (1,)), ((1,), (2,)))))),
    "dot_general_outer": Case([((3,), normal), ((2,), normal)], lambda np_, lx: lambda a, b: (
        lx.dot_general(a, b, (((), ()), ((), ()))))),
    "dot_general_int": Case([((2, 3), ints(-4, 4)), ((3,), ints(-4, 4))], lambda np_, lx: lambda a, b: (
        lx.dot_general(a, b, (((1,), (0,)), ((), ()))))),
    # Sorting several operands, along different dimensions.
    "sort_three_operands_axis0": Case([((4, 3), of_kind("ties")), ((4, 3), normal), ((4, 3), ints(0, 9))],
                                      lambda np_, lx: lambda a, b, c: lx.sort((a, b, c), dimension=0, num_keys=1)),
    "sort_two_keys_int": Case([((6,), ints(0, 3)), ((6,), ints(0, 3)), ((6,), normal)],
                              lambda np_, lx: lambda a, b, c: lx.sort((a, b, c), num_keys=2)),
    "argsort_axis0": Case([((5, 2), of_kind("ties"))], lambda np_, lx: lambda x: np_.argsort(x, axis=0)),
    # Reductions of integers and booleans.
    "reduce_bits": Case([((3, 4), ints(-50, 50))], lambda np_, lx: lambda x: (
        lx.reduce_xor(x, (1,)), lx.reduce_and(x, (0,)), lx.reduce_or(x, (0, 1)), np_.argmax(x, axis=0))),
    "reduce_bool": Case([((3, 4), bools)], lambda np_, lx: lambda x: (
        lx.reduce_xor(x, (0,)), np_.all(x, axis=1), np_.any(x))),
    # Gather and scatter with indices as arguments.
    "gather_idx": Case([((5, 3), normal), ((4,), ints(-5, 5))], lambda np_, lx: lambda x, i: x[i]),
    "gather_idx_2d": Case([((5, 3), normal), ((2, 2), ints(0, 5)), ((2, 2), ints(0, 3))],
                          lambda np_, lx: lambda x, i, j: x[i, j]),
    "gather_slices": Case([((6, 4), normal), ((3,), ints(0, 6))], lambda np_, lx: lambda x, i: x[i, 1:3]),
    "gather_fill_idx": Case([((4,), normal), ((3,), ints(-6, 9))],
                            lambda np_, lx: lambda x, i: x.at[i].get(mode="fill", fill_value=-1.0)),
    "gather_clip_idx": Case([((4, 2), normal), ((3,), ints(-6, 9))],
                            lambda np_, lx: lambda x, i: x.at[i].get(mode="clip")),
    "take_along_axis_idx": Case([((3, 4), normal), ((3, 2), ints(0, 4))],
                                lambda np_, lx: lambda x, i: np_.take_along_axis(x, i, axis=1)),
    "gather_own_batch_dims": Case([((3, 4), normal), ((3, 2, 1), ints(0, 4))], lambda np_, lx: lambda x, i: lx.gather(
        x, i, getattr(lx, GDN)(offset_dims=(), collapsed_slice_dims=(1,), start_index_map=(1,),
                               operand_batching_dims=(0,), start_indices_batching_dims=(0,)),
        slice_sizes=(1, 1), mode="clip")),
    "scatter_own_batch_dims": Case([((3, 4), normal), ((3, 2, 1), ints(0, 4)), ((3, 2), normal)],
                                   lambda np_, lx: lambda x, i, u: lx.scatter_add(
        x, i, u, getattr(lx, SDN)(update_window_dims=(), inserted_window_dims=(1,),
                                  scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
                                  scatter_indices_batching_dims=(0,)), mode="clip")),
    "scatter_set": Case([((5, 2), normal), ((3,), unique_ints(5)), ((3, 2), normal)],
                        lambda np_, lx: lambda x, i, u: x.at[i].set(u)),
    "scatter_add": Case([((5,), normal), ((4,), ints(0, 5)), ((4,), normal)],
                        lambda np_, lx: lambda x, i, u: x.at[i].add(u)),
    "scatter_mul": Case([((5,), normal), ((4,), ints(0, 5)), ((4,), normal)],
                        lambda np_, lx: lambda x, i, u: x.at[i].multiply(u)),
    "scatter_min": Case([((5,), normal), ((4,), ints(0, 5)), ((4,), normal)],
                        lambda np_, lx: lambda x, i, u: x.at[i].min(u)),
    "scatter_max": Case([((5, 2), normal), ((4,), ints(0, 5)), ((4, 2), normal)],
                        lambda np_, lx: lambda x, i, u: x.at[i].max(u)),
    "scatter_add_drop": Case([((4,), normal), ((3,), ints(-2, 8)), ((3,), normal)],
                             lambda np_, lx: lambda x, i, u: x.at[i].add(u, mode="drop")),
    "scatter_add_2d_idx": Case([((4, 3), normal), ((2,), ints(0, 4)), ((2,), ints(0, 3)), ((2,), normal)],
                               lambda np_, lx: lambda x, i, j, u: x.at[i, j].add(u)),
    "scatter_int": Case([((5,), ints(-9, 9)), ((3,), ints(0, 5)), ((3,), ints(-9, 9))],
                        lambda np_, lx: lambda x, i, u: x.at[i].add(u)),
    # Convolutions (groups and dilations decide where the vmap axis is folded) and FFTs.
    "conv_feature_groups": Case([((1, 5, 4, 4), normal), ((2, 3, 2, 4), normal)], lambda np_, lx: lambda x, w: (
        lx.conv_general_dilated(x, w, (1, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                feature_group_count=2)), rtol=1e-4, atol=1e-4),
    "conv_batch_groups": Case([((4, 3, 6), normal), ((4, 3, 2), normal)], lambda np_, lx: lambda x, w: (
        lx.conv_general_dilated(x, w, (1,), ((1, 0),), batch_group_count=2)), rtol=1e-4, atol=1e-4),
    "conv_dilated": Case([((2, 2, 5, 5), normal), ((3, 2, 2, 2), normal)], lambda np_, lx: lambda x, w: (
        lx.conv_general_dilated(x, w, (2, 1), ((1, 0), (0, 1)), (1, 2), (2, 1))), rtol=1e-4, atol=1e-4),
    "fft_rfft_irfft": Case([((3, 6), normal)], lambda np_, lx: lambda x: (
        np_.fft.rfft(x, axis=0), np_.fft.irfft(np_.fft.rfft(x), n=6)), rtol=1e-4, atol=1e-4),
    "fft_fft2_complex": Case([((3, 4), complexes)], lambda np_, lx: lambda z: (
        np_.fft.fft2(z), np_.fft.ifftn(z, axes=(0,))), rtol=1e-4, atol=1e-4),
})

# Explicit mapping patterns: case -> tuples of mapped argument positions.
SCATTERS = ["scatter_set", "scatter_add", "scatter_mul", "scatter_min", "scatter_max"]
PATTERNS = {
    **{n: [(0,), (1,), (0, 1)] for n in ["gather_idx", "gather_slices", "gather_fill_idx", "gather_clip_idx",
                                         "take_along_axis_idx", "gather_own_batch_dims"]},
    **{n: [(0,), (1,), (0, 1), (2,), (0, 2), (1, 2), (0, 1, 2)] for n in SCATTERS + ["scatter_own_batch_dims"]},
    **{n: [(0,), (1,), (0, 1)] for n in ["rd_matmul", "rd_matmul_batched", "rd_einsum", "rd_tensordot",
                                         "dot_general_inner_batch", "dot_general_middle_batch", "dot_general_outer"]},
    **{n: [(0,), (1,), (0, 1)] for n in ["pad_2d_value", "st_lax_pad_value_tangent", "st_lax_pad_negative"]},
    "dynamic_slice_starts": [(0,), (1,), (2,), (1, 2), (0, 1), (0, 1, 2)],
    "dynamic_index_in_dim": [(0,), (1,), (0, 1)],
    "dynamic_update_slice_starts": [(0,), (1,), (2,), (0, 3), (1, 2), (0, 1, 2, 3)],
    "dynamic_update_slice_1d": [(2,), (0, 2), (1, 2)],
    "select_n_scalar_pred": [(0,), (1,), (0, 2), (1, 2)],
    "select_n_scalar_cases": [(0,), (1,), (0, 1)],
    "clamp_scalar_bounds": [(0,), (1,), (2,), (0, 2)],
    "sort_three_operands_axis0": [(0,), (1,), (2,), (1, 2)],
    "rd_sort_key_val": [(0,), (1,)],
    "rank0_three_way": [(0,), (1,), (2,), (0, 2)],
}


# ----------------------------------------------------------------------------
# Running a case
#
# Each case draws its values once (a pool of POOL batch elements per argument and one value for the argument
# unmapped); hypothesis varies what batching acts on: which arguments are mapped, along which axes, the
# batch size and out_axes.  jax's per-element results are memoized, so one compiled jax program per case
# serves every configuration.

POOL = 6
UNMAPPED = POOL


@functools.cache
def jax_fn(name):
    return jax.jit(CASES[name].build(*JX))


@functools.cache
def pool(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return [[gen(rng, shape) for _ in range(POOL + 1)] for shape, gen in CASES[name].args]


@functools.cache
def element(name, key):
    """jax's result for one batch element: argument k is pool sample ``key[k]``."""
    out = jax_fn(name)(*[pool(name)[k][i] for k, i in enumerate(key)])
    return jax.tree_util.tree_map(np.asarray, out)


@functools.cache
def out_ranks(name):
    return [np.ndim(o) for o in jax.tree_util.tree_leaves(element(name, (UNMAPPED,) * len(CASES[name].args)))]


def stack(trees, axis):
    """Stack result trees along ``axis`` (negative counts from the end of the stacked rank)."""
    leaves = [jax.tree_util.tree_leaves(t) for t in trees]
    out = [np.stack([lv[k] for lv in leaves], axis=axis % (np.ndim(leaves[0][k]) + 1))
           for k in range(len(leaves[0]))]
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(trees[0]), out)


def batch_args(name, in_axes, size):
    return [samples[UNMAPPED] if ax is None else np.stack(samples[:size], axis=ax % (np.ndim(samples[0]) + 1))
            for samples, ax in zip(pool(name), in_axes)]


def loop_oracle(name, in_axes, out_axes, size):
    """jax's program on each batch element, stacked along ``out_axes``: the values jax.vmap computes."""
    keys = [tuple(UNMAPPED if ax is None else b for ax in in_axes) for b in range(size)]
    return stack([element(name, k) for k in keys], out_axes)


def _tuples(tree):
    """Lists as tuples (containers compare by their leaves)."""
    if isinstance(tree, (list, tuple)):
        return tuple(_tuples(t) for t in tree)
    if isinstance(tree, dict):
        return {k: _tuples(v) for k, v in tree.items()}
    return tree


# Linear algebra: each primitive works on stacks of matrices; its batching rule moves the batch axis to the front.
def spd_matrix(rng, shape):
    a = rng.normal(size=shape)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(np.float32)


def general_matrix(rng, shape):
    a = rng.normal(size=shape)
    k = min(shape[-2:])
    a[..., range(k), range(k)] += 4.0
    return a.astype(np.float32)


_LA = {"rtol": 1e-3, "atol": 1e-4}
CASES["la_cholesky"] = Case(f32((3, 3), gen=spd_matrix), lambda jnp_, lx: lambda a: lx.linalg.cholesky(a), **_LA)
CASES["la_triangular_solve"] = Case(
    f32((3, 3), gen=spd_matrix) + f32((3, 2)),
    lambda jnp_, lx: lambda a, b: lx.linalg.triangular_solve(a, b, left_side=True, lower=True), **_LA)
CASES["la_lu"] = Case(f32((3, 3), gen=general_matrix), lambda jnp_, lx: lambda a: lx.linalg.lu(a), **_LA)
CASES["la_qr"] = Case(f32((4, 3), gen=general_matrix),
                      lambda jnp_, lx: lambda a: jnp_.abs(lx.linalg.qr(a, full_matrices=False)[1]), **_LA)
CASES["la_eigh_values"] = Case(f32((3, 3), gen=spd_matrix), lambda jnp_, lx: lambda a: lx.linalg.eigh(a)[1], **_LA)
CASES["la_svdvals"] = Case(f32((3, 4), gen=general_matrix),
                           lambda jnp_, lx: lambda a: lx.linalg.svd(a, compute_uv=False), **_LA)
CASES["la_pivots"] = Case([((3,), ints(0, 4))],
                          lambda jnp_, lx: lambda p: lx.linalg.lu_pivots_to_permutation(p, 4))
CASES["la_solve_det"] = Case(f32((3, 3), gen=general_matrix) + f32((3, 2)),
                             lambda jnp_, lx: lambda a, b: (jnp_.linalg.solve(a, b), jnp_.linalg.det(a)), **_LA)


def assert_matches(got, want, rtol, atol):
    g, gt = jax.tree_util.tree_flatten(_tuples(got))
    w, wt = jax.tree_util.tree_flatten(_tuples(want))
    assert gt == wt, (gt, wt)
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        assert a.shape == b.shape, (a.shape, b.shape)
        if np.issubdtype(b.dtype, np.inexact):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(a, b)


def assert_avals(got, avals):
    g = jax.tree_util.tree_leaves(got)
    w = jax.tree_util.tree_leaves(avals)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        assert (np.asarray(a).dtype, np.shape(a)) == (b.dtype, b.shape)


def ft_args(args):
    return [fjnp.asarray(a) for a in args]


def jx_avals(args):
    return [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in args]


@st.composite
def configs(draw, name, pattern=None):
    """(in_axes, out_axes, batch size): every mapped argument gets an axis in range, maybe negative."""
    case = CASES[name]
    n = len(case.args)
    if pattern is None:
        mask = draw(st.integers(1, 2 ** n - 1))
        pattern = [k for k in range(n) if mask >> k & 1]
    in_axes = tuple(draw(st.integers(-(r + 1), r)) if k in pattern else None for k, r in enumerate(case.ranks))
    assume(not case.jax_fails(in_axes, case.ranks))
    r = min(out_ranks(name))
    out_axes = draw(st.integers(-(r + 1), r))
    size = draw(st.sampled_from([3, 2, 1]))
    return in_axes, out_axes, size


def check_vmap(name, config):
    in_axes, out_axes, size = config
    case = CASES[name]
    args = batch_args(name, in_axes, size)
    want = loop_oracle(name, in_axes, out_axes, size)
    # jax.vmap of the case's jitted program: jax batches its cached jaxpr instead of tracing jnp again.
    avals = jax.eval_shape(jax.vmap(jax_fn(name), in_axes=in_axes, out_axes=out_axes), *jx_avals(args))
    assert_avals(want, avals)  # the oracle has jax.vmap's shapes and dtypes
    got = ftrans.vmap(case.build(*FT), in_axes=in_axes, out_axes=out_axes)(*ft_args(args))
    assert_matches(got, want, case.rtol, case.atol)


@pytest.mark.parametrize("name", sorted(CASES))
@given(data=st.data())
def test_vmap_matches_jax(name, data):
    check_vmap(name, data.draw(configs(name)))


PATTERN_PARAMS = [(n, p) for n in sorted(PATTERNS) for p in PATTERNS[n]]


@pytest.mark.parametrize(("name", "pattern"), PATTERN_PARAMS, ids=[f"{n}-{p}" for n, p in PATTERN_PARAMS])
@_fewer(3)
@given(data=st.data())
def test_vmap_mapping_patterns(name, pattern, data):
    in_axes, out_axes, size = data.draw(configs(name, pattern))
    assert [k for k, a in enumerate(in_axes) if a is not None] == list(pattern)
    check_vmap(name, (in_axes, out_axes, size))


JAX_FAILS = [("bitcast_widen", (-1,), ValueError, "Attempting to convert array"),
             ("bitcast_widen", (2,), ValueError, "Attempting to convert array"),
             ("clamp_scalar_x", (None, None, 0), TypeError, "clamp requires")]


@pytest.mark.parametrize(("name", "in_axes", "exc", "msg"), JAX_FAILS)
def test_where_jax_vmap_fails(name, in_axes, exc, msg):
    """Configurations jax.vmap itself rejects; jax's per-element results are the reference for ftrans."""
    case = CASES[name]
    assert case.jax_fails(in_axes, case.ranks)
    args = batch_args(name, in_axes, 3)
    with pytest.raises(exc, match=msg):
        jax.vmap(case.build(*JX), in_axes=in_axes)(*args)
    got = ftrans.vmap(case.build(*FT), in_axes=in_axes)(*ft_args(args))
    assert_matches(got, loop_oracle(name, in_axes, 0, 3), case.rtol, case.atol)


FAMILIES = {
    "elementwise": [n for n in CASES if n.startswith(("ew_", "rank0_")) or n in (
        "weak_python_scalars", "int_plus_weak_float", "integer_pow", "nextafter", "complex_parts", "complex_abs",
        "is_finite_stop_gradient", "comparisons", "bitwise_int", "bitwise_bool", "shifts", "rem_int")],
    "select_clamp_convert": [n for n in CASES if n.startswith(("select_n", "clamp", "where", "bitcast"))]
    + [n for n in CASES if n.startswith("st_") and any(k in n for k in ("astype", "where", "select", "clamp", "clip"))],
    "structural": [n for n in CASES if n.startswith("st_") and not any(
        k in n for k in ("astype", "where", "select", "clamp", "clip", "gather", "take", "at_", "dynamic"))]
    + ["pad_2d_value", "pad_int_value"],
    "dynamic": [n for n in CASES if "dynamic" in n],
    "reductions_dot": [n for n in CASES if n.startswith("rd_") and not any(
        k in n for k in ("cum", "sort", "pool", "top_k", "median"))]
    + ["reduce_bits", "reduce_bool"] + [n for n in CASES if n.startswith("dot_general")],
    "sort_cumulative_window": [n for n in CASES if n.startswith("rd_") and any(
        k in n for k in ("cum", "sort", "pool", "top_k", "median"))] + [n for n in CASES if n.startswith(("sort", "argsort"))],
    "gather": [n for n in CASES if "gather" in n or "take" in n],
    "scatter": [n for n in CASES if "scatter" in n or n.startswith("st_at_")],
    "linalg": [n for n in CASES if n.startswith("la_")],
    "conv_fft": [n for n in CASES if n.startswith(("conv_", "fft_"))],
}


def test_top_k_output_container_matches_jax():
    # lax.top_k returns a list, as JAX's, so out_axes written for JAX's list ([0, 1]) is a prefix of it.
    x = np.stack(pool("rd_top_k")[0][:3])
    want = jax.vmap(lambda v: jax.lax.top_k(v, 2), out_axes=[0, 1])(x)
    got = ftrans.vmap(lambda v: flax.top_k(v, 2), out_axes=[0, 1])(x)
    assert type(got) is type(want)
    assert_matches(got, want, 1e-6, 1e-6)


def test_families_cover_every_case():
    covered = set(itertools.chain.from_iterable(FAMILIES.values()))
    assert covered == set(CASES), sorted(set(CASES) - covered)


def test_every_primitive_with_operands_has_a_batching_rule():
    from ftrans.core.prims import convolution as C
    from ftrans.core.prims import elementwise as E
    from ftrans.core.prims import fft as F
    from ftrans.core.prims import indexing as I
    from ftrans.core.prims import reductions as R
    from ftrans.core.prims import sorting as So
    from ftrans.core.prims import structural as S
    from ftrans.core.prims import windowed as W

    prims = {p for m in (E, S, R, So, W, I, C, F) for p in vars(m).values() if isinstance(p, Primitive)}
    missing = sorted(p.name for p in prims if p not in batching_rules)
    # iota and dim_as_value (a symbolic dimension's value) have no operands to batch; rng_uniform (XLA's
    # unseeded generator) has no batching rule in JAX either
    assert missing == ["dim_as_value", "iota", "rng_uniform"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
@_fewer(3)
@given(data=st.data())
def test_jit_of_vmap_matches_jax_vmap(family, data):
    """ftrans.jit(ftrans.vmap(f)) against jax.vmap's shapes and values; the batched program also typechecks."""
    name = data.draw(st.sampled_from(FAMILIES[family]))
    in_axes, out_axes, size = data.draw(configs(name))
    case = CASES[name]
    args = batch_args(name, in_axes, size)
    want = loop_oracle(name, in_axes, out_axes, size)
    assert_avals(want, jax.eval_shape(jax.vmap(jax_fn(name), in_axes=in_axes, out_axes=out_axes), *jx_avals(args)))
    fb = ftrans.vmap(case.build(*FT), in_axes=in_axes, out_axes=out_axes)
    typecheck(ftrans.make_jaxpr(fb)(*ft_args(args)))
    got = ftrans.jit(fb)(*ft_args(args))
    assert_matches(got, want, case.rtol, case.atol)


@st.composite
def nested_configs(draw, name):
    """Inner and outer in_axes (each level maps at least one argument), out_axes, and sizes 2 and 3."""
    case = CASES[name]
    n = len(case.args)
    inner_mask = draw(st.integers(1, 2 ** n - 1))
    outer_mask = draw(st.integers(1, 2 ** n - 1))
    inner, outer, outer_ranks = [], [], []
    for k, r in enumerate(case.ranks):
        a = draw(st.integers(-(r + 1), r)) if inner_mask >> k & 1 else None
        r1 = r + (a is not None)
        b = draw(st.integers(-(r1 + 1), r1)) if outer_mask >> k & 1 else None
        inner.append(a)
        outer.append(b)
        outer_ranks.append(r1)
    assume(not case.jax_fails(tuple(inner), case.ranks) and not case.jax_fails(tuple(outer), outer_ranks))
    r = min(out_ranks(name))
    o_in = draw(st.integers(-(r + 1), r))
    o_out = draw(st.integers(-(r + 2), r + 1))
    sizes = draw(st.sampled_from([(2, 3), (3, 2)]))
    return tuple(inner), tuple(outer), o_in, o_out, sizes


def nested_args(name, inner, outer, n_in, n_out):
    """Element (o, i) of argument k is pool sample o * n_in + i, o, i or UNMAPPED as k is mapped."""
    args = []
    for samples, a, b in zip(pool(name), inner, outer):
        def level(o):
            if a is None:
                return samples[o if b is not None else UNMAPPED]
            base = o * n_in if b is not None else 0
            return np.stack(samples[base:base + n_in], a % (np.ndim(samples[0]) + 1))

        args.append(level(0) if b is None else np.stack([level(o) for o in range(n_out)],
                                                         b % (np.ndim(level(0)) + 1)))
    return args


def nested_oracle(name, inner, outer, o_in, o_out, n_in, n_out):
    def key(o, i):
        return tuple(UNMAPPED if a is None and b is None else
                     o * n_in + i if a is not None and b is not None else
                     i if a is not None else o for a, b in zip(inner, outer))

    return stack([stack([element(name, key(o, i)) for i in range(n_in)], o_in) for o in range(n_out)], o_out)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@_fewer(3)
@given(data=st.data())
def test_nested_vmap_matches_jax_vmap(family, data):
    """vmap(vmap(f)) with different axes at each level: against jax.vmap(jax.vmap(f)) and the element loop."""
    name = data.draw(st.sampled_from(FAMILIES[family]))
    inner, outer, o_in, o_out, (n_in, n_out) = data.draw(nested_configs(name))
    case = CASES[name]
    args = nested_args(name, inner, outer, n_in, n_out)

    def nest(vmap, f):
        return vmap(vmap(f, in_axes=inner, out_axes=o_in), in_axes=outer, out_axes=o_out)

    want = jax.jit(nest(jax.vmap, case.build(*JX)))(*args)
    assert_matches(nested_oracle(name, inner, outer, o_in, o_out, n_in, n_out), want, case.rtol, case.atol)
    got = nest(ftrans.vmap, case.build(*FT))(*ft_args(args))
    assert_matches(got, want, case.rtol, case.atol)
