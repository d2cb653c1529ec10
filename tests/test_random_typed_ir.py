"""Typed PRNG keys in the IR: inside a staged program a key array is a ``key<fry>`` value and the PRNG
operations are the primitives ``random_seed``/``random_bits``/``random_split``/``random_fold_in``/
``random_wrap``/``random_unwrap``/``random_clone``, printed as JAX prints them; compiled programs
carry keys as their ``uint32`` data and give JAX's bits; the key-reuse signatures are read off the IR."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
import ftrans.random as fr
from ftrans import lax
from ftrans.core.keys import KeyDtype
from ftrans.core.prims import random as R
from ftrans.experimental.key_reuse import _core as kr


def _both(fn):
    """``fn(mod)`` for ftrans and for jax: the same program written once against either."""
    return fn(ftrans), fn(jax)


_PROGRAMS = {
    "seed": (lambda m: m.random.key, lambda m: (0,)),
    "split": (lambda m: m.random.split, lambda m: (m.random.key(0),)),
    "split_shape": (lambda m: functools.partial(m.random.split, num=(2, 3)), lambda m: (m.random.key(0),)),
    "fold_in": (lambda m: lambda k: m.random.fold_in(k, 3), lambda m: (m.random.key(0),)),
    "bits": (lambda m: lambda k: m.random.bits(k, (3,)), lambda m: (m.random.key(0),)),
    "bits8": (lambda m: lambda k: m.random.bits(k, (2, 2), np.uint8), lambda m: (m.random.key(0),)),
    "key_data": (lambda m: m.random.key_data, lambda m: (m.random.key(0),)),
    "wrap": (lambda m: m.random.wrap_key_data, lambda m: (np.zeros(2, np.uint32),)),
    "clone": (lambda m: m.random.clone, lambda m: (m.random.key(0),)),
    "split_keys": (lambda m: lambda ks: m.random.split(ks[1]), lambda m: (m.random.split(m.random.key(0), 4),)),
    "squeeze": (lambda m: lambda k: m.numpy.squeeze(k), lambda m: (m.random.split(m.random.key(0), 1),)),
}


@pytest.mark.parametrize("name", list(_PROGRAMS))
def test_key_operations_print_as_jax(name):
    fn, args = _PROGRAMS[name]
    ours = str(ftrans.make_jaxpr(fn(ftrans))(*args(ftrans)))
    theirs = str(jax.make_jaxpr(fn(jax))(*args(jax)))
    # (line breaking aside: the printers' 80-column rules differ by the closing brace)
    assert " ".join(ours.split()) == " ".join(theirs.split())


def test_key_arguments_and_results_are_key_typed():
    ks = fr.split(fr.key(0), 60).reshape(3, 4, 5)
    closed = ftrans.make_jaxpr(lambda ks: lax.scan(lambda _, k: (None, k.T), None, ks))(ks)
    (a,), (e,) = closed.jaxpr.invars, closed.jaxpr.eqns
    assert type(a.aval.dtype) is KeyDtype and a.aval.shape == (3, 4, 5) and str(a.aval.dtype) == "key<fry>"
    assert e.primitive.name == "scan" and e.outvars[0].aval.shape == (3, 5, 4)
    (inner,) = e.params["jaxpr"].jaxpr.eqns
    assert inner.primitive.name == "transpose" and type(inner.outvars[0].aval.dtype) is KeyDtype
    # an eval_shape struct of a key dtype enters as a key-typed value too
    s = ftrans.eval_shape(fr.key, 0)
    closed = ftrans.make_jaxpr(fr.split)(s)
    # (82 columns on one line: JAX's printer breaks it, the closing " }" counting towards the 80)
    assert str(closed) == "{ lambda ; a:key<fry>[]. let\n    b:key<fry>[2] = random_split[shape=(2,)] a\n  in (b,) }"


def test_user_prng_impls_bind_the_primitives():
    impl = fr.PRNGKeyArray  # noqa: F841  (the class is public; the impl below is a user's)
    from ftrans.extend import random as xr

    def seed(s):
        return jnp.stack([lax.convert_element_type(s, np.uint32), np.uint32(7), np.uint32(1)])

    def split(k, shape):
        return jnp.broadcast_to(k, (*shape, 3)) + jnp.arange(int(np.prod(shape)), dtype=np.uint32).reshape(
            (*shape, 1))

    def fold_in(k, d):
        return k + d

    def bits(k, width, shape):
        return jnp.broadcast_to(k[0] * np.uint32(3) + k[1], shape).astype(f"uint{width}")

    mine = xr.define_prng_impl(key_shape=(3,), seed=seed, split=split, random_bits=bits, fold_in=fold_in,
                               name="mine", tag="my")
    k = fr.key(5, impl=mine)
    text = str(ftrans.make_jaxpr(lambda k: fr.bits(fr.split(k)[1], (2,)))(k))
    assert "random_split[shape=(2,)]" in text and "a:key<my>[]" in text and "random_bits" in text
    eager = fr.bits(fr.split(k)[1], (2,))
    np.testing.assert_array_equal(ftrans.jit(lambda s: fr.bits(fr.split(fr.key(s, impl=mine))[1], (2,)))(5), eager)


def _program(m, s, idx, closed_key):
    k = m.random.key(s)
    ks = m.random.split(k, 4)
    out = [ks[idx], ks.at[1].set(k), ks.at[idx].set(ks[:2]), m.numpy.concatenate([ks[:1], closed_key[None]]),
           m.numpy.stack([k, closed_key]), m.lax.select(True, k, closed_key), ks.reshape(2, 2).T,
           m.lax.dynamic_slice(ks, (idx[0],), (2,)), m.numpy.where(np.array([True, False, True, False]), ks,
                                                                    ks[::-1]),
           m.random.fold_in(k, 7), m.numpy.broadcast_to(k, (3,))[2]]
    data = [m.random.key_data(x) for x in out]
    return data + [m.random.bits(out[-1], (2,)), m.random.normal(out[0][1], (3,)), ks == ks[::-1]]


def test_compiled_programs_over_typed_keys_match_jax():
    idx = np.array([2, 0], np.int32)
    ck, jck = fr.key(5), jax.random.key(5)  # a concrete key the program closes over
    ours = ftrans.jit(lambda s, i: _program(ftrans, s, i, ck))(3, idx)
    theirs = jax.jit(lambda s, i: _program(jax, s, i, jck))(3, idx)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _control_flow(m, s):
    k = m.random.key(s)
    k2 = m.lax.cond(s > 1, lambda k: m.random.split(k)[0], lambda k: k, k)
    k3, _ = m.lax.while_loop(lambda c: c[1] < 3, lambda c: (m.random.fold_in(c[0], c[1]), c[1] + 1), (k2, 0))

    def step(c, _):
        a, b = m.random.split(c)
        return a, m.random.uniform(b)

    last, us = m.lax.scan(step, k3, None, length=3)
    v = m.vmap(lambda s: m.random.uniform(m.random.key(s)))(m.numpy.arange(3))
    g = m.grad(lambda w: m.numpy.sum(w * m.random.normal(last, (3,))))(m.numpy.ones(3))
    return m.random.normal(k3), us, v, g, m.random.key_data(last)


def test_control_flow_vmap_grad_over_typed_keys_match_jax():
    ours = ftrans.jit(functools.partial(_control_flow, ftrans))(3)
    theirs = jax.jit(functools.partial(_control_flow, jax))(3)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
    text = str(ftrans.make_jaxpr(functools.partial(_control_flow, ftrans))(3))
    assert "key<fry>" in text and "random_seed[impl=fry]" in text and "random_split" in text


def test_key_results_of_compiled_programs_are_key_arrays():
    k = ftrans.jit(lambda s: fr.split(fr.key(s), 3))(4)
    assert isinstance(k, fr.PRNGKeyArray) and k.shape == (3,) and str(k.dtype) == "key<fry>"
    np.testing.assert_array_equal(fr.key_data(k), jax.random.key_data(jax.random.split(jax.random.key(4), 3)))
    text = ftrans.jit(lambda s: fr.split(fr.key(s), 3)).lower(4).as_text()
    assert "tensor<3x2xui32>" in text  # keys are uint32 data at the StableHLO boundary


def test_random_primitives_rules():
    kd = KeyDtype(fr.key(0)._impl)
    from ftrans.core.avals import ShapedArray

    k = ShapedArray((3,), kd)
    assert R.random_bits_p.abstract_eval if hasattr(R.random_bits_p, "abstract_eval") else True
    from ftrans.core.primitive import abstract_eval

    assert abstract_eval(R.random_bits_p, [k], {"bit_width": 16, "shape": (2,)}) == ShapedArray((3, 2), np.uint16)
    assert abstract_eval(R.random_split_p, [k], {"shape": (2,)}) == ShapedArray((3, 2), kd)
    assert abstract_eval(R.random_unwrap_p, [k], {}) == ShapedArray((3, 2), np.uint32)
    assert abstract_eval(R.random_wrap_p, [ShapedArray((3, 2), np.uint32)], {"impl": kd._impl}) == k
    with pytest.raises(ftrans.errors.FtransTypeError, match="key array operand"):
        abstract_eval(R.random_bits_p, [ShapedArray((2,), np.uint32)], {"bit_width": 32, "shape": ()})
    with pytest.raises(ftrans.errors.FtransTypeError, match="must be uint32"):
        abstract_eval(R.random_wrap_p, [ShapedArray((2,), np.int32)], {"impl": kd._impl})
    # eager (NumPy-path) rules on concrete key arrays: JAX's bits
    key = fr.key(1)
    np.testing.assert_array_equal(R.random_bits_p.impl(key, bit_width=32, shape=(3,)),
                                  jax.random.bits(jax.random.key(1), (3,)))
    np.testing.assert_array_equal(fr.key_data(R.random_split_p.impl(key, shape=(2,))),
                                  jax.random.key_data(jax.random.split(jax.random.key(1))))
    # jvp: keys have float0 tangents; vmap: the batch axis moves to the front
    out, tan = ftrans.jvp(lambda x: (x * 2.0, fr.split(fr.key(0))), (1.0,), (1.0,))
    assert tan[1].dtype == ftrans.dtypes.float0 and tan[1].shape == (2,)
    kk = ftrans.jit(ftrans.vmap(lambda k: fr.bits(k[1], (2,)), in_axes=1))(fr.split(fr.key(0), (2, 3)))
    np.testing.assert_array_equal(kk, jax.vmap(lambda k: jax.random.bits(k[1], (2,)), in_axes=1)(
        jax.random.split(jax.random.key(0), (2, 3))))


_SIGNATURES = {
    "split": (fr.split, lambda: (fr.key(0),), kr.KeyReuseSignature(kr.Sink(0), kr.Source(0))),
    "bits": (fr.bits, lambda: (fr.key(0),), kr.KeyReuseSignature(kr.Sink(0))),
    "fold_in": (lambda k: fr.fold_in(k, 2), lambda: (fr.key(0),), kr.KeyReuseSignature(kr.Source(0))),
    "seed": (fr.key, lambda: (0,), kr.KeyReuseSignature(kr.Source(0))),
    "wrap": (fr.wrap_key_data, lambda: (np.zeros(2, np.uint32),), kr.KeyReuseSignature(kr.Source(0))),
    "unwrap": (fr.key_data, lambda: (fr.key(0),), kr.KeyReuseSignature()),
    "clone": (fr.clone, lambda: (fr.key(0),), kr.KeyReuseSignature(kr.Source(0))),
    "consume": (kr.consume, lambda: (fr.key(0),), kr.KeyReuseSignature(kr.Sink(0), kr.Forward(0, 0))),
    "reshape": (lambda k: k.reshape((1,)), lambda: (fr.key(0),), kr.KeyReuseSignature(kr.Forward(0, 0))),
    "dus": (lax.dynamic_update_slice, lambda: (fr.split(fr.key(0), 1), fr.split(fr.key(1), 1), (0,)),
            kr.KeyReuseSignature(kr.Sink(1), kr.Forward(0, 0))),
    "jit": (ftrans.jit(lambda k: (fr.bits(k), k)), lambda: (fr.key(0),),
            kr.KeyReuseSignature(kr.Sink(0), kr.Forward(0, 1))),
}


@pytest.mark.parametrize("name", list(_SIGNATURES))
def test_jaxpr_type_signatures(name):
    fn, args, expected = _SIGNATURES[name]
    assert kr.jaxpr_type_signature(ftrans.make_jaxpr(fn)(*args()).jaxpr) == expected
    assert name == "jit" or kr.key_reuse_signatures[
        {"split": R.random_split_p, "bits": R.random_bits_p, "fold_in": R.random_fold_in_p,
         "seed": R.random_seed_p, "wrap": R.random_wrap_p, "unwrap": R.random_unwrap_p,
         "clone": R.random_clone_p, "consume": R.consume_p, "reshape": ftrans.lax.reshape_p,
         "dus": ftrans.lax.dynamic_update_slice_p}[name]] == expected


def test_jaxpr_type_signature_finds_reuse():
    def twice(k):
        return fr.bits(k), fr.bits(k)

    with pytest.raises(ftrans.errors.KeyReuseError, match="In random_bits, argument 0 is already consumed"):
        kr.jaxpr_type_signature(ftrans.make_jaxpr(twice)(fr.key(0)).jaxpr)


def test_jax_oracle_agrees_on_printed_scan():
    f = lambda m: lambda ks: m.lax.scan(lambda _, k: (None, k.T), None, ks)  # noqa: E731
    ours = str(ftrans.make_jaxpr(f(ftrans))(fr.split(fr.key(0), 60).reshape(3, 4, 5)))
    theirs = str(jax.make_jaxpr(f(jax))(jax.random.split(jax.random.key(0), 60).reshape(3, 4, 5)))
    # JAX's scan prints more params (jaxpr sharing, linear, ...): the key-typed signature lines agree
    assert ours.splitlines()[0] == theirs.splitlines()[0] == "{ lambda ; a:key<fry>[3,4,5]. let"
    assert "d:key<fry>[5,4] = transpose[permutation=(1, 0)] c" in ours
    assert "d:key<fry>[5,4] = transpose[permutation=(1, 0)] c" in theirs
    _ = jjnp


def _bodies_making_keys(m):
    """Control flow (run eagerly) whose bodies make keys from traced seeds."""
    us = m.lax.scan(lambda c, s: (c, m.random.uniform(m.random.key(s))), 0, m.numpy.arange(3))[1]
    k1 = m.lax.cond(True, lambda s: m.random.key(s), lambda s: m.random.key(s + 1), 3)
    k2 = m.lax.fori_loop(0, 3, lambda i, k: m.random.key(i), m.random.key(7))
    k3 = m.lax.fori_loop(0, 3, lambda i, k: m.random.fold_in(k, i), m.random.key(7))
    return us, m.random.key_data(k1), m.random.key_data(k2), m.random.key_data(k3)


def test_eager_control_flow_over_keys_made_inside_match_jax():
    for a, b in zip(_bodies_making_keys(ftrans), _bodies_making_keys(jax)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_interpreting_a_typed_program_on_concrete_keys():
    from ftrans.core.jaxpr_api import eval_jaxpr

    def f(k):
        ks = fr.split(k, 4)
        return fr.uniform(ks[1], (2,)), fr.key_data(ks.reshape(2, 2).T)

    closed = ftrans.make_jaxpr(f)(fr.key(0))
    outs = eval_jaxpr(closed.jaxpr, list(closed.consts), fr.key(0))
    for a, b in zip(outs, f(fr.key(0))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
