"""User-defined extended dtypes (``dtypes.ExtendedDType`` with a rules object), differential against JAX.

An array of an extended dtype is its representation array (the element's representation axes trailing);
``lax.convert_element_type`` converts to and from the representation dtype only (JAX's ``to_edtype`` /
``from_edtype``).  Each case runs the same program on ftrans and on jax (with jax's own ``ExtendedDType``)
and compares results; the error cases compare exception classes.
"""

from __future__ import annotations

import dataclasses
import itertools
import types

import jax
import numpy as np
import pytest
from jax._src import dtypes as jdtypes

import ftrans
import ftrans.numpy as jnp
from ftrans import dtypes, lax


def _rules(shape, dtype, **more):
    return types.SimpleNamespace(
        physical_element_aval=lambda _: types.SimpleNamespace(shape=shape, dtype=dtype), allow_conversion=True,
        **more)


def _pair(name, shape, dtype, **more):
    """The same extended dtype built on ftrans's and on jax's ``ExtendedDType``."""
    class scalar(dtypes.extended):
        pass

    class jscalar(jdtypes.extended):
        pass

    @dataclasses.dataclass(frozen=True)
    class FDType(dtypes.ExtendedDType):
        type = scalar
        _rules = _rules(shape, dtype, **more)

        @property
        def name(self):
            return name

    @dataclasses.dataclass(frozen=True)
    class JDType(jdtypes.ExtendedDType):
        type = jscalar
        _rules = _rules(shape, dtype, **more)

        @property
        def name(self):
            return name

    return FDType(), JDType(), scalar


@pytest.mark.parametrize("prefix,suffix", list(itertools.product([(), (2,), (3, 4)], repeat=2)))
def test_round_trip_shapes_match_jax(prefix, suffix):
    fd, jd, _ = _pair("dt", suffix, "int32")
    seen = {}

    def make(lib_lax, d, key):
        def f(x):
            y = lib_lax.convert_element_type(x, d)
            seen[key] = (tuple(y.shape), y.dtype == d)
            return lib_lax.convert_element_type(y, "int32") + 1
        return f

    x = np.arange(int(np.prod(prefix + suffix)), dtype=np.int32).reshape(prefix + suffix)
    got = ftrans.jit(make(lax, fd, "ft"))(x)
    want = jax.jit(make(jax.lax, jd, "jax"))(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert seen["ft"] == seen["jax"] == (prefix, True)


def test_conversion_errors_match_jax_classes():
    fd, jd, _ = _pair("dt", (3,), "int32")
    fd2, jd2, _ = _pair("dt2", (3,), "int32")
    cases = {
        "ext to other ext": lambda L, d, d2, x: L.convert_element_type(L.convert_element_type(x, d), d2),
        "wrong representation dtype": lambda L, d, d2, x: L.convert_element_type(x.astype("float32"), d),
        "wrong trailing shape": lambda L, d, d2, x: L.convert_element_type(x[:, :2], d),
        "too few axes": lambda L, d, d2, x: L.convert_element_type(x[:, 0], d),
        "ext to a non-representation dtype": lambda L, d, d2, x: L.convert_element_type(
            L.convert_element_type(x, d), "float32"),
    }
    x = np.zeros((5, 3), np.int32)
    for what, body in cases.items():
        classes = []
        for lib_jit, L, d, d2 in ((ftrans.jit, lax, fd, fd2), (jax.jit, jax.lax, jd, jd2)):
            try:
                lib_jit(lambda x, body=body, L=L, d=d, d2=d2: body(L, d, d2, x))(x)
            except Exception as e:  # noqa: BLE001
                classes.append(ValueError if isinstance(e, ValueError) else type(e))
            else:
                classes.append(None)
        assert classes[0] is classes[1] is ValueError, (what, classes)


def test_vmap_and_batch_dim():
    fd, jd, _ = _pair("dt", (3,), "int32")
    x = np.arange(30, dtype=np.int32).reshape(5, 2, 3)

    def f(L, d):
        return lambda v: L.convert_element_type(L.convert_element_type(v, d), "int32") * 2

    got = ftrans.vmap(ftrans.jit(f(lax, fd)), in_axes=1)(x)
    want = jax.vmap(jax.jit(f(jax.lax, jd)), in_axes=1)(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_grad_through_extended_dtype_with_tangent_dtype():
    fd, jd, _ = _pair("ft", (), "float32", tangent_dtype=lambda d: np.dtype("float32"))

    def g(L, lnp, d):
        return lambda x: lnp.sum(L.convert_element_type(L.convert_element_type(x, d), "float32") * x)

    x = np.arange(4.0, dtype=np.float32)
    got = ftrans.jit(ftrans.grad(g(lax, jnp, fd)))(x)
    want = jax.jit(jax.grad(g(jax.lax, jax.numpy, jd)))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want))


def test_custom_tangent_accumulates_with_rules_add():
    """Two uses of a value whose cotangents are of an extended dtype: they add with the rules' ``add``
    (a max here), as in JAX's ``test_custom_tangent_dtype``."""
    def build(lib, L, D):
        class scale(D.extended):
            pass

        class Rules:
            allow_conversion = True

            @staticmethod
            def physical_element_aval(dt):
                return types.SimpleNamespace(shape=(), dtype=dt.float_dtype)

            @staticmethod
            def add(dt, x, y):
                return L.convert_element_type(L.max(L.convert_element_type(x, dt.float_dtype),
                                                    L.convert_element_type(y, dt.float_dtype)), dt)

            @staticmethod
            def zero(dt):
                return L.convert_element_type(np.array(-np.inf, dt.float_dtype), dt)

        @dataclasses.dataclass(frozen=True)
        class ScaleTy(D.ExtendedDType):
            float_dtype: np.dtype
            name: str = "scale"
            _rules: type = Rules
            type: type = scale

        st = ScaleTy(np.dtype("float32"))

        @lib.custom_vjp
        def g(x):
            return x
        g.defvjp(lambda x: (x, None), lambda _, ct: (L.convert_element_type(ct * 3.0, st),))

        @lib.custom_vjp
        def conv(x):
            return x
        conv.defvjp(lambda x: (x, None), lambda _, ct: (L.convert_element_type(ct, ct.dtype.float_dtype),))

        return lib.jit(lib.grad(lambda x: (lambda y: g(y) * 2.0 + g(y))(conv(x))))

    x = np.float32(1.5)
    got = build(ftrans, lax, dtypes)(x)
    want = build(jax, jax.lax, jdtypes)(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want))


def test_primal_tangent_dtype_matches_jax():
    fdt = dtypes.primal_tangent_dtype(np.int8, dtypes.bfloat16)
    jdt = jdtypes.primal_tangent_dtype(np.int8, jdtypes.bfloat16)
    assert repr(fdt) == repr(jdt) == "PrimalTangentDType{i8/bf16}"
    assert fdt == dtypes.primal_tangent_dtype(np.int8, dtypes.bfloat16)

    def h(lib, lnp, dt):
        x = np.array([1, 2, 3], np.int8)
        g = np.array([0.5, 1.0, 2.0], dtypes.bfloat16)

        @lib.custom_gradient
        def f(x):
            return lnp.int8(x).astype(g.dtype) * 2 + 1, lambda ct: (2 * ct,)

        def run():
            out, bwd = lib.vjp(f, lnp.asarray(x).astype(dt))
            return out, bwd(g)[0]
        return lib.jit(run)()

    (fo, fb), (jo, jb) = h(ftrans, jnp, fdt), h(jax, jax.numpy, jdt)
    assert fo.dtype == jo.dtype and fb.dtype == jb.dtype
    np.testing.assert_allclose(np.asarray(fo, np.float32), np.asarray(jo, np.float32))
    np.testing.assert_allclose(np.asarray(fb, np.float32), np.asarray(jb, np.float32))


def test_issubdtype_and_eager_conversion():
    fd, _, scalar = _pair("dt", (), "float32")
    assert dtypes.issubdtype(fd, scalar) and dtypes.issubdtype(fd, dtypes.extended)
    assert not dtypes.issubdtype(fd, np.number) and not dtypes.issubdtype(np.float32, scalar)
    with pytest.raises(NotImplementedError, match="only inside jit"):
        lax.convert_element_type(jnp.zeros(3), fd)
    # an extended-dtype result of a jitted function is its representation data, at rest
    y = ftrans.jit(lambda x: lax.convert_element_type(x, fd))(jnp.arange(3.0))
    assert y.dtype == fd and y.shape == (3,)
    out = ftrans.jit(lambda y: lax.convert_element_type(y, "float32"))(y)
    np.testing.assert_array_equal(np.asarray(out), np.arange(3.0, dtype=np.float32))
