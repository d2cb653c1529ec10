"""``ftrans.nn`` against ``jax.nn``: values and gradients, eagerly, under ``jit`` and under ``vmap``.

Inputs are hypothesis-drawn float32 arrays of a few fixed shapes (each new
shape costs a compile on both sides), plus hand-picked extreme values where
the stable formulas matter: ``softplus``/``log_sigmoid`` of large inputs,
``log_softmax``/``softmax``/``logsumexp`` of huge or ``-inf`` entries,
derivatives at the kinks of ``relu``/``relu6``. Eager ftrans runs NumPy's
transcendental functions while jax runs XLA's, so values are compared with a
few ulps of tolerance; subnormals are excluded from drawn inputs because XLA
on CPU flushes them to zero.

The initializers are checked bit for bit against ``jax.nn.initializers`` for
the same key, once ``ftrans.random`` is available.
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ftrans
import ftrans.numpy as jnp
from ftrans import nn
from tests.backend_util import assert_same_samples, on_cpu

SHAPES = [(2, 3)]
RTOL, ATOL = 2e-5, 1e-6


def close(ours, theirs, rtol=RTOL, atol=ATOL):
    a, b = np.asarray(ours), np.asarray(theirs)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    np.testing.assert_allclose(a.astype(wide), b.astype(wide), rtol=rtol, atol=atol, equal_nan=True)


_ORACLES: dict = {}


def oracle(key, make):
    """A ``jax.jit``-ed reference function, built once per ``key``.

    jax's op-by-op dispatch compiles every primitive for every new shape
    (~0.5 s for a small gradient); one jitted program per signature is far cheaper.
    """
    fn = _ORACLES.get(key)
    if fn is None:
        fn = _ORACLES[key] = jax.jit(make())
    return fn


def value_and_grad_sum(g, **kw):
    """``x -> (g(x), grad(sum(g(x) * cos-weights)))``, for oracles."""
    def both(x):
        w = jjnp.cos(jjnp.arange(x.size, dtype=x.dtype)).reshape(x.shape)
        return g(x, **kw), jax.grad(lambda v: (g(v, **kw) * w).sum())(x)

    return both


def ours_value_and_grad_sum(f, x, **kw):
    w = np.cos(np.arange(x.size, dtype=x.dtype)).reshape(x.shape)
    return f(x, **kw), ftrans.grad(lambda v: (f(v, **kw) * w).sum())(x)


def floats(lo=-30.0, hi=30.0):
    return st.floats(lo, hi, width=32, allow_subnormal=False)


def arrays(lo=-30.0, hi=30.0):
    return st.sampled_from(SHAPES).flatmap(lambda s: hnp.arrays(np.float32, s, elements=floats(lo, hi)))


# Unary elementwise activations: name -> input range that keeps the comparison meaningful.
UNARY = {
    "relu": 30, "relu6": 30, "elu": 30, "selu": 30, "celu": 30, "silu": 30, "swish": 30, "sigmoid": 30,
    "log_sigmoid": 30, "softplus": 30, "hard_tanh": 3, "leaky_relu": 30, "mish": 15, "soft_sign": 30,
    "hard_sigmoid": 10, "hard_silu": 10, "hard_swish": 10, "sparse_plus": 3, "sparse_sigmoid": 3,
    "squareplus": 30, "tanh": 10, "identity": 30,
}


def _unary(name):
    return getattr(nn, name), getattr(jax.nn, name)


@pytest.mark.parametrize("name", sorted(UNARY))
@given(data=st.data())
def test_unary_values_and_grads(name, data):
    x = data.draw(arrays(-UNARY[name], UNARY[name]))
    f, g = _unary(name)
    want_v, want_g = oracle(("unary", name), lambda: value_and_grad_sum(g))(x)
    got_v, got_g = ours_value_and_grad_sum(f, x)
    close(got_v, want_v)
    close(got_g, want_g, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("approximate", [True, False])
@given(x=arrays(-10, 10))
def test_gelu(approximate, x):
    want_v, want_g = oracle(("gelu", approximate),
                            lambda: value_and_grad_sum(jax.nn.gelu, approximate=approximate))(x)
    got_v, got_g = ours_value_and_grad_sum(nn.gelu, x, approximate=approximate)
    close(got_v, want_v)
    close(got_g, want_g, rtol=1e-4, atol=1e-5)


UNDER_TRANSFORMS = ["relu", "softplus", "gelu", "silu", "elu", "log_sigmoid", "relu6"]
X_TRANSFORMS = np.array([[-3.0, -0.5, 0.0, 0.5, 6.0], [7.0, 1.0, -1.0, 2.5, -20.0]], np.float32)


@functools.cache
def _under_transforms_oracle():
    """jax's values of every ``UNDER_TRANSFORMS`` case, in one compiled program."""
    def ref(v):
        return {name: (g(v), jax.vmap(g)(v), jax.vmap(jax.grad(g))(v.ravel()), jax.vmap(jax.grad(jax.grad(g)))(v.ravel()))
                for name, g in ((n, getattr(jax.nn, n)) for n in UNDER_TRANSFORMS)}

    return jax.jit(ref)(X_TRANSFORMS)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xla_optimized) if n == "gelu" else n
                                  for n in UNDER_TRANSFORMS])  # (gelu's values pinned where LLVM optimises)
def test_unary_under_jit_vmap_grad(name):
    x = X_TRANSFORMS
    f = getattr(nn, name)
    want = _under_transforms_oracle()[name]
    close(ftrans.jit(f)(x), want[0])
    close(ftrans.vmap(f)(x), want[1])
    close(ftrans.jit(ftrans.vmap(ftrans.grad(f)))(x.ravel()), want[2], rtol=1e-5)
    # second derivative through the custom rules
    close(ftrans.vmap(ftrans.grad(ftrans.grad(f)))(x.ravel()), want[3], rtol=1e-4, atol=1e-5)


def test_kink_derivatives_match_jax():
    """relu'(0) = 0 and relu6'(0) = relu6'(6) = 0 (custom JVPs); softplus'(0) = 1/2."""
    pts = np.array([0.0, 6.0, -0.0, 1e-30], np.float32)
    names = ["relu", "relu6", "softplus", "leaky_relu", "elu", "hard_tanh", "celu", "selu", "hard_sigmoid"]
    wants = jax.jit(lambda p: [jax.vmap(jax.grad(_unary(name)[1]))(p) for name in names])(pts)
    for name, want in zip(names, wants):
        close(ftrans.vmap(ftrans.grad(_unary(name)[0]))(pts), want)
    assert float(ftrans.grad(nn.relu)(0.0)) == 0.0
    assert float(ftrans.grad(nn.relu6)(6.0)) == 0.0
    np.testing.assert_array_equal(ftrans.jvp(nn.relu, (jnp.zeros(3),), (jnp.ones(3),))[1], np.zeros(3, np.float32))


EXTREME = ["softplus", "log_sigmoid", "sigmoid", "silu", "elu", "selu", "celu", "mish"]


def test_extreme_inputs_are_stable():
    big = np.array([-1e4, -200.0, -88.0, -20.0, 0.0, 20.0, 88.0, 89.0, 200.0, 1e4, np.inf, -np.inf], np.float32)
    finite = big[np.isfinite(big)]
    want = jax.jit(lambda v, u: [(getattr(jax.nn, n)(v), jax.vmap(jax.grad(getattr(jax.nn, n)))(u))
                                 for n in EXTREME])(big, finite)
    for name, (want_v, want_g) in zip(EXTREME, want):
        f = getattr(nn, name)
        close(f(big), want_v)
        close(ftrans.jit(f)(big), want_v)
        close(ftrans.vmap(ftrans.grad(f))(finite), want_g, rtol=1e-4)
    assert np.asarray(nn.softplus(np.float32(1e4))) == np.float32(1e4)
    assert np.asarray(nn.log_sigmoid(np.float32(-1e4))) == np.float32(-1e4)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@given(x=arrays(-50, 50), axis=st.sampled_from([-1, 0, None]))
def test_softmax_family(fn, x, axis):
    f, g = getattr(nn, fn), getattr(jax.nn, fn)
    want_v, want_g = oracle((fn, axis), lambda: value_and_grad_sum(g, axis=axis))(x)
    got_v, got_g = ours_value_and_grad_sum(f, x, axis=axis)
    close(got_v, want_v)
    close(got_g, want_g, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_family_extremes_and_masks(fn):
    f, g = getattr(nn, fn), getattr(jax.nn, fn)
    x = np.array([[1e30, 1e30, -np.inf, 0.0], [-np.inf, 2.0, 3.0, -np.inf], [80.0, -80.0, 90.0, 1.0]], np.float32)
    w = np.array([[1.0, 2.0, 3.0, 4.0]] * 3, np.float32)
    mask = np.array([[True, False, True, True], [True, True, False, True], [False, True, True, True]])
    xm = x.copy()
    xm[0, 0] = xm[0, 1] = 5.0
    safe = x[1:]  # rows without an overflowing max, where jax's gradient is finite
    xg = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)

    def ref(x, xm, safe, xg):
        return (g(x), jax.grad(lambda v: (g(v) * w[1:]).sum())(safe), g(xm, where=mask),
                g(xm, axis=(0, 1), where=mask), jax.grad(lambda v: (g(v, where=mask) * w * mask).sum())(xg),
                jax.vmap(g)(x))

    want = jax.jit(ref)(x, xm, safe, xg)
    close(f(x), want[0])
    close(ftrans.jit(f)(x), want[0])
    close(ftrans.grad(lambda v: (f(v) * w[1:]).sum())(safe), want[1], rtol=1e-4, atol=1e-5)
    close(f(xm, where=mask), want[2])
    close(f(xm, axis=(0, 1), where=mask), want[3])
    close(ftrans.jit(lambda v: f(v, where=mask))(xm), want[2])
    close(ftrans.grad(lambda v: (f(v, where=mask) * w * mask).sum())(xg), want[4], rtol=1e-4, atol=1e-5)
    close(ftrans.vmap(f)(x), want[5])


def test_log_softmax_hessian_matches():
    x = np.array([0.5, -1.0, 2.0, 0.0], np.float32)
    close(ftrans.hessian(lambda v: nn.log_softmax(v)[1])(x), jax.jit(jax.hessian(lambda v: jax.nn.log_softmax(v)[1]))(x),
          rtol=1e-4, atol=1e-6)
    close(ftrans.jacrev(nn.softmax)(x), jax.jit(jax.jacrev(jax.nn.softmax))(x), rtol=1e-5, atol=1e-7)
    close(ftrans.jacfwd(nn.softmax)(x), jax.jit(jax.jacfwd(jax.nn.softmax))(x), rtol=1e-5, atol=1e-7)


@given(x=arrays(-100, 100), axis=st.sampled_from([None, 0, -1, (0,)]), keepdims=st.booleans())
def test_logsumexp_and_logmeanexp(x, axis, keepdims):
    def ref(v):
        return (jax.nn.logsumexp(v, axis=axis, keepdims=keepdims), jax.nn.logmeanexp(v, axis=axis, keepdims=keepdims),
                jax.grad(lambda u: jax.nn.logsumexp(u, axis=axis).sum())(v))

    want = oracle(("lse", axis, keepdims), lambda: ref)(x)
    close(nn.logsumexp(x, axis=axis, keepdims=keepdims), want[0])
    close(nn.logmeanexp(x, axis=axis, keepdims=keepdims), want[1])
    close(ftrans.grad(lambda v: nn.logsumexp(v, axis=axis).sum())(x), want[2], rtol=1e-4, atol=1e-6)


def test_logsumexp_extremes():
    x = np.array([[1e30, 1e30, 3e38], [-np.inf, -np.inf, -np.inf], [1e4, 1e4 + 1, -np.inf]], np.float32)
    mask = np.array([[True, False, True], [True, True, False], [False, True, True]])
    y = np.where(np.isfinite(x), x, 0.0).astype(np.float32)
    want_lse, want_grad, want_lme = jax.jit(lambda x, y: (
        jax.nn.logsumexp(x, axis=1), jax.grad(lambda v: jax.nn.logsumexp(v, axis=1).sum())(x),
        jax.nn.logmeanexp(y, axis=1, where=mask)))(x, y)
    close(nn.logsumexp(x, axis=1), want_lse)
    close(ftrans.jit(lambda v: nn.logsumexp(v, axis=1))(x), want_lse)
    close(ftrans.grad(lambda v: nn.logsumexp(v, axis=1).sum())(x), want_grad)
    close(nn.logmeanexp(y, axis=1, where=mask), want_lme)


STANDARDIZE_KW = [{}, {"axis": 0}, {"axis": None}, {"algorithm": "stable"}, {"epsilon": 0.5},
                  {"mean": np.float32(1.0), "variance": np.float32(4.0)},
                  {"where": np.array([[True, False, True, True]] * 3)}]


def test_standardize():
    x = np.random.RandomState(0).randn(3, 4).astype(np.float32) * 3 + 1

    def ref(x):
        outs = [(jax.nn.standardize(x, **kw), jax.grad(lambda v, kw=kw: (jax.nn.standardize(v, **kw) ** 3).sum())(x))
                for kw in STANDARDIZE_KW]
        return outs, jax.vmap(jax.nn.standardize)(x)

    want, want_vmap = jax.jit(ref)(x)
    for kw, (want_v, want_g) in zip(STANDARDIZE_KW, want):
        close(nn.standardize(x, **kw), want_v, rtol=1e-4, atol=1e-5)
        close(ftrans.grad(lambda v, kw=kw: (nn.standardize(v, **kw) ** 3).sum())(x), want_g, rtol=1e-3, atol=1e-4)
    close(ftrans.jit(nn.standardize)(x), want[0][0], rtol=1e-4, atol=1e-5)
    close(ftrans.vmap(nn.standardize)(x), want_vmap, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="algorithm"):
        nn.standardize(x, algorithm="bogus")


def test_glu():
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 5 - 1
    want, want_axis1, want_grad = jax.jit(lambda v: (jax.nn.glu(v), jax.nn.glu(v, axis=1),
                                                     jax.grad(lambda v: jax.nn.glu(v).sum())(v)))(x)
    close(nn.glu(x), want)
    close(nn.glu(x, axis=1), want_axis1)
    close(ftrans.grad(lambda v: nn.glu(v).sum())(x), want_grad)
    with pytest.raises(ValueError, match="divisible by 2"):
        nn.glu(x, axis=0)


def test_log1mexp_and_extras():
    x = np.array([0.01, 0.5, 0.69, 0.7, 2.0, 30.0], np.float32)
    want = jax.jit(lambda x: (jax.nn.log1mexp(x), jax.vmap(jax.grad(jax.nn.log1mexp))(x), jax.nn.squareplus(x, 2.0),
                              jax.nn.elu(x - 1, alpha=0.5), jax.nn.celu(x - 1, alpha=0.5),
                              jax.nn.leaky_relu(x - 1, negative_slope=0.2)))(x)
    close(nn.log1mexp(x), want[0], rtol=1e-4)
    close(ftrans.vmap(ftrans.grad(nn.log1mexp))(x), want[1], rtol=1e-4)
    close(nn.squareplus(x, 2.0), want[2])
    close(nn.elu(x - 1, alpha=0.5), want[3])
    close(nn.celu(x - 1, alpha=0.5), want[4])
    close(nn.leaky_relu(x - 1, negative_slope=0.2), want[5])


DTYPE_FNS = ["relu", "gelu", "softplus", "elu", "log_softmax", "sigmoid", "silu"]


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16", np.float32, np.int32])
def test_dtypes_follow_jax(dtype):
    x = np.array([-2.0, -0.5, 0.0, 1.5], np.float32).astype(jnp.dtype(dtype))
    names = DTYPE_FNS[:5] if dtype is np.int32 else DTYPE_FNS  # jax's sigmoid refuses integers
    want = jax.jit(lambda v: [getattr(jax.nn, n)(v) for n in names])(x)
    for name, w in zip(names, want):
        close(getattr(nn, name)(jnp.asarray(x)), w, rtol=1e-2, atol=1e-2)  # also checks the dtype
    if dtype is np.int32:
        for name in ["sigmoid", "silu"]:
            with pytest.raises(TypeError):
                getattr(jax.nn, name)(x)
            with pytest.raises(TypeError):
                getattr(nn, name)(x)


def test_one_hot():
    idx = np.array([[0, 2], [-1, 3]], np.int32)
    close(nn.one_hot(idx, 3), jax.nn.one_hot(idx, 3))
    close(nn.one_hot(idx, 4, axis=0), jax.nn.one_hot(idx, 4, axis=0))
    close(nn.one_hot(idx, 4, axis=1), jax.nn.one_hot(idx, 4, axis=1))
    close(nn.one_hot(idx, 4, dtype=jnp.int32), jax.nn.one_hot(idx, 4, dtype=jjnp.int32))
    close(nn.one_hot(np.uint8(2), 3, dtype=jnp.bool_), jax.nn.one_hot(np.uint8(2), 3, dtype=jjnp.bool_))
    close(ftrans.jit(lambda i: nn.one_hot(i, 5))(idx), jax.jit(lambda i: jax.nn.one_hot(i, 5))(idx))
    close(ftrans.vmap(lambda i: nn.one_hot(i, 5))(idx), jax.vmap(lambda i: jax.nn.one_hot(i, 5))(idx))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        close(nn.one_hot(np.array([0.0, 1.0], np.float32), 2), jax.nn.one_hot(np.array([0.0, 1.0], np.float32), 2))
    assert any(issubclass(w.category, DeprecationWarning) for w in rec)
    # a named vmap axis
    got = ftrans.vmap(lambda i: nn.one_hot(i, 3, axis="b"), axis_name="b")(jnp.array([0, 2, 2]))
    want = jax.vmap(lambda i: jax.nn.one_hot(i, 3, axis="b"), axis_name="b")(jjnp.array([0, 2, 2]))
    close(got, want)
    with pytest.raises(ValueError, match="num_classes"):
        ftrans.vmap(lambda i: nn.one_hot(i, 4, axis="b"), axis_name="b")(jnp.array([0, 2, 2]))
    with pytest.raises(ftrans.errors.ConcretizationTypeError, match="num_classes"):  # as JAX raises
        ftrans.jit(lambda i, n: nn.one_hot(i, n))(idx, 3)
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(lambda i, n: jax.nn.one_hot(i, n))(idx, 3)


def test_python_scalars_and_lists():
    assert float(nn.relu(-2.0)) == 0.0
    assert float(nn.softplus(0.0)) == pytest.approx(np.log(2.0))
    close(nn.sigmoid(0.0), jax.nn.sigmoid(0.0))
    with pytest.raises(TypeError):
        nn.silu([1.0, 2.0])


# ----------------------------------------------------------------------------
# initializers, bit for bit against jax for the same key


INITS = [  # few distinct (sampler, shape) pairs: each costs jax and ftrans a compile
    ("glorot_uniform", (), (3, 4)), ("glorot_normal", (), (3, 4)), ("lecun_uniform", (), (3, 4)),
    ("lecun_normal", (), (3, 4)), ("he_uniform", (), (2, 3, 4)), ("he_normal", (), (2, 3, 4)),
    ("xavier_uniform", (), (3, 4)), ("kaiming_normal", (), (3, 4)),
    ("normal", (), (3, 4)), ("normal", (0.5,), (3, 4)), ("uniform", (), (3, 4)), ("uniform", (2.0,), (3, 4)),
    ("truncated_normal", (), (3, 4)), ("truncated_normal", (0.3, None, -1.0, 1.5), (3, 4)),
    ("constant", (-7,), (3, 4)), ("variance_scaling", (2.0, "fan_geo_avg", "normal"), (3, 4)),
    ("variance_scaling", (0.5, "fan_out", "uniform", 0, 2, 1), (2, 3, 4)),
    ("variance_scaling", (1.0, "fan_in", "truncated_normal", (0, 1), 2), (2, 3, 4)),
]


def _same_bits(ours, theirs):  # bit for bit on the CPU; to a few ulps on a GPU (tests/backend_util.py)
    assert_same_samples(ours, theirs)


@pytest.mark.parametrize("name,args,shape", INITS, ids=[f"{n}{i}" for i, (n, _, _) in enumerate(INITS)])
def test_initializers_match_jax_bits(name, args, shape):
    import ftrans.random as fr

    for seed in (0, 42):
        ours = getattr(nn.initializers, name)(*args)(fr.PRNGKey(seed), shape)  # compiled on the default device
        theirs = getattr(jax.nn.initializers, name)(*args)(jax.random.PRNGKey(seed), shape)  # as jax's
        if jax.__version_info__ >= (0, 12):
            # jax 0.12 runs the initializers' normal sampler op by op, whose erf_inv rounds a last bit
            # differently from the one program of jax 0.10 and 0.11 (ftrans's bits: docs/differences.md)
            close(ours, theirs, rtol=5e-7, atol=0)
            continue
        _same_bits(ours, theirs)


@pytest.mark.parametrize("dtype,names", [("float16", ["glorot_normal"]), ("bfloat16", ["he_uniform"]),
                                         ("complex64", ["glorot_normal", "he_uniform"])])
def test_initializers_dtypes(dtype, names):
    import ftrans.random as fr

    for name in names:
        ours = getattr(nn.initializers, name)()(fr.PRNGKey(3), (3, 4), dtype)
        theirs = getattr(jax.nn.initializers, name)()(jax.random.PRNGKey(3), (3, 4), dtype)
        if dtype == "complex64":  # built from exp/sqrt/log: NumPy's and XLA's agree to rounding
            close(ours, theirs, rtol=1e-6, atol=1e-7)
        else:
            _same_bits(ours, theirs)


def test_initializers_under_jit_and_vmap():
    import ftrans.random as fr

    init, jinit = nn.initializers.glorot_normal(), jax.nn.initializers.glorot_normal()
    ours = ftrans.jit(lambda k: init(k, (3, 4)))(fr.PRNGKey(1))
    if on_cpu():
        _same_bits(ours, jinit(jax.random.PRNGKey(1), (3, 4)))
    else:  # two GPU programs of different fusions: the same to float32 rounding, not bit for bit
        close(ours, jax.jit(lambda k: jinit(k, (3, 4)))(jax.random.PRNGKey(1)), rtol=2e-6, atol=0)
    keys = fr.split(fr.PRNGKey(2), 3)
    jkeys = jax.random.split(jax.random.PRNGKey(2), 3)
    close(ftrans.vmap(lambda k: init(k, (3, 4)))(keys), jax.jit(jax.vmap(lambda k: jinit(k, (3, 4))))(jkeys),
          rtol=1e-7 if on_cpu() else 2e-6, atol=0)


def test_initializer_errors_and_constants():
    key = np.zeros(2, np.uint32)
    _same_bits(nn.initializers.zeros(key, (2, 3)), jax.nn.initializers.zeros(jax.random.PRNGKey(0), (2, 3)))
    _same_bits(nn.initializers.ones(key, (3,), jnp.int32), jax.nn.initializers.ones(jax.random.PRNGKey(0), (3,),
                                                                                   jjnp.int32))
    _same_bits(nn.initializers.constant(2.5, jnp.float16)(key, (2,)),
               jax.nn.initializers.constant(2.5, jjnp.float16)(jax.random.PRNGKey(0), (2,)))
    with pytest.raises(ValueError, match="in_axis"):
        nn.initializers.glorot_uniform()(key, (3,))
    with pytest.raises(ValueError, match="mode"):
        nn.initializers.variance_scaling(1.0, "fan_bogus", "normal")(key, (3, 3))
    with pytest.raises(TypeError, match="out_sharding"):  # as jax's: not a sharding
        nn.initializers.zeros(key, (2,), out_sharding="x")
    with pytest.raises(NotImplementedError, match="out_sharding"):  # as jax's
        nn.initializers.orthogonal()(key, (2, 2), out_sharding=ftrans.sharding.P())
    assert isinstance(nn.initializers.glorot_uniform(), nn.initializers.Initializer)


@pytest.mark.parametrize("flag", [False, True])
def test_softmax_custom_jvp_option_residuals_and_derivatives_match_jax(flag):
    from jax._src import ad_checkpoint as jax_ad_checkpoint

    from ftrans.ad_checkpoint import saved_residuals

    x = np.array([[5.5, 1.3, -4.2, 0.9], [0.1, -1.0, 2.0, 3.0]], np.float32)
    keep = np.array([True, False, True, True])
    with jax.softmax_custom_jvp(flag):
        want_res = jax_ad_checkpoint.saved_residuals(jax.nn.softmax, jjnp.asarray(x[0]))
        # the oracle as one jitted program (eager jax compiles every operation of every transform)
        want_jac, want_masked, want_jvp = jax.jit(lambda x: (
            jax.jacrev(lambda x: jax.nn.softmax(x, axis=1))(x),
            jax.grad(lambda x: jax.nn.softmax(x, where=keep)[:, 0].sum())(x),
            jax.jvp(lambda x: jax.nn.softmax(x, axis=0), (x,), (x * 2,))[1]))(x)
    with ftrans.softmax_custom_jvp(flag):
        got_res = saved_residuals(nn.softmax, jnp.asarray(x[0]))
        got_jac = ftrans.jacrev(lambda x: nn.softmax(x, axis=1))(x)
        got_masked = ftrans.jit(ftrans.grad(lambda x: nn.softmax(x, where=keep)[:, 0].sum()))(x)
        got_jvp = ftrans.jvp(lambda x: nn.softmax(x, axis=0), (x,), (x * 2,))[1]
    if flag:  # only the output is kept, as in JAX (off, ftrans keeps the sum broadcast, not its (1,) shape)
        assert [(a.shape, a.dtype) for a, _ in got_res] == [(a.shape, a.dtype) for a, _ in want_res]
    for got, want in [(got_jac, want_jac), (got_masked, want_masked), (got_jvp, want_jvp)]:
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)


def test_softmax_custom_jvp_option_retraces_jitted_functions():
    traces = []

    def f(x):
        traces.append(ftrans.config.softmax_custom_jvp)
        return nn.softmax(x)[0]

    g = ftrans.jit(ftrans.grad(f))
    x = jnp.array([5.5, 1.3, -4.2, 0.9])
    g(x)
    with ftrans.softmax_custom_jvp(True):
        g(x)
    ftrans.config.update("jax_softmax_custom_jvp", True)
    try:
        g(x)
    finally:
        ftrans.config.update("jax_softmax_custom_jvp", False)
    g(x)
    assert traces == [False, True, True, False]
