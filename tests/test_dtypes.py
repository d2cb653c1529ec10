"""Type promotion, weak types and dtype utilities, differential against jax.

Every pair of supported dtypes, and every dtype against every weakly typed
Python scalar, is compared with jax 0.10.2 (x64 off); a few cases are repeated
with 64-bit mode on in both libraries.
"""

from __future__ import annotations

import contextlib
import itertools
import warnings

import jax
import jax.numpy as jjnp
import ml_dtypes
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.core import dtypes as D

SUPPORTED = [np.dtype(d) for d in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    ml_dtypes.bfloat16, np.float16, np.float32, np.float64, np.complex64, np.complex128,
)]
IDS = [d.name for d in SUPPORTED]
# JAX's narrow storage types: supported, but outside implicit promotion (tested on their own below).
NARROW = [np.dtype(getattr(ml_dtypes, n)) for n in (
    "int2", "int4", "uint2", "uint4", "float4_e2m1fn", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz",
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu")]
SCALARS = [True, 1, 1.0, 1j]


@pytest.fixture(autouse=True)
def _quiet_jax_truncation():
    # jax warns when asked for a 64-bit array with x64 off; the truncation is what we test.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


@contextlib.contextmanager
def x64(on: bool = True):
    """64-bit mode in both ftrans and jax, restored afterwards."""
    ours, theirs = ftrans.config.enable_x64, jax.config.jax_enable_x64
    ftrans.config.update("enable_x64", on)
    jax.config.update("jax_enable_x64", on)
    try:
        yield
    finally:
        ftrans.config.update("enable_x64", ours)
        jax.config.update("jax_enable_x64", theirs)


def test_supported_dtypes_are_the_documented_set():
    assert set(SUPPORTED) | set(NARROW) == set(D.SUPPORTED)
    for name in ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
                 "uint8", "uint32", "bool_", "complex64"):
        assert np.dtype(getattr(jnp, name)) == np.dtype(getattr(jjnp, name)), name
    for d in NARROW:
        assert np.dtype(getattr(jnp, d.name)) == np.dtype(getattr(jjnp, d.name)) == d


@pytest.mark.parametrize("a", NARROW, ids=[d.name for d in NARROW])
def test_narrow_dtypes_promote_only_with_themselves_and_weak_scalars(a):
    for b in SUPPORTED + NARROW:
        try:
            theirs = jjnp.promote_types(a, b)
        except ValueError:  # jax.dtypes.TypePromotionError
            with pytest.raises(ValueError, match="promotion"):
                jnp.promote_types(a, b)
            continue
        assert jnp.promote_types(a, b) == theirs, (a, b)
    for scalar in (1, 1.0):
        try:
            theirs = jjnp.result_type(a, scalar)
        except ValueError:
            continue
        assert jnp.result_type(a, scalar) == theirs, (a, scalar)
    assert D.issubdtype(a, np.integer) == jjnp.issubdtype(a, np.integer)
    assert D.issubdtype(a, np.floating) == jjnp.issubdtype(a, np.floating)
    assert D.issubdtype(a, np.signedinteger) == jjnp.issubdtype(a, np.signedinteger)


def test_promote_types_all_pairs():
    """jnp.promote_types is the lattice join itself: JAX does not narrow it to 32 bits."""
    bad = []
    # Python's scalar types are weak in JAX's lattice: promote_types(complex, float32) is complex64.
    for a, b in itertools.product([*SUPPORTED, bool, int, float, complex], repeat=2):
        ours, theirs = jnp.promote_types(a, b), jjnp.promote_types(a, b)
        if ours != theirs:
            bad.append(f"promote_types({a}, {b}) = {ours}, jax gives {theirs}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("a", SUPPORTED, ids=IDS)
def test_result_type_all_pairs(a):
    bad = []
    for b in SUPPORTED:
        ours, theirs = jnp.result_type(a, b), jjnp.result_type(a, b)
        if ours != theirs:
            bad.append(f"result_type({a}, {b}) = {ours}, jax gives {theirs}")
        # On arrays, the promoted dtype is what arithmetic produces (both strong).
        got = jnp.zeros((), a) + jnp.zeros((), b) if a != np.bool_ or b != np.bool_ else None
        if got is not None and (got.dtype, got.weak_type) != (theirs, False):
            bad.append(f"zeros({a}) + zeros({b}) gives {got.dtype} weak={got.weak_type}, jax {theirs}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("a", SUPPORTED, ids=IDS)
def test_weak_python_scalars(a):
    bad = []
    for s in SCALARS:
        theirs = (jjnp.zeros((), a) + s).aval
        ours_rt = jnp.result_type(a, s)
        if ours_rt != jjnp.result_type(a, s):
            bad.append(f"result_type({a}, {s!r}) = {ours_rt}, jax {jjnp.result_type(a, s)}")
        ours = jnp.zeros((), a) + s
        if (ours.dtype, ours.weak_type) != (theirs.dtype, theirs.weak_type):
            bad.append(f"zeros({a}) + {s!r}: {ours.dtype} weak={ours.weak_type}, "
                       f"jax {theirs.dtype} weak={theirs.weak_type}")
        rev = s + jnp.zeros((), a)
        if (rev.dtype, rev.weak_type) != (theirs.dtype, theirs.weak_type):
            bad.append(f"{s!r} + zeros({a}): {rev.dtype} weak={rev.weak_type}")
        # The lattice itself, with the weak flag as JAX reports it.
        dt, weak = D.promote(((D.canonicalize(a), False), (D.python_scalar_dtype(s), D.is_weak_scalar(s))))
        if (dt, weak) != (theirs.dtype, theirs.weak_type):
            bad.append(f"promote({a}, weak {type(s).__name__}) = {dt} weak={weak}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("a", SCALARS, ids=[type(s).__name__ for s in SCALARS])
def test_scalar_with_scalar(a):
    for b in SCALARS:
        assert jnp.result_type(a, b) == jjnp.result_type(a, b), (a, b)
        theirs = (jjnp.asarray(a) + jjnp.asarray(b)).aval
        dt, weak = D.promote(((D.python_scalar_dtype(a), D.is_weak_scalar(a)),
                              (D.python_scalar_dtype(b), D.is_weak_scalar(b))))
        assert (dt, weak) == (theirs.dtype, theirs.weak_type), (a, b)


@pytest.mark.parametrize("d", [np.int8, np.uint8, ml_dtypes.bfloat16, np.float16, np.int32])
def test_weak_array_meets_strong_array(d):
    """A weakly typed array (from a Python scalar) yields to the strong operand's dtype."""
    for s in (2, 2.0):
        weak_ours = jnp.multiply(s, 1)  # a weak array
        weak_theirs = jjnp.multiply(s, 1)
        assert weak_ours.weak_type == weak_theirs.aval.weak_type
        ours = weak_ours + jnp.ones(3, d)
        theirs = weak_theirs + jjnp.ones(3, d)
        assert (ours.dtype, ours.weak_type) == (theirs.dtype, theirs.aval.weak_type), (d, s)


def test_result_type_single_and_python_types():
    for arg in (1, 1.0, 1j, True, np.int8, "float16", np.float64, int, float, complex, bool):
        assert jnp.result_type(arg) == jjnp.result_type(arg), arg
    assert jnp.result_type(np.ones(2, np.float64)) == jjnp.result_type(np.ones(2, np.float64))
    assert jnp.result_type(np.int8, 1, 2.0) == jjnp.result_type(np.int8, 1, 2.0)
    assert jnp.result_type(np.uint8, np.int8, np.float16) == jjnp.result_type(np.uint8, np.int8, np.float16)


# ----------------------------------------------------------------------------
# 64-bit mode


def test_x64_promotion():
    with x64():
        pairs = [(np.int64, np.int8), (np.uint64, np.int64), (np.float64, np.float32),
                 (np.int32, np.float64), (np.uint32, np.int32), (np.complex64, np.float64),
                 (np.int64, ml_dtypes.bfloat16)]
        for a, b in pairs:
            assert jnp.result_type(a, b) == jjnp.result_type(a, b), (a, b)
            assert jnp.promote_types(a, b) == jjnp.promote_types(a, b), (a, b)
        for d in (np.int32, np.int64, np.float32, np.uint8):
            for s in SCALARS:
                theirs = (jjnp.zeros((), d) + s).aval
                ours = jnp.zeros((), d) + s
                assert (ours.dtype, ours.weak_type) == (theirs.dtype, theirs.weak_type), (d, s)
        for s in (1, 1.0, 1j):
            assert jnp.result_type(s) == jjnp.result_type(s)
            assert jnp.asarray(s).dtype == jjnp.asarray(s).dtype


def test_x64_toggle_is_restored():
    before = ftrans.config.enable_x64
    with x64():
        assert D.default_float() == np.float64 and D.default_int() == np.int64
        assert D.canonicalize(np.float64) == np.float64
    assert ftrans.config.enable_x64 == before
    assert D.default_float() == np.float32 and D.canonicalize(np.int64) == np.int32


# ----------------------------------------------------------------------------
# finfo, iinfo, issubdtype


@pytest.mark.parametrize("d", [ml_dtypes.bfloat16, np.float16, np.float32, np.float64],
                         ids=["bfloat16", "float16", "float32", "float64"])
def test_finfo(d):
    ours, theirs = jnp.finfo(d), jjnp.finfo(d)
    for attr in ("bits", "eps", "max", "min", "tiny", "resolution", "nmant", "nexp"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert ours.dtype == theirs.dtype


def test_finfo_of_complex_and_arrays():
    assert jnp.finfo(np.complex64).eps == jjnp.finfo(np.complex64).eps
    assert jnp.finfo(jnp.float32).bits == 32


@pytest.mark.parametrize("d", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                               np.uint64, np.bool_])
def test_iinfo(d):
    if d is np.bool_:
        with pytest.raises((TypeError, ValueError)):
            jnp.iinfo(d)
        return
    ours, theirs = jnp.iinfo(d), jjnp.iinfo(d)
    assert (ours.min, ours.max, ours.bits) == (theirs.min, theirs.max, theirs.bits)


CATEGORIES = [np.generic, np.number, np.inexact, np.floating, np.complexfloating, np.integer,
              np.signedinteger, np.unsignedinteger, np.bool_]


@pytest.mark.parametrize("a", SUPPORTED, ids=IDS)
def test_issubdtype(a):
    for cat in CATEGORIES + SUPPORTED:
        assert jnp.issubdtype(a, cat) == jjnp.issubdtype(a, cat), (a, cat)


def test_issubdtype_bfloat16():
    assert jnp.issubdtype(jnp.bfloat16, jnp.floating)
    assert jnp.issubdtype(jnp.bfloat16, jnp.inexact)
    assert not jnp.issubdtype(jnp.bfloat16, jnp.integer)
    assert not jnp.issubdtype(jnp.bfloat16, np.float16)
    assert jnp.issubdtype(jnp.bfloat16, jnp.bfloat16)


def test_canonicalize_rejects_unsupported_dtypes():
    bad_dtypes = [np.str_, np.object_, np.dtype("datetime64[s]")]
    if hasattr(np, "float128"):
        bad_dtypes.append(np.float128)
    for bad in bad_dtypes:
        with pytest.raises(TypeError, match="not supported"):
            D.canonicalize(bad)


NAMED_ONLY = ["int1", "uint1", "float6_e2m3fn", "float6_e3m2fn"]


@pytest.mark.parametrize("name", NAMED_ONLY)
def test_named_only_dtypes_answer_queries_as_jax_and_refuse_arrays(name):
    import jax.numpy as jjnp

    ours, theirs = getattr(jnp, name), getattr(jjnp, name)
    assert np.dtype(ours) == np.dtype(theirs) and ours == theirs
    for kind in ("integer", "signedinteger", "unsignedinteger", "floating", "inexact", "number", "generic"):
        assert jnp.issubdtype(ours, getattr(jnp, kind)) == jjnp.issubdtype(theirs, getattr(jjnp, kind)), kind
    if name.startswith("float"):
        a, b = jnp.finfo(ours), jjnp.finfo(theirs)
        assert (float(a.max), float(a.eps), a.bits) == (float(b.max), float(b.eps), b.bits)
    else:
        a, b = jnp.iinfo(ours), jjnp.iinfo(theirs)
        assert (a.min, a.max) == (b.min, b.max)
    assert np.dtype(ours) not in D.SUPPORTED
    with pytest.raises(ftrans.errors.FtransTypeError, match="name only"):
        jnp.zeros(3, ours)
