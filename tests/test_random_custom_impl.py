"""A user's own PRNG implementation (``extend.random.define_prng_impl`` / ``PRNGImpl``), against JAX's: the
same four functions on one key's data give the same keys and draws, through jit, vmap, scan, eval_shape and
the key arrays' structural operations; ``key_impl`` round-trips it."""

from __future__ import annotations

import jax
import jax.extend.random as jer
import jax.numpy as jjnp
import jax.random as jr
import numpy as np
import pytest
from jax._src.random import threefry2x32 as jtf

import ftrans
import ftrans.extend.random as fer
import ftrans.numpy as jnp
import ftrans.random as fr
from ftrans.random import _threefry as ftf


def _funcs(np_, vmap, seed_key, split_keys, bits_, fold_in_key):
    """JAX's test suite's "double threefry": two threefry keys side by side (key shape (2, 2))."""
    def seed(s):
        int_t = s.dtype.type if hasattr(s, "dtype") else type(s)
        return np_.vstack([seed_key(s), seed_key(s ^ int_t(3))])

    def split(k, shape):
        return vmap(split_keys, (0, None), len(shape))(k, shape)

    def random_bits(k, bit_width, shape):
        return bits_(k[0], bit_width, shape)

    def fold_in(k, d):
        return np_.vstack([fold_in_key(k[0], d), fold_in_key(k[1], d)])

    return dict(key_shape=(2, 2), seed=seed, split=split, random_bits=random_bits, fold_in=fold_in,
                name="double", tag="fry2")


OURS = fer.define_prng_impl(**_funcs(jnp, ftrans.vmap, ftf.seed_key, ftf.split_keys, ftf.random_bits,
                                     ftf.fold_in_key))
THEIRS = jer.define_prng_impl(**_funcs(jjnp, jax.vmap, jtf.threefry_seed, jtf.threefry_split,
                                       jtf.threefry_random_bits, jtf.threefry_fold_in))


def same_keys(ours, theirs):
    assert isinstance(ours, fr.PRNGKeyArray)
    assert str(ours.dtype) == str(theirs.dtype) == "key<fry2>" and ours.shape == theirs.shape
    np.testing.assert_array_equal(np.asarray(fr.key_data(ours)), np.asarray(jr.key_data(theirs)))


@pytest.mark.parametrize("seed", [0, 73, -5, np.uint32(9)])
def test_seed_split_fold_in_match_jax(seed):
    k, jk = fr.key(seed, impl=OURS), jr.key(seed, impl=THEIRS)
    same_keys(k, jk)
    same_keys(fr.split(k, 3), jr.split(jk, 3))
    same_keys(fr.split(k, (2, 3)), jr.split(jk, (2, 3)))
    same_keys(fr.fold_in(k, 7), jr.fold_in(jk, 7))
    same_keys(ftrans.jit(lambda k: fr.split(k))(k), jax.jit(lambda k: jr.split(k))(jk))


def test_samplers_match_jax():
    k, jk = fr.key(11, impl=OURS), jr.key(11, impl=THEIRS)
    pairs = [(lambda k: fr.uniform(k, (3,)), lambda k: jr.uniform(k, (3,))),
             (lambda k: fr.normal(k, (2, 2)), lambda k: jr.normal(k, (2, 2))),
             (lambda k: fr.randint(k, (4,), 0, 10), lambda k: jr.randint(k, (4,), 0, 10)),
             (lambda k: fr.permutation(k, 6), lambda k: jr.permutation(k, 6)),
             (lambda k: fr.gamma(k, 2.0, (2,)), lambda k: jr.gamma(k, 2.0, (2,))),
             (lambda k: fr.bits(k, (3,), np.uint16), lambda k: jr.bits(k, (3,), np.uint16))]
    # ftrans's samplers run eagerly; jax's oracle is one jitted program (eagerly jax compiles each operation)
    theirs = jax.jit(lambda jk: [g(jk) for _, g in pairs])(jk)
    for (f, _), t in zip(pairs, theirs, strict=True):
        np.testing.assert_allclose(np.asarray(f(k)), np.asarray(t), rtol=1e-6)
    f, g = (lambda k: fr.normal(fr.fold_in(k, 2), (3,))), (lambda k: jr.normal(jr.fold_in(k, 2), (3,)))
    np.testing.assert_allclose(np.asarray(ftrans.jit(f)(k)), np.asarray(jax.jit(g)(jk)), rtol=1e-6)


def test_transforms_and_structure_match_jax():
    ks, jks = fr.split(fr.key(5, impl=OURS), 4), jr.split(jr.key(5, impl=THEIRS), 4)
    np.testing.assert_allclose(np.asarray(ftrans.vmap(lambda k: fr.normal(k, (2,)))(ks)),
                               np.asarray(jax.vmap(lambda k: jr.normal(k, (2,)))(jks)), rtol=1e-6)
    same_keys(ftrans.vmap(fr.fold_in, (0, None))(ks, 2), jax.vmap(jr.fold_in, (0, None))(jks, 2))
    same_keys(ftrans.vmap(fr.split)(ks), jax.vmap(jr.split)(jks))
    c, ys = ftrans.lax.scan(lambda c, k: (c + fr.uniform(k), fr.fold_in(k, 1)), 0.0, ks)
    jc, jys = jax.lax.scan(lambda c, k: (c + jr.uniform(k), jr.fold_in(k, 1)), 0.0, jks)
    np.testing.assert_allclose(float(c), float(jc), rtol=1e-6)
    same_keys(ys, jys)
    same_keys(jnp.concatenate([ks, ks[::-1]]), jjnp.concatenate([jks, jks[::-1]]))
    same_keys(ks.reshape(2, 2).T, jks.reshape(2, 2).T)
    same_keys(fr.wrap_key_data(fr.key_data(ks), impl=OURS), jr.wrap_key_data(jr.key_data(jks), impl=THEIRS))
    out = ftrans.eval_shape(lambda k: fr.split(k, 3), ks[0])
    assert out.shape == (3,) and str(out.dtype) == "key<fry2>"


def test_key_impl_round_trips_and_specs_compare():
    k = fr.key(3, impl=OURS)
    spec = fr.key_impl(k)
    assert spec == OURS and hash(spec) == hash(OURS) and repr(spec) == repr(jr.key_impl(jr.key(3, impl=THEIRS)))
    same_keys(fr.key(3, impl=spec), jr.key(3, impl=THEIRS))
    assert fr.key(3, impl=spec).dtype == k.dtype == fr.key_dtype(OURS)
    # a second implementation of the same name and tag is another implementation (JAX's PRNGImpl is a
    # NamedTuple of its functions)
    other = fer.define_prng_impl(**{**_funcs(jnp, ftrans.vmap, ftf.seed_key, ftf.split_keys, ftf.random_bits,
                                             ftf.fold_in_key)})
    assert other != OURS and fr.key(3, impl=other).dtype != k.dtype
    # the built-in implementations still answer their names
    assert fr.key_impl(fr.key(0)) == "threefry2x32" == jr.key_impl(jr.key(0))


def test_prng_impl_defaults_are_jaxs():
    imp = fer.PRNGImpl((2,), ftf.seed_key, ftf.split_keys, ftf.random_bits, ftf.fold_in_key)
    assert imp.name == "<unnamed>" and imp.tag == "?"
    k = fr.key(4, impl=imp)
    assert str(k.dtype) == "key<?>"
    np.testing.assert_array_equal(np.asarray(fr.key_data(k)), np.asarray(jr.key_data(jr.key(4))))
    np.testing.assert_array_equal(np.asarray(fr.uniform(k, (3,))), np.asarray(jr.uniform(jr.key(4), (3,))))


@pytest.mark.parametrize("impl", ["threefry2x32", "threefry4x32", "rbg"])
def test_pickled_keys_keep_a_builtin_implementation(impl):
    import pickle

    for r in (fr, jr):
        k = r.split(r.key(3, impl=impl), 2)
        back = pickle.loads(pickle.dumps(k))
        assert back.dtype == k.dtype and r.key_impl(back) == impl
        np.testing.assert_array_equal(np.asarray(r.key_data(back)), np.asarray(r.key_data(k)))
    assert fr.key(3, impl=impl)._impl is pickle.loads(pickle.dumps(fr.key(3, impl=impl)))._impl
