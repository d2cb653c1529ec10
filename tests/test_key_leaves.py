"""A typed key array is one pytree leaf (as in JAX), and still crosses every transformation as its data."""

import jax
import jax.random as jr
import numpy as np

import ftrans
import ftrans.numpy as fnp
import ftrans.random as fr


def _data(k):
    return np.asarray(fr.key_data(k))


def _same_keys(ours, theirs):
    assert str(ours.dtype) == str(theirs.dtype) and ours.shape == theirs.shape
    np.testing.assert_array_equal(_data(ours), np.asarray(jr.key_data(theirs)))


def test_key_arrays_are_leaves_as_in_jax():
    ours, theirs = fr.split(fr.key(3), 4), jr.split(jr.key(3), 4)
    for tree_o, tree_t in (((ours,), (theirs,)), ({"k": ours, "x": 1.0}, {"k": theirs, "x": 1.0}), (ours, theirs)):
        lo, lt = jax.tree.leaves(tree_o), jax.tree.leaves(tree_t)
        assert len(lo) == len(lt) and all(a is b for a, b in zip(lo, jax.tree.leaves(tree_o)))
        assert jax.tree.structure(tree_o) == jax.tree.structure(tree_t)
    assert jax.tree.leaves(ours)[0] is ours
    # tree.map hands the whole key array to the function
    _same_keys(jax.tree.map(lambda k: fr.split(k[0])[1], {"a": ours})["a"],
               jax.tree.map(lambda k: jr.split(k[0])[1], {"a": theirs})["a"])


def test_transformations_unwrap_and_rewrap_key_leaves():
    ours, theirs = fr.key(5), jr.key(5)
    # jit returning keys (in a tree), and taking them
    f_o = ftrans.jit(lambda k: {"pair": fr.split(k), "n": fr.normal(k)})
    f_t = jax.jit(lambda k: {"pair": jr.split(k), "n": jr.normal(k)})
    o, t = f_o(ours), f_t(theirs)
    _same_keys(o["pair"], t["pair"])
    np.testing.assert_allclose(np.asarray(o["n"]), np.asarray(t["n"]), rtol=1e-6)
    # vmap over a batch of keys, returning keys
    g_o = ftrans.vmap(lambda k: (fr.fold_in(k, 1), fr.uniform(k)))
    g_t = jax.vmap(lambda k: (jr.fold_in(k, 1), jr.uniform(k)))
    (ko, uo), (kt, ut) = g_o(fr.split(ours, 3)), g_t(jr.split(theirs, 3))
    _same_keys(ko, kt)
    np.testing.assert_allclose(np.asarray(uo), np.asarray(ut), rtol=1e-6)
    # scan carrying a key
    step_o = lambda c, _: (fr.split(c)[0], fr.bits(c))  # noqa: E731
    step_t = lambda c, _: (jr.split(c)[0], jr.bits(c))  # noqa: E731
    (co, bo), (ct, bt) = ftrans.lax.scan(step_o, ours, None, length=3), jax.lax.scan(step_t, theirs, None, length=3)
    _same_keys(co, ct)
    np.testing.assert_array_equal(np.asarray(bo), np.asarray(bt))
    # grad with a key among the arguments: its cotangent is float0 of the key array's shape
    gx_o, gk_o = ftrans.grad(lambda x, k: x * fr.normal(k), argnums=(0, 1), allow_int=True)(2.0, ours)
    gx_t, gk_t = jax.grad(lambda x, k: x * jr.normal(k), argnums=(0, 1), allow_int=True)(2.0, theirs)
    np.testing.assert_allclose(np.asarray(gx_o), np.asarray(gx_t), rtol=1e-6)
    assert gk_o.dtype == gk_t.dtype and gk_o.shape == gk_t.shape == ()
    # cond and eval_shape
    _same_keys(ftrans.lax.cond(True, lambda k: fr.split(k)[1], lambda k: k, ours),
               jax.lax.cond(True, lambda k: jr.split(k)[1], lambda k: k, theirs))
    s = ftrans.eval_shape(lambda k: fr.split(k, 3), ours)
    assert s.shape == (3,) and str(s.dtype) == "key<fry>"


def test_jnp_ops_on_traced_keys():
    def f(mod, rnd, ks):
        k2 = ks.reshape(2, 2).T
        both = mod.concatenate([k2[0], k2[1, ::-1]])
        picked = mod.where(mod.arange(4) % 2 == 0, both, mod.broadcast_to(ks[0], (4,)))
        return rnd.split(picked[len(picked) - 1]), [k for k in picked][1]

    o = ftrans.jit(lambda ks: f(fnp, fr, ks))(fr.split(fr.key(1), 4))
    t = jax.jit(lambda ks: f(jax.numpy, jr, ks))(jr.split(jr.key(1), 4))
    _same_keys(o[0], t[0])
    _same_keys(o[1], t[1])


def test_custom_vjp_symbolic_zeros_sees_whole_key_arrays():
    seen = []

    @ftrans.custom_vjp
    def f(_, state):
        return state

    def fwd(_, state):
        seen.append(state[1])
        return jax.tree.map(lambda p: p.value, state), None

    def bwd(_, state_bar):
        seen.append(state_bar[1])
        return state_bar[0], state_bar

    f.defvjp(fwd, bwd, symbolic_zeros=True)
    assert float(ftrans.grad(lambda th: f(th, (8.0, fr.key(123)))[0])(3.0)) == 1.0
    prim, ct = seen
    assert type(prim).__name__ == "CustomVJPPrimal" and str(prim.value.dtype) == "key<fry>" and not prim.perturbed
    assert isinstance(ct, ftrans.custom_derivatives.SymbolicZero) and ct.dtype == jax.dtypes.float0
