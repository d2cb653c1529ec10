"""ftrans.image against jax.image: resize with every method (antialiased or not, up and down),
scale_and_translate, dtypes, gradients with respect to the image, scale and translation, jit, and errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp
from ftrans import image as fimage
from ftrans.errors import FtransTypeError, FtransValueError
from tests.thorough import THOROUGH

_METHODS = ["nearest", "bilinear", "tricubic", "lanczos3", "lanczos5", "cubic-pytorch", "area"]
_ALIASES = ["nearest", "linear", "bilinear", "trilinear", "triangle", "cubic", "bicubic", "tricubic",
            "lanczos3", "lanczos5", "cubic-pytorch", "bicubic-pytorch", "area"]


# The jax oracle is jitted: eager jax compiles every operation of a resize separately.
_jax_resize = jax.jit(jax.image.resize, static_argnums=(1, 2), static_argnames=("antialias",))
_jax_scale_and_translate = jax.jit(jax.image.scale_and_translate, static_argnums=(1, 2, 5),
                                   static_argnames=("antialias",))


def _close(a, b, tol=2e-5):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


_SHAPES = [(2, 9, 4, 3), (2, 3, 11, 3), (1, 1, 2, 3)]
# Every method at every target shape, antialiased or not in turn (each method both ways, each shape both
# ways); the thorough run (tests/thorough.py) draws the whole product. The first two shapes take one path
# (an axis scaled up beside one scaled down: 5 -> 9, 7 -> 4 and 5 -> 3, 7 -> 11), so the quick run keeps the
# second of them (a method's other antialias setting) beside the third (axes down to one and two).
_RESIZE_CASES = [(m, aa, shape) for i, m in enumerate(_METHODS) for j, shape in enumerate(_SHAPES)
                 for aa in (True, False) if THOROUGH or (aa == bool((i + j) % 2) and j != 0)]


@pytest.mark.parametrize("method,antialias,shape", _RESIZE_CASES)
def test_resize_matches_jax(method, antialias, shape):
    x = np.random.default_rng(0).standard_normal((2, 5, 7, 3)).astype(np.float32)
    if shape[0] == 1:
        shape = (2, 1, 2, 3)
    _close(fimage.resize(x, shape, method, antialias=antialias), _jax_resize(x, shape, method, antialias=antialias))


# (float32, every method, is test_resize_matches_jax's: the thorough run only here)
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float16] + ([np.float32] if THOROUGH else []))
@pytest.mark.parametrize("method", ["nearest", "linear", "lanczos3"])
def test_resize_dtypes(dtype, method):
    x = (np.random.default_rng(1).uniform(0, 9, (6, 4))).astype(dtype)
    a, b = fimage.resize(x, (3, 9), method), _jax_resize(x, (3, 9), method)
    _close(a, b, tol=1e-2 if dtype == np.float16 else 2e-5)


def test_resize_enum_and_array_shape():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    for m in fimage.ResizeMethod:
        jm = jax.image.ResizeMethod[m.name]
        _close(fimage.resize(x, (5, 2), m), _jax_resize(x, (5, 2), jm))
    assert fimage.resize(x, fnp.array((10, 17)), "nearest").shape == (10, 17)
    for name in _ALIASES:
        assert fimage.ResizeMethod.from_string(name).name == jax.image.ResizeMethod.from_string(name).name


def test_resize_golden_pytorch_bicubic():
    x = np.arange(10, dtype=np.float32).reshape(2, 5) / 9.0
    _close(fimage.resize(x, (4, 10), "bicubic-pytorch", antialias=False),
           _jax_resize(x, (4, 10), "bicubic-pytorch", antialias=False))


@pytest.mark.parametrize("method", ["linear", "cubic", "lanczos5", "area"])
def test_resize_grad_and_jit(method):
    x = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    w = np.random.default_rng(3).standard_normal((7, 3)).astype(np.float32)
    f = lambda im: ftrans.numpy.sum(fimage.resize(im, (7, 3), method) * w)  # noqa: E731
    g = lambda im: jnp.sum(jax.image.resize(im, (7, 3), method) * w)  # noqa: E731
    _close(ftrans.grad(f)(x), jax.jit(jax.grad(g))(x))
    _close(ftrans.jit(f)(x), jax.jit(g)(x))


@pytest.mark.parametrize("method", ["linear", "cubic", "lanczos3", "area", "cubic-pytorch"])
@pytest.mark.parametrize("antialias", [True, False])
def test_scale_and_translate(method, antialias):
    x = np.random.default_rng(4).standard_normal((2, 6, 5)).astype(np.float32)
    scale = np.array([1.7, 0.6], np.float32)
    trans = np.array([-0.8, 1.3], np.float32)
    def loss(lib, im, s, t):
        mod = fimage if lib is ftrans else jax.image
        return lib.numpy.sum(mod.scale_and_translate(im, (2, 9, 4), (1, 2), s, t, method,
                                                      antialias=antialias) ** 2)

    # All three gradients from one program on each side (one compile, not three); jax's values and
    # gradients from one program too.
    argnums = (0,) if method == "cubic-pytorch" and not antialias else (0, 1, 2)
    want, jg = jax.jit(lambda *a: (jax.image.scale_and_translate(a[0], (2, 9, 4), (1, 2), a[1], a[2], method,
                                                                 antialias=antialias),
                                   jax.grad(lambda *b: loss(jax, *b), argnums=argnums)(*a)))(x, scale, trans)
    _close(fimage.scale_and_translate(x, (2, 9, 4), (1, 2), scale, trans, method, antialias=antialias), want)
    fg = ftrans.jit(ftrans.grad(lambda *a: loss(ftrans, *a), argnums=argnums))(x, scale, trans)
    for f, j in zip(fg, jg):
        _close(f, j, tol=1e-4)


def test_scale_and_translate_int_image_and_negative_axis():
    x = np.arange(20, dtype=np.int32).reshape(4, 5)
    a = fimage.scale_and_translate(x, (6, 5), (-2,), np.array([1.5]), np.array([0.0]), "linear")
    b = _jax_scale_and_translate(x, (6, 5), (-2,), np.array([1.5]), np.array([0.0]), "linear")
    _close(a, b)


def test_errors():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(FtransTypeError):
        fimage.resize(x, [10.5, 17], "bicubic")
    with pytest.raises(FtransValueError, match="Unknown resize method"):
        fimage.resize(x, (5, 5), "bogus")
    with pytest.raises(FtransValueError, match="shape must have length"):
        fimage.resize(x, (5, 5, 1), "linear")
    with pytest.raises(FtransValueError, match="Nearest neighbor"):
        fimage.scale_and_translate(x, (5, 5), (0, 1), np.ones(2), np.zeros(2), "nearest")
    with pytest.raises(FtransTypeError):
        fimage.resize([[1.0]], (2, 2), "linear")


def test_vmap_over_images_and_transforms():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    s = np.array([[1.5, 0.7], [0.5, 2.0], [1.0, 1.2]], np.float32)
    t = np.array([[0.1, -0.3], [0.0, 0.5], [1.0, 0.0]], np.float32)
    _close(ftrans.vmap(lambda im, a, b: fimage.scale_and_translate(im, (6, 3), (0, 1), a, b, "lanczos3"))(x, s, t),
           jax.jit(jax.vmap(lambda im, a, b: jax.image.scale_and_translate(im, (6, 3), (0, 1), a, b,
                                                                           "lanczos3")))(x, s, t))
    _close(ftrans.vmap(lambda im: fimage.resize(im, (6, 3), "nearest"))(x),
           jax.jit(jax.vmap(lambda im: jax.image.resize(im, (6, 3), "nearest")))(x))
