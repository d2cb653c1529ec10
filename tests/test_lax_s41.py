"""Conformance gaps found by JAX's lax/fft test files run with JAX's configuration (strict dtype promotion,
rank promotion "raise", ...) reaching ftrans, each checked against jax."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp

# ---------------------------------------------------------------- fft: eager equals jit equals JAX


@pytest.mark.parametrize("name,shape,dtype,axes", [
    ("rfft2", (16, 8, 4, 8), np.float32, (0, 1)),
    ("fft2", (6, 10, 4), np.complex64, (-2, -1)),
    ("ifftn", (5, 6, 7), np.complex64, None),
    ("irfft2", (8, 6, 5), np.complex64, (1, 2)),
])
def test_eager_fft_is_xlas_fft(name, shape, dtype, axes):
    rng = np.random.RandomState(0)
    x = rng.randn(*shape).astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        x = (x + 1j * rng.randn(*shape)).astype(dtype)
    kw = {} if axes is None else {"axes": axes}
    eager = np.asarray(getattr(fnp.fft, name)(x, **kw))
    jitted = np.asarray(ftrans.jit(lambda a: getattr(fnp.fft, name)(a, **kw))(x))
    want = np.asarray(getattr(jnp.fft, name)(x, **kw))
    np.testing.assert_array_equal(eager, jitted)
    np.testing.assert_array_equal(eager, want)
    assert eager.dtype == want.dtype


def test_fft_norm_large_integer_shape_does_not_overflow():
    # JAX's gh-18453: the norm of a transform over 3 * 900**3 points computed in int32 overflowed
    from ftrans.numpy.fft import _norm_factor
    n = 3 * 900 ** 3
    assert _norm_factor("fft", "ortho", [3, 900, 900, 900]) == pytest.approx(1 / np.sqrt(n), rel=1e-15)
    assert _norm_factor("ifft", "forward", [3, 900, 900, 900]) == n
