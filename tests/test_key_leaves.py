"""A typed key array is one pytree leaf (as in JAX), and still crosses every transformation as its data."""

import jax
import jax.random as jr
import numpy as np

import ftrans
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
    # (jit, vmap, scan, cond, grad and eval_shape over bare keys: test_random_keys.py)
    ours, theirs = fr.split(fr.key(5), 3), jr.split(jr.key(5), 3)
    # jit returning key leaves inside a tree; vmap with an in_axes prefix over a tree holding keys
    o = ftrans.jit(lambda t: {"ks": t["ks"][::-1], "x": t["x"] + 1})({"ks": ours, "x": 1.0})
    _same_keys(o["ks"], theirs[::-1])
    assert float(o["x"]) == 2.0
    v = ftrans.vmap(lambda t, y: (t[0], t[1] * y), in_axes=((0, None), None))((ours, 2.0), 3.0)
    _same_keys(v[0], theirs)
    np.testing.assert_array_equal(np.asarray(v[1]), np.full(3, 6.0, np.float32))


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


def test_ftrans_flattens_through_its_key_aware_pytrees():
    """Every ftrans module flattens user pytrees with ``ftrans.core.pytrees`` (which opens key leaves into
    their data); one that used jax's ``tree_util`` directly would hand key arrays to the IR as leaves."""
    import pathlib
    import re

    root = pathlib.Path(ftrans.__file__).parent
    # the public re-exports, the module itself, and the runtime boundary (jaxlib's C++ jit dispatcher takes
    # jax's own tree definitions of a program's outputs, which hold no keys: key outputs keep the Python path)
    allowed = {"tree.py", "tree_util.py", "core/pytrees.py", "lowering/compat.py"}
    pattern = re.compile(r"^\s*(from jax import .*\btree(_util)?\b|from jax\.tree(_util)? import|import jax\.tree)"
                         r"|\bjax\.tree(_util)?\.", re.M)
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if str(p.relative_to(root)) not in allowed and pattern.search(p.read_text())]
    assert not offenders, f"import ftrans.core.pytrees as tree_util instead of jax's in {offenders}"


def test_lowered_in_tree_and_in_avals_show_a_key_as_one_leaf_like_jax():
    """``jit(f).lower(...)``'s ``in_tree``/``in_avals`` (and the compiled program's) show a key argument
    as one leaf with a key-dtype abstract value, as JAX's, not ftrans's internal opening of it."""
    def f(k, x):
        return x

    ours = ftrans.jit(f).lower(ftrans.random.key(0), {"a": 1.0})
    theirs = jax.jit(f).lower(jax.random.key(0), {"a": 1.0})
    assert ours.in_tree == theirs.in_tree
    assert ours.compile().in_tree == theirs.in_tree
    (k_aval, x_avals), _ = ours.in_avals
    (jk_aval, _), _ = theirs.in_avals
    assert k_aval.shape == jk_aval.shape == () and str(k_aval.dtype) == str(jk_aval.dtype) == "key<fry>"
    assert x_avals["a"].shape == () and x_avals["a"].dtype == np.float32
