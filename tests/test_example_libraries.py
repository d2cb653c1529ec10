"""``ftrans.example_libraries`` against ``jax.example_libraries``: optimizer trajectories and stax networks.

Optimizers run a few steps on a small pytree (a dict holding a matrix and a
tuple) from the same start, with the same gradients computed by each library,
eagerly and with the step under ``jit``; learning-rate schedules are compared
pointwise, with Python and traced step numbers. stax networks built from the
same layers are initialised from the same key (parameters must agree bit for
bit once ``ftrans.random`` exists) and applied, differentiated, jitted and
vmapped.
"""

from __future__ import annotations

import pathlib
import re

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from jax.example_libraries import optimizers as jopt
from jax.example_libraries import stax as jstax

import ftrans
import ftrans.numpy as jnp
from ftrans.example_libraries import optimizers as fopt
from ftrans.example_libraries import stax as fstax
from tests.backend_util import assert_same_samples, on_cpu


def close(ours, theirs, rtol=2e-5, atol=1e-6):
    a, b = np.asarray(ours), np.asarray(theirs)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


def tree_close(ours, theirs, **kw):
    la, ta = jax.tree_util.tree_flatten(ours)
    lb, tb = jax.tree_util.tree_flatten(theirs)
    assert ta == tb, (ta, tb)
    for a, b in zip(la, lb):
        close(a, b, **kw)


def tree_same_bits(ours, theirs):
    la, ta = jax.tree_util.tree_flatten(ours)
    lb, tb = jax.tree_util.tree_flatten(theirs)
    assert ta == tb, (ta, tb)
    for a, b in zip(la, lb):
        if jax.__version_info__ >= (0, 12) and np.asarray(a).dtype.kind == "f":
            # jax 0.12's initializers round the last bit of some samples differently; ftrans keeps 0.10's
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=5e-7, atol=0)
            continue
        assert_same_samples(a, b)  # bit for bit on the CPU; to a few ulps on a GPU (tests/backend_util.py)


# ----------------------------------------------------------------------------
# optimizers

PARAMS = {
    "w": (np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5) / 3,
    "b": (np.array([0.5, -1.0], np.float32), np.float32(1.5)),
}


def loss_ours(p):
    return jnp.sum(jnp.sin(p["w"]) ** 2) + jnp.sum(p["b"][0] ** 2 * p["b"][1]) + p["b"][1] ** 4 / 4


def loss_jax(p):
    return jjnp.sum(jjnp.sin(p["w"]) ** 2) + jjnp.sum(p["b"][0] ** 2 * p["b"][1]) + p["b"][1] ** 4 / 4


OPTIMIZERS = [
    ("sgd", (0.1,), {}), ("momentum", (0.1, 0.9), {}), ("nesterov", (0.05, 0.8), {}), ("adagrad", (0.1,), {}),
    ("adagrad", (0.1,), {"momentum": 0.5}), ("rmsprop", (0.01,), {}), ("rmsprop", (0.01,), {"gamma": 0.8}),
    ("rmsprop_momentum", (0.01,), {}), ("adam", (0.1,), {}), ("adam", (0.01,), {"b1": 0.5, "eps": 1e-4}),
    ("adamax", (0.1,), {}),
]  # sm3 keeps Python shapes in its state, so its step cannot be jitted: see test_sm3_on_scalars_and_matrices
_JAX_STEPS: dict = {}


def jax_step(key, opt):
    """One jitted jax step per optimizer (jax's eager mode compiles every primitive per shape)."""
    if key not in _JAX_STEPS:
        _, update, get_params = opt
        _JAX_STEPS[key] = jax.jit(lambda i, s: update(i, jax.grad(loss_jax)(get_params(s)), s))
    return _JAX_STEPS[key]


@pytest.mark.parametrize("name,args,kwargs", OPTIMIZERS, ids=[f"{n}{i}" for i, (n, _, _) in enumerate(OPTIMIZERS)])
def test_optimizer_trajectories_match_jax(name, args, kwargs):
    ours = getattr(fopt, name)(*args, **kwargs)
    theirs = getattr(jopt, name)(*args, **kwargs)
    s_ours, s_jax = ours.init_fn(PARAMS), theirs[0](PARAMS)
    step = jax_step((name, args, tuple(sorted(kwargs.items()))), theirs)

    def our_update(i, s):
        return ours.update_fn(i, ftrans.grad(loss_ours)(ours.params_fn(s)), s)

    our_step = ftrans.jit(our_update)
    s_jit = s_ours
    for i in range(4):
        s_ours = our_update(i, s_ours)
        s_jit = our_step(i, s_jit)
        s_jax = step(i, s_jax)
        tree_close(ours.params_fn(s_ours), theirs[2](s_jax), rtol=2e-5, atol=1e-6)
        tree_close(ours.params_fn(s_jit), theirs[2](s_jax), rtol=2e-5, atol=1e-6)
    # the whole state (moments, accumulators), not only the parameters
    tree_close(s_ours.packed_state, s_jax.packed_state, rtol=2e-5, atol=1e-6)
    assert s_ours.tree_def == s_jax.tree_def


@pytest.mark.parametrize("name", ["sgd", "adam"])
@given(w=hnp.arrays(np.float32, (2, 3), elements=st.floats(-3, 3, width=32, allow_subnormal=False)),
       lr=st.sampled_from([1e-3, 0.05, 0.3]))
def test_optimizer_trajectories_hypothesis(name, w, lr):
    params = {"w": w, "b": (w[0, :2] * 2, np.float32(w[1, 2]))}
    ours, theirs = getattr(fopt, name)(lr), getattr(jopt, name)(lr)
    s_ours, s_jax = ours.init_fn(params), theirs[0](params)
    step = jax_step(("hyp", name, lr), theirs)
    for i in range(3):
        s_ours = ours.update_fn(i, ftrans.grad(loss_ours)(ours.params_fn(s_ours)), s_ours)
        s_jax = step(i, s_jax)
    tree_close(ours.params_fn(s_ours), theirs[2](s_jax), rtol=1e-4, atol=1e-5)


def test_optimizer_with_schedule_and_traced_step():
    sched_o = fopt.exponential_decay(0.1, 3, 0.5)
    sched_j = jopt.exponential_decay(0.1, 3, 0.5)
    ours, theirs = fopt.momentum(sched_o, 0.9), jopt.momentum(sched_j, 0.9)
    s_o, s_j = ours.init_fn(PARAMS), theirs.init_fn(PARAMS)
    step_o = ftrans.jit(lambda i, s: ours.update_fn(i, ftrans.grad(loss_ours)(ours.params_fn(s)), s))
    step_j = jax.jit(lambda i, s: theirs.update_fn(i, jax.grad(loss_jax)(theirs.params_fn(s)), s))
    for i in range(4):
        s_o, s_j = step_o(jnp.int32(i), s_o), step_j(np.int32(i), s_j)
    tree_close(ours.params_fn(s_o), theirs.params_fn(s_j))


def test_schedules_match_jax():
    pairs = [
        (fopt.constant(0.3), jopt.constant(0.3)),
        (fopt.exponential_decay(0.1, 5, 0.3), jopt.exponential_decay(0.1, 5, 0.3)),
        (fopt.inverse_time_decay(0.1, 4, 0.5), jopt.inverse_time_decay(0.1, 4, 0.5)),
        (fopt.inverse_time_decay(0.1, 4, 0.5, staircase=True), jopt.inverse_time_decay(0.1, 4, 0.5, staircase=True)),
        (fopt.polynomial_decay(1.0, 6, 0.1), jopt.polynomial_decay(1.0, 6, 0.1)),
        (fopt.polynomial_decay(1.0, 6, 0.1, power=2.0), jopt.polynomial_decay(1.0, 6, 0.1, power=2.0)),
        (fopt.piecewise_constant([2, 5], [1.0, 0.5, 0.1]), jopt.piecewise_constant([2, 5], [1.0, 0.5, 0.1])),
    ]
    steps = np.arange(9, dtype=np.int32)
    for ours, theirs in pairs:
        for i in range(9):
            close(jnp.asarray(ours(i)), jjnp.asarray(theirs(i)), rtol=1e-6)
        close(ftrans.vmap(lambda i, f=ours: jnp.asarray(f(i), jnp.float32))(steps),
              jax.jit(jax.vmap(lambda i, f=theirs: jjnp.asarray(f(i), jjnp.float32)))(steps), rtol=1e-6)
    with pytest.raises(ValueError, match="one shorter"):
        fopt.piecewise_constant([1, 2], [1.0])
    with pytest.raises(ValueError, match="sequences"):
        fopt.piecewise_constant(1, [1.0])
    assert fopt.make_schedule(0.5)(7) == 0.5
    with pytest.raises(TypeError):
        fopt.make_schedule([0.1, 0.2])


def test_l2_norm_and_clip_grads():
    tree = {"a": np.array([3.0, 4.0], np.float32), "b": [np.float32(12.0)]}
    close(fopt.l2_norm(tree), jopt.l2_norm(tree))
    for max_norm in [1.0, 13.0, 100.0]:
        tree_close(fopt.clip_grads(tree, max_norm), jopt.clip_grads(tree, max_norm))
    tree_close(ftrans.jit(fopt.clip_grads)(tree, 2.0), jax.jit(jopt.clip_grads)(tree, 2.0))
    close(ftrans.grad(fopt.l2_norm)(tree)["a"], jax.grad(jopt.l2_norm)(tree)["a"])


def test_pack_unpack_roundtrip_and_errors():
    opt = fopt.adam(0.1)
    state = opt.init_fn(PARAMS)
    state = opt.update_fn(0, ftrans.grad(loss_ours)(opt.params_fn(state)), state)
    marked = fopt.unpack_optimizer_state(state)
    assert isinstance(marked["w"], fopt.JoinPoint)
    jstate = jopt.adam(0.1).init_fn(PARAMS)
    jmarked = jopt.unpack_optimizer_state(jstate)
    assert jax.tree_util.tree_structure(marked["b"], is_leaf=lambda x: isinstance(x, fopt.JoinPoint)).num_leaves \
        == jax.tree_util.tree_structure(jmarked["b"], is_leaf=lambda x: isinstance(x, jopt.JoinPoint)).num_leaves
    back = fopt.pack_optimizer_state(marked)
    tree_same_bits(back.packed_state, state.packed_state)
    assert back.tree_def == state.tree_def and back.subtree_defs == state.subtree_defs
    # OptimizerState is a pytree: the arrays are its leaves
    leaves = jax.tree_util.tree_leaves(state)
    assert len(leaves) == 3 * 3
    with pytest.raises(TypeError, match="did not match the parameter tree"):
        opt.update_fn(1, {"w": PARAMS["w"]}, state)
    with pytest.raises(TypeError, match="JoinPoint"):
        fopt.pack_optimizer_state({"w": 1.0})


def test_sm3_on_scalars_and_matrices():
    params = {"s": np.float32(2.0), "m": np.ones((2, 3), np.float32)}
    ours, theirs = fopt.sm3(0.1), jopt.sm3(0.1)
    s_o, s_j = ours.init_fn(params), theirs.init_fn(params)

    def step_j(i, s):  # eager: sm3's state holds Python shapes
        return theirs.update_fn(i, jax.tree_util.tree_map(lambda p: p * 0.5 + 1, theirs.params_fn(s)), s)

    for i in range(3):
        s_o = ours.update_fn(i, jax.tree_util.tree_map(lambda p: p * 0.5 + 1, ours.params_fn(s_o)), s_o)
        s_j = step_j(i, s_j)
    tree_close(ours.params_fn(s_o), theirs.params_fn(s_j))


# ----------------------------------------------------------------------------
# stax


def mlp(s):
    return s.serial(  # three Dense layers only: each costs both libraries sampler compiles
        s.Dense(4), s.Relu,
        s.FanOut(2), s.parallel(s.Dense(4), s.serial(s.Tanh, s.Elu)), s.FanInSum,
        s.FanOut(2), s.parallel(s.Sigmoid, s.Softplus), s.FanInConcat(),
        s.Dense(3, W_init=s.randn(0.5)), s.LeakyRelu, s.Identity, s.LogSoftmax,
    )


X = np.random.RandomState(0).randn(5, 6).astype(np.float32)


def test_stax_mlp_init_apply_grad_match_jax():
    import ftrans.random as fr

    (fi, fa), (ji, ja) = mlp(fstax), mlp(jstax)
    f_shape, f_params = fi(fr.PRNGKey(7), X.shape)
    j_shape, j_params = ji(jax.random.PRNGKey(7), X.shape)  # both samplers compiled on the default device
    assert tuple(f_shape) == tuple(j_shape) == (5, 3)
    tree_same_bits(f_params, j_params)  # same key, same splits, same samplers

    want = jax.jit(lambda p, x: (ja(p, x), jax.grad(lambda q: ja(q, x).sum())(p),
                                 jax.vmap(lambda r: ja(p, r))(x)))(j_params, X)
    close(fa(f_params, X), want[0])
    close(ftrans.jit(fa)(f_params, X), want[0])
    tree_close(ftrans.grad(lambda q: fa(q, X).sum())(f_params), want[1], rtol=1e-4, atol=1e-6)
    close(ftrans.vmap(lambda r: fa(f_params, r))(X), want[2])


def test_stax_dropout_and_rng_plumbing():
    import ftrans.random as fr

    def net(s, mode):
        return s.serial(s.Dense(4), s.Dropout(0.6, mode=mode), s.Softmax)

    for mode in ["train", "test"]:
        (fi, fa), (ji, ja) = net(fstax, mode), net(jstax, mode)
        _, fp = fi(fr.PRNGKey(1), (3, 2))
        _, jp = ji(jax.random.PRNGKey(1), (3, 2))  # both samplers compiled on the default device
        tree_same_bits(fp, jp)
        x = X[:3, :2]
        close(fa(fp, x, rng=fr.PRNGKey(3)), jax.jit(lambda p, k: ja(p, x, rng=k))(jp, jax.random.PRNGKey(3)))
    _, dropout = fstax.Dropout(0.5)
    with pytest.raises(ValueError, match="PRNG key"):
        dropout((), X)


def test_stax_pooling_batchnorm_flatten_shape_dependent():
    import ftrans.random as fr

    x = np.random.RandomState(1).randn(2, 4, 5, 3).astype(np.float32)

    def net(s):
        return s.serial(
            s.BatchNorm(), s.MaxPool((2, 2), (1, 1), "SAME"), s.AvgPool((2, 2), (2, 1), "VALID"),
            s.SumPool((1, 2)), s.Exp, s.Flatten,
            s.shape_dependent(lambda shape: s.Dense(shape[-1] // 2)), s.Selu, s.Gelu,
        )

    (fi, fa), (ji, ja) = net(fstax), net(jstax)
    f_shape, fp = fi(fr.PRNGKey(2), x.shape)
    j_shape, jp = ji(jax.random.PRNGKey(2), x.shape)  # both samplers compiled on the default device
    assert tuple(f_shape) == tuple(j_shape)
    tree_same_bits(fp, jp)
    want = jax.jit(lambda p, v: (ja(p, v), jax.grad(lambda q: ja(q, v).sum())(p)))(jp, x)
    tol = 1 if on_cpu() else 30  # a GPU's float32 products (TF32 at the default precision) in different programs
    close(fa(fp, x), want[0], rtol=1e-4 * tol, atol=1e-5 * tol)
    close(ftrans.jit(fa)(fp, x), want[0], rtol=1e-4 * tol, atol=1e-5 * tol)
    tree_close(ftrans.grad(lambda q: fa(q, x).sum())(fp), want[1], rtol=1e-3 * tol, atol=1e-4 * tol)
    for spec_layer in ["MaxPool", "AvgPool"]:
        fi2, fa2 = getattr(fstax, spec_layer)((2,), spec="NCW")
        ji2, ja2 = getattr(jstax, spec_layer)((2,), spec="NCW")
        y = x[:, :, :, 0]
        assert tuple(fi2(None, y.shape)[0]) == tuple(ji2(None, y.shape)[0])
        close(fa2((), y), jax.jit(lambda v: ja2((), v))(y), rtol=1e-5)
    for center, scale in [(True, False), (False, True), (False, False)]:
        (fbi, fba), (jbi, jba) = fstax.BatchNorm(axis=0, center=center, scale=scale), jstax.BatchNorm(
            axis=0, center=center, scale=scale)
        z = x[:, 0, 0, :]
        _, fbp = fbi(fr.PRNGKey(0), z.shape)
        _, jbp = jbi(jax.random.PRNGKey(0), z.shape)
        tree_same_bits(fbp, jbp)
        close(fba(fbp, z), jax.jit(jba)(jbp, z), rtol=1e-4, atol=1e-5)


def test_stax_shapes_without_random():
    for s in (fstax, jstax):
        assert s.Flatten[0](None, (2, 3, 4))[0] == (2, 12)
        assert s.FanInConcat(axis=1)[0](None, [(2, 3), (2, 5)])[0] == (2, 8)
        assert s.FanOut(3)[0](None, (2,))[0] == [(2,), (2,), (2,)]
        assert s.FanInSum[0](None, [(4,), (4,)])[0] == (4,)
    ones = np.ones((2, 3), np.float32)
    close(fstax.FanInConcat(0)[1]((), [ones, ones * 2]), jstax.FanInConcat(0)[1]((), [ones, ones * 2]))
    close(fstax.FanInSum[1]((), [ones, ones * 2]), jstax.FanInSum[1]((), [ones, ones * 2]))


def test_docs_nn_snippets_run(capsys):
    """The code blocks of docs/nn.md run, in order, and print what the page says."""
    page = pathlib.Path(__file__).resolve().parents[1] / "docs" / "nn.md"
    code = "\n\n".join(re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M))
    exec(compile(code, str(page), "exec"), {"__name__": "docs_nn"})  # noqa: S102
    out = capsys.readouterr().out
    assert "[0. 0. 3.] [0. 0. 1.]" in out
    assert "1000.6932" in out
    assert "(-1, 3) (2, 3)" in out
