"""``check_grads`` on every differentiable primitive, in float64, forward and reverse, orders 1 and 2.

The operands and parameters are the registry test's samples (every primitive
has some): float32 operands are widened to float64 (and float32 dtype
parameters with them) so central differences are accurate.  Primitives whose
derivative is zero by definition (comparisons, rounding, argmax, ...) are
checked to have zero derivatives instead.  The last test makes sure the
sweep really covered every primitive that has a non-zero JVP rule.
"""

from __future__ import annotations

import numpy as np
import pytest

import ftrans
from ftrans.core import primitive as P
from ftrans.core.array import Array
from ftrans.core.ir import ClosedJaxpr
from ftrans.test_util import check_grads
from ftrans.transforms.ad import jvp_rules
from tests.test_registry import SAMPLES

F32 = np.dtype(np.float32)
# Primitives that need an operand domain the generic samples (values in (0.1, 0.9)) do not give,
# or whose samples are not functions of float operands.
DOMAIN = {"acosh": lambda a: a + 1.5, "pow": lambda a: a + 0.5}
SKIP = {
    "custom_lin": "evaluating it forward is an error by design",
    "nextafter": "its value moves by one ulp: finite differences cannot see a derivative",
    "rem": "a sawtooth; checked against jax.vjp in test_vjp_elementwise",
    "reduce_precision": "a staircase (JAX differentiates it as the identity, rounded); checked against jax.grad "
                        "in test_lax_extras",
    "cholesky": "its JVP (as JAX's) assumes a Hermitian tangent, which the API's symmetrization gives; "
                "checked through ftrans.numpy.linalg in test_linalg",
    "eigh": "its JVP (as JAX's) assumes a Hermitian tangent; checked through ftrans.numpy.linalg in test_linalg",
    "eig": "eigenvector derivatives are not implemented (as in JAX); eigenvalue gradients are checked in test_linalg",
    "pure_callback": "not differentiable (as in JAX: its JVP raises); checked in test_pure_io_callbacks",
    "io_callback": "not differentiable (as in JAX: its JVP raises); checked in test_pure_io_callbacks",
    "buffer_callback": "not differentiable (as in JAX: its JVP raises); checked in test_buffer_callback",
    "ffi_call": "not differentiable (as in JAX: its JVP raises); its sample is a float32 LAPACK target",
}


def _zero_rule(prim) -> bool:
    rule = jvp_rules.get(prim)
    return rule is not None and rule.__name__.endswith("_jvp_zero")


def _widen(x):
    if isinstance(x, Array):
        v = x._value
        return Array._new(v.astype(np.float64), x.weak_type) if v.dtype == F32 else x
    if isinstance(x, np.ndarray) and x.dtype == F32:
        return x.astype(np.float64)
    return x


def _widen_params(params: dict) -> dict:
    return {k: (np.dtype(np.float64) if isinstance(v, np.dtype) and v == F32 else v) for k, v in params.items()}


def _float_positions(args) -> list[int]:
    out = []
    for i, a in enumerate(args):
        d = (a._value.dtype if isinstance(a, Array) else getattr(a, "dtype", None))
        if d is not None and np.dtype(d) == F32:
            out.append(i)
    return out


def _is_call(params: dict) -> bool:
    """Call-like primitives carry a float32 jaxpr; they are checked in their own test modules."""
    return any(isinstance(v, ClosedJaxpr) for v in params.values())


def _cases():
    """(name, sample index, args, params) for float32 samples of differentiable primitives, two per primitive."""
    cases = []
    for name in sorted(SAMPLES):
        prim = P.registry.get(name)
        if prim is None or prim not in jvp_rules or name in SKIP:
            continue
        taken = 0
        for k, (args, params) in enumerate(SAMPLES[name]):
            pos = _float_positions(args)
            if not pos or taken == 2 or _is_call(params):
                continue
            cases.append(pytest.param(name, args, params, pos, id=f"{name}-{k}"))
            taken += 1
    return cases


CASES = _cases()


@pytest.fixture
def x64():
    before = ftrans.config.enable_x64
    ftrans.config.update("enable_x64", True)
    yield
    ftrans.config.update("enable_x64", before)


@pytest.mark.parametrize("name,args,params,pos", CASES)
def test_primitive_gradients(x64, name, args, params, pos):
    prim = P.registry[name]
    full = [_widen(a) for a in args]
    if name in DOMAIN:
        full = [DOMAIN[name](a) if i in pos else a for i, a in enumerate(full)]
    params = _widen_params(params)

    def f(*xs):
        ops = list(full)
        for i, x in zip(pos, xs):
            ops[i] = x
        out = prim.bind(*ops, **params)
        return out if not prim.multiple_results else tuple(out)

    try:
        ftrans.eval_shape(f, *[full[i] for i in pos])  # staged: the abstract-eval rule must accept it too
        out = f(*[full[i] for i in pos])
    except (TypeError, ValueError):
        pytest.skip("sample not valid once widened to float64")
    outs = out if isinstance(out, tuple) else (out,)
    if any(np.asarray(o).dtype.kind not in "fc" for o in outs):
        pytest.skip("integer or boolean output: no derivative to check")
    if not all(np.all(np.isfinite(np.asarray(o))) for o in outs):
        pytest.skip("sample outside the primitive's domain")
    if name == "scatter_mul":  # differentiable in the updates only with unique indices (as in JAX)
        pos = pos[:1]
    primals = [full[i] for i in pos]
    if _zero_rule(prim):
        _, pullback = ftrans.vjp(f, *primals)
        cts = pullback(out)
        for c in cts:
            assert not np.any(np.asarray(c)), f"{name} should have a zero derivative"
        return
    # Second derivatives of these are checked against jax.vjp elsewhere: the samples sit on ties (kinks) or
    # the first derivative is itself piecewise.
    first_only = ("sort", "cumprod", "cummax", "cummin", "cumlogsumexp", "reduce_prod", "scatter_min",
                  "scatter_max")
    order = 1 if name in first_only else 2
    check_grads(f, tuple(primals), order=order, modes=("fwd", "rev"), atol=1e-4, rtol=1e-4, eps=1e-5)


def test_every_differentiable_primitive_was_checked():
    names = {c.values[0] for c in CASES}
    float_in = {n for n in names}
    missing = sorted(
        p.name for p in P.registry.values()
        if p in jvp_rules and not _zero_rule(p) and p.name not in SKIP and p.name not in float_in
        and any(_float_positions(a) and not _is_call(k) for a, k in SAMPLES.get(p.name, []))
    )
    assert not missing, f"differentiable primitives without a float32 sample to check: {missing}"
    assert len(names) >= 60


def test_default_float32_step_is_jaxs_so_a_nearby_jump_is_not_crossed():
    # JAX's check_grads steps 1e-4; a float32 point 5e-4 below a jump of rem/frexp passes there, and here too.
    import jax
    import jax.test_util as jtu_public

    from ftrans import lax as flax_
    from ftrans.test_util import check_grads as fcheck
    from ftrans.test_util import default_eps

    x = np.array([0.9995, 2.5, -1.25], np.float32)
    jtu_public.check_grads(lambda a: jax.lax.rem(a, np.float32(1.0)), (x,), 1, modes=["fwd", "rev"])
    fcheck(lambda a: flax_.rem(a, np.float32(1.0)), (x,), 1, modes=["fwd", "rev"])
    assert default_eps(np.float32) == 1e-4


def test_at_an_infinite_input_the_derivative_is_taken_along_the_tangent():
    # At x = -inf the rounded points x +- eps t are both -inf: no step is measurable (inf - inf), so the
    # derivative is compared along t itself, as JAX's check_grads does (softplus'(-inf) = 0).
    import jax
    import jax.test_util as jtu_public

    from ftrans import nn as fnn
    from ftrans.test_util import check_grads as fcheck

    for x in (-float("inf"), float("nan"), np.array([-np.inf, 0.5, 3.0], np.float32)):
        jtu_public.check_grads(jax.nn.softplus, (x,), 1)
        fcheck(fnn.softplus, (x,), 1)
    flat = ftrans.custom_jvp(lambda x: ftrans.numpy.zeros_like(x))
    flat.defjvp(lambda p, t: (flat(*p), t[0]))  # a wrong derivative is still caught there
    with pytest.raises(AssertionError, match="JVP differs"):
        fcheck(flat, (-float("inf"),), 1, modes=["fwd"])
