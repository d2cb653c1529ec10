"""Behaviour that user machine-learning programs (transformers, optimisers, conv nets, VAEs, ...) depend on
and that once differed from JAX under ftrans: each check runs the same code under both libraries and compares
the results (bits where JAX's are reproducible, printed text where users print)."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp
from tests.backend_util import host_oracle


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("decimals", [1, 2, 4, 7])
def test_round_decimals_bits_match_jax_eagerly_and_under_jit(dtype, decimals):
    # jnp.round(x, 4) is what programs print; JAX's is a jitted program where XLA turns the division
    # by 10**decimals into a multiplication by its reciprocal, so eager ftrans must give the same bits.
    rng = np.random.default_rng(decimals)
    x = (rng.normal(size=512) * 10 ** rng.uniform(-3, 3, 512)).astype(jnp.dtype(dtype))
    want = np.asarray(jnp.round(x, decimals))
    with host_oracle():  # eager ftrans runs on the host: XLA on the CPU is its oracle
        want_host = np.asarray(jnp.round(x, decimals))
        printed = str(jnp.round(x[:6], decimals))
    eager = np.asarray(fnp.round(x, decimals))
    jitted = np.asarray(ftrans.jit(lambda v: fnp.round(v, decimals))(x))
    np.testing.assert_array_equal(eager.view(np.uint8), want_host.view(np.uint8))
    np.testing.assert_array_equal(jitted.view(np.uint8), want.view(np.uint8))
    assert str(fnp.round(fnp.asarray(x[:6]), decimals)) == printed


def test_mesh_shape_is_an_ordered_dict_as_jax():
    # print(mesh.shape) in a data-parallel program shows OrderedDict([('data', n), ...]) under JAX
    import collections

    devs = np.array(ftrans.devices()[:1])
    fm = ftrans.sharding.Mesh(devs, ("data",))
    jm = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("data",))
    assert type(fm.shape) is collections.OrderedDict
    assert repr(fm.shape) == repr(jm.shape)
    assert repr(fm.abstract_mesh.shape) == repr(jm.abstract_mesh.shape)


def test_debug_nans_under_jit_prints_jax_line_before_the_deoptimized_rerun(capsys):
    # A training loop run with jax_debug_nans prints JAX's line to stdout, then raises FloatingPointError.
    line = "Invalid nan value encountered in the output of a jax.jit function. Calling the de-optimized version."
    ftrans.config.update("debug_nans", True)
    try:
        with pytest.raises(FloatingPointError):
            ftrans.jit(lambda x: x * fnp.log(x))(np.array([-1.0, 1.0], np.float32))
    finally:
        ftrans.config.update("debug_nans", False)
    out_f = capsys.readouterr().out
    jax.config.update("jax_debug_nans", True)
    try:
        with pytest.raises(FloatingPointError):
            jax.jit(lambda x: x * jax.lax.log(x))(np.array([-1.0, 1.0], np.float32))
    finally:
        jax.config.update("jax_debug_nans", False)
    out_j = capsys.readouterr().out
    assert line in out_j.splitlines()
    assert out_f.splitlines() == [line]


needs8 = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")


@needs8
@pytest.mark.parametrize("jit", [False, True])
def test_shard_map_on_explicit_mesh_rejects_in_specs_that_differ_from_the_input_type(jit):
    # A tensor-parallel program: jax.make_mesh's axes are Explicit, so an unsharded argument whose in_specs
    # split it raises JAX's ValueError; an argument laid out as in_specs says runs.
    def program(m):
        P = m.sharding.PartitionSpec
        mesh = m.make_mesh((2, 4), ("dp", "tp"), axis_types=(m.sharding.AxisType.Explicit,) * 2)
        f = m.shard_map(lambda b: b * 2, mesh=mesh, in_specs=P("dp", "tp"), out_specs=P("dp", "tp"))
        f = m.jit(f) if jit else f
        x = np.arange(48.0, dtype=np.float32).reshape(6, 8)
        with pytest.raises(ValueError) as e:
            f(x)
        ok = f(m.device_put(x, m.sharding.NamedSharding(mesh, P("dp", "tp"))))
        rep = m.shard_map(lambda b: b + 1, mesh=mesh, in_specs=P(), out_specs=P())(x)  # P() matches P(None, None)
        return str(e.value).split(" for arg")[0], np.asarray(ok), np.asarray(rep)

    (fe, fo, fr), (je, jo, jr) = program(ftrans), program(jax)
    assert fe == je
    np.testing.assert_array_equal(fo, jo)
    np.testing.assert_array_equal(fr, jr)


def _grad_cases(m):
    n, lax = m.numpy, m.lax
    return {
        "maximum": lambda: m.grad(n.maximum, argnums=(0, 1))(1.0, 1.0),
        "minimum": lambda: m.grad(n.minimum)(1.0, 2.0),
        "where": lambda: m.grad(lambda x: n.where(x > 0, x, 0.0))(1.0),
        "select": lambda: m.grad(lambda x: lax.select(x > 0, x, 0.0))(1.0),
        "relu": lambda: m.grad(m.nn.relu)(1.0),
        "clip": lambda: m.grad(lambda x: n.clip(x, 0.0, 2.0))(1.0),
        "abs": lambda: m.grad(n.abs)(1.0),
        "pow_float": lambda: m.grad(lambda x: x ** 2.5)(1.0),
        "pow_int_exp": lambda: m.grad(lambda x: n.power(x, 3.0))(-2.0),
        "pow_rhs": lambda: m.grad(lambda y: 2.0 ** y)(0.5),
        "pad": lambda: m.grad(lambda x: n.pad(x[None], 1)[1])(1.0),
        "jit_maximum": lambda: m.jit(m.grad(n.maximum, argnums=(0, 1)))(1.0, 1.0),
        "strong_maximum": lambda: m.grad(n.maximum)(np.float32(1.0), 1.0),
        # slice and dynamic_slice transpose into strong zeros in JAX: these gradients are strong
        "stack_index": lambda: m.grad(lambda x: n.stack([x, x])[0])(1.0),
        "roll_index": lambda: m.grad(lambda x: n.roll(n.stack([x, x]), 1)[0])(1.0),
        "dynamic_slice": lambda: m.grad(lambda x: lax.dynamic_slice(n.stack([x, x, x]), (1,), (2,)).sum())(1.0),
        "stack_sum": lambda: m.grad(lambda x: n.stack([x, x]).sum())(1.0),
        "at_set": lambda: m.grad(lambda x: n.zeros(3).at[1].set(x)[1])(1.0),
    }


@pytest.mark.parametrize("case", sorted(_grad_cases(jax)))
def test_gradient_weak_types_of_python_scalar_inputs_match_jax(case):
    # print(jax.grad(...)(1.0)) shows weak_type=True for weak inputs of max/where/relu/clip, as JAX's
    # transpose rules build their zeros with full_like; pow's factors are strongly typed (converted).
    want = _MAX_MIN_WEAK.get(case) or repr(_grad_cases(jax)[case]())
    assert repr(_grad_cases(ftrans)[case]()) == want


# jax 0.10's results: jax 0.11 rewrote max/min's JVP with strongly typed tie factors, so it prints these
# gradients without weak_type=True; ftrans keeps jax 0.10's weak types (docs/differences.md).
_W = "Array({}, dtype=float32, weak_type=True)"
_MAX_MIN_WEAK = {
    "maximum": f"({_W.format(0.5)}, {_W.format(0.5)})",
    "jit_maximum": f"({_W.format(0.5)}, {_W.format(0.5)})",
    "minimum": _W.format("1."),
    "clip": _W.format("1."),
}


def test_lowered_module_name_of_a_lambda_strips_trailing_underscores_as_jax():
    # print(jax.jit(lambda x: ...).lower(x).as_text()) starts with ``module @jit__lambda``
    def named_(x):
        return x * 2

    for f in (lambda x: x * 2, named_):
        want = jax.jit(f).lower(1.0).as_text().splitlines()[0].split(" attributes")[0]
        got = ftrans.jit(f).lower(1.0).as_text().splitlines()[0].split(" attributes")[0]
        assert got == want
