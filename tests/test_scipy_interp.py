"""ftrans.scipy.ndimage / interpolate / spatial.transform / cluster.vq against their jax twins:
values, dtypes, gradients, jit/vmap and errors."""

import jax
import jax.numpy as jnp
import jax.scipy.cluster.vq as jvq
import jax.scipy.interpolate as jinterp
import jax.scipy.ndimage as jndimage
import jax.scipy.spatial.transform as jtransform
import numpy as np
import pytest

import ftrans
import ftrans.scipy.cluster.vq as fvq
import ftrans.scipy.interpolate as finterp
import ftrans.scipy.ndimage as fndimage
import ftrans.scipy.spatial.transform as ftransform
from ftrans.errors import FtransTypeError, FtransValueError


def _close(a, b, tol=1e-5):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def _tree_close(a, b, tol=1e-5):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        _close(x, y, tol)


# ------------------------------------------------------------------ ndimage.map_coordinates
@pytest.mark.parametrize("mode", ["constant", "nearest", "wrap", "mirror", "reflect"])
@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_map_coordinates(mode, order, dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((5, 7)) * 10).astype(dtype)
    coords = [rng.uniform(-7, 12, (3, 4)).astype(np.float32), rng.uniform(-9, 15, (3, 4)).astype(np.float32)]
    _close(fndimage.map_coordinates(x, coords, order, mode=mode, cval=2.5),
           jndimage.map_coordinates(x, coords, order, mode=mode, cval=2.5))


def test_map_coordinates_integer_coords_and_grad():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    ci = [np.array([0, 2, 5]), np.array([1, -1, 3])]
    _close(fndimage.map_coordinates(x, ci, 0), jax.jit(lambda x, c: jndimage.map_coordinates(x, c, 0))(x, ci))
    c = [np.array([0.5, 1.25, 1.9], np.float32), np.array([1.5, 2.5, 0.1], np.float32)]
    fg = ftrans.grad(lambda im, c0: ftrans.numpy.sum(fndimage.map_coordinates(im, [c0, c[1]], 1) ** 2),
                     argnums=(0, 1))(x, c[0])
    jg = jax.jit(jax.grad(lambda im, c0: jnp.sum(jndimage.map_coordinates(im, [c0, c[1]], 1) ** 2),
                          argnums=(0, 1)))(x, c[0])
    _tree_close(fg, jg)
    fv = ftrans.vmap(lambda cc: fndimage.map_coordinates(x, [cc, c[1]], 1))(np.stack([c[0], c[0] + 0.3]))
    jv = jax.jit(jax.vmap(lambda cc: jndimage.map_coordinates(x, [cc, c[1]], 1)))(np.stack([c[0], c[0] + 0.3]))
    _close(fv, jv)


def test_map_coordinates_errors():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(FtransValueError, match="length input.ndim"):
        fndimage.map_coordinates(x, [np.zeros(2)], 1)
    with pytest.raises(NotImplementedError, match="mode"):
        fndimage.map_coordinates(x, [np.zeros(2), np.zeros(2)], 1, mode="grid-wrap")
    with pytest.raises(NotImplementedError, match="order"):
        fndimage.map_coordinates(x, [np.zeros(2), np.zeros(2)], 3)


# ------------------------------------------------------------------ interpolate.RegularGridInterpolator
@pytest.mark.parametrize("method", ["linear", "nearest"])
@pytest.mark.parametrize("fill", [np.nan, None, -1.0])
def test_regular_grid_interpolator(method, fill):
    rng = np.random.default_rng(1)
    pts = (np.linspace(-1, 2, 5), np.sort(rng.uniform(0, 4, 6)))
    vals = rng.standard_normal((5, 6, 2))
    xi = np.stack([rng.uniform(-1.5, 2.5, 30), rng.uniform(-0.5, 4.5, 30)], axis=-1)
    f = finterp.RegularGridInterpolator(pts, vals, method=method, fill_value=fill)
    j = jinterp.RegularGridInterpolator(pts, vals, method=method, fill_value=fill)
    _close(f(xi), j(xi))
    _close(f(xi, method="nearest"), j(xi, method="nearest"))
    _close(f((xi[:, 0], xi[:, 1])), j((xi[:, 0], xi[:, 1])))
    # a pytree: it crosses jit, and its values can be differentiated
    _close(ftrans.jit(lambda r, q: r(q))(f, xi), j(xi))
    fg = ftrans.grad(lambda v: ftrans.numpy.nansum(finterp.RegularGridInterpolator(pts, v, method)(xi)))(vals)
    jg = jax.grad(lambda v: jnp.nansum(jinterp.RegularGridInterpolator(pts, v, method)(xi)))(vals)
    _close(fg, jg)


def test_regular_grid_interpolator_errors():
    pts, vals = (np.arange(3.0),), np.arange(3.0)
    with pytest.raises(FtransValueError, match="not defined"):
        finterp.RegularGridInterpolator(pts, vals, method="cubic")
    with pytest.raises(NotImplementedError):
        finterp.RegularGridInterpolator(pts, vals, bounds_error=True)
    with pytest.raises(FtransValueError, match="point arrays"):
        finterp.RegularGridInterpolator((pts[0], pts[0]), vals)
    with pytest.raises(FtransValueError, match="compatible"):
        finterp.RegularGridInterpolator(pts, vals, fill_value=1j)
    with pytest.raises(FtransValueError, match="dimension"):
        finterp.RegularGridInterpolator(pts, vals)(np.zeros((4, 2)))


# ------------------------------------------------------------------ spatial.transform
def _quats(n=None, seed=2):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((4,) if n is None else (n, 4)).astype(np.float32)


@pytest.mark.parametrize("n", [None, 3])
def test_rotation_conversions(n):
    q = _quats(n)
    q2 = _quats(n, seed=4)
    vec = np.random.default_rng(3).standard_normal((3,) if n is None else (n, 3)).astype(np.float32)
    euler = [(seq, deg) for seq in ("xyz", "ZXY", "zxz", "XYX", "yzx") for deg in (False, True)]
    flags = [(canonical, sf) for canonical in (False, True) for sf in (False, True)]

    def jax_side(q, q2, vec):  # every jax reference from one compiled program
        jr = jtransform.Rotation.from_quat(q)
        m, v, mrp = jr.as_matrix(), jr.as_rotvec(), jr.as_mrp()
        return dict(
            quat=jr.quat, matrix=m, mrp=mrp, rotvec=[jr.as_rotvec(deg) for deg in (False, True)],
            magnitude=jr.magnitude(), inv=jr.inv().quat, as_quat=[jr.as_quat(c, sf) for c, sf in flags],
            euler=[jr.as_euler(seq, deg) for seq, deg in euler], v=v,
            from_matrix=jtransform.Rotation.from_matrix(m).quat, from_rotvec=jtransform.Rotation.from_rotvec(v).quat,
            from_rotvec_deg=jtransform.Rotation.from_rotvec(v, True).quat,
            from_mrp=jtransform.Rotation.from_mrp(mrp).quat, apply=[jr.apply(vec, inv) for inv in (False, True)],
            product=(jr * jtransform.Rotation.from_quat(q2)).quat)

    want = jax.jit(jax_side)(q, q2, vec)
    fr = ftransform.Rotation.from_quat(q)
    _close(fr.quat, want["quat"])
    _close(fr.as_matrix(), want["matrix"])
    _close(fr.as_mrp(), want["mrp"])
    for deg in (False, True):
        _close(fr.as_rotvec(deg), want["rotvec"][deg], 1e-4)
    _close(fr.magnitude(), want["magnitude"])
    _close(fr.inv().quat, want["inv"])
    for (canonical, sf), w in zip(flags, want["as_quat"]):
        _close(fr.as_quat(canonical, sf), w)
    for (seq, deg), w in zip(euler, want["euler"]):
        _close(fr.as_euler(seq, deg), w, 1e-4)
    m, v = want["matrix"], np.asarray(want["v"])
    _close(ftransform.Rotation.from_matrix(np.asarray(m)).quat, want["from_matrix"])
    _close(ftransform.Rotation.from_rotvec(v).quat, want["from_rotvec"])
    _close(ftransform.Rotation.from_rotvec(v, degrees=True).quat, want["from_rotvec_deg"])
    mrp = np.asarray(want["mrp"])
    _close(ftransform.Rotation.from_mrp(mrp).quat, want["from_mrp"])
    for inverse in (False, True):
        _close(fr.apply(vec, inverse), want["apply"][inverse])
    _close((fr * ftransform.Rotation.from_quat(q2)).quat, want["product"])
    assert fr.single == jax.eval_shape(jtransform.Rotation.from_quat, q).single


@pytest.mark.parametrize("seq", ["x", "ZY", "xyz", "XYZ", "zxz"])
@pytest.mark.parametrize("degrees", [False, True])
def test_rotation_from_euler(seq, degrees):
    a = np.random.default_rng(5).uniform(-3, 3, (2, len(seq))).astype(np.float32)
    _close(ftransform.Rotation.from_euler(seq, a, degrees).quat, jtransform.Rotation.from_euler(seq, a, degrees).quat)
    _close(ftransform.Rotation.from_euler(seq, a[0], degrees).quat,
           jtransform.Rotation.from_euler(seq, a[0], degrees).quat)
    _close(ftransform.Rotation.from_euler("z", 90, degrees).quat, jtransform.Rotation.from_euler("z", 90, degrees).quat)


def test_rotation_gimbal_lock_and_stack_ops():
    for seq in ("xyz", "XYZ", "zxz"):
        a = np.array([[0.3, 0.0, 0.2], [0.1, np.pi / 2, -0.4], [0.5, np.pi, 0.1]], np.float32)
        q = np.asarray(jax.jit(lambda a: jtransform.Rotation.from_euler(seq, a).quat)(a))
        # compiled on both sides: at a gimbal lock the branch hangs on the last bit of XLA's atan2
        _close(ftrans.jit(lambda x: ftransform.Rotation(x).as_euler(seq))(q),
               jax.jit(lambda x: jtransform.Rotation(x).as_euler(seq))(q), 1e-4)
    q = _quats(4)
    w = np.array([1.0, 2.0, 0.5, 1.5], np.float32)

    def jax_side(q, w):  # every jax reference from one compiled program
        jr = jtransform.Rotation.from_quat(q)
        assert len(jr) == 4
        return (jr[1:3].quat, jtransform.Rotation.concatenate([jr, jr[0:1]]).quat, jr.mean(w).as_matrix(),
                jtransform.Rotation.identity().quat)

    sliced, concatenated, jm, identity = jax.jit(jax_side)(q, w)
    fr = ftransform.Rotation.from_quat(q)
    assert len(fr) == 4
    _close(fr[1:3].quat, sliced)
    _close(ftransform.Rotation.concatenate([fr, fr[0:1]]).quat, concatenated)
    fm = fr.mean(w).as_matrix()
    _close(fm, jm, 1e-4)
    _close(ftransform.Rotation.identity().quat, identity)
    assert ftransform.Rotation.identity(3).quat.shape == (3, 4)
    with pytest.raises(FtransTypeError, match="not subscriptable"):
        ftransform.Rotation.from_quat(q[0])[0]
    with pytest.raises(FtransTypeError, match="no len"):
        len(ftransform.Rotation.from_quat(q[0]))
    with pytest.raises(FtransValueError, match="consecutive"):
        ftransform.Rotation.from_euler("xxy", np.zeros(3))
    with pytest.raises(FtransValueError, match="Expected axes"):
        ftransform.Rotation.from_euler("xYz", np.zeros(3))
    with pytest.raises(FtransValueError, match="Expected 3 axes"):
        fr.as_euler("xy")
    with pytest.raises(FtransValueError, match="weights"):
        fr.mean(np.ones(3))


@pytest.mark.xla_optimized  # (the jitted rotation's rounding, pinned where LLVM optimises)
def test_rotation_grad_jit_vmap():
    q = _quats(3)
    f = lambda x: ftrans.numpy.sum(ftransform.Rotation.from_quat(x).as_euler("xyz") ** 2)  # noqa: E731
    j = lambda x: jnp.sum(jtransform.Rotation.from_quat(x).as_euler("xyz") ** 2)  # noqa: E731
    _close(ftrans.grad(f)(q), jax.jit(jax.grad(j))(q), 1e-4)  # jax's side jitted: one compile
    _close(ftrans.jit(f)(q), jax.jit(j)(q), 1e-4)
    fv = ftrans.vmap(lambda x: ftransform.Rotation.from_quat(x).as_rotvec())(q)
    jv = jax.jit(jax.vmap(lambda x: jtransform.Rotation.from_quat(x).as_rotvec()))(q)
    _close(fv, jv)
    out = ftrans.jit(lambda x: ftransform.Rotation.from_quat(x))(q)
    assert isinstance(out, ftransform.Rotation)
    t = np.array([0.3, 1.6], np.float32)
    fs = ftrans.grad(lambda x: ftransform.Slerp.init(np.arange(3.0), ftransform.Rotation.from_quat(x))(t)
                     .as_rotvec().sum())(q)
    js = jax.jit(jax.grad(lambda x: jtransform.Slerp.init(np.arange(3.0), jtransform.Rotation.from_quat(x))(t)
                          .as_rotvec().sum()))(q)
    _close(fs, js, 1e-4)
    fm = ftrans.grad(lambda x: ftransform.Rotation.from_quat(x).mean().as_matrix()[0, 0])(q)
    jm = jax.jit(jax.grad(lambda x: jtransform.Rotation.from_quat(x).mean().as_matrix()[0, 0]))(q)
    _close(fm, jm, 1e-4)


@pytest.mark.parametrize("times", [0.0, 0.5, np.array([0.0, 0.25, 1.0, 1.7, 2.0])])
def test_slerp(times):
    q = _quats(3)
    key_t = np.array([0.0, 1.0, 2.0], np.float32)
    fs = ftransform.Slerp.init(key_t, ftransform.Rotation.from_quat(q))

    box = {}

    def jax_side(key_t, q):  # every jax reference from one compiled program (`single`, a bool, through the trace)
        js = jtransform.Slerp.init(key_t, jtransform.Rotation.from_quat(q))
        box["single"] = js(times).single
        return js, js(times).as_rotvec()

    js, rotvec = jax.jit(jax_side)(key_t, q)
    single = box["single"]
    _tree_close(fs, js)
    _close(fs(times).as_rotvec(), rotvec, 1e-4)
    assert fs(times).single == single
    with pytest.raises(FtransTypeError, match="Rotation"):
        ftransform.Slerp.init(key_t, q)
    with pytest.raises(FtransValueError, match="at least 2"):
        ftransform.Slerp.init(key_t[:1], ftransform.Rotation.from_quat(q[:1]))
    with pytest.raises(FtransValueError, match="timestamps"):
        ftransform.Slerp.init(key_t[:2], ftransform.Rotation.from_quat(q))


# ------------------------------------------------------------------ cluster.vq
@pytest.mark.parametrize("shapes", [((6, 3), (4, 3)), ((7,), (3,))])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_vq(shapes, dtype):
    rng = np.random.default_rng(6)
    obs = (rng.standard_normal(shapes[0]) * 5).astype(dtype)
    book = (rng.standard_normal(shapes[1]) * 5).astype(dtype)
    _tree_close(fvq.vq(obs, book), jax.jit(jvq.vq)(obs, book))
    fg = ftrans.grad(lambda o: fvq.vq(o, book.astype(np.float32))[1].sum())(obs.astype(np.float32))
    jg = jax.jit(jax.grad(lambda o: jvq.vq(o, book.astype(np.float32))[1].sum()))(obs.astype(np.float32))
    _close(fg, jg)


def test_vq_errors():
    with pytest.raises(FtransValueError, match="same rank"):
        fvq.vq(np.zeros((3, 2)), np.zeros(3))
    with pytest.raises(FtransValueError, match="ndim"):
        fvq.vq(np.zeros((3, 2, 1)), np.zeros((3, 2, 1)))
    with pytest.raises(FtransTypeError):
        fvq.vq([[1.0]], np.zeros((1, 1)))
