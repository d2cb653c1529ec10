"""Eager operations on arrays held in device memory stay there: typed without a copy to the host, broadcast on
the device, and placed as JAX places them.

On a GPU every jit output is such an array, and an eager operation that read its value to learn its dtype or
to index with it copied the whole buffer to the host (and waited for it) on every call; an elementwise
operation between a matrix and a vector pinned to one device raised, because the device's one-primitive
programs are typed strictly while jnp left the broadcast to the host's NumPy rules.  On the CPU the same
paths are taken by arrays committed to a device (``device_put(x, device)``), which is what these tests use;
a GPU run (``benchmarks/gpu_session.sh``) takes them with uncommitted jit outputs too.
"""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp
from ftrans import lax as flax
from ftrans import nn as fnn
from ftrans.core import array as array_mod

RNG = np.random.default_rng(0)
A = RNG.standard_normal((8, 8)).astype(np.float32)
B = RNG.standard_normal((8, 8)).astype(np.float32)
V = RNG.standard_normal((8,)).astype(np.float32)
IDX = np.array([1, -3, 5], np.int32)

# name -> f(lib, nn, x, y, v, i): the same program for ftrans and jax; x, y (8, 8), v (8,), i int32 (3,)
OPS = {
    "x + v": lambda m, nn, x, y, v, i: x + v,
    "v * x": lambda m, nn, x, y, v, i: v * x,
    "x - v[:, None]": lambda m, nn, x, y, v, i: x - v[:, None],
    "x @ y": lambda m, nn, x, y, v, i: x @ y,
    "x @ v": lambda m, nn, x, y, v, i: x @ v,
    "einsum": lambda m, nn, x, y, v, i: m.einsum("ij,jk->ik", x, y),
    "tanh": lambda m, nn, x, y, v, i: m.tanh(x),
    "sum": lambda m, nn, x, y, v, i: m.sum(x),
    "mean axis": lambda m, nn, x, y, v, i: m.mean(x, axis=0),
    "var": lambda m, nn, x, y, v, i: m.var(x, axis=1),
    "max": lambda m, nn, x, y, v, i: m.max(x, axis=1),
    "argmax": lambda m, nn, x, y, v, i: m.argmax(x, axis=1),
    "softmax": lambda m, nn, x, y, v, i: nn.softmax(x),
    "log_softmax": lambda m, nn, x, y, v, i: nn.log_softmax(x),
    "logsumexp": lambda m, nn, x, y, v, i: nn.logsumexp(x, axis=-1),
    "relu": lambda m, nn, x, y, v, i: nn.relu(x),
    "where": lambda m, nn, x, y, v, i: m.where(x > 0, x, v),
    "clip": lambda m, nn, x, y, v, i: m.clip(x, -0.5, 0.5),
    "outer": lambda m, nn, x, y, v, i: m.outer(v, v),
    "x[i]": lambda m, nn, x, y, v, i: x[i],
    "x[:, i]": lambda m, nn, x, y, v, i: x[:, i],
    "take": lambda m, nn, x, y, v, i: m.take(x, i, axis=0),
    "at[i].set": lambda m, nn, x, y, v, i: x.at[i].set(0.0),
    "at[i].add": lambda m, nn, x, y, v, i: x.at[i].add(v),
    "one_hot": lambda m, nn, x, y, v, i: nn.one_hot(i, 8),
    "concatenate": lambda m, nn, x, y, v, i: m.concatenate([x, y]),
    "stack": lambda m, nn, x, y, v, i: m.stack([x, y]),
    "zeros_like": lambda m, nn, x, y, v, i: m.zeros_like(x),
    "full_like": lambda m, nn, x, y, v, i: m.full_like(x, 2.0),
    "astype": lambda m, nn, x, y, v, i: x.astype(np.float16),
    "reshape.T": lambda m, nn, x, y, v, i: x.reshape(4, 16).T,
    "cumsum": lambda m, nn, x, y, v, i: m.cumsum(x, axis=0),
    "sort": lambda m, nn, x, y, v, i: m.sort(x, axis=1),
    "norm": lambda m, nn, x, y, v, i: m.linalg.norm(x),
    "pad": lambda m, nn, x, y, v, i: m.pad(x, 1),
    "len": lambda m, nn, x, y, v, i: x[: len(x) // 2],
}


def _fetch_spy():
    """A list, and a ``DeviceArray.__getattr__`` that notes in it the shape of every buffer fetched to the
    host (``_value``): install it with ``monkeypatch.setattr(array_mod.DeviceArray, "__getattr__", spy)``."""
    fetched = []
    real = array_mod.DeviceArray.__getattr__

    def spy(self, attr):
        if attr == "_value":
            fetched.append(self.shape)
        return real(self, attr)

    return fetched, spy


def _device():
    return ftrans.devices()[-1]  # (on the CPU: one of conftest's host devices, not the default one)


def _operands(lib_put):
    return [lib_put(a) for a in (A, B, V, IDX)]


@pytest.mark.parametrize("name", list(OPS))
def test_operations_on_committed_arrays_match_jax_and_stay_on_the_device(name):
    dev, jdev = _device(), jax.devices()[-1]
    op = OPS[name]
    got = op(fnp, fnn, *_operands(lambda a: ftrans.device_put(a, dev)))
    # jax's value from one program (eagerly jax compiles each op of softmax, var, ... by itself)
    want = jax.jit(lambda *a: op(jjnp, jax.nn, *a))(*_operands(lambda a: jax.device_put(a, jdev)))
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=2e-5, atol=2e-5)
    assert got.devices() == {dev}  # as JAX's: a result of committed operands stays on their device
    assert got.committed


@pytest.mark.parametrize("name", list(OPS))
def test_operations_on_committed_arrays_never_fetch_them(name, monkeypatch):
    """No operand's buffer, nor an intermediate result's, is copied to the host to type or index it."""
    fetched, spy = _fetch_spy()

    operands = _operands(lambda a: ftrans.device_put(a, _device()))
    monkeypatch.setattr(array_mod.DeviceArray, "__getattr__", spy)
    out = OPS[name](fnp, fnn, *operands)
    ftrans.block_until_ready(out)
    assert fetched == []


def _accelerator_jit_outputs():
    dev = ftrans.devices()[0]
    if dev.platform == "cpu":
        pytest.skip("a jit output on the CPU is host memory, which eager NumPy reads in place")
    out = ftrans.jit(lambda *a: [-(-x) for x in a])(A, B, V, IDX)
    assert all(type(o) is array_mod.DeviceArray and not o.committed and o.devices() == {dev} for o in out)
    return out


@pytest.mark.parametrize("name", list(OPS))
def test_operations_on_an_accelerators_jit_outputs_stay_there_unfetched(name, monkeypatch):
    """On a GPU: uncommitted arrays in device memory are operated on there, and the results stay uncommitted."""
    operands = _accelerator_jit_outputs()
    fetched, spy = _fetch_spy()

    monkeypatch.setattr(array_mod.DeviceArray, "__getattr__", spy)
    got = OPS[name](fnp, fnn, *operands)
    ftrans.block_until_ready(got)
    assert fetched == []
    monkeypatch.undo()
    assert got.devices() == {ftrans.devices()[0]} and not got.committed
    want = OPS[name](jjnp, jax.nn, *(jax.device_put(a) for a in (A, B, V, IDX)))
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=5e-3, atol=5e-3)


def test_broadcasting_between_committed_arrays_of_incompatible_shapes_is_numpys_error():
    dev = _device()
    x, w = ftrans.device_put(A, dev), ftrans.device_put(np.ones(3, np.float32), dev)
    with pytest.raises(ValueError, match="incompatible shapes for broadcasting"):
        x + w
    with pytest.raises(ValueError):
        flax.add_p.bind(x, w)  # a primitive's own operands: NumPy's broadcast refuses them too


def test_a_host_operand_joins_a_committed_one_on_its_device():
    dev = _device()
    x = ftrans.device_put(A, dev)
    r = x + V  # a NumPy vector broadcast against a committed matrix
    np.testing.assert_allclose(np.asarray(r), A + V, rtol=1e-6)
    assert r.devices() == {dev} and r.committed
    r = fnp.asarray(V)[None, :] * x
    np.testing.assert_allclose(np.asarray(r), V[None, :] * A, rtol=1e-6)
    assert r.devices() == {dev}


def test_a_host_scalar_operand_is_copied_to_the_device_once(monkeypatch):
    """An optimizer's ``lr * g`` makes a new host scalar each step: its device copy is made once per value."""
    from ftrans.lowering import device_eager

    puts = []
    real = device_eager.to_buffer

    def spy(x, device):
        puts.append(np.asarray(x).tolist() if not isinstance(x, array_mod.DeviceArray) else "device")
        return real(x, device)

    g = ftrans.device_put(A, _device())
    monkeypatch.setattr(device_eager, "to_buffer", spy)
    device_eager.clear()
    outs = [g * 0.125 for _ in range(3)] + [g * -0.0, g * 0.0, g * 0.125]
    for o in outs[:3] + outs[-1:]:
        np.testing.assert_array_equal(np.asarray(o), A * np.float32(0.125))
    for o, c in ((outs[3], -0.0), (outs[4], 0.0)):  # the sign of a zero scalar is kept (two keys)
        np.testing.assert_array_equal(np.signbit(np.asarray(o)), np.signbit(A * np.float32(c)))
    assert sorted(p for p in puts if p != "device") == [-0.0, 0.0, 0.125]  # -0.0 and 0.0 are two values


_SCALAR_OPS = {
    "x * c": lambda x, c: x * c, "c * x": lambda x, c: c * x, "x - c": lambda x, c: x - c,
    "c - x": lambda x, c: c - x, "x / c": lambda x, c: x / c, "c / x": lambda x, c: c / x,
    "x ** c": lambda x, c: x ** c, "x + y": lambda x, c: x + x[::-1], "x == y": lambda x, c: x == x[::-1],
    "x < c": lambda x, c: x < c, "x + y (int)": lambda x, c: x.astype(np.int32) + x.astype(np.int32),
    "x + y (mixed)": lambda x, c: x + x.astype(np.float16), "x + y (bool)": lambda x, c: (x > 0) + (x < 1),
}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", list(_SCALAR_OPS))
def test_binary_operations_on_device_arrays_match_jax(name, dtype):
    """Device arrays with each other and with Python floats (the shortcuts that skip promotion): JAX's dtype,
    weak type and bits, the result on the operands' device."""
    import ml_dtypes

    d = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    base = np.array([1.0, 2.0, 3.0, -0.7, 0.0, 1e4], d)
    dev, jdev = _device(), jax.devices()[-1]
    op = _SCALAR_OPS[name]
    for c in (0.1, -0.0, float("inf"), 1e30):
        got = op(ftrans.device_put(base, dev), c)
        want = op(jax.device_put(base, jdev), c)
        assert (got.dtype, got.weak_type, got.shape) == (want.dtype, want.weak_type, want.shape)
        np.testing.assert_array_equal(np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64))
        assert got.devices() == {dev}


# Functions whose result's shape or meaning depends on operand values (as in JAX, which reads them too;
# expand_dims and tile read an array given as their axes or reps, as JAX's ensure_index_tuple does):
# they may fetch a device operand.  And those whose result JAX makes on the host (a shape-mismatch
# constant, index arrays computed from shapes) or from a shape read off an array.
_READ_VALUES = {
    "_method_compress", "argwhere", "bincount", "choose", "compress", "delete", "empty", "expand_dims", "extract",
    "flatnonzero", "indices", "intersect1d", "nonzero", "ones", "repeat", "resize", "roll", "roots",
    "setdiff1d", "setxor1d", "tile", "trim_zeros", "union1d", "unique", "unique_all", "unique_counts",
    "unique_inverse", "unique_values", "where", "zeros",
}
_MADE_ON_THE_DEFAULT_DEVICE = {"array_equal", "diag_indices_from", "empty", "indices", "ones", "polydiv",
                               "tril_indices_from", "triu_indices_from", "zeros"}


def test_every_jnp_function_on_committed_arrays_agrees_with_the_host_path(monkeypatch):
    """Each jnp function that takes one or two small arrays: the same result from operands committed to a
    device as from host operands, on that device, and without fetching an operand it does not need."""
    import warnings

    dev = _device()
    vals = {"x": A[:3, :4] * 0.5 + 0.6, "y": V[:4] * 0.25 + 0.6, "s": B[:4, :4], "i": np.array([2, 0, 1], np.int32),
            "b": A[:3, :4] > 0}
    argsets = [("x",), ("x", "y"), ("s",), ("s", "s"), ("x", "x"), ("i",), ("b",), ("x", "i"), ("i", "i"),
               ("y",), ("y", "y"), ("b", "x", "x")]
    skip = {"save", "savez", "load", "fromfile", "frombuffer", "printoptions", "set_printoptions",
            "get_printoptions", "vectorize", "frompyfunc", "piecewise", "fromfunction", "from_dlpack",
            "array_repr", "array_str"}
    fetched, spy = _fetch_spy()

    problems, checked = [], 0
    for name in sorted(dir(fnp)):
        f = getattr(fnp, name, None)
        if name in skip or name.startswith("__") or not callable(f) or name[0].isupper() or isinstance(f, type):
            continue
        for sig in argsets:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    want = f(*[fnp.asarray(vals[k]) for k in sig])
                want_leaves = ftrans.tree_util.tree_leaves(want)
            except Exception:  # noqa: BLE001 (not a signature this function takes)
                continue
            if not want_leaves or not all(isinstance(w, ftrans.Array) for w in want_leaves):
                continue
            checked += 1
            operands = [ftrans.device_put(vals[k], dev) for k in sig]
            fetched.clear()
            monkeypatch.setattr(array_mod.DeviceArray, "__getattr__", spy)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got = f(*operands)
                    ftrans.block_until_ready(got)
            except Exception as e:  # noqa: BLE001
                problems.append(f"{name}{sig} raised {type(e).__name__}: {e}")
                break
            finally:
                monkeypatch.undo()
            got_leaves = ftrans.tree_util.tree_leaves(got)
            for g, w in zip(got_leaves, want_leaves, strict=True):
                gv, wv = np.asarray(g), np.asarray(w)
                if (gv.dtype, gv.shape, g.weak_type) != (wv.dtype, wv.shape, w.weak_type) or not np.allclose(
                        gv, wv, rtol=1e-5, atol=1e-6, equal_nan=True):
                    problems.append(f"{name}{sig}: {g.aval.str_short()} {gv} against the host's {wv}")
                if name not in _MADE_ON_THE_DEFAULT_DEVICE and g.devices() != {dev}:
                    problems.append(f"{name}{sig}: placed on {g.devices()}")
            if fetched and name not in _READ_VALUES:
                problems.append(f"{name}{sig}: fetched {fetched} to the host")
            break
    assert checked > 250, checked
    assert not problems, "\n".join(problems)
