"""JAX's ``random_gamma`` primitive (``ftrans.random.random_gamma_p``): the gamma sampler as one equation
over a key-typed operand, with every rule (abstract evaluation, eager, jvp, batching, lowering) checked
against ``jax.random.random_gamma_p``; typed key arrays as ``jit`` arguments; a primitive bound directly on
key arrays in traced code (JAX's key arrays are arrays to any primitive), and key reuse through it."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.core.primitive import Primitive
from ftrans.errors import FtransTypeError, KeyReuseError
from ftrans.experimental.key_reuse import _core as kr
from tests.thorough import THOROUGH

F32 = np.float32
A23 = np.array([[0.3, 1.0, 2.5], [4.0, 0.05, 9.0]], F32)


def _same(ours, theirs, rtol=0.0):
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=rtol, atol=0)


def _eqn_names(jaxpr):
    out = []
    for e in jaxpr.eqns:
        out.append(e.primitive.name)
        inner = e.params.get("jaxpr")
        if inner is not None:
            out += _eqn_names(getattr(inner, "jaxpr", inner))
    return out


def test_public_and_printed_as_jax():
    assert ftrans.random.random_gamma_p.name == jax.random.random_gamma_p.name == "random_gamma"
    ours = ftrans.make_jaxpr(ftrans.random.gamma)(ftrans.random.key(0), 1.0)
    theirs = jax.make_jaxpr(jax.random.gamma)(jax.random.key(0), 1.0)
    assert _eqn_names(ours.jaxpr)[-2:] == _eqn_names(theirs.jaxpr)[-2:] == ["convert_element_type", "random_gamma"]
    assert "random_gamma[log_space=False]" in str(ours)


@pytest.mark.parametrize("log_space", [False, True])
def test_bind_on_key_arrays_matches_jax_eager_jit_and_interpreted(log_space):
    def prog(m):
        return lambda ks, a: m.random.random_gamma_p.bind(ks, a, log_space=log_space)

    theirs = prog(jax)(jax.random.split(jax.random.key(3), 2), jjnp.asarray(A23))
    keys = ftrans.random.split(ftrans.random.key(3), 2)
    _same(prog(ftrans)(keys, jnp.asarray(A23)), theirs)
    _same(ftrans.jit(prog(ftrans))(keys, jnp.asarray(A23)), theirs)
    closed = ftrans.make_jaxpr(prog(ftrans))(keys, jnp.asarray(A23))
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["random_gamma"]
    assert str(closed.jaxpr.invars[0].aval) == "key<fry>[2]"
    _same(ftrans.core.eval_jaxpr(closed.jaxpr, closed.consts, keys, jnp.asarray(A23))[0], theirs)


# which draws each implementation takes in the quick run: every draw eagerly over threefry keys; under jit the
# rbg implementations' batched split is what differs, and each takes the batched gamma with one of the other
# two (log space, gradient) in turn; the thorough run (tests/thorough.py) takes every draw over each
_PICKED = {"threefry2x32": (0, 1, 2), "rbg": (0, 1), "unsafe_rbg": (0, 2)}


@pytest.mark.parametrize("impl", ["threefry2x32", "rbg", "unsafe_rbg"])
def test_samplers_vmap_and_grad_match_jax(impl):
    picked = (0, 1, 2) if THOROUGH else _PICKED[impl]

    def draws(m, keys, a):
        every = [lambda: m.vmap(lambda k, x: m.random.gamma(k, x))(keys, a),
                 lambda: m.vmap(lambda k: m.random.loggamma(k, 1.5, (2,)))(keys),
                 lambda: m.vmap(m.grad(lambda x, k: m.random.gamma(k, x)), (None, 0))(np.float32(2.0), keys)]
        return [every[i]() for i in picked]

    def run(m, jitted):
        keys = m.random.split(m.random.key(7, impl=impl), 3)
        a = m.numpy.asarray(np.array([0.5, 2.0, 7.0], F32))
        if jitted:  # one program (eagerly each batched operation is a compile of its own)
            return m.jit(lambda keys, a: draws(m, keys, a))(keys, a)
        return draws(m, keys, a)

    # jax's side is the oracle: one jitted program. ftrans's batched samplers run eagerly over threefry keys
    # and under jit over the rbg keys (tests/test_random_rbg.py runs them eagerly over rbg keys).
    for o, t in zip(run(ftrans, impl != "threefry2x32"), run(jax, True), strict=True):
        _same(o, t, rtol=1e-6)


def test_jvp_matches_jax():
    def run(m):
        return m.jvp(lambda a: m.random.loggamma(m.random.key(0), a, (2,)), (np.float32(1.5),), (np.float32(1.0),))

    for o, t in zip(run(ftrans), run(jax)):
        _same(o, t, rtol=1e-6)


def test_abstract_evaluation_errors():
    keys = ftrans.random.split(ftrans.random.key(0), 2)
    with pytest.raises(FtransTypeError, match="must lead"):
        ftrans.make_jaxpr(lambda k: ftrans.random.random_gamma_p.bind(k, jnp.ones((3, 2)), log_space=False))(keys)
    with pytest.raises(FtransTypeError, match="float"):
        ftrans.make_jaxpr(lambda k: ftrans.random.random_gamma_p.bind(k, jnp.ones((2,), np.int32),
                                                                      log_space=False))(keys)
    with pytest.raises(FtransTypeError, match="key"):
        ftrans.make_jaxpr(lambda a: ftrans.random.random_gamma_p.bind(a, a, log_space=False))(jnp.ones(2))


def test_key_reuse_signature_is_jaxs():
    sig = kr.key_reuse_signatures[ftrans.random.random_gamma_p]
    assert sig == kr.KeyReuseSignature(kr.Sink(0))
    k = ftrans.random.key(0)
    assert kr.function_type_signature(ftrans.random.gamma, k, 1.0) == sig
    assert kr.jaxpr_type_signature(ftrans.make_jaxpr(ftrans.random.gamma)(k, 1.0).jaxpr) == sig


def test_jit_takes_typed_keys_as_key_values():
    k = ftrans.random.key(0)
    f = ftrans.jit(lambda k: ftrans.random.normal(k, (2,)))
    _same(f(k), jax.random.normal(jax.random.key(0), (2,)))
    inner = ftrans.make_jaxpr(f)(k).jaxpr.eqns[0].params["jaxpr"]
    assert str(getattr(inner, "jaxpr", inner).invars[-1].aval) == "key<fry>[]"
    traced = f.trace(k)
    assert "key<fry>[]" in str(traced.jaxpr)
    ks = ftrans.random.split(k, 3)
    out = ftrans.jit(lambda ks: (ks[1], ftrans.random.split(ks[0])))(ks)
    theirs = jax.jit(lambda ks: (ks[1], jax.random.split(ks[0])))(jax.random.split(jax.random.key(0), 3))
    for o, t in zip(out, theirs):
        assert str(o.dtype) == str(t.dtype)
        _same(ftrans.random.key_data(o), jax.random.key_data(t))
    # ahead of time: the compiled program takes the key array; its data alone is another pytree
    compiled = ftrans.jit(lambda k: ftrans.random.uniform(k)).lower(k).compile()
    _same(compiled(ftrans.random.key(1)), jax.random.uniform(jax.random.key(1)))
    with pytest.raises(FtransTypeError, match="pytree structure"):
        compiled(ftrans.random.PRNGKey(1))
    # out of bounds in fill mode: the key whose data words are all the maximum (JAX's)
    filled = ftrans.jit(lambda x: x.at[100].get(mode="fill"))(ks)
    assert ftrans.random.key_data(filled).tolist() == [2**32 - 1] * 2


_user_p = Primitive("test_random_gamma_primitive_identity")
_user_p.def_abstract_eval(lambda x: x)
_user_p.def_impl(lambda x: x)


def test_user_primitive_on_key_arrays_in_traced_code():
    k = ftrans.random.key(0)
    closed = ftrans.make_jaxpr(lambda k: _user_p.bind(k))(k)
    assert str(closed.jaxpr.outvars[0].aval) == "key<fry>[]"
    # a key the traced code closes over enters as its data, wrapped
    closed = ftrans.make_jaxpr(lambda: _user_p.bind(k))()
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["random_wrap", _user_p.name]


def test_key_reuse_through_an_unknown_primitive():
    def f(key):
        kr.assert_unconsumed(key)
        key2 = _user_p.bind(key)
        kr.assert_consumed(key)
        kr.assert_consumed(key2)

    kr.check_key_reuse(f, ftrans.random.key(0))
    # read off the IR: the unknown primitive consumes its key and its result counts as consumed
    jaxpr = ftrans.make_jaxpr(lambda k: ftrans.random.bits(_user_p.bind(k)))(ftrans.random.key(0)).jaxpr
    with pytest.raises(KeyReuseError, match="already consumed"):
        kr.jaxpr_type_signature(jaxpr)
