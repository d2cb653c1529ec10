"""Gaps found by running JAX's own callback/debugging/custom-derivative test files against ftrans, each
checked here against jax itself: a debug print inside a checkpointed function under each remat policy
(printed again by the recomputation exactly when JAX's would); ``debug.inspect_array_sharding`` of a jit
argument laid out over a mesh; custom_jvp/custom_vjp (and jit) whose body reads a vmap's named axis on
unbatched operands."""

import jax
import jax.numpy as jnp_jax
import numpy as np
import pytest
from jax import ad_checkpoint as adc_jax
from jax.extend.core.primitives import name_p as name_p_jax

import ftrans
import ftrans.numpy as jnp
from ftrans import ad_checkpoint as adc
from ftrans.extend.core.primitives import name_p


def _lines(capsys, fn, *args):
    capsys.readouterr()
    out = fn(*args)
    jax.effects_barrier()
    ftrans.effects_barrier()
    return capsys.readouterr().out.splitlines(), out


def _but(name_prim, *names):
    def policy(prim, *_, **params):
        if prim is name_prim:
            return params["name"] not in names
        return True
    return policy


def _remat_fn(J, np_, adc_mod):
    def f(x):
        y = adc_mod.checkpoint_name(x + 1.0, "y")
        z = adc_mod.checkpoint_name(y * 2.0, "z")
        J.debug.print("y: {}, z: {}", y, z)
        return adc_mod.checkpoint_name(np_.exp(z), "w")
    return f


POLICIES = {
    "everything": lambda J, p: J.checkpoint_policies.everything_saveable,
    "nothing": lambda J, p: J.checkpoint_policies.nothing_saveable,
    "any_names_but_z": lambda J, p: J.checkpoint_policies.save_any_names_but_these("z"),
    "all_but_y": lambda J, p: _but(p, "y"),
    "all_but_y_z": lambda J, p: _but(p, "y", "z"),
}


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("jit", [False, True])
def test_remat_debug_print_recomputed_as_jax(capsys, policy, jit):
    def run(J, np_, adc_mod, p):
        g = J.grad(J.checkpoint(_remat_fn(J, np_, adc_mod), policy=POLICIES[policy](J, p)))
        return J.jit(g) if jit else g

    jl, jout = _lines(capsys, run(jax, jnp_jax, adc_jax, name_p_jax), 2.0)
    fl, fout = _lines(capsys, run(ftrans, jnp, adc, name_p), 2.0)
    assert fl == jl
    assert float(fout) == pytest.approx(float(jout), rel=1e-6)


def test_remat_debug_print_of_inputs_and_scan_carry(capsys):
    """A saved print that reads only the checkpoint's inputs (or a loop carry) runs again, as JAX's."""
    def make(J, np_):
        def f(x):
            J.debug.print("x {}", x)
            def body(c, _):
                J.debug.print("c {}", c)
                return c * 2.0, None
            return np_.sin(J.lax.scan(body, x, None, length=2)[0])
        return J.grad(J.checkpoint(f, policy=J.checkpoint_policies.everything_saveable))

    jl, _ = _lines(capsys, make(jax, jnp_jax), 1.0)
    fl, _ = _lines(capsys, make(ftrans, jnp), 1.0)
    assert fl == jl


# ----------------------------------------------------------------------------
# debug.inspect_array_sharding of a jit argument laid out over a mesh


def _inspected(J, make_call):
    got = []

    def cb(sd):
        got.append((isinstance(sd, J.sharding.NamedSharding), len(sd.device_set),
                    tuple(getattr(sd, "spec", ()) or ())))

    def f(x):
        J.debug.inspect_array_sharding(x, callback=cb)
        return J.numpy.square(x)

    make_call(J, f)
    return got


def _with_in_shardings(J, f):
    mesh = J.sharding.Mesh(np.array(J.devices()[:4]), ("dev",))
    P = J.sharding.PartitionSpec
    g = J.jit(f, in_shardings=J.sharding.NamedSharding(mesh, P("dev")),
              out_shardings=J.sharding.NamedSharding(mesh, P()))
    with J.set_mesh(mesh):
        g(np.arange(8, dtype=np.int32))


def _sharded_argument(J, f):
    mesh = J.sharding.Mesh(np.array(J.devices()[:2]), ("x",))
    arr = J.device_put(np.arange(8.0).reshape(2, 2, 2), J.sharding.NamedSharding(mesh, J.sharding.PartitionSpec("x")))
    J.jit(f)(arr)


def _nested(J, f):
    mesh = J.sharding.Mesh(np.array(J.devices()[:2]), ("x",))
    arr = J.device_put(np.arange(4.0), J.sharding.NamedSharding(mesh, J.sharding.PartitionSpec("x")))
    J.jit(lambda x: J.jit(f)(x) + 1.0)(arr)


@pytest.mark.parametrize("make_call", [_with_in_shardings, _sharded_argument, _nested])
def test_inspect_array_sharding_of_laid_out_jit_argument(make_call):
    assert _inspected(ftrans, make_call) == _inspected(jax, make_call)


def _one_device_argument(J, f):
    mesh = J.sharding.Mesh(np.array(J.devices()[:1]), ("x",))
    arr = J.device_put(np.arange(8.0).reshape(2, 4), J.sharding.NamedSharding(mesh, J.sharding.PartitionSpec("x")))
    J.jit(lambda x: J.jit(f)(x) + 1.0)(arr)


def _one_device_in_shardings(J, f):
    mesh = J.sharding.Mesh(np.array(J.devices()[:1]), ("dev",))
    P = J.sharding.PartitionSpec
    g = J.jit(f, in_shardings=J.sharding.NamedSharding(mesh, P("dev")), out_shardings=J.sharding.NamedSharding(mesh, P()))
    with J.set_mesh(mesh):
        g(np.arange(8, dtype=np.int32))


@pytest.mark.parametrize("make_call", [_one_device_argument, _one_device_in_shardings])
def test_inspect_array_sharding_over_a_one_device_mesh_is_replicated(make_call):
    # (what a one-GPU machine's tests above see) the compiler reports one device's layout as P(), as JAX
    assert _inspected(ftrans, make_call) == _inspected(jax, make_call) == [(True, 1, ())]


# ----------------------------------------------------------------------------
# custom_jvp / custom_vjp whose body reads a vmap's named axis on unbatched operands (JAX's
# test_initial_style_vmap_with_collective): the result stays unbatched (out_axes=None works), through
# eval_jaxpr of its jaxpr, directly and under jit, and its derivatives agree.


def _custom_collective(J, kind):
    lax = J.lax
    if kind == "jvp":
        @J.custom_jvp
        def f(x):
            return lax.psum(x, "foo")

        @f.defjvp
        def f_jvp(xs, ts):
            return lax.psum(xs[0], "foo"), ts[0] * 2.0
    else:
        @J.custom_vjp
        def f(x):
            return lax.psum(x, "foo")

        f.defvjp(lambda x: (lax.psum(x, "foo"), x * 3.0), lambda res, g: (g * res,))
    return f


def _eval_jaxpr_of(J, f):
    ev = J.core.eval_jaxpr if J is jax else ftrans.extend.core.eval_jaxpr

    def g(x):
        return ev(J.make_jaxpr(f)(x).jaxpr, [], x)[0]
    return g


_HOW = {"eval_jaxpr": _eval_jaxpr_of, "direct": lambda J, f: f, "jit": lambda J, f: J.jit(f)}


@pytest.mark.parametrize("kind", ["jvp", "vjp"])
@pytest.mark.parametrize("how", sorted(_HOW))
def test_custom_rule_with_collective_on_unbatched_operand(kind, how):
    def run(J):
        g = _HOW[how](J, _custom_collective(J, kind))
        jnp_ = J.numpy
        out = J.vmap(lambda _, x: g(x), axis_name="foo", in_axes=(0, None), out_axes=None)(jnp_.arange(4.0), 2.0)
        res = [out, J.vmap(J.grad(g), axis_name="foo", in_axes=None, out_axes=None, axis_size=4)(2.0),
               J.grad(lambda y: J.vmap(lambda _, x: g(x), axis_name="foo", in_axes=(0, None),
                                       out_axes=None)(jnp_.arange(4.0), y))(2.0)]
        return [float(r) for r in res]

    assert run(ftrans) == run(jax)


def test_grad_of_jitted_psum_on_unbatched_operand_under_vmap():
    def run(J):
        h = J.jit(lambda x: J.lax.psum(x, "foo"))
        return float(J.vmap(J.grad(h), axis_name="foo", in_axes=None, out_axes=None, axis_size=4)(2.0))

    assert run(ftrans) == run(jax)
