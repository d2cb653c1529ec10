"""Python control flow on values being differentiated, outside ``jit``, against jax on the same inputs.

Outside ``jit`` an autodiff tracer (``jvp``, and the primal side of ``linearize``/``grad``/``vjp``/
``jacrev``/``hessian``) whose primal is concrete answers ``bool``, ``int``, ``operator.index``,
``.item()`` and value-dependent shapes (boolean masks, ``nonzero`` without ``size=``...) from its
primal, as JAX's do.  Under ``jit``, ``make_jaxpr`` and ``vmap`` the usual concretization errors stay.

Programs are written once against a numpy-like module ``np_`` and instantiated for ftrans and for
jax, so the oracle differentiates exactly the same function.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as fjnp
from ftrans import errors
from tests.thorough import THOROUGH

API = {"ftrans": (ftrans, fjnp), "jax": (jax, jjnp)}


def close(a, b, tol=1e-5):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def tree_close(a, b, tol=1e-5):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb, (ta, tb)
    for x, y in zip(la, lb):
        close(x, y, tol)


# ----------------------------------------------------------------------------
# The programs (autodiff-cookbook style): each takes the numpy-like module first


def abs_if(np_, x):
    if x > 0:
        return x * x * x
    return -2.0 * x


def branch_and_or(np_, x):
    # `and`/`or`/`not` call bool() too
    if x > 0 and not x > 10:
        return np_.sin(x) * x
    return np_.cos(x)


def halving_while(np_, x):
    # Python while on the value: the trip count depends on x
    y = x
    n = 0
    while y > 1.0:
        y = y * 0.5 + 0.1 * np_.sin(y)
        n += 1
    return y * n


def rec_pow(np_, x, n=5):
    # recursion on a Python int, with a value test inside
    if n == 0:
        return np_.ones_like(x)
    half = rec_pow(np_, x, n // 2)
    out = half * half
    if n % 2:
        out = out * x
    return out if out < 1e6 else out * 0.0


def float_factorial(np_, x):
    # recursion decided by the value itself (x, x-1, ... until <= 1)
    if x <= 1.0:
        return np_.ones_like(x)
    return x * float_factorial(np_, x - 1.0)


def int_loop_count(np_, x):
    # int(x) as a Python loop count
    acc = x
    for _ in range(int(x)):
        acc = acc * x * 0.5
    return acc


def index_from_value(np_, x):
    # operator.index of an integer value as a Python list index
    table = [1.0, 2.0, 3.0, 4.0, 5.0]
    return x * table[(x * 0 + 2).astype(np_.int32)] + x * x


def item_scale(np_, x):
    # .item() gives the value (without its derivative), as in JAX
    return x * x.item() + np_.sin(x)


SCALAR_PROGRAMS = [abs_if, branch_and_or, halving_while, rec_pow, float_factorial, int_loop_count,
                   index_from_value, item_scale]
SCALAR_POINTS = [-1.5, 0.7, 2.3, 3.6, 7.2]


def mask_sum(np_, x):
    return (x[x > 0] ** 2).sum()


def mask_2d(np_, x):
    m = x.reshape(2, 3)
    return np_.sin(m[m > 0.1]).sum() + (m[m < 0] * 3.0).sum()


def nonzero_gather(np_, x):
    idx = np_.nonzero(x > 0)
    return (x[idx] ** 3).sum()


def where_one_arg(np_, x):
    (idx,) = np_.where(x < 0.5)
    return (x[idx] * x[idx]).sum() + x.sum()


def argwhere_gather(np_, x):
    return (x[np_.argwhere(x > -0.2)[:, 0]] ** 2).sum()


def flatnonzero_gather(np_, x):
    return np_.cos(x[np_.flatnonzero(x > 0)]).sum()


def repeat_by_value(np_, x):
    reps = (x > 0).astype(np_.int32) + 1
    return (np_.repeat(x, reps) ** 2).sum()


def any_all_branch(np_, x):
    if (x > 0).all():
        return (x ** 2).sum()
    if (x < 0).any():
        return (x * np_.abs(x)).sum()
    return x.sum()


def mask_update(np_, x):
    return (x.at[x > 0].set(0.0) * x).sum()


def arange_from_value(np_, x):
    # a value-dependent shape from a concrete integer computed from x
    n = (x[0] * 0 + 3).astype(np_.int32)
    return (x[np_.arange(n)] ** 2).sum()


VECTOR_PROGRAMS = [mask_sum, mask_2d, nonzero_gather, where_one_arg, argwhere_gather, flatnonzero_gather,
                   repeat_by_value, any_all_branch, mask_update, arange_from_value]
VECTOR_POINTS = [
    np.array([1.0, -2.0, 3.0, 0.5, -0.1, 2.0], np.float32),
    np.array([-1.0, -2.0, -3.0, -0.5, -0.1, -2.0], np.float32),
    np.array([0.3, 1.2, 2.5, 0.9, 1.1, 0.2], np.float32),
]


# (program, point) pairs: every pair in the thorough run; the quick run leaves out a point where the program
# takes the same path as at an earlier one (the same kind of selection: none, some or all of the elements; the
# same branch), which only the values tell apart.  Each pair's jax oracle (eager: its ops compiled one by one
# for the pair's shapes) is most of the cost.
_SAME_PATH_AS_EARLIER = {(where_one_arg, 2), (argwhere_gather, 1), (arange_from_value, 1), (arange_from_value, 2)}
VECTOR_CASES = [(prog, k) for prog in VECTOR_PROGRAMS for k in range(len(VECTOR_POINTS))
                if THOROUGH or (prog, k) not in _SAME_PATH_AS_EARLIER]


def both(prog):
    """The program instantiated for ftrans and for jax."""
    return (lambda *a: prog(fjnp, *a)), (lambda *a: prog(jjnp, *a))


# ----------------------------------------------------------------------------
# Against jax: every derivative API on the same inputs


_ORACLES = {}


def jax_oracle(prog, x):
    """jax's value, gradient and Hessian of ``prog`` at ``x``, computed once per (program, point).

    jax cannot jit these programs (Python control flow on the values), so every eager call compiles
    each of its operations anew for the new shapes.  For a scalar-valued program everything the tests
    compare is one of these three: ``jacfwd`` and ``jacrev`` are the gradient, a JVP with tangent ``t``
    (and a linearized function at ``t``) is the gradient dotted with ``t``, a VJP with cotangent ``c``
    is ``c`` times the gradient.  Both tests of a (program, point) read the same oracle.

    The Hessian is ``jax.hessian``'s forward-over-reverse, one column (a JVP of the gradient along a basis
    vector) at a time: bit for bit jax.hessian's values, but the eager JVPs reuse the ops compiled for the
    gradient, where jax.hessian's vmapped ones compile every op again for the batched shapes (half the
    oracle's cost).
    """
    key = (prog, np.asarray(x).tobytes())
    if key not in _ORACLES:
        g = both(prog)[1]
        v, d = jax.value_and_grad(g)(x)
        _ORACLES[key] = (np.asarray(v), np.asarray(d), _jax_hessian(g, x))
    return _ORACLES[key]


def _jax_hessian(g, x):
    """``jax.hessian(g)(x)`` for a scalar or 1-D ``x``: the JVPs of ``jax.grad(g)`` along the basis vectors."""
    grad = jax.grad(g)
    x = np.asarray(x)
    if x.ndim == 0:
        return np.asarray(jax.jvp(grad, (x,), (np.ones_like(x),))[1])
    assert x.ndim == 1
    cols = [np.asarray(jax.jvp(grad, (x,), (e,))[1]) for e in np.eye(x.size, dtype=x.dtype)]
    return np.stack(cols, axis=-1)


def dot(d, t):
    """The directional derivative ``<d, t>`` in the gradient's dtype (jax's JVP tangent of a scalar)."""
    return np.asarray(np.sum(d * t), d.dtype)


@pytest.mark.parametrize("prog", SCALAR_PROGRAMS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("x", SCALAR_POINTS)
def test_scalar_programs_grad_family(prog, x):
    f = both(prog)[0]
    x = np.float32(x)
    v, d, h = jax_oracle(prog, x)
    close(ftrans.grad(f)(x), d)
    close(ftrans.jacfwd(f)(x), d)
    close(ftrans.jacrev(f)(x), d)
    close(ftrans.hessian(f)(x), h, tol=1e-4)
    vf, df = ftrans.value_and_grad(f)(x)
    close(vf, v)
    close(df, d)


@pytest.mark.parametrize("prog", SCALAR_PROGRAMS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("x", SCALAR_POINTS)
def test_scalar_programs_jvp_vjp_linearize(prog, x):
    f = both(prog)[0]
    x, t = np.float32(x), np.float32(0.75)
    v, d, _ = jax_oracle(prog, x)
    tree_close(ftrans.jvp(f, (x,), (t,)), (v, dot(d, t)))
    yf, pf = ftrans.vjp(f, x)
    close(yf, v)
    tree_close(pf(np.float32(1.5)), (np.float32(1.5) * d,))
    yf, lf = ftrans.linearize(f, x)
    close(yf, v)
    close(lf(t), dot(d, t))


@pytest.mark.parametrize("prog,k", VECTOR_CASES, ids=[f"{p.__name__}-{k}" for p, k in VECTOR_CASES])
def test_vector_programs_grad_family(prog, k):
    f = both(prog)[0]
    x = VECTOR_POINTS[k]
    _, d, h = jax_oracle(prog, x)
    close(ftrans.grad(f)(x), d)
    close(ftrans.jacfwd(f)(x), d)
    close(ftrans.jacrev(f)(x), d)
    close(ftrans.hessian(f)(x), h, tol=1e-4)


@pytest.mark.parametrize("prog,k", VECTOR_CASES, ids=[f"{p.__name__}-{k}" for p, k in VECTOR_CASES])
def test_vector_programs_jvp_vjp_linearize(prog, k):
    f = both(prog)[0]
    x = VECTOR_POINTS[k]
    t = np.linspace(-1, 1, x.size).astype(np.float32)
    v, d, _ = jax_oracle(prog, x)
    tree_close(ftrans.jvp(f, (x,), (t,)), (v, dot(d, t)))
    yf, pf = ftrans.vjp(f, x)
    close(yf, v)
    tree_close(pf(np.float32(2.0)), (np.float32(2.0) * d,))
    yf, lf = ftrans.linearize(f, x)
    close(yf, v)
    close(lf(t), dot(d, t))


def test_mask_output_jacobians_match_jax():
    """A value-dependent output shape: the Jacobian has one row per selected element."""
    x = VECTOR_POINTS[0]
    f, g = (lambda x: x[x > 0] ** 3), (lambda x: x[x > 0] ** 3)
    jf, jj = ftrans.jacfwd(f)(x), jax.jacfwd(g)(x)
    assert jf.shape == (4, 6)
    close(jf, jj)
    close(ftrans.jacrev(f)(x), jax.jacrev(g)(x))
    tree_close(ftrans.jvp(f, (x,), (np.ones_like(x),)), jax.jvp(g, (x,), (np.ones_like(x),)))


def test_unique_without_size_reads_the_value_like_jax():
    x = np.array([1.0, 1.0, 3.0], np.float32)
    # JAX reads the values of an unsized unique as constants (zero derivative); with size= it differentiates.
    close(ftrans.grad(lambda x: fjnp.unique(x).sum())(x), jax.grad(lambda x: jjnp.unique(x).sum())(x))
    close(ftrans.grad(lambda x: fjnp.unique(x, size=2).sum())(x),
          jax.grad(lambda x: jjnp.unique(x, size=2).sum())(x))


def test_nested_transforms_follow_the_primal():
    f, g = both(abs_if)
    for x in (np.float32(1.3), np.float32(-0.4)):
        tree_close(ftrans.jvp(ftrans.grad(f), (x,), (np.float32(1.0),)),
                   jax.jvp(jax.grad(g), (x,), (np.float32(1.0),)))
        close(ftrans.grad(ftrans.grad(f))(x), jax.grad(jax.grad(g))(x))
        close(ftrans.jacrev(ftrans.jacfwd(f))(x), jax.jacrev(jax.jacfwd(g))(x))


def test_grad_of_jit_inside_control_flow():
    """``jit`` of an inner function is fine: only the control flow outside it reads values."""
    inner_f = ftrans.jit(lambda x: fjnp.sin(x) * x)
    inner_j = jax.jit(lambda x: jjnp.sin(x) * x)

    def f(x):
        y = inner_f(x)
        return y if y > 0 else -y

    def g(x):
        y = inner_j(x)
        return y if y > 0 else -y

    for x in (np.float32(0.5), np.float32(4.0)):
        close(ftrans.grad(f)(x), jax.grad(g)(x))


def test_item_and_int_return_python_numbers():
    seen = {}

    def f(x):
        seen["item"] = x.item()
        seen["int"] = int(x)
        seen["index"] = [10, 20, 30][(x * 0 + 1).astype(fjnp.int32)]
        seen["bool"] = bool(x > 1)
        return x * x

    close(ftrans.grad(f)(np.float32(2.5)), np.float32(5.0))
    assert seen == {"item": 2.5, "int": 2, "index": 20, "bool": True}
    assert type(seen["item"]) is float


# Half the profile's examples: every example runs jax eagerly on a new shape (jax cannot jit these
# data-dependent shapes), which compiles each of its operations anew.
@settings(max_examples=max(2, settings.default.max_examples // 2))
@given(st.lists(st.floats(-3, 3, width=32), min_size=1, max_size=8))
def test_hypothesis_masks_match_jax(vals):
    x = np.array(vals, np.float32)
    for prog in (mask_sum, nonzero_gather, where_one_arg, any_all_branch, repeat_by_value):
        f, g = both(prog)
        want = jax.grad(g)(x)  # a scalar program's jacrev is its gradient: one oracle for both
        close(ftrans.grad(f)(x), want)
        close(ftrans.jacrev(f)(x), want)


# ----------------------------------------------------------------------------
# Conversions JAX refuses even for concrete values: float(), complex(), tolist()


@pytest.mark.parametrize("conv", [float, complex, lambda x: x.tolist()], ids=["float", "complex", "tolist"])
def test_lossy_conversions_still_refused_like_jax(conv):
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.grad(lambda x: x * conv(x).real if conv is complex else x * conv(x))(np.float32(2.0))
    with pytest.raises(errors.ConcretizationTypeError, match="derivative"):
        ftrans.grad(lambda x: x * conv(x).real if conv is complex else x * conv(x))(np.float32(2.0))


def test_numpy_conversion_still_refused_like_jax():
    with pytest.raises(jax.errors.TracerArrayConversionError):
        jax.grad(lambda x: x * np.asarray(x))(np.float32(2.0))
    with pytest.raises(errors.TracerArrayConversionError):
        ftrans.grad(lambda x: x * np.asarray(x))(np.float32(2.0))


# ----------------------------------------------------------------------------
# Under jit / make_jaxpr / vmap the concretization errors stay


ERROR_CASES = [
    (abs_if, np.float32(1.5), errors.TracerBoolConversionError, jax.errors.TracerBoolConversionError),
    (halving_while, np.float32(3.0), errors.TracerBoolConversionError, jax.errors.TracerBoolConversionError),
    (float_factorial, np.float32(3.0), errors.TracerBoolConversionError, jax.errors.TracerBoolConversionError),
    (int_loop_count, np.float32(3.0), errors.TracerIntegerConversionError,
     jax.errors.ConcretizationTypeError),
    (index_from_value, np.float32(3.0), errors.TracerIntegerConversionError,
     jax.errors.TracerIntegerConversionError),
    (item_scale, np.float32(3.0), errors.ConcretizationTypeError, jax.errors.ConcretizationTypeError),
    (mask_sum, VECTOR_POINTS[0], errors.NonConcreteBooleanIndexError, jax.errors.NonConcreteBooleanIndexError),
    (nonzero_gather, VECTOR_POINTS[0], errors.ConcretizationTypeError, jax.errors.ConcretizationTypeError),
    (where_one_arg, VECTOR_POINTS[0], errors.ConcretizationTypeError, jax.errors.ConcretizationTypeError),
    (flatnonzero_gather, VECTOR_POINTS[0], errors.ConcretizationTypeError, jax.errors.ConcretizationTypeError),
    (any_all_branch, VECTOR_POINTS[0], errors.TracerBoolConversionError, jax.errors.TracerBoolConversionError),
    (repeat_by_value, VECTOR_POINTS[0], errors.ConcretizationTypeError, jax.errors.ConcretizationTypeError),
]


def _wrappers(mod):
    return {
        "jit(grad)": lambda f, x: mod.jit(mod.grad(f))(x),
        "grad(jit)": lambda f, x: mod.grad(mod.jit(f))(x),
        "make_jaxpr(grad)": lambda f, x: mod.make_jaxpr(mod.grad(f))(x),
        "make_jaxpr(jvp)": lambda f, x: mod.make_jaxpr(lambda x: mod.jvp(f, (x,), (x,)))(x),
        "vmap(grad)": lambda f, x: mod.vmap(mod.grad(f))(np.stack([x, x])),
        "grad(vmap)": lambda f, x: mod.grad(lambda y: mod.vmap(f)(y).sum())(np.stack([x, x])),
        "eval_shape(grad)": lambda f, x: mod.eval_shape(mod.grad(f), x),
    }


@pytest.mark.parametrize("how", list(_wrappers(jax)))
@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda c: c[0].__name__)
def test_staged_or_batched_values_still_raise(case, how):
    prog, x, ftrans_err, jax_err = case
    f, g = both(prog)
    # jax raises a concretization error; ftrans raises its specific type
    with pytest.raises((jax.errors.ConcretizationTypeError, jax.errors.NonConcreteBooleanIndexError, jax_err)):
        _wrappers(jax)[how](g, x)
    with pytest.raises(ftrans_err):
        _wrappers(ftrans)[how](f, x)


def test_staged_errors_name_the_users_line():
    with pytest.raises(errors.TracerBoolConversionError) as e:
        ftrans.jit(ftrans.grad(lambda x: abs_if(fjnp, x)))(np.float32(1.0))
    assert "test_concrete_autodiff.py" in str(e.value)


def test_disable_jit_cond_reads_concrete_autodiff_values():
    """lax.cond under disable_jit picks the branch from a concrete predicate, also under grad."""
    taken = []

    def f(lax_, x):
        def yes(v):
            taken.append("yes")
            return v * v

        def no(v):
            taken.append("no")
            return -v

        return lax_.cond(x > 0, yes, no, x)

    ftrans.config.update("disable_jit", True)
    try:
        with jax.disable_jit():
            for x in (np.float32(1.5), np.float32(-2.0)):
                del taken[:]
                close(ftrans.grad(lambda x: f(ftrans.lax, x))(x), jax.grad(lambda x: f(jax.lax, x))(x))
                # the branch is chosen in Python: only the taken one ever runs, for ftrans as for jax
                assert taken == ["yes" if x > 0 else "no"] * 2
    finally:
        ftrans.config.update("disable_jit", False)


# ----------------------------------------------------------------------------
# custom_jvp / custom_vjp with Python control flow on their inputs


def _custom_pair(mod, np_):
    @mod.custom_jvp
    def soft(x):
        return x * x if x > 0 else -x

    @soft.defjvp
    def soft_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        slope = 2.0 * x if x > 0 else -np_.ones_like(x)
        return soft(x), slope * t

    @mod.custom_vjp
    def clip_grad(x):
        y = x
        while y > 2.0:  # a Python loop on the value in the function itself
            y = y - 1.0
        return y * x

    def fwd(x):
        return clip_grad(x), x

    def bwd(x, ct):
        g = 1.0 if x > 0 else 0.25  # and in the backward function
        return (g * ct,)

    clip_grad.defvjp(fwd, bwd)
    return soft, clip_grad


def test_custom_rules_with_control_flow_under_grad():
    fs, fc = _custom_pair(ftrans, fjnp)
    js, jc = _custom_pair(jax, jjnp)
    for x in (np.float32(1.5), np.float32(-0.5), np.float32(4.5)):
        close(ftrans.grad(fs)(x), jax.grad(js)(x))
        close(ftrans.grad(fc)(x), jax.grad(jc)(x))
        close(ftrans.jacrev(fc)(x), jax.jacrev(jc)(x))
        tree_close(ftrans.jvp(fs, (x,), (np.float32(2.0),)), jax.jvp(js, (x,), (np.float32(2.0),)))
        close(ftrans.grad(lambda x: fs(x) * fc(x) if x > 1 else fs(x))(x),
              jax.grad(lambda x: js(x) * jc(x) if x > 1 else js(x))(x))
        close(ftrans.hessian(fs)(x), jax.hessian(js)(x))
        # called eagerly (no transform) they are the plain functions
        close(fs(x), js(x))
        close(fc(x), jc(x))


def test_custom_rules_with_control_flow_raise_when_staged():
    fs, fc = _custom_pair(ftrans, fjnp)
    x = np.float32(1.5)
    for f in (fs, fc):
        with pytest.raises(errors.TracerBoolConversionError):
            ftrans.jit(ftrans.grad(f))(x)
        with pytest.raises(errors.TracerBoolConversionError):
            ftrans.vmap(ftrans.grad(f))(np.stack([x, x]))
    with pytest.raises(errors.FtransTypeError, match="forward-mode"):
        ftrans.jvp(fc, (x,), (x,))


def test_custom_vjp_forward_closing_over_a_differentiated_value_raises():
    def outer(y):
        @ftrans.custom_vjp
        def g(x):
            return x * y

        g.defvjp(lambda x: (g(x), None), lambda r, ct: (ct * y,))
        return g(y)

    with pytest.raises(errors.UnexpectedTracerError, match="closes over"):
        ftrans.grad(outer)(np.float32(3.0))
