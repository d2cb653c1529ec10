"""Registry coverage: every primitive has every rule, and its rules agree with each other.

DESIGN.md section 2: a missing rule is never discovered by a user.  Part one
walks every (primitive, table) pair of ``ftrans.core.primitive.rule_tables``
and requires a rule unless ``not_supported`` records why not; the tables that
exist are pinned by name, so a table whose module fails to import (or is no
longer created through ``rule_table``) fails the run instead of vanishing from
it.  The partial-evaluation tables apply to higher-order primitives, which are
found from the params they are really bound with (part two's samples), not
from a list.  Part two runs each primitive's NumPy rule on sample operands and
checks the result against the abstract-eval rule (shape, dtype, weak type),
which catches an impl rule returning a wider dtype than the IR promised, a
weak-type rule that disagrees with abstract eval, and an impl rule that
mutates its inputs.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

# Every module that creates a rule table, imported explicitly: an import error here is a failure.
import ftrans
import ftrans.lax  # noqa: F401
import ftrans.lowering.lower  # noqa: F401
import ftrans.numpy  # noqa: F401
import ftrans.transforms.ad  # noqa: F401
import ftrans.transforms.batching  # noqa: F401
import ftrans.transforms.partial_eval  # noqa: F401
import ftrans.transforms.transpose  # noqa: F401
from ftrans.core import ir
from ftrans.core import primitive as P
from ftrans.core.array import Array
from ftrans.core.avals import ShapedArray

# ----------------------------------------------------------------------------
# Part one: every rule table covers every primitive

# The tables that must exist.  Adding a table means adding it here; a table can
# never disappear from the coverage check without this set shrinking in a diff.
EXPECTED_TABLES = {
    "abstract_eval": False, "impl": False, "lowering": False, "jvp": False, "transpose": False,
    "batching": False, "partial_eval": True, "partial_eval_jaxpr": True,
}  # name -> higher_order_only

TABLES = [(name, t.rules) for name, t in P.rule_tables.items()]


def test_rule_tables_are_exactly_the_expected_ones():
    assert {n: t.higher_order_only for n, t in P.rule_tables.items()} == EXPECTED_TABLES
    for name, t in P.rule_tables.items():
        assert t.name == name and t.owner.startswith("ftrans."), t


def test_a_table_name_is_registered_once():
    with pytest.raises(ValueError, match="registered twice"):
        P.rule_table("jvp", owner="tests.test_registry")
    assert P.rule_tables["jvp"].owner == "ftrans.transforms.ad"


def test_registry_is_populated():
    assert len(P.registry) >= 60
    for name, prim in P.registry.items():
        assert prim.name == name


def _ftrans_primitives() -> dict:
    """ftrans's own primitives: a user's (other test files build some, as JAX's tutorials do) supplies only
    the rules it needs, and is not held to every table."""
    return {name: prim for name, prim in P.registry.items() if prim.ftrans_owned}


def test_user_primitives_are_not_ftrans_owned():
    assert P.registry["sin"].ftrans_owned and P.registry["jit_call"].ftrans_owned
    user = P.Primitive("test_registry_user_probe")
    try:
        assert not user.ftrans_owned and "test_registry_user_probe" not in _ftrans_primitives()
    finally:
        P.registry.pop(user.name, None)


@pytest.mark.parametrize("table_name", list(EXPECTED_TABLES))
def test_every_primitive_has_a_rule_or_a_reason(table_name):
    table = P.rule_tables[table_name]
    missing = [
        name for name, prim in sorted(_ftrans_primitives().items())
        if (table.applies_to(prim) or name in HIGHER_ORDER)
        and prim not in table.rules and (prim, table_name) not in P.not_supported
    ]
    assert not missing, (
        f"primitives with no {table_name!r} rule and no not_supported reason: {', '.join(missing)}"
    )


def test_not_supported_entries_are_meaningful():
    for (prim, table_name), reason in P.not_supported.items():
        assert P.registry.get(prim.name) is prim, f"not_supported names an unregistered {prim}"
        assert table_name in P.rule_tables, f"unknown table {table_name!r} for {prim}"
        assert isinstance(reason, str) and len(reason) > 10, f"({prim}, {table_name}) needs a real reason"
        assert prim not in P.rule_tables[table_name].rules, (
            f"{prim} has a {table_name} rule but is marked unsupported"
        )


def test_higher_order_flag_matches_the_params_primitives_are_bound_with():
    """``Primitive.higher_order`` (read by the partial-eval coverage and ``ftrans.rules``) is checked
    against the samples: a primitive bound with a jaxpr in its params must carry the flag, and a
    flagged one must really be bound with one."""
    flagged = {n for n, p in P.registry.items() if p.higher_order and p.ftrans_owned}
    with_samples = {n for n in flagged if n in SAMPLES}
    assert HIGHER_ORDER == with_samples, (
        f"bound with jaxpr params but not flagged higher_order: {sorted(HIGHER_ORDER - flagged)}; "
        f"flagged but never bound with a jaxpr: {sorted(with_samples - HIGHER_ORDER)}"
    )
    assert {"cond", "while", "scan", "jit_call", "remat2", "custom_jvp_call", "custom_vjp_call",
            "custom_vmap_call"} <= HIGHER_ORDER


def test_eager_fast_path_uses_the_registered_impl():
    for prim in P.registry.values():
        if prim in P.impl_rules:
            assert prim.impl is P.impl_rules[prim], prim.name


# ----------------------------------------------------------------------------
# Part two: impl rules agree with abstract-eval rules on sample operands

# Canonical dtypes with x64 off (what operands can actually have).
DTYPES = [np.dtype(d) for d in (
    np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32,
    ml_dtypes.bfloat16, np.float16, np.float32, np.complex64,
)]
f32, i32, u8, bf16, f16, c64, b = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.uint8),
                                   np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16),
                                   np.dtype(np.complex64), np.dtype(np.bool_))


def arr(shape, dtype, seed: int = 0) -> np.ndarray:
    """Small values valid for most functions (in (0, 1) for floats, 0..5 for ints)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 6, size=shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.uniform(0.1, 0.9, shape) + 1j * rng.uniform(0.1, 0.9, shape)).astype(dtype)
    return rng.uniform(0.1, 0.9, shape).astype(dtype)


UNARY = [
    "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "ceil", "conj", "copy", "cos",
    "cosh", "digamma", "erf", "erf_inv", "erfc", "exp", "exp2", "expm1", "floor", "imag",
    "is_finite", "lgamma", "log", "log1p", "logistic", "neg", "not", "population_count", "real",
    "round", "rsqrt", "sign", "sin", "sinh", "sqrt", "stop_gradient", "tan", "tanh", "clz",
    "square", "reduce_precision", "bessel_i0e", "bessel_i1e",
]
BINARY = [
    "add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter", "complex", "eq",
    "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "shift_left", "shift_right_logical",
    "shift_right_arithmetic",
]
# Extra params some elementwise primitives require.
ELEMENTWISE_PARAMS = {
    "round": [{"rounding_method": 0}, {"rounding_method": 1}],
    "integer_pow": [{"y": 3}, {"y": 0}, {"y": -2}],
    "reduce_precision": [{"exponent_bits": 5, "mantissa_bits": 10}],
}


def _elementwise_samples(name: str, arity: int) -> list[tuple[tuple, dict]]:
    """The primitive on every dtype (abstract eval decides which it accepts), weak and strong,
    and for binary primitives also with a rank-0 operand next to an array."""
    out = []
    for params in ELEMENTWISE_PARAMS.get(name, [{}]):
        for d in DTYPES:
            if arity == 1:
                out.append(((arr((2, 3), d),), params))
                out.append(((Array._new(arr((), d), True),), params))
            else:
                out.append(((arr((2, 3), d, 1), arr((2, 3), d, 2)), params))
                out.append(((arr((2, 3), d, 1), Array._new(arr((), d, 3), True)), params))
                out.append(((Array._new(arr((), d, 4), True), arr((4,), d, 5)), params))
    return out


def _dot(lhs, rhs, lc, rc, lb=(), rb=(), pet=None):
    return ((lhs, rhs), {"dimension_numbers": ((lc, rc), (lb, rb)), "precision": None,
                         "preferred_element_type": pet})


def _hand_samples() -> dict[str, list[tuple[tuple, dict]]]:
    s: dict[str, list[tuple[tuple, dict]]] = {}
    s["integer_pow"] = []  # filled from ELEMENTWISE_PARAMS below
    s["convert_element_type"] = [
        ((arr((3,), src),), {"new_dtype": dst, "weak_type": weak})
        for src in DTYPES for dst in DTYPES for weak in (False, True)
    ]
    s["bitcast_convert_type"] = [
        ((arr((3,), f32),), {"new_dtype": i32}),
        ((arr((3,), f32),), {"new_dtype": u8}),
        ((arr((3, 4), u8),), {"new_dtype": f32}),
        ((arr((3,), np.int16),), {"new_dtype": bf16}),
        ((arr((3,), f16),), {"new_dtype": np.dtype(np.uint16)}),
    ]
    s["rng_bit_generator"] = [
        ((np.array([1, 2, 3, 4], np.uint32),), {"shape": (3,), "dtype": np.dtype(np.uint32), "algorithm": 0}),
        ((np.array([5, 6, 7, 8], np.uint32),), {"shape": (2, 2), "dtype": np.dtype(np.uint8), "algorithm": 2}),
    ]
    s["rng_uniform"] = [
        ((np.array(0.0, f32), np.array(1.0, f32)), {"shape": (3,)}),
        ((np.array(0, i32), np.array(10, i32)), {"shape": (2, 2)}),
    ]
    s["select_n"] = [
        ((arr((3,), b), arr((3,), f32, 1), arr((3,), f32, 2)), {}),
        ((np.array([0, 2, 1], i32), arr((3,), i32, 1), arr((3,), i32, 2), arr((3,), i32, 3)), {}),
        ((np.array(True), arr((3,), bf16, 1), arr((3,), bf16, 2)), {}),
        ((arr((3,), b), Array._new(arr((3,), f32, 1), True), Array._new(arr((3,), f32, 2), True)), {}),
    ]
    s["polynomial"] = [  # (x, a_0, ..., a_N): one dtype, the result's shape or rank 0
        ((arr((2, 3), f32), arr((2, 3), f32, 1), np.array(0.5, f32)), {}),
        ((np.array(0.3, f32), arr((3,), f32, 1), np.array(0.5, f32), arr((3,), f32, 2)), {}),
        ((arr((3,), i32), np.array(1, i32), arr((3,), i32, 1), np.array(2, i32)), {"unroll": 2}),
        ((arr((2,), bf16), np.array(0.5, bf16), np.array(0.25, bf16)), {}),
        ((arr((3,), np.dtype(np.complex64)), arr((3,), np.dtype(np.complex64), 1),
          arr((3,), np.dtype(np.complex64), 2)), {}),
        ((Array._new(arr((), f32), True), Array._new(arr((), f32, 1), True), Array._new(arr((), f32, 2), True)), {}),
    ]
    s["clamp"] = [
        ((np.array(0.2, f32), arr((3,), f32), np.array(0.7, f32)), {}),
        ((arr((3,), i32, 1), arr((3,), i32, 2), arr((3,), i32, 3) + 3), {}),
        ((np.array(0.2, bf16), arr((3,), bf16), np.array(0.7, bf16)), {}),
    ]
    s["broadcast_in_dim"] = [
        ((arr((3,), f32),), {"shape": (2, 3), "broadcast_dimensions": (1,)}),
        ((arr((), bf16),), {"shape": (2, 3), "broadcast_dimensions": ()}),
        ((arr((3, 1), b),), {"shape": (3, 4), "broadcast_dimensions": (0, 1)}),
    ]
    s["reshape"] = [
        ((arr((2, 3), f32),), {"new_sizes": (3, 2), "dimensions": None}),
        ((arr((2, 3), i32),), {"new_sizes": (6,), "dimensions": (1, 0)}),
        ((arr((1,), f16),), {"new_sizes": (), "dimensions": None}),
    ]
    s["transpose"] = [
        ((arr((2, 3), f32),), {"permutation": (1, 0)}),
        ((arr((2, 3, 4), u8),), {"permutation": (2, 0, 1)}),
    ]
    s["squeeze"] = [((arr((1, 3, 1), f32),), {"dimensions": (0, 2)})]
    s["expand_dims"] = [((arr((3,), i32),), {"dimensions": (0, 2)})]
    s["rev"] = [((arr((2, 3), f32),), {"dimensions": (0, 1)}), ((arr((3,), b),), {"dimensions": ()})]
    s["pad"] = [
        ((arr((3,), f32), np.array(0, f32)), {"padding_config": ((1, 2, 1),)}),
        ((arr((4, 3), i32), np.array(-1, i32)), {"padding_config": ((-1, 0, 0), (0, 1, 2))}),
        ((arr((2,), bf16), np.array(0, bf16)), {"padding_config": ((0, 0, 0),)}),
    ]
    s["concatenate"] = [
        ((arr((2,), f32), arr((3,), f32)), {"dimension": 0}),
        ((arr((2, 2), u8), arr((2, 1), u8), arr((2, 3), u8)), {"dimension": 1}),
    ]
    s["slice"] = [
        ((arr((5,), f32),), {"start_indices": (1,), "limit_indices": (4,), "strides": None}),
        ((arr((5, 4), i32),), {"start_indices": (0, 1), "limit_indices": (5, 4), "strides": (2, 2)}),
    ]
    s["dynamic_slice"] = [
        ((arr((5,), f32), np.array(1, i32)), {"slice_sizes": (2,)}),
        ((arr((5, 4), bf16), np.array(9, i32), np.array(-3, i32)), {"slice_sizes": (2, 2)}),
    ]
    s["dynamic_update_slice"] = [
        ((arr((5,), f32), arr((2,), f32, 1), np.array(1, i32)), {}),
        ((arr((5, 4), i32), arr((2, 2), i32, 1), np.array(9, i32), np.array(-3, i32)), {}),
    ]
    s["iota"] = [
        ((), {"dtype": i32, "shape": (2, 3), "dimension": 1}),
        ((), {"dtype": f32, "shape": (4,), "dimension": 0}),
        ((), {"dtype": bf16, "shape": (3, 2), "dimension": 0}),
    ]
    for name, kinds in [("reduce_sum", (f32, i32, bf16, f16, u8, c64)),
                        ("reduce_prod", (f32, i32, bf16, u8)),
                        ("reduce_max", (f32, i32, bf16, b, u8)),
                        ("reduce_min", (f32, i32, bf16, b, u8)),
                        ("reduce_and", (b, i32, u8)),
                        ("reduce_or", (b, i32, u8)),
                        ("reduce_xor", (b, i32, u8))]:
        s[name] = [((arr((2, 3), d),), {"axes": (1,)}) for d in kinds]
        s[name] += [((arr((2, 3), kinds[0]),), {"axes": (0, 1)}),
                    ((arr((2, 0), kinds[0]),), {"axes": (1,)}),
                    ((Array._new(arr((2, 3), kinds[0]), True),), {"axes": (0,)})]
    nan_row = np.array([[0.5, np.nan, 0.1], [0.2, 0.3, 0.1]], f32)
    for name in ("argmax", "argmin"):
        s[name] = [((arr((2, 3), d),), {"axes": (1,), "index_dtype": i32}) for d in (f32, i32, bf16, b)]
        s[name] += [((nan_row,), {"axes": (1,), "index_dtype": i32}),
                    ((arr((2, 3), f32),), {"axes": (0,), "index_dtype": np.dtype(np.int8)})]
    s["dot_general"] = [
        _dot(arr((2, 3), f32), arr((3, 4), f32), (1,), (0,)),
        _dot(arr((2, 3), bf16), arr((3, 4), bf16), (1,), (0,)),
        _dot(arr((2, 3), f16), arr((3, 4), f16), (1,), (0,)),
        _dot(arr((2, 3), np.dtype(np.int8)), arr((3, 4), np.dtype(np.int8)), (1,), (0,)),
        _dot(arr((2, 3), b), arr((3, 4), b), (1,), (0,)),
        _dot(arr((5, 2, 3), f32), arr((5, 3, 4), f32), (2,), (1,), (0,), (0,)),
        _dot(arr((3,), c64), arr((3,), c64), (0,), (0,)),
        _dot(arr((2, 3), bf16), arr((3, 4), bf16), (1,), (0,), pet=f32),
        _dot(arr((2, 3), np.dtype(np.int8)), arr((3, 4), np.dtype(np.int8)), (1,), (0,), pet=i32),
        _dot(Array._new(arr((3,), f32), True), Array._new(arr((3,), f32), True), (0,), (0,)),
    ]
    for name, kinds in [("reduce_window_sum", (f32, i32, bf16, f16)),
                        ("reduce_window_max", (f32, i32, bf16, b)),
                        ("reduce_window_min", (f32, u8, bf16, b))]:
        s[name] = [((arr((4, 5), d),), {"window_dimensions": (2, 2), "window_strides": (1, 2),
                                         "padding": ((0, 0), (1, 0)), "base_dilation": (1, 1),
                                         "window_dilation": (1, 1)}) for d in kinds]
        s[name].append(((arr((4, 5), f32),), {"window_dimensions": (2, 3), "window_strides": (2, 1),
                                              "padding": ((1, 1), (0, 2)), "base_dilation": (2, 1),
                                              "window_dilation": (1, 2)}))
    from ftrans.core.prims.convolution import ConvDimensionNumbers as _CDN
    from ftrans.core.prims.fft import FftType as _Fft

    def _conv(lhs, rhs, dn=None, strides=(1, 1), padding=((0, 0), (0, 0)), ld=(1, 1), rd=(1, 1), fg=1, bg=1,
              pet=None, prec=None):
        nd = lhs.ndim
        dn = dn or _CDN(tuple(range(nd)), tuple(range(nd)), tuple(range(nd)))
        return ((lhs, rhs), {"window_strides": strides, "padding": padding, "lhs_dilation": ld, "rhs_dilation": rd,
                             "dimension_numbers": dn, "feature_group_count": fg, "batch_group_count": bg,
                             "precision": prec, "preferred_element_type": pet})

    s["conv_general_dilated"] = [
        _conv(arr((2, 3, 5, 4), f32), arr((4, 3, 2, 2), f32, 1)),
        _conv(arr((2, 4, 5, 4), f32), arr((6, 2, 3, 2), f32, 1), strides=(2, 1), padding=((1, 1), (0, -1)),
              ld=(1, 2), rd=(2, 1), fg=2, prec=("HIGHEST", "HIGHEST")),
        _conv(arr((4, 3, 6), f32), arr((4, 3, 2), f32, 1), strides=(1,), padding=((1, 0),), ld=(1,), rd=(1,),
              bg=2),
        _conv(arr((2, 5, 4, 3), f32), arr((2, 2, 3, 4), f32, 1),
              dn=_CDN((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2)), padding=((1, 0), (0, 1))),
        _conv(arr((1, 2, 4, 4), bf16), arr((3, 2, 2, 2), bf16, 1)),
        _conv(arr((1, 2, 4, 4), bf16), arr((3, 2, 2, 2), bf16, 1), pet=f32),
        _conv(arr((1, 2, 4), i32), arr((3, 2, 2), i32, 1), strides=(1,), padding=((0, 0),), ld=(1,), rd=(1,)),
        _conv(arr((1, 2, 4), c64), arr((3, 2, 2), c64, 1), strides=(1,), padding=((0, 0),), ld=(1,), rd=(1,)),
        _conv(arr((1, 2, 4), f32), arr((3, 2, 2), f32, 1), strides=(1,), padding=((1, 1),), ld=(2,), rd=(1,)),
        _conv(arr((0, 2, 4), f32), arr((3, 2, 2), f32, 1), strides=(1,), padding=((0, 0),), ld=(1,), rd=(1,)),
    ]
    s["fft"] = [
        ((arr((3, 8), c64),), {"fft_type": _Fft.FFT, "fft_lengths": (8,)}),
        ((arr((2, 4, 6), c64),), {"fft_type": _Fft.IFFT, "fft_lengths": (4, 6)}),
        ((arr((3, 8), f32),), {"fft_type": _Fft.RFFT, "fft_lengths": (8,)}),
        ((arr((2, 3, 5), f32),), {"fft_type": _Fft.RFFT, "fft_lengths": (3, 5)}),
        ((arr((3, 5), c64),), {"fft_type": _Fft.IRFFT, "fft_lengths": (8,)}),
        ((arr((2, 4, 4), c64),), {"fft_type": _Fft.IRFFT, "fft_lengths": (4, 7)}),
        ((arr((2, 2, 3, 4), c64),), {"fft_type": _Fft.FFT, "fft_lengths": (2, 3, 4)}),
    ]


    from ftrans.sharding import NamedSharding, P, make_mesh

    one = make_mesh((1,), ("x",))  # one device: the constraint is the identity wherever the tests run it
    s["sharding_constraint"] = [((arr((4, 2), f32),), {"sharding": NamedSharding(one, P("x"))}),
                                ((arr((3,), i32),), {"sharding": NamedSharding(one, P())})]
    s["shard_alike"] = [((arr((4, 2), f32), arr((4, 2), f32, 1)), {}), ((arr((3,), i32), arr((3,), i32, 2)), {})]
    from ftrans.core.prims.sharding import CopySemantics as _CS

    dev = ftrans.devices()[-1]
    s["device_put"] = [
        ((arr((4, 2), f32),), {"devices": (dev,), "srcs": (None,), "copy_semantics": (_CS.REUSE_INPUT,)}),
        ((arr((3,), f32), Array._new(arr((), f32, 1), True)),
         {"devices": (None, NamedSharding(one, P())), "srcs": (dev, None),
          "copy_semantics": (_CS.ALWAYS_COPY, _CS.REUSE_INPUT)}),
        ((arr((3,), i32),), {"devices": (dev,), "srcs": (None,), "copy_semantics": (_CS.ALWAYS_COPY,)}),
    ]
    # Primitives other engineers are adding; entries apply once they register.
    s["sort"] = [
        ((arr((2, 5), f32),), {"dimension": 1, "is_stable": True, "num_keys": 1}),
        ((arr((5,), i32), arr((5,), f32)), {"dimension": 0, "is_stable": True, "num_keys": 1}),
    ]
    s["split"] = [((arr((5, 3), f32),), {"sizes": (2, 0, 3), "axis": 0}), ((arr((2, 4), i32),), {"sizes": (1, 3), "axis": 1})]
    s["top_k"] = [((arr((2, 5), f32),), {"k": 3, "axis": 1}), ((arr((4, 3), i32),), {"k": 2, "axis": 0})]
    for name in ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"):
        kinds = (f32, bf16) if name == "cumlogsumexp" else (f32, i32, bf16)
        s[name] = [((arr((2, 4), d),), {"axis": 1, "reverse": rev}) for d in kinds for rev in (False, True)]
    s.update(_linalg_samples())
    # Host callbacks: the callback is a parameter (a HostCallback over flat arguments).
    from jax import tree_util as _tu

    from ftrans.core.prims.callbacks import HostCallback

    def host_cb(fn, kind):
        return HostCallback(fn, _tu.tree_flatten(((0,), {}))[1], {}, 1, "tests/test_registry.py", kind)

    s["debug_callback"] = [((arr((3,), f32),), {"callback": host_cb(lambda x: None, "debug"), "ordered": False})]
    s["debug_print"] = [((arr((3,), f32),), {"callback": host_cb(lambda x: None, "debug"), "ordered": False})]
    from ftrans.core.prims.callbacks import ShardingInspector

    s["inspect_sharding"] = [((arr((3,), f32),), {"callback": ShardingInspector(lambda sharding: None)})]
    s["pure_callback"] = [((arr((3,), f32),), {"callback": host_cb(lambda x: np.asarray(x) * 2, "pure"),
                                                "result_avals": (ShapedArray((3,), f32),), "vmap_method": None})]
    s["io_callback"] = [((arr((2,), i32),), {"callback": host_cb(lambda x: np.asarray(x) + 1, "io"),
                                             "result_avals": (ShapedArray((2,), i32),), "ordered": True})]
    # checkify's check: the operands are an Error's leaves (no error set here, so the impl returns nothing).
    from ftrans.experimental import checkify

    chk = ftrans.make_jaxpr(lambda x: checkify.check(x.sum() > 0, "{}", x))(np.ones(3, f32)).eqns[-1]
    s["check"] = [((np.array(False), np.array(7, i32), arr((3,), f32)), dict(chk.params)),
                  ((np.array(True), np.array(7, i32), arr((3,), f32)), dict(chk.params, debug=True))]
    # sparse.todense of a traced dense value (the identity; sparsify gives a sparse operand its todense).
    s["todense"] = [((arr((3,), f32),), {})]
    # ffi_call: jaxlib's LAPACK QR target, with the params ftrans.ffi.ffi_call binds.
    from ftrans import ffi as ftrans_ffi

    qr_in = arr((4, 3), f32)
    qr = lambda x: ftrans_ffi.ffi_call(  # noqa: E731
        "lapack_sgeqrf_ffi", (ftrans.ShapeDtypeStruct((4, 3), f32), ftrans.ShapeDtypeStruct((3,), f32)),
        input_layouts=[(1, 0)], output_layouts=[(1, 0), None], input_output_aliases={0: 0})(x)
    (qr_eqn,) = ftrans.make_jaxpr(qr)(qr_in).eqns
    s["ffi_call"] = [((qr_in,), dict(qr_eqn.params))]
    # buffer_callback: a callback filling its output with its input plus one (the params buffer_callback binds).
    from ftrans.experimental.buffer_callback import buffer_callback

    def _add_one(ctx, out, x):
        np.asarray(out)[...] = np.asarray(x) + 1

    bc_in = arr((3,), f32)
    (bc_eqn,) = ftrans.make_jaxpr(buffer_callback(_add_one, ftrans.ShapeDtypeStruct((3,), f32)))(bc_in).eqns
    s["buffer_callback"] = [((bc_in,), dict(bc_eqn.params))]
    # call_exported: a function exported with ftrans.export.
    from ftrans import export as ftrans_export

    exp_in = arr((2, 3), f32)
    # for the CPU (where tests/test_lowering_samples.py runs it) and the default platform (the eager samples)
    here = {"gpu": "cuda"}.get(ftrans.default_backend(), ftrans.default_backend())
    exported = ftrans_export.export(ftrans.jit(lambda x: (ftrans.numpy.sin(x), x.sum(0))),
                                    platforms=tuple(dict.fromkeys(("cpu", here))))(exp_in)
    s["call_exported"] = [((exp_in,), {"exported": exported})]
    return s


def _linalg_samples() -> dict[str, list[tuple[tuple, dict]]]:
    """Well-conditioned matrices (the generic (0, 1) values plus a multiple of the identity)."""
    def spd(n, batch=(), seed=0):
        a = arr(batch + (n, n), np.float32, seed)
        return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=np.float32)).astype(np.float32)

    def gen(m, n, batch=(), seed=0):
        a = arr(batch + (m, n), np.float32, seed) - 0.5
        k = min(m, n)
        a[..., range(k), range(k)] += 2.0
        return a

    def separated(m, n, batch=(), seed=0):  # distinct singular values, so their derivatives stay small
        a = gen(m, n, batch, seed) * 0.2
        k = min(m, n)
        a[..., range(k), range(k)] += np.arange(k, 0, -1, dtype=np.float32) * 1.5
        return a

    tri = {"left_side": True, "lower": True, "transpose_a": False, "conjugate_a": False, "unit_diagonal": False}
    return {
        "cholesky": [((spd(3),), {}), ((spd(2, (2,)),), {})],
        "triangular_solve": [
            ((np.tril(spd(3)), gen(3, 2)), tri),
            ((np.triu(spd(3, (2,))), gen(2, 3, (2,), 1)), dict(tri, left_side=False, lower=False, transpose_a=True)),
            ((spd(3), gen(3, 3, (), 2)), dict(tri, unit_diagonal=True)),
        ],
        "lu": [((gen(3, 3),), {}), ((gen(2, 4, (2,)),), {}), ((gen(4, 2),), {})],
        "lu_pivots_to_permutation": [((np.array([2, 2, 3], np.int32),), {"permutation_size": 4}),
                                     ((np.array([[1, 1], [0, 1]], np.int32),), {"permutation_size": 2})],
        "qr": [((gen(4, 3),), {"full_matrices": False}), ((gen(3, 3, (2,)),), {"full_matrices": True})],
        "eigh": [((spd(3),), {"lower": True}), ((spd(3, (2,)),), {"lower": False})],
        "svd": [((separated(4, 3),), {"full_matrices": False, "compute_uv": True}),
                ((separated(3, 3, (2,)),), {"full_matrices": False, "compute_uv": False})],
        "eig": [((gen(3, 3),), {"compute_left_eigenvectors": False, "compute_right_eigenvectors": False}),
                ((gen(2, 2),), {"compute_left_eigenvectors": True, "compute_right_eigenvectors": True})],
        "schur": [((gen(3, 3),), {}), ((gen(4, 4, (2,)),), {})],
        "tridiagonal": [((spd(3),), {"lower": True}), ((spd(4, (2,)),), {"lower": False})],
        "tridiagonal_solve": [
            ((gen(4, 1)[:, 0] * .3, spd(4)[0] + 3, gen(4, 1, (), 1)[:, 0] * .3, gen(4, 2, (), 2)),
             {"perturb_singular": False}),
            ((gen(2, 3) * .3, gen(2, 3, (), 1) + 3, gen(2, 3, (), 2) * .3, gen(3, 1, (2,), 3)),
             {"perturb_singular": True})],
        "hessenberg": [((gen(3, 3),), {}), ((gen(4, 4, (2,)),), {})],
        "householder_product": [((gen(4, 3), gen(3, 1)[:, 0] * .5), {}), ((gen(3, 3, (2,)), gen(2, 2) * .5), {})],
        "ormqr": [((gen(4, 3), gen(2, 1)[:, 0] * .5, gen(4, 2, (), 1)), {"left": True, "transpose": False}),
                  ((gen(3, 3, (2,)), gen(2, 2) * .5, gen(2, 3, (2,), 1)), {"left": False, "transpose": True})],
        "cholesky_update": [((np.triu(spd(3)) + 2 * np.eye(3, dtype=np.float32), gen(3, 1)[:, 0]), {})],
        "symmetric_product": [((gen(3, 2), spd(3)), {"alpha": 1.5, "beta": 0.5}),
                              ((gen(2, 3, (2,)), spd(2, (2,))), {"alpha": 1.0, "beta": 0.0})],
    }


def _all_samples() -> dict[str, list[tuple[tuple, dict]]]:
    samples = _hand_samples()
    captured, _ = _CAPTURED
    samples.update(captured)
    for name in UNARY:
        samples[name] = _elementwise_samples(name, 1)
    for name in BINARY:
        samples[name] = _elementwise_samples(name, 2)
    samples["integer_pow"] = _elementwise_samples("integer_pow", 1)
    samples["jit_call"] = _jit_call_samples()
    samples["pmap"] = _pmap_samples()
    samples.update(_autodiff_samples())
    samples.update(_control_flow_samples())
    return samples


def _control_flow_samples() -> dict[str, list[tuple[tuple, dict]]]:
    """cond, while, scan, custom_linear_solve and reduce as the lax API records them, with the operands they are bound to."""
    from ftrans import lax as flax
    from ftrans.core.jaxpr_api import eval_jaxpr

    x = arr((2, 3), f32)
    i = Array._new(np.asarray(1, np.int32), False)
    programs = {
        "cond": [lambda a: flax.cond(a.sum() > 0, lambda b: (b * 2.0, b.sum()), lambda b: (b - 1.0, b.max()), a),
                 lambda a: flax.switch(i, [lambda b: b, lambda b: b + a, lambda b: -b], a * 2)],
        "while": [lambda a: flax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * a), (0, a)),
                  lambda a: flax.while_loop(lambda c: c.sum() < 100.0, lambda c: c * 2.0 + 1.0, a)],
        "scan": [lambda a: flax.scan(lambda c, r: (c + r, c * r), a[0], a),
                 lambda a: flax.scan(lambda c, r: (c * a[0], (r, c.sum())), a[1], a, reverse=True, unroll=2),
                 lambda a: flax.scan(lambda c, _: (c + 1, None), 0, None, length=4)],
        "custom_linear_solve": [
            lambda a: flax.custom_linear_solve(lambda v: v * 2.0 + a, a, lambda mv, v: (v - a) / 2.0,
                                               symmetric=True),
            lambda a: flax.custom_linear_solve(lambda v: v * 3.0, a[0], lambda mv, v: v / 3.0)],
        "reduce": [
            lambda a: flax.reduce((a, a * 2.0), (np.float32(-np.inf), np.float32(0)),
                                  lambda p, q: (flax.max(p[0], q[0]), p[1] + q[1]), (0,)),
            lambda a: flax.reduce(a, np.float32(0.5), lambda p, q: flax.max(p, q), (0, 1)),
            lambda a: flax.reduce(a, np.float32(0), lambda p, q: flax.select(q > p, q, p), (1,))],
        "composite": [lambda a: flax.composite(lambda b, *, k: (b * 2.0, b.sum() + k), "t.pair", version=1)(
            a, k=np.float32(1)), lambda a: flax.composite(lambda b: b[0] * np.arange(3, dtype=np.float32), "t.closed")(a)],
        "dce_sink": [lambda a: (flax.dce_sink(a * 2.0, prevent_mlir_dce=True), a)[1],
                     lambda a: (flax.dce_sink((a, a.sum())), a + 1.0)[1]],
        "reduce_window": [
            lambda a: flax.reduce_window((a, a * 2.0), (np.float32(0), np.float32(-np.inf)),
                                         lambda p, q: (p[0] + q[0], flax.max(p[1], q[1])), (2, 1), (1, 1),
                                         "SAME"),
            lambda a: flax.reduce_window(a, np.float32(1), lambda p, q: p * q, (1, 2), (1, 1), [(0, 1), (1, 0)],
                                         (1, 2), (1, 1))],
    }
    out: dict[str, list] = {}
    for name, fs in programs.items():
        out[name] = []
        for f in fs:
            closed = ftrans.make_jaxpr(f)(x)
            j = closed.jaxpr
            for k, eqn in enumerate(j.eqns):
                if eqn.primitive.name != name:
                    continue
                upto = ir.Jaxpr(j.constvars, j.invars, j.eqns[:k], list(eqn.invars))
                ops = eval_jaxpr(upto, list(closed.consts), x)
                out[name].append((tuple(ops), dict(eqn.params)))
    return out


def _autodiff_samples() -> dict[str, list[tuple[tuple, dict]]]:
    """The call-like primitives of autodiff (custom rules, remat, names, barriers), as the API records them."""
    from ftrans import lax as flax
    from ftrans.ad_checkpoint import checkpoint_name
    from ftrans.custom_derivatives import linear_call
    from ftrans.experimental.xla_metadata import set_xla_metadata
    from ftrans.extend.core import primitives as fcore_primitives
    from ftrans.extend.linear_util import wrap_init

    x = arr((2, 3), f32)

    @ftrans.custom_jvp
    def cj(a):
        return a * 2.0

    cj.defjvp(lambda p, t: (cj(*p), t[0] * 2.0))

    @ftrans.custom_vjp
    def cv(a):
        return a.sum()

    cv.defvjp(lambda a: (a.sum(), None), lambda res, g: (g * 1.0,))
    @ftrans.custom_batching.custom_vmap
    def cm(a):
        return a * 2.0

    cm.def_vmap(lambda n, in_batched, a: (a * 2.0, in_batched[0]))

    @ftrans.custom_vjp
    def cr(a):
        return a.sum()

    cr.defvjp(lambda a: (a.sum(), a * 2.0), lambda res, g: (g * res,), optimize_remat=True)
    programs = {
        "custom_dce_call": lambda a: ftrans.vjp(cr, a)[0],
        "custom_vmap_call": lambda a: cm(a),
        "custom_jvp_call": lambda a: cj(a),
        "custom_vjp_call": lambda a: cv(a),
        "remat2": lambda a: ftrans.checkpoint(lambda b: (b * 2.0, b.sum()))(a),
        "name": lambda a: checkpoint_name(a, "h"),
        "xla_metadata_value": lambda a: set_xla_metadata(a, k="v", flag=True),
        "linear_call": lambda a: linear_call(lambda r, b: (b * 2.0, b.sum()), lambda r, c: c[0] * 2.0 + c[1], (), a),
        "optimization_barrier": lambda a: flax.optimization_barrier((a, a.sum())),
        # JAX's call_p / closed_call_p, bound with a wrapped function (ftrans.extend.linear_util)
        "call": lambda a: fcore_primitives.call_p.bind(a, subfuns=(wrap_init(lambda b: [b * 2.0, b.sum()]),)),
        "closed_call": lambda a: fcore_primitives.closed_call_p.bind(a, subfuns=(wrap_init(lambda b: [b * 2.0]),)),
    }
    out = {}
    for name, f in programs.items():
        (eqn,) = [e for e in ftrans.make_jaxpr(f)(x).eqns if e.primitive.name == name]
        out[name] = [((x,), dict(eqn.params))]
    return out


def _jit_call_samples() -> list[tuple[tuple, dict]]:
    """A staged jit call, as ``make_jaxpr`` of a jitted function records it."""
    x = arr((2, 3), f32)
    closed = ftrans.make_jaxpr(lambda a: ftrans.jit(lambda b: (b * 2.0, b.sum()))(a))(x)
    (eqn,) = closed.eqns
    return [((x,), dict(eqn.params))]


def _pmap_samples() -> list[tuple[tuple, dict]]:
    """A staged pmap (mapped and broadcast operands, a mapped and a replicated result), as make_jaxpr records it."""
    from ftrans import lax as flax

    x = arr((2, 3), f32)
    y = arr((3,), f32)
    f = ftrans.pmap(lambda b, c: (b * c, flax.psum(b.sum(), "i")), axis_name="i", in_axes=(0, None),
                    out_axes=(0, None))
    (eqn,) = ftrans.make_jaxpr(f)(x, y).eqns
    return [((x, y), dict(eqn.params))]

# Registered primitives that need no sample entry here, each with the reason.
# (Empty: every primitive has samples. Add "name": "reason" only for a primitive
# whose operands cannot be built here, and say where it is tested instead.)
NO_SAMPLE_ALLOWLIST: dict[str, str] = {
    **{name: "a conversion to/from a user-defined extended dtype: no eager array of one exists (its impl rule "
             "raises NotImplementedError by design); tests/test_extended_dtypes.py covers it under jit, vmap and "
             "grad against jax"
       for name in ("to_edtype", "from_edtype")},
    "custom_lin": "evaluating it is an error by design (jvp of a custom_vjp function); "
                  "tests/test_custom_derivatives.py covers its transpose and that error",
    **{name: "a collective: abstract eval and impl need its axis name bound by vmap/pmap, so it has no "
             "standalone samples; tests/test_collectives.py covers it against jax.vmap"
       for name in ("psum", "pmax", "pmin", "all_gather", "all_to_all", "ppermute", "psum_scatter", "axis_index")},
    **{name: "shard_map's varying-type cast and the psum it transposes with: bound only inside a shard_map body "
             "checked with check_vma; tests/test_shard_map_pvary.py covers them (jaxprs, grads, vmap) against jax"
       for name in ("pvary", "psum_invariant")},
    **{name: "shard_map's reduced/unreduced type casts (pcast to='reduced'/'unreduced'): bound only inside a "
             "shard_map body checked with check_vma; tests/test_unreduced_shard_map.py covers them (types, grads, "
             "eager, vmap) against jax"
       for name in ("preduced", "vary_unreduced_cast", "reduced_vary_cast")},
    **{name: "shard_map's collectives between reduced/unreduced types (all_gather(to='reduced'), psum/psum_scatter "
             "of an unreduced value): bound only inside a shard_map body checked with check_vma; "
             "tests/test_unreduced_collectives.py covers them (jaxprs, values, grads, vmap, lowering) against jax"
       for name in ("all_gather_reduced", "unreduced_reduce_scatter", "unreduced_psum")},
    **{name: "built only by linearizing a while_loop (its params are staged programs and the backward "
             "function); tests/test_while_grad.py covers it eagerly, in jit, under vmap and nested"
       for name in ("checkpointed_while", "while_lin")},
    "dim_as_value": "its param is a symbolic dimension, which has a value only in a shape-polymorphic exported "
                    "program that runs; tests/test_export_shape_poly.py covers it (x * x.shape[0], mean) "
                    "against jax.export",
    "shard_map": "its operands must be laid out over a multi-device mesh and it runs only as a partitioned "
                 "program; tests/test_sharding.py covers it (eager, in jit, grad, vmap) against jax.shard_map",
    "ragged_all_to_all": "a collective whose axis must be bound by shard_map or pmap (JAX has no rule for its "
                         "vmap axis either); tests/test_ragged_all_to_all.py covers it (jit, jvp, grad, vmap)",
    **{name: "a PRNG primitive over key-typed values: its key operands or results are key arrays (a key<...> "
             "type over uint32 data), which NumPy samples cannot stand for; tests/test_random_typed_ir.py covers "
             "its rules (abstract eval, impl, jvp, vmap, lowering) against jax"
       for name in ("random_seed", "random_bits", "random_split", "random_fold_in", "random_wrap", "random_unwrap",
                    "random_clone", "consume")},
    "random_gamma": "JAX's gamma sampler over a key-typed operand (a key array, which NumPy samples cannot stand "
                    "for); tests/test_random_gamma_primitive.py covers its rules (abstract eval, eager, jvp, vmap, "
                    "lowering) against jax.random.random_gamma_p",
}


def _captured_samples() -> tuple[dict[str, list[tuple[tuple, dict]]], list[str]]:
    """Samples for primitives with intricate params (gather/scatter), taken from real API calls.

    Each function is staged; the jaxpr is then evaluated equation by equation and
    the concrete operands and params of every equation are recorded, so the
    params are exactly what the API layer produces.
    """
    import ftrans.numpy as jnp

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    xi = np.arange(12, dtype=np.int32).reshape(3, 4)
    idx = np.array([0, 2, 2], np.int32)
    calls = [
        (lambda x: x[idx], x),
        (lambda x: x[idx, 1:], x),
        (lambda x: jnp.take(x, idx, axis=1), xi),
        (lambda x: x.at[idx].get(mode="fill", fill_value=-1.0), x),
        (lambda x: x.at[np.array([0, 5], np.int32)].get(mode="clip"), x),
        (lambda x: x.at[idx].set(1.0), x),
        (lambda x: x.at[idx].add(1.0), x),
        (lambda x: x.at[idx].add(1), xi),
        (lambda x: x.at[idx].multiply(2.0), x),
        (lambda x: x.at[idx].subtract(2.0), x),
        (lambda x: x.at[idx].subtract(3), xi),
        (lambda x: x.at[idx].min(0.0), x),
        (lambda x: x.at[idx].max(5.0), x),
        (lambda x: x.at[np.array([1, 7], np.int32)].set(9.0, mode="drop"), x),
    ]
    out: dict[str, list[tuple[tuple, dict]]] = {}
    errors = []
    for fn, arg in calls:
        try:
            closed = ftrans.make_jaxpr(fn)(arg)
        except Exception as e:  # an API still being written: reported by the coverage test
            errors.append(f"{type(e).__name__}: {e}")
            continue
        env = {id(v): c for v, c in zip(closed.jaxpr.constvars, closed.consts)}
        env[id(closed.jaxpr.invars[0])] = Array._make(arg)

        def read(a):
            if isinstance(a, ir.Literal):
                return Array._new(np.asarray(a.val, a.aval.dtype), a.aval.weak_type)
            return env[id(a)]

        for eqn in closed.eqns:
            ins = tuple(read(a) for a in eqn.invars)
            if eqn.primitive.name in ("gather",) or eqn.primitive.name.startswith("scatter"):
                out.setdefault(eqn.primitive.name, []).append((ins, dict(eqn.params)))
            res = eqn.primitive.bind(*ins, **eqn.params)
            for v, r in zip(eqn.outvars, res if eqn.primitive.multiple_results else [res]):
                env[id(v)] = r
    return out, errors


_CAPTURED = _captured_samples()
SAMPLES = _all_samples()


def _holds_jaxpr(value) -> bool:
    if isinstance(value, (ir.Jaxpr, ir.ClosedJaxpr)):
        return True
    if isinstance(value, (tuple, list)):
        return any(_holds_jaxpr(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_jaxpr(v) for v in value.values())
    return False


# Primitives bound with a jaxpr somewhere in their params: they run a body, so the
# partial-evaluation tables apply to them whatever their flag says.
HIGHER_ORDER = {name for name, samples in SAMPLES.items() if name in P.registry
                and any(_holds_jaxpr(params) for _, params in samples)}


def test_every_registered_primitive_has_samples():
    missing = sorted(n for n in _ftrans_primitives() if n not in SAMPLES and n not in NO_SAMPLE_ALLOWLIST)
    assert not missing, (
        "registered primitives with no sample operands in tests/test_registry.py "
        f"(add them to _hand_samples, or to NO_SAMPLE_ALLOWLIST with a reason): {missing}"
        + ("\nAPI calls that failed while capturing samples: " + "; ".join(_CAPTURED[1]) if _CAPTURED[1] else "")
    )


def _operand(x):
    return x if isinstance(x, Array) else Array._make(x)


def _aval(x) -> ShapedArray:
    if isinstance(x, Array):
        return x.aval
    return ShapedArray(x.shape, x.dtype, False)


def _check_one(prim, operands, params) -> bool:
    """Run one sample; False when abstract eval rejects it (the dtype is not accepted)."""
    avals = [_aval(x) for x in operands]
    try:
        expected = P.abstract_eval_rules[prim](*avals, **params)
    except (TypeError, ValueError):
        return False
    raw = [x._value if isinstance(x, Array) else x for x in operands]
    before = [np.array(r, copy=True) for r in raw]
    out = prim.impl(*raw, **params)
    outs = list(out) if prim.multiple_results else [out]
    exps = list(expected) if prim.multiple_results else [expected]
    where = f"{prim.name}{params} on {', '.join(a.str_short() for a in avals)}"
    assert len(outs) == len(exps), where
    for o, e in zip(outs, exps):
        assert isinstance(o, (np.ndarray, np.generic)), f"{where}: impl returned {type(o).__name__}"
        assert o.dtype == e.dtype, f"{where}: impl gives {o.dtype}, abstract eval {e.dtype}"
        assert np.shape(o) == e.shape, f"{where}: impl gives shape {np.shape(o)}, abstract eval {e.shape}"
    for r, bef in zip(raw, before):
        np.testing.assert_array_equal(r, bef, err_msg=f"{where}: impl mutated an input")
    # The eager path (bind with no transform) gives the same type, weak type included.
    eager = prim.bind(*[_operand(x) for x in operands], **params)
    eagers = list(eager) if prim.multiple_results else [eager]
    for o, e in zip(eagers, exps):
        assert isinstance(o, Array)
        assert (o.shape, o.dtype, o.weak_type) == (e.shape, e.dtype, e.weak_type), (
            f"{where}: eager gives {o.aval!r}, abstract eval {e!r}"
        )
    return True


REGISTERED_SAMPLES = sorted(n for n in SAMPLES if n in P.registry)
# Samples that need more of the machine than one GPU (tests/backend_util.py).
_MACHINE_MARKS = {"pmap": pytest.mark.needs_devices(2),
                  "ffi_call": pytest.mark.cpu_only("the sample calls LAPACK's geqrf FFI target by name"),
                  "buffer_callback": pytest.mark.cpu_only("the sample's callback reads its buffers with NumPy "
                                                          "(jaxlib's Buffer.__array__ is the CPU's only)")}
_SAMPLE_PARAMS = [pytest.param(n, marks=_MACHINE_MARKS.get(n, ())) for n in REGISTERED_SAMPLES]


@pytest.mark.parametrize("name", _SAMPLE_PARAMS)
def test_impl_matches_abstract_eval(name):
    prim = P.registry[name]
    accepted = [_check_one(prim, ops, params) for ops, params in SAMPLES[name]]
    assert any(accepted), f"abstract eval of {name} rejected every sample operand"


@pytest.mark.parametrize("name", _SAMPLE_PARAMS)
def test_staged_primitive_typechecks(name):
    """Binding under make_jaxpr records an equation that typechecks and re-evaluates."""
    prim = P.registry[name]
    for ops, params in SAMPLES[name]:
        avals = [_aval(x) for x in ops]
        try:
            P.abstract_eval_rules[prim](*avals, **params)
        except (TypeError, ValueError):
            continue
        args = [_operand(x) for x in ops]
        closed = ftrans.make_jaxpr(lambda *xs: prim.bind(*xs, **params))(*args)
        ftrans.core.ir.typecheck(closed)
        assert [e.primitive for e in closed.eqns][-1] is prim
        outs = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *args)
        for o, a in zip(outs, closed.out_avals):
            assert (o.shape, o.dtype) == (a.shape, a.dtype)
        return
    pytest.fail(f"no sample of {name} is accepted by its abstract eval")


def test_rank0_operand_is_the_only_elementwise_broadcast():
    add = P.registry["add"]
    with pytest.raises(TypeError, match="same shape"):
        P.abstract_eval_rules[add](ShapedArray((2, 3), f32), ShapedArray((3,), f32))
    with pytest.raises(TypeError, match="same dtype"):
        P.abstract_eval_rules[add](ShapedArray((3,), f32), ShapedArray((3,), i32))
    out = P.abstract_eval_rules[add](ShapedArray((2, 3), f32), ShapedArray((), f32, True))
    assert out == ShapedArray((2, 3), f32, False)
