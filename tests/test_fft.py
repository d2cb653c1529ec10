"""lax.fft and jnp.fft against JAX: values over drawn shapes/kinds/lengths/axes/norms, gradients, vmap, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as fnp
from ftrans import lax
from ftrans.core.ir import typecheck
from ftrans.test_util import check_grads

_ONE_AXIS = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
_MANY_AXES = ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"]
_REAL_INPUT = {"rfft", "ihfft", "rfft2", "rfftn"}


def _input(name, shape, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    if name in _REAL_INPUT:
        return x
    return (x + 1j * rng.standard_normal(shape)).astype(np.complex64 if dtype == np.float32 else np.complex128)


@st.composite
def _one_axis_case(draw):
    name = draw(st.sampled_from(_ONE_AXIS))
    nd = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(nd))
    axis = draw(st.integers(-nd, nd - 1))
    n = draw(st.one_of(st.none(), st.integers(1, 8)))
    if name in ("irfft", "hfft") and n is None and shape[axis] < 2:
        n = 2
    norm = draw(st.sampled_from([None, "backward", "ortho", "forward"]))
    return name, shape, dict(n=n, axis=axis, norm=norm), draw(st.integers(0, 2**16))


@st.composite
def _many_axes_case(draw):
    name = draw(st.sampled_from(_MANY_AXES))
    nd = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(nd))
    if name.endswith("2"):
        axes = tuple(draw(st.permutations(range(nd)))[:2])
    else:
        k = draw(st.integers(1, nd))
        axes = tuple(draw(st.permutations(range(nd)))[:k])
    s = draw(st.one_of(st.none(), st.tuples(*[st.integers(2, 6) for _ in axes])))
    if name.startswith("irfft") and s is None and shape[axes[-1]] < 2:
        s = tuple(shape[a] for a in axes[:-1]) + (2,)
    norm = draw(st.sampled_from([None, "ortho", "forward"]))
    return name, shape, dict(s=s, axes=axes, norm=norm), draw(st.integers(0, 2**16))


def _compare(name, x, kw):
    expected = jax.jit(lambda a: getattr(jnp.fft, name)(a, **kw))(x)
    got = getattr(fnp.fft, name)(x, **kw)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-4, atol=1e-4)
    staged = ftrans.jit(lambda a: getattr(fnp.fft, name)(a, **kw))(x)
    np.testing.assert_allclose(np.asarray(staged), np.asarray(expected), rtol=1e-4, atol=1e-4)
    return expected


@given(_one_axis_case())
def test_one_axis_transforms_match_jax(case):
    name, shape, kw, seed = case
    _compare(name, _input(name, shape, seed), kw)


@given(_many_axes_case())
def test_multi_axis_transforms_match_jax(case):
    name, shape, kw, seed = case
    _compare(name, _input(name, shape, seed), kw)


def test_more_than_three_axes_and_int_input():
    x = _input("fftn", (2, 3, 2, 3, 2), 0)
    for name in ("fftn", "ifftn", "irfftn"):
        _compare(name, x, {})
    _compare("rfftn", _input("rfftn", (2, 3, 2, 3, 2), 1), {})
    _compare("fft", np.arange(6), {})
    _compare("rfft", np.arange(6), {})


@given(st.sampled_from(["FFT", "IFFT", "RFFT", "IRFFT"]), st.integers(1, 3), st.integers(0, 2**16))
def test_lax_fft_grads_and_vmap_match_jax(kind, k, seed):
    rng = np.random.default_rng(seed)
    lens = tuple(int(v) for v in rng.integers(1, 6, size=k))
    batch = (2,)
    if kind == "IRFFT":
        shape = batch + lens[:-1] + (lens[-1] // 2 + 1,)
    else:
        shape = batch + lens
    x = rng.standard_normal(shape).astype(np.float32)
    if kind != "RFFT":
        x = (x + 1j * rng.standard_normal(shape)).astype(np.complex64)

    def theirs(a):
        return jax.lax.fft(a, getattr(jax.lax.FftType, kind), lens)

    def ours(a):
        return lax.fft(a, kind, lens)

    out_shape = jax.eval_shape(theirs, x).shape
    w = rng.standard_normal(out_shape).astype(np.float32)
    xs = np.stack([x, 2 * x], axis=1)
    # the values, both gradients and the vmapped values from one jax program
    expected, gj_abs, gj_real, vj = jax.jit(lambda a, b: (
        theirs(a), jax.grad(lambda u: jnp.sum(jnp.abs(theirs(u)) * w))(a),
        jax.grad(lambda u: jnp.sum(jnp.real(theirs(u)) * w))(a), jax.vmap(theirs, in_axes=1)(b)))(x, xs)
    np.testing.assert_allclose(np.asarray(ours(x)), np.asarray(expected), rtol=1e-4, atol=1e-4)
    typecheck(ftrans.make_jaxpr(ours)(x))
    gf = ftrans.grad(lambda a: fnp.sum(fnp.abs(ours(a)) * w))(x)
    np.testing.assert_allclose(np.asarray(gf), np.asarray(gj_abs), rtol=2e-3, atol=2e-3)
    gf = ftrans.jit(ftrans.grad(lambda a: fnp.sum(fnp.real(ours(a)) * w)))(x)
    np.testing.assert_allclose(np.asarray(gf), np.asarray(gj_real), rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(np.asarray(ftrans.vmap(ours, in_axes=1)(xs)), np.asarray(vj), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind,shape,lens", [
    ("FFT", (2, 4), (4,)), ("IFFT", (3, 4), (3, 4)), ("RFFT", (2, 6), (6,)), ("RFFT", (3, 5), (3, 5)),
    ("IRFFT", (2, 4), (6,)), ("IRFFT", (2, 4), (7,)),
])
def test_lax_fft_check_grads(kind, shape, lens):
    before = ftrans.config.enable_x64
    ftrans.config.update("enable_x64", True)
    try:
        x = _input("rfft" if kind == "RFFT" else "fft", shape, 3, np.float64)
        check_grads(lambda a: lax.fft(a, kind, lens), (x,), order=2)
    finally:
        ftrans.config.update("enable_x64", before)


@pytest.mark.parametrize("n", [0, 1, 6, 7])
@pytest.mark.parametrize("d", [1.0, 0.25])
def test_freqs_and_shifts(n, d):
    x = np.arange(max(n, 1) * 3).reshape(max(n, 1), 3)
    shifts = [(name, axes) for name in ("fftshift", "ifftshift")
              for axes in (None, 0, (1,), (0, 1), ())]  # axes=() shifts nothing
    # all the jax results of the case from one jax program
    freqs, shifted = jax.jit(lambda u: ([getattr(jnp.fft, name)(n, d) for name in ("fftfreq", "rfftfreq")],
                                        [getattr(jnp.fft, name)(u, axes) for name, axes in shifts]))(x)
    for name, e in zip(("fftfreq", "rfftfreq"), freqs):
        g = getattr(fnp.fft, name)(n, d)
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-6)
    for (name, axes), e in zip(shifts, shifted):
        np.testing.assert_array_equal(np.asarray(getattr(fnp.fft, name)(x, axes)), np.asarray(e))


def test_fft_errors_name_the_axis_and_the_line():
    with pytest.raises(ValueError) as info:
        fnp.fft.fft(np.ones(4), axis=3)
    msg = str(info.value)
    assert "axis 3 is out of bounds for an array of rank 1 (shape (4,))" in msg and "test_fft.py" in msg
    with pytest.raises(ValueError, match="axis -3 is out of bounds"):
        fnp.fft.fftn(np.ones((2, 2)), axes=(0, -3))
    with pytest.raises(ValueError, match="one axis"):
        fnp.fft.fft(np.ones((2, 2)), axis=(0, 1))
    with pytest.raises(ValueError, match="exactly 2 axes"):
        fnp.fft.fft2(np.ones((2, 2, 2)), axes=(0, 1, 2))
    with pytest.raises(ValueError, match="repeated axes"):
        fnp.fft.fftn(np.ones((2, 2)), axes=(0, 0))
    with pytest.raises(ValueError, match="positive"):
        fnp.fft.fft(np.ones(3), n=0)
    with pytest.raises(ValueError, match="invalid norm"):
        fnp.fft.fft(np.ones(3), norm="sideways")
    # Shapes that do not fit fft_lengths are ValueErrors, as in JAX, and name the input shape.
    with pytest.raises(ValueError, match=r"input shape \(2, 3\): the trailing axes"):
        lax.fft(np.ones((2, 3), np.complex64), "FFT", (4,))
    with pytest.raises(ValueError, match="rank >= 3"):
        lax.fft(np.ones((14, 15), np.complex64), "FFT", (4, 5, 6))
    with pytest.raises(ValueError, match="n must be an integer"):
        fnp.fft.fftfreq([0, 1, 2])
    with pytest.raises(ValueError, match="d must be a single value"):
        fnp.fft.rfftfreq(10, d=[0, 1, 2])
    with pytest.raises(TypeError, match="RFFT needs a real operand"):
        lax.fft(np.ones(4, np.complex64), "RFFT", (4,))


@pytest.mark.parametrize("fft_type", ["FFT", "IFFT", "RFFT", "IRFFT"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_lax_fft_with_no_lengths_is_the_identity(fft_type, dtype):
    """``fft_lengths=()`` (JAX accepts it): the operand converted to the transform's dtype, also under vmap."""
    import jax
    from jax import lax as jlax

    from ftrans import lax as flax

    if fft_type == "RFFT" and dtype == np.complex64:
        with pytest.raises(TypeError):
            flax.fft(np.ones((2, 3), dtype), fft_type, ())
        return
    x = (np.arange(6).reshape(2, 3) + (1j if dtype == np.complex64 else 0)).astype(dtype)
    want, want_v = jax.jit(lambda u: (jlax.fft(u, fft_type, ()), jax.vmap(lambda a: jlax.fft(a, fft_type, ()))(u)))(x)
    got = flax.fft(x, fft_type, ())
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    vg = ftrans.vmap(lambda a: flax.fft(a, fft_type, ()))(x)
    np.testing.assert_array_equal(np.asarray(vg), np.asarray(want_v))
