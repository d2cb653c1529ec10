"""Convolutions against JAX: lax.conv_general_dilated and its wrappers, jnp.convolve/correlate,
scipy.signal, stax conv layers; values, gradients of both operands, vmap and errors."""

import jax
import jax.numpy as jnp
import jax.scipy.signal as jsignal
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from jax.example_libraries import stax as jstax

import ftrans
import ftrans.numpy as fnp
import ftrans.scipy.signal as fsignal
from ftrans import lax
from ftrans.core.ir import typecheck
from ftrans.example_libraries import stax as fstax
from ftrans.test_util import check_grads
from tests.backend_util import cpu_only, host_oracle

_LAYOUTS = {
    1: [("NCH", "OIH", "NCH"), ("NHC", "HIO", "NHC"), ("HNC", "IHO", "CHN")],
    2: [("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC"), ("NWHC", "OHWI", "CNWH")],
}


def _place(canon_shape, spec, pair):
    """The shape whose axes, named by the layout string ``spec``, have the canonical sizes."""
    spatial = [c for c in spec if c not in pair]
    order = {pair[0]: 0, pair[1]: 1}
    return tuple(canon_shape[order[c]] if c in order else canon_shape[2 + spatial.index(c)] for c in spec)


@st.composite
def _conv_case(draw):
    nsp = draw(st.integers(1, 2))
    lspec, rspec, ospec = draw(st.sampled_from(_LAYOUTS[nsp]))
    group_kind = draw(st.sampled_from(["none", "feature", "batch"]))
    g = 1 if group_kind == "none" else draw(st.integers(2, 3))
    fg, bg = (g, 1) if group_kind == "feature" else (1, g) if group_kind == "batch" else (1, 1)
    n = draw(st.integers(1, 2)) * bg
    i = draw(st.integers(1, 3))
    o = draw(st.integers(1, 2)) * fg * bg
    spatial = [draw(st.integers(1, 6)) for _ in range(nsp)]
    kernel = [draw(st.integers(1, 3)) for _ in range(nsp)]
    strides = tuple(draw(st.integers(1, 2)) for _ in range(nsp))
    ld = tuple(draw(st.integers(1, 2)) for _ in range(nsp))
    rd = tuple(draw(st.integers(1, 2)) for _ in range(nsp))
    if all(d == 1 for d in ld) and draw(st.booleans()):
        padding = draw(st.sampled_from(["SAME", "VALID", "SAME_LOWER"]))
    else:
        padding = tuple((draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(nsp))
    # Spatial sizes follow rhs_spec's order of the spatial letters.
    sp_letters = [c for c in rspec if c not in "OI"]
    lhs_canon = (n, i * fg, *spatial)
    rhs_canon = (o, i, *kernel)
    lhs_shape = tuple(lhs_canon[0] if c == "N" else lhs_canon[1] if c == "C" else spatial[sp_letters.index(c)]
                      for c in lspec)
    rhs_shape = tuple(rhs_canon[0] if c == "O" else rhs_canon[1] if c == "I" else kernel[sp_letters.index(c)]
                      for c in rspec)
    seed = draw(st.integers(0, 2**16))
    return dict(lhs_shape=lhs_shape, rhs_shape=rhs_shape, dn=(lspec, rspec, ospec), strides=strides,
                padding=padding, ld=ld, rd=rd, fg=fg, bg=bg, seed=seed)


def _fns(c):
    kw = dict(window_strides=c["strides"], padding=c["padding"], lhs_dilation=c["ld"], rhs_dilation=c["rd"],
              dimension_numbers=c["dn"], feature_group_count=c["fg"], batch_group_count=c["bg"])

    def ours(a, b):
        return lax.conv_general_dilated(a, b, **kw)

    def theirs(a, b):
        return jax.lax.conv_general_dilated(a, b, precision="highest", **kw)

    return ours, theirs


def _operands(c):
    rng = np.random.default_rng(c["seed"])
    x = rng.standard_normal(c["lhs_shape"]).astype(np.float32)
    w = rng.standard_normal(c["rhs_shape"]).astype(np.float32)
    return x, w


def _expected(c, x, w):
    _, theirs = _fns(c)
    try:
        out = theirs(x, w)
    except (TypeError, ValueError):
        assume(False)
    assume(out.size > 0)
    return out


_TOL = dict(rtol=2e-4, atol=2e-4)


@given(_conv_case())
def test_conv_values_match_jax(c):
    x, w = _operands(c)
    expected = _expected(c, x, w)
    ours, _ = _fns(c)
    got = ours(x, w)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), **_TOL)
    np.testing.assert_allclose(np.asarray(ftrans.jit(ours)(x, w)), np.asarray(expected), **_TOL)
    closed = ftrans.make_jaxpr(ours)(x, w)
    typecheck(closed)


@given(_conv_case())
def test_conv_grads_match_jax(c):
    x, w = _operands(c)
    expected = _expected(c, x, w)
    ours, theirs = _fns(c)
    ct = np.random.default_rng(c["seed"] + 1).standard_normal(expected.shape).astype(np.float32)
    want = jax.jit(jax.grad(lambda a, b: jnp.sum(theirs(a, b) * ct), argnums=(0, 1)))(x, w)
    got = ftrans.grad(lambda a, b: fnp.sum(ours(a, b) * ct), argnums=(0, 1))(x, w)
    for g, e in zip(got, want):
        assert g.shape == e.shape
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-3, atol=1e-3)
    got_jit = ftrans.jit(ftrans.grad(lambda a, b: fnp.sum(ours(a, b) * ct), argnums=(0, 1)))(x, w)
    for g, e in zip(got_jit, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-3, atol=1e-3)


@given(_conv_case(), st.sampled_from([(0, None), (None, 0), (0, 0), (1, 2)]))
def test_conv_vmap_matches_jax(c, in_axes):
    x, w = _operands(c)
    _expected(c, x, w)
    ours, theirs = _fns(c)
    xs = np.stack([x, 0.5 * x - 1.0], axis=in_axes[0]) if in_axes[0] is not None else x
    ws = np.stack([w, 2.0 * w + 0.25], axis=in_axes[1]) if in_axes[1] is not None else w
    expected = jax.jit(jax.vmap(theirs, in_axes=in_axes))(xs, ws)
    got = ftrans.vmap(ours, in_axes=in_axes)(xs, ws)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), **_TOL)


@pytest.mark.parametrize("kw", [
    dict(window_strides=(2, 1), padding=((1, 0), (0, 1)), lhs_dilation=(1, 2), rhs_dilation=(2, 1)),
    dict(window_strides=(1, 1), padding="SAME", feature_group_count=2),
    dict(window_strides=(1, 2), padding="VALID", batch_group_count=2),
])
def test_conv_check_grads(kw):
    rng = np.random.default_rng(0)
    fg, bg = kw.get("feature_group_count", 1), kw.get("batch_group_count", 1)
    x = rng.standard_normal((2, 2 * fg, 5, 4))
    w = rng.standard_normal((2 * fg * bg, 2, 2, 3))
    before = ftrans.config.enable_x64
    ftrans.config.update("enable_x64", True)
    try:
        check_grads(lambda a, b: lax.conv_general_dilated(a, b, **kw), (x, w), order=2)
    finally:
        ftrans.config.update("enable_x64", before)


@pytest.mark.parametrize("dtype, pet", [(np.int8, np.float32), (np.uint8, np.float32), (np.int16, np.float32),
                                        (np.int8, np.int32)])
@cpu_only("XLA's GPU compiler has integer convolutions only as cuDNN's int8 idioms (it rejects jax's program, "
          "or crashes)")
def test_integer_operands_with_a_wider_preferred_type_like_jax(dtype, pet):
    """JAX's one mixed combination: integral operands, floating-point result (conv and dot_general)."""
    rng = np.random.default_rng(2)
    x = rng.integers(-3, 4, (2, 3, 6, 7)).astype(dtype)
    w = rng.integers(-3, 4, (2, 3, 2, 3)).astype(dtype)
    want = jax.lax.conv(x, w, (1, 1), "VALID", preferred_element_type=pet)
    def conv(a, b):
        return lax.conv(a, b, (1, 1), "VALID", preferred_element_type=pet)

    for f in (conv, ftrans.jit(conv)):
        got = f(x, w)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    m = x.reshape(6, -1)[:, :5]
    dn = (((1,), (1,)), ((), ()))
    want = jax.lax.dot_general(m, m, dn, preferred_element_type=pet)
    for f in (lambda a: lax.dot_general(a, a, dn, preferred_element_type=pet),
              ftrans.jit(lambda a: lax.dot_general(a, a, dn, preferred_element_type=pet))):
        got = f(m)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(TypeError, match="narrower"):  # as in JAX: never narrower than the operands
        lax.conv(x.astype(np.int32), w.astype(np.int32), (1, 1), "VALID", preferred_element_type=np.float16)
    with pytest.raises(TypeError, match="preferred_element_type"):  # float operands, integral result: as JAX
        lax.conv(x.astype(np.float32), w.astype(np.float32), (1, 1), "VALID", preferred_element_type=np.int32)


def test_operands_of_different_ranks_raise_value_error_like_jax():
    lhs, rhs = np.ones((1, 1, 1), np.float32), np.ones((1, 1, 1, 1), np.float32)
    kw = dict(window_strides=(1,), padding=((0, 0),), dimension_numbers=((0, 1, 2), (0, 1, 2), (0, 1, 2)))
    jdn = jax.lax.ConvDimensionNumbers(lhs_spec=(0, 1, 2), rhs_spec=(0, 1, 2), out_spec=(0, 1, 2))
    with pytest.raises(ValueError, match="same number of dimensions"):  # jax's own test of this (issue 4316)
        jax.lax.conv_general_dilated(lhs, rhs, **{**kw, "dimension_numbers": jdn})
    fdn = lax.ConvDimensionNumbers(lhs_spec=(0, 1, 2), rhs_spec=(0, 1, 2), out_spec=(0, 1, 2))
    with pytest.raises(ValueError, match=r"same number of dimensions.*f32\[1,1,1\], f32\[1,1,1,1\]"):
        lax.conv_general_dilated(lhs, rhs, **{**kw, "dimension_numbers": fdn})
    with pytest.raises(TypeError, match="ndim to be equal"):  # spelled as a tuple: TypeError in both
        jax.lax.conv_general_dilated(lhs, rhs, **kw)
    with pytest.raises(TypeError, match="ndim to be equal"):
        lax.conv_general_dilated(lhs, rhs, **kw)


def test_conv_dtypes_precision_and_preferred_element_type():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 5, 5)).astype(jnp.bfloat16)
    w = rng.standard_normal((3, 2, 2, 2)).astype(jnp.bfloat16)
    for pet in (None, np.float32):
        e = jax.lax.conv(x, w, (1, 1), "SAME", preferred_element_type=pet)
        g = lax.conv(x, w, (1, 1), "SAME", preferred_element_type=pet)
        assert g.dtype == e.dtype
        np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(e, np.float32), rtol=3e-2, atol=3e-2)
    xi, wi = np.arange(24, dtype=np.int32).reshape(1, 2, 3, 4), np.ones((2, 2, 2, 2), np.int32)
    with host_oracle():  # (ftrans's eager conv runs on the host; XLA's GPU compiler has no int32 convolution)
        want = jax.lax.conv(xi, wi, (1, 1), "VALID")
    np.testing.assert_array_equal(lax.conv(xi, wi, (1, 1), "VALID"), want)
    xc = (rng.standard_normal((1, 2, 4)) + 1j * rng.standard_normal((1, 2, 4))).astype(np.complex64)
    wc = (rng.standard_normal((2, 2, 2)) - 1j).astype(np.complex64)
    e = jax.lax.conv(xc, wc, (1,), "SAME")
    np.testing.assert_allclose(np.asarray(lax.conv(xc, wc, (1,), "SAME")), np.asarray(e), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(ftrans.jit(lambda a, b: lax.conv(a, b, (1,), "SAME"))(xc, wc)),
                               np.asarray(e), rtol=1e-4, atol=1e-4)
    for prec in ("highest", jax.lax.Precision.HIGH, ("default", "highest"), None):
        x32, w32 = x.astype(np.float32), w.astype(np.float32)
        np.testing.assert_allclose(np.asarray(lax.conv(x32, w32, (1, 1), "SAME", precision=prec)),
                                   np.asarray(jax.lax.conv(x32, w32, (1, 1), "SAME", precision="highest")),
                                   rtol=1e-4, atol=1e-4)
    dn = jax.lax.conv_dimension_numbers((1, 5, 5, 2), (2, 2, 2, 3), ("NHWC", "HWIO", "NHWC"))
    ours = lax.conv_dimension_numbers((1, 5, 5, 2), (2, 2, 2, 3), ("NHWC", "HWIO", "NHWC"))
    assert tuple(map(tuple, dn)) == tuple(map(tuple, ours))
    x4 = rng.standard_normal((1, 5, 5, 2)).astype(np.float32)
    w4 = rng.standard_normal((2, 2, 2, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(lax.conv_general_dilated(x4, w4, (1, 1), "SAME", dimension_numbers=dn)),
                               np.asarray(jax.lax.conv_general_dilated(x4, w4, (1, 1), "SAME", dimension_numbers=dn,
                                                                       precision="highest")), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("strides,padding,transpose_kernel,rd", [
    ((2, 2), "SAME", False, None), ((2, 1), "VALID", True, None), ((1, 2), ((1, 2), (0, 1)), False, (2, 1)),
])
def test_conv_transpose_and_wrappers(strides, padding, transpose_kernel, rd):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 4, 3)).astype(np.float32)
    w = rng.standard_normal((3, 2, 4, 3) if transpose_kernel else (3, 2, 3, 4)).astype(np.float32)
    e = jax.lax.conv_transpose(x, w, strides, padding, rhs_dilation=rd, transpose_kernel=transpose_kernel,
                               precision="highest")
    g = lax.conv_transpose(x, w, strides, padding, rhs_dilation=rd, transpose_kernel=transpose_kernel)
    assert g.shape == e.shape
    np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-4, atol=1e-4)
    xn = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    wn = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    e = jax.lax.conv_with_general_padding(xn, wn, (1, 2), ((1, 0), (2, 1)), (2, 1), (1, 2), precision="highest")
    g = lax.conv_with_general_padding(xn, wn, (1, 2), ((1, 0), (2, 1)), (2, 1), (1, 2))
    np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dn", [None, ("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "CNHW")])
def test_conv_general_dilated_patches(dn):
    rng = np.random.default_rng(3)
    shape = (2, 5, 6, 3) if dn and dn[0] == "NHWC" else (2, 3, 5, 6)
    x = rng.standard_normal(shape).astype(np.float32)
    e = jax.jit(lambda a: jax.lax.conv_general_dilated_patches(a, (2, 3), (1, 2), "SAME", dimension_numbers=dn))(x)
    g = lax.conv_general_dilated_patches(x, (2, 3), (1, 2), "SAME", dimension_numbers=dn)
    assert g.shape == e.shape
    np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-5, atol=1e-5)


def _error(fn, *args, **kw):
    with pytest.raises((TypeError, ValueError)) as info:
        fn(*args, **kw)
    return info


def test_conv_bad_operands_name_each_dimension():
    x = np.ones((2, 3, 5, 5), np.float32)
    info = _error(lax.conv, x, np.ones((4, 2, 3, 3), np.float32), (1, 1), "VALID")
    msg = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "lhs feature dimension (axis 1, size 3)" in msg and "rhs input-feature dimension (axis 1, size 2)" in msg
    assert "f32[2,3,5,5]" in msg and "test_convolution.py" in msg
    info = _error(lax.conv_general_dilated, x, np.ones((5, 1, 3, 3), np.float32), (1, 1), "VALID",
                  feature_group_count=3)
    assert "rhs output-feature dimension (axis 0, size 5)" in str(info.value)
    assert "multiple of feature_group_count 3" in str(info.value)
    info = _error(lax.conv_general_dilated, x, np.ones((4, 3, 3, 3), np.float32), (1, 1), "VALID",
                  batch_group_count=3)
    assert "lhs batch dimension (axis 0, size 2)" in str(info.value)
    info = _error(lax.conv_general_dilated, x, np.ones((4, 3, 3, 3), np.float32), (1, 1), ((-4, -4), (0, 0)))
    assert "negative padding (-4, -4)" in str(info.value) and "(axis 2, size 5)" in str(info.value)
    info = _error(lax.conv, x, np.ones((4, 3, 3), np.float32), (1, 1), "VALID")
    assert isinstance(info.value, TypeError) and "(2, 3, 5, 5)" in str(info.value)
    info = _error(lax.conv, x, np.ones((4, 3, 3, 3), np.float16), (1, 1), "VALID")
    assert isinstance(info.value, TypeError) and "same dtypes" in str(info.value)
    info = _error(lax.conv_general_dilated, x, np.ones((4, 3, 3, 3), np.float32), (1,), "VALID")
    assert "window_strides" in str(info.value)
    info = _error(lax.conv_general_dilated, x, np.ones((3, 3, 3, 4), np.float32), (1, 1), "VALID",
                  dimension_numbers=("NCHW", "HWIX", "NHWC"))
    assert "'O' and 'I'" in str(info.value)
    info = _error(lax.conv_general_dilated, x, np.ones((4, 3, 3, 3), np.float32), (1, 1), "SAME",
                  lhs_dilation=(2, 1))
    assert "lhs_dilation" in str(info.value)
    # Staged uses raise the same error from the abstract-eval rule.
    info = _error(ftrans.jit(lambda a, b: lax.conv(a, b, (1, 1), "VALID")), x, np.ones((4, 2, 3, 3), np.float32))
    assert "rhs input-feature dimension (axis 1, size 2)" in str(info.value)


def _jax_convolve_correlate(a, v, mode, with_grad):
    """jnp.convolve and jnp.correlate of ``a`` and ``v`` (and the gradient of the convolution's squared sum),
    as one compiled jax program."""
    def run(a, v):
        out = (jnp.convolve(a, v, mode=mode), jnp.correlate(a, v, mode=mode))
        if with_grad:
            out += (jax.grad(lambda a, v: jnp.convolve(a, v, mode=mode).sum() ** 2, argnums=(0, 1))(a, v),)
        return out
    return jax.jit(run)(a, v)


@given(st.integers(1, 7), st.integers(1, 7), st.sampled_from(["full", "same", "valid"]),
       st.sampled_from([np.float32, np.int32, np.complex64]), st.integers(0, 2**16))
def test_jnp_convolve_correlate(la, lv, mode, dtype, seed):
    rng = np.random.default_rng(seed)
    a = (3 * rng.standard_normal(la)).astype(dtype)
    v = (3 * rng.standard_normal(lv)).astype(dtype)
    if dtype == np.complex64:
        a, v = a + 1j * rng.standard_normal(la), v - 0.5j
    want = _jax_convolve_correlate(a, v, mode, dtype == np.float32)  # one jax program per case
    for name, e in zip(("convolve", "correlate"), want):
        g = getattr(fnp, name)(a, v, mode=mode)
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-4, atol=1e-4)
    if dtype == np.float32:
        ge = want[2]
        gg = ftrans.grad(lambda a, v: fnp.convolve(a, v, mode=mode).sum() ** 2, argnums=(0, 1))(a, v)
        for x, y in zip(gg, ge):
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-3, atol=1e-3)


@given(st.tuples(st.integers(1, 5), st.integers(1, 5)), st.tuples(st.integers(1, 5), st.integers(1, 5)),
       st.sampled_from(["full", "same", "valid"]), st.booleans(), st.integers(0, 2**16))
def test_scipy_signal(s1, s2, mode, cplx, seed):
    rng = np.random.default_rng(seed)
    a, v = rng.standard_normal(s1).astype(np.float32), rng.standard_normal(s2).astype(np.float32)
    if cplx:
        a, v = a + 1j * a[::-1], v * (1 - 2j)
    fits = all(x >= y for x, y in zip(s1, s2)) or all(x <= y for x, y in zip(s1, s2))
    names = ("convolve", "correlate", "convolve2d", "correlate2d")
    if fits:  # the four jax references as one compiled program
        want = jax.jit(lambda a, v: [getattr(jsignal, name)(a, v, mode=mode) for name in names])(a, v)
    for k, name in enumerate(names):
        if not fits:
            with pytest.raises(ValueError, match="every dimension"):
                getattr(fsignal, name)(a, v, mode=mode)
            continue
        e = want[k]
        g = getattr(fsignal, name)(a, v, mode=mode)
        assert g.shape == e.shape and g.dtype == e.dtype, name
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-4, atol=1e-4, err_msg=name)


def test_signal_errors():
    with pytest.raises(ValueError, match="mode must be one of"):
        fnp.convolve(np.ones(3), np.ones(2), mode="bogus")
    with pytest.raises(ValueError, match="1-dimensional"):
        fnp.correlate(np.ones((3, 2)), np.ones(2))
    with pytest.raises(ValueError, match="empty"):
        fnp.convolve(np.ones(3), np.ones(0))
    with pytest.raises(NotImplementedError, match="boundary"):
        fsignal.convolve2d(np.ones((3, 3)), np.ones((2, 2)), boundary="wrap")
    with pytest.raises(ValueError, match="same number of dimensions"):
        fsignal.convolve(np.ones((3, 3)), np.ones(2))


def _jit_init(init, key, shape):
    """A stax ``init_fun`` run as one compiled jax program (the output shape, plain ints, comes back through the
    trace)."""
    box = {}

    def params(key):
        box["shape"], p = init(key, shape)
        return p

    p = jax.jit(params)(key)
    return box["shape"], p


@pytest.mark.parametrize("name,args,shape", [
    ("Conv", (4, (3, 3)), (2, 8, 8, 3)),
    ("Conv", (4, (3, 2), (2, 1), "SAME"), (2, 8, 7, 3)),
    ("ConvTranspose", (4, (3, 3), (2, 2), "SAME"), (2, 5, 5, 3)),
    ("Conv1DTranspose", (4, (3,), (2,), "VALID"), (2, 5, 3)),
    ("GeneralConv", (("NCHW", "OIHW", "NCHW"), 4, (2, 2)), (2, 3, 6, 6)),
])
def test_stax_conv_layers_match_jax(name, args, shape):
    init_j, apply_j = getattr(jstax, name)(*args)
    init_f, apply_f = getattr(fstax, name)(*args)
    shape_j, params_j = _jit_init(init_j, jax.random.PRNGKey(0), shape)
    shape_f, params_f = init_f(ftrans.random.PRNGKey(0), shape)
    assert tuple(shape_f) == tuple(shape_j)
    for p, q in zip(params_f, params_j):
        np.testing.assert_allclose(np.asarray(p), np.asarray(q), rtol=1e-5, atol=1e-6)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out = apply_f(params_f, x)
    assert out.shape == tuple(shape_f)
    np.testing.assert_allclose(np.asarray(out), np.asarray(jax.jit(apply_j)(params_j, x)), rtol=1e-3, atol=1e-3)


def test_stax_conv_net_grads_match_jax():
    def net(lib):
        return lib.serial(lib.Conv(4, (3, 3), padding="SAME"), lib.Relu, lib.MaxPool((2, 2), (2, 2)),
                          lib.Conv(3, (2, 2)), lib.Relu, lib.AvgPool((2, 2)), lib.Flatten, lib.Dense(2))
    init_j, apply_j = net(jstax)
    init_f, apply_f = net(fstax)
    _, pj = _jit_init(init_j, jax.random.PRNGKey(1), (3, 8, 8, 2))
    _, pf = init_f(ftrans.random.PRNGKey(1), (3, 8, 8, 2))
    x = np.random.default_rng(1).standard_normal((3, 8, 8, 2)).astype(np.float32)
    gj = jax.jit(jax.grad(lambda p: jnp.sum(apply_j(p, x) ** 2)))(pj)
    gf = ftrans.jit(ftrans.grad(lambda p: fnp.sum(apply_f(p, x) ** 2)))(pf)
    for a, b in zip(jax.tree_util.tree_leaves(gf), jax.tree_util.tree_leaves(gj)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0)])
def test_conv_vmap_over_an_empty_axis(in_axes):
    x = np.ones((0, 2, 3, 5) if in_axes[0] == 0 else (2, 3, 5), np.float32)
    w = np.ones((0, 4, 3, 2) if in_axes[1] == 0 else (4, 3, 2), np.float32)
    expected = jax.eval_shape(jax.vmap(lambda a, b: jax.lax.conv_general_dilated(a, b, (1,), "VALID"),
                                       in_axes=in_axes), x, w)
    for fn in (ftrans.vmap, lambda f, **k: ftrans.jit(ftrans.vmap(f, **k))):
        got = fn(lambda a, b: lax.conv_general_dilated(a, b, (1,), "VALID"), in_axes=in_axes)(x, w)
        assert got.shape == expected.shape and got.dtype == expected.dtype


def test_precision_enum_matches_jax():
    for name in ("default", "high", "highest", "bfloat16", "tensorfloat32", "float32", "fastest"):
        assert lax.Precision(name).name == jax.lax.Precision(name).name
    x = np.random.default_rng(4).standard_normal((1, 2, 6)).astype(np.float32)
    w = np.random.default_rng(5).standard_normal((3, 2, 2)).astype(np.float32)
    for p in (lax.Precision.HIGHEST, (lax.Precision.DEFAULT, lax.Precision.HIGH)):
        got = ftrans.jit(lambda a, b, p=p: lax.conv(a, b, (1,), "VALID", precision=p))(x, w)
        np.testing.assert_allclose(np.asarray(got), np.asarray(jax.lax.conv(x, w, (1,), "VALID", precision="highest")),
                                   rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="precision must be"):
        lax.conv(x, w, (1,), "VALID", precision="sloppy")


_NHWC, _MIXED, _NWC = ("NHWC", "HWIO", "NHWC"), ("NCHW", "HWIO", "NHWC"), ("NWC", "WIO", "NCW")


# A covering set: every layout, every padding kind and both strides appear (each layout with two paddings).
@pytest.mark.parametrize("dn,pad,stride,seed", [
    (None, "SAME", 1, 0), (None, "explicit", 2, 1), (_NHWC, "VALID", 2, 2), (_NHWC, "SAME", 1, 3),
    (_MIXED, "explicit", 1, 4), (_MIXED, "VALID", 2, 5), (_NWC, "SAME", 2, 6), (_NWC, "explicit", 1, 7),
])
def test_conv_general_dilated_local_matches_jax(dn, pad, stride, seed):
    """An unshared convolution (a kernel per output position), eagerly, under jit and its gradient, against jax."""
    rng = np.random.default_rng(seed)
    nsp = 1 if dn is not None and len(dn[0]) == 3 else 2
    fs = (3, 2)[:nsp]
    lshape = {None: (2, 3, 7, 6), _NHWC: (2, 7, 6, 3), _MIXED: (2, 3, 7, 6), _NWC: (2, 7, 3)}[dn]
    padding = ((1, 0), (0, 2))[:nsp] if pad == "explicit" else pad
    strides = (stride,) * nsp
    x = rng.standard_normal(lshape).astype(np.float32)
    p = jax.eval_shape(lambda a: jax.lax.conv_general_dilated_patches(a, fs, strides, padding, dimension_numbers=dn),
                       x)
    _, rspec, ospec = jax.lax.conv_dimension_numbers(x.shape, (1, 1) + fs, dn)
    shape = [0] * len(lshape)
    shape[rspec[0]], shape[rspec[1]] = 4, p.shape[ospec[1]]
    for k, a in enumerate(rspec[2:]):
        shape[a] = p.shape[ospec[2 + k]]
    w = rng.standard_normal(shape).astype(np.float32)

    def f(mod):
        return lambda a, b: mod.conv_general_dilated_local(a, b, strides, padding, fs, dimension_numbers=dn,
                                                           precision="highest")

    # the value and the gradient from one compiled jax program
    want, gw = jax.jit(lambda a, b: (f(jax.lax)(a, b), jax.grad(lambda b: jnp.sum(f(jax.lax)(a, b) ** 2))(b)))(x, w)
    for got in (f(lax)(x, w), ftrans.jit(f(lax))(x, w)):
        assert got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(ftrans.grad(lambda b: fnp.sum(f(lax)(x, b) ** 2))(w)), np.asarray(gw),
                               rtol=1e-3, atol=1e-3)
