"""The key-reuse checker (ftrans.experimental.key_reuse) against JAX's (jax.experimental.key_reuse) as the oracle:
the same programs raise KeyReuseError with the same message (JAX's first line), or pass, statically
(check_key_reuse) and eagerly (the debug_key_reuse option)."""

from __future__ import annotations

import types

import jax
import jax.experimental.key_reuse._core as jax_core
import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
import ftrans.experimental.key_reuse as fkr
import ftrans.numpy as fnp
from ftrans.experimental.key_reuse import _core as f_core

JAX = types.SimpleNamespace(checkpoint=jax.checkpoint, grad=jax.grad, core=jax_core, device_put=jax.device_put, random=jax.random, lax=jax.lax, np=jnp, jit=jax.jit, vmap=jax.vmap,
                            check=jax_core.check_key_reuse, sig=jax_core.function_type_signature,
                            error=jax.errors.KeyReuseError, ctx=jax.debug_key_reuse, disable_jit=jax.disable_jit)
FT = types.SimpleNamespace(checkpoint=ftrans.checkpoint, grad=ftrans.grad, core=f_core, device_put=ftrans.device_put, random=ftrans.random, lax=ftrans.lax, np=fnp, jit=ftrans.jit, vmap=ftrans.vmap,
                           check=fkr.check_key_reuse, sig=fkr.function_type_signature, error=fkr.KeyReuseError,
                           ctx=ftrans.debug_key_reuse, disable_jit=ftrans.disable_jit)


def _twice(L):
    key = L.random.key(0)
    return L.random.uniform(key) + L.random.uniform(key)


def _after_split(L):
    key = L.random.key(0)
    other = L.random.split(key)
    return L.random.uniform(key), other


def _split_twice(L):
    key = L.random.key(0)
    a = L.random.split(key)
    b = L.random.split(key)
    return a, b


def _split_good(L):
    k1, k2 = L.random.split(L.random.key(0))
    return L.random.uniform(k1) + L.random.uniform(k2)


def _fold_ins(L):
    key = L.random.key(0)
    return [L.random.uniform(L.random.fold_in(key, i)) for i in range(3)] + [L.random.uniform(key)]


def _broadcast(L):
    key = L.random.key(0)
    return L.random.bits(key) + L.vmap(L.random.bits)(key[None])


def _reshape(L):
    key = L.random.key(0)
    return L.random.bits(key) + L.random.bits(key.reshape((1,)).squeeze())


def _indexing(L):
    keys = L.random.split(L.random.key(0), 3)
    return L.random.uniform(keys[0]) + L.random.normal(keys[2])


def _cond_then_reuse(L):
    key = L.random.key(0)
    return L.lax.cond(True, L.random.uniform, lambda k: 1.0, key) + L.random.uniform(key)


def _scan_good(L):
    def body(key, _):
        key, sub = L.random.split(key)
        return key, L.random.bits(sub)
    return L.lax.scan(body, L.random.key(0), xs=L.np.arange(4))


def _scan_const(L):
    key = L.random.key(0)
    return L.lax.scan(lambda c, _: (c, L.random.uniform(key)), None, xs=L.np.arange(4))


def _scan_carry(L):
    return L.lax.scan(lambda k, _: (k, L.random.bits(k)), L.random.key(0), xs=L.np.arange(4))


def _while_body(L):
    def body(c):
        return c[0], c[1] + L.random.randint(c[0], (), 1, 3)
    return L.lax.while_loop(lambda c: c[1] < 5, body, (L.random.key(0), 0))


def _while_cond_const(L):
    key = L.random.key(0)
    return L.lax.while_loop(lambda i: i < L.random.uniform(key), lambda i: i + 1, 0.0)


def _jit_inner_reuse(L):
    @L.jit
    def g(key):
        return L.random.bits(key) + L.random.bits(key)
    return g(L.random.key(0))


def _jit_consumed_arg(L):
    key = L.random.key(0)
    L.jit(L.random.bits)(key)
    return L.random.bits(key)


def _jit_not_consuming(L):
    key = L.random.key(0)
    x = L.random.bits(key)
    return L.jit(lambda k, x: x)(key, x)


def _clone(L):
    key = L.random.key(0)
    k2 = L.random.clone(key)
    return L.random.bits(key) + L.random.bits(k2)


def _bits_twice(L):
    key = L.random.key(0)
    return L.random.bits(key) + L.random.bits(key)




def _checkpoint_then_reuse(L):
    key = L.random.key(0)
    L.checkpoint(lambda x, k: x * L.random.normal(k))(1.0, key)
    return L.random.normal(key)


def _grad_of_checkpoint(L):
    return L.grad(L.checkpoint(lambda x, k: x * L.random.normal(k)))(1.0, L.random.key(0))


CASES = [_checkpoint_then_reuse, _grad_of_checkpoint, _twice, _after_split, _split_twice, _split_good, _fold_ins, _broadcast, _reshape, _indexing, _cond_then_reuse,
         _scan_good, _scan_const, _scan_carry, _while_body, _while_cond_const, _jit_inner_reuse, _jit_consumed_arg,
         _jit_not_consuming]


def _outcome(L, run):
    try:
        run()
    except L.error as e:
        # JAX's first line, up to the details (why a loop body reuses a key depends on how JAX's scan
        # forwards a carried key that the body returns unchanged)
        return str(e).split("\n")[0].split(":")[0].split(", because")[0]
    return None


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_check_key_reuse_matches_jax(case):
    want = _outcome(JAX, lambda: JAX.check(lambda: case(JAX)))
    got = _outcome(FT, lambda: FT.check(lambda: case(FT)))
    assert (got is None) == (want is None), (got, want)
    if want is not None:
        assert got.startswith(want), (got, want)


@pytest.mark.parametrize("fun, args", [
    (lambda L: L.random.bits, lambda L: (L.random.key(0),)),
    (lambda L: L.random.split, lambda L: (L.random.key(0),)),
    (lambda L: L.random.key, lambda L: (0,)),
    (lambda L: L.random.fold_in, lambda L: (L.random.key(0), 2)),
    (lambda L: L.random.key_data, lambda L: (L.random.key(0),)),
    (lambda L: (lambda k: k[None]), lambda L: (L.random.key(0),)),
    (lambda L: (lambda a, b: L.lax.concatenate([a, b], 0)),
     lambda L: (L.random.key(0)[None], L.random.key(1)[None])),
    (lambda L: (lambda k: (k, L.random.uniform(k))), lambda L: (L.random.key(0),)),
])
def test_signatures_match_jax(fun, args):
    assert repr(FT.sig(fun(FT), *args(FT))) == repr(JAX.sig(fun(JAX), *args(JAX)))


def test_eager_option_matches_jax():
    """With the option on, jitted calls are checked eagerly as JAX's: a consumed argument key, a closed-over key
    consumed by an earlier call, and (ftrans only: JAX's eager samplers compile for seconds) samplers run
    one by one, with JAX's wording."""
    outcomes = []
    for L in (JAX, FT):
        key = L.random.key(1)
        f = L.jit(lambda: L.random.bits(key))
        with L.ctx(True):
            outcomes.append(_outcome(L, lambda: _jit_consumed_arg(L)))
            f()
            with pytest.raises(L.error, match="Previously-consumed key passed to jit-compiled function at index 0"):
                f()
        with L.ctx(False):
            f()  # not checked
    assert outcomes[0] == outcomes[1] == "Previously-consumed key passed to random_bits at index 0"
    key = FT.random.key(0)
    with FT.ctx(True), FT.disable_jit():
        FT.random.bits(key)
        with pytest.raises(FT.error, match="Previously-consumed key passed to random_bits at index 0"):
            FT.random.bits(key)


def test_consumed_state_and_helpers():
    with ftrans.debug_key_reuse(True):
        key = ftrans.random.key(0)
        ftrans.random.bits(key)
        assert key._consumed and not ftrans.random.clone(key)._consumed
        assert _outcome(FT, lambda: _clone(FT)) is None
        keys = ftrans.random.split(ftrans.random.key(1), 3)
        keys[1]
        np.testing.assert_array_equal(keys._consumed, [False, True, False])
        fkr.assert_consumed(keys, np.array([False, True, False]))
        with pytest.raises(AssertionError):
            fkr.assert_unconsumed(keys)
        k2 = fkr.consume(ftrans.random.key(2))
        fkr.assert_consumed(k2)
    with pytest.raises(fkr.KeyReuseError, match=r"(?s)already consumed.*test_key_reuse\.py:\d+"):
        fkr.check_key_reuse(lambda: _twice(FT))  # names the user's line
    assert ftrans.config.debug_key_reuse is False


def test_signature_classes_like_jax():
    for lib in (jax_core, f_core):
        m = np.array([True, False])
        assert repr(lib.KeyReuseSignature(lib.Sink(1), lib.Source(0), lib.Forward(0, 1))) == \
            "KeyReuseSignature(Sink(1), Source(0), Forward(0, 1))"
        assert lib.Sink(0, m) == lib.Sink(0, m.copy()) and lib.Sink(0) == lib.Sink(0, np.array([True, True]))
        with pytest.raises(ValueError):
            lib.Source(0).idx = 1


def _asserting(L):
    """JAX's unit checks of the signatures: the consumption state the helpers assert, through jit, cond,
    device_put and vmap (each assertion also runs, as a no-op, when the jitted call runs for real)."""
    A = L.core

    def f(flag, key):
        A.assert_unconsumed(key)
        L.lax.cond(flag, L.random.uniform, lambda k: 1.0, key)
        A.assert_consumed(key)

        def g():
            k = L.random.key(0)
            bits = L.random.bits(k)
            A.assert_consumed(k)
            return bits, k
        _, k = L.jit(g)()
        A.assert_consumed(k)
        k1 = L.random.key(1)
        k1d = L.device_put(k1)
        A.assert_unconsumed(k1d)
        A.consume(k1)
        A.assert_consumed(k1d)
        keys = L.random.split(L.random.key(2))
        A.assert_unconsumed(keys[0])
        A.assert_consumed(keys, np.array([True, False]))
    A.check_key_reuse(L.jit(f), True, L.random.key(3))


def test_assertions_like_jax():
    _asserting(JAX)
    _asserting(FT)


def test_jitted_training_loop_is_analysed_once_per_signature():
    """A loop of jitted steps on fresh subkeys passes (JAX's outcome; its eager split compiles for seconds, so
    it is left out here); ftrans traces the step once for the program and once for its effect on keys, not
    at every call."""
    for L in (FT,):
        runs = []

        @L.jit
        def step(p, k):
            runs.append(1)
            return p + L.random.bits(k)

        with L.ctx(True):
            key, p = L.random.key(0), L.np.zeros((), L.np.uint32)
            for _ in range(3):
                key, sub = L.random.split(key)
                p = step(p, sub)
            with pytest.raises(L.error):
                step(p, sub)
    assert len(runs) == 2


def test_jit_analysis_still_runs_once_refs_exist():
    # Once any ref exists, jit stages through the ref-threading path; the key analysis must run there too.
    ftrans.new_ref(np.zeros(3, np.float32))

    def f(key):
        return ftrans.random.bits(key)

    with ftrans.debug_key_reuse(True):
        k = ftrans.random.key(0)
        ftrans.jit(f)(k)
        with pytest.raises(fkr.KeyReuseError, match="Previously-consumed key passed to jit-compiled function"):
            ftrans.jit(f)(k)
