"""``ftrans.experimental.buffer_callback`` against ``jax.experimental.buffer_callback`` on the same programs.

Eagerly, under ``jit`` and ``vmap`` (each ``vmap_method``), with ``input_output_aliases``, side effects and
pytrees of arguments and results: the results, what the callback sees (shapes, dtypes, writeable flags, the
execution stage) and the errors (types; ftrans's messages name the user's line).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import buffer_callback as jbc

import ftrans
import ftrans.numpy as fnp
from ftrans.experimental import buffer_callback as fbc

pytestmark = pytest.mark.cpu_only("buffer callbacks read their buffers with np.asarray (the CPU's __array__)")

LIBS = [pytest.param((jax, jnp, jbc), id="jax"), pytest.param((ftrans, fnp, fbc), id="ftrans")]
X = np.arange(12, dtype=np.float32).reshape(3, 4)
Y = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)


def _add_one(ctx, out, x):
    np.asarray(out)[...] = np.asarray(x) + 1


def _both(run):
    """``run(lib, np_mod, bc)`` under jax and under ftrans; both results."""
    return run(jax, jnp, jbc), run(ftrans, fnp, fbc)


def _assert_same(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for u, v in zip(la, lb):
        u, v = np.asarray(u), np.asarray(v)
        assert u.dtype == v.dtype and u.shape == v.shape
        np.testing.assert_array_equal(u, v)


# ---------------------------------------------------------------- values


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.float16, np.uint8, np.complex64])
def test_eager_and_jit_copy_match_jax(dtype):
    data = (X % 2 if dtype is np.bool_ else X).astype(dtype)
    seen = {}

    def copy(ctx, out, arg):
        seen.setdefault("info", []).append((arg.shape, np.dtype(arg.dtype), arg.writeable, out.writeable))
        np.asarray(out)[...] = np.asarray(arg)

    def run(lib, _, bc):
        seen.clear()
        f = bc.buffer_callback(copy, lib.ShapeDtypeStruct(data.shape, data.dtype))
        return lib.block_until_ready((f(data), lib.jit(f)(data))) + (seen["info"],)

    (je, jj, jinfo), (fe, fj, finfo) = _both(run)
    _assert_same(je, fe)
    _assert_same(jj, fj)
    _assert_same(fe, data)
    assert jinfo == finfo == [((3, 4), np.dtype(dtype), False, True)] * 2


def test_pytrees_of_arguments_and_results_and_kwargs():
    def cb(ctx, out, xs, *, scale):
        a, b = xs
        np.asarray(out["sum"])[...] = np.asarray(a) + np.asarray(b)
        np.asarray(out["n"])[...] = np.asarray(scale).astype(np.int32) * 2

    def run(lib, _, bc):
        f = bc.buffer_callback(cb, {"sum": lib.ShapeDtypeStruct((3, 4), np.float32),
                                    "n": lib.ShapeDtypeStruct((), np.int32)})
        return f((X, Y), scale=np.float32(3)), lib.jit(lambda x, y: f((x, y), scale=x[0, 1]))(X, Y)

    j, f = _both(run)
    _assert_same(j, f)
    assert int(f[0]["n"]) == 6


def test_python_scalar_argument():
    _assert_same(*_both(lambda lib, _, bc: bc.buffer_callback(_add_one, lib.ShapeDtypeStruct((), np.float32))(1.0)))


def test_execution_context_and_types():
    seen = []

    def cb(ctx, out, x):
        seen.append((ctx.stage == fbc.ExecutionStage.EXECUTE, isinstance(ctx, fbc.ExecutionContext),
                     isinstance(x, fbc.Buffer), isinstance(out, fbc.Buffer)))
        with pytest.raises(ftrans.errors.JaxRuntimeError, match="GPU context is not available"):
            ctx.stream  # noqa: B018  (the CPU has no stream: JAX's runtime error)
        np.asarray(out)[...] = 0

    fbc.buffer_callback(cb, ftrans.ShapeDtypeStruct((2,), np.float32))(np.ones(2, np.float32))
    assert seen == [(True, True, True, True)]
    assert fbc.ExecutionStage is jbc.ExecutionStage and fbc.Buffer is jbc.Buffer


def test_dlpack_reads_the_input():
    got = []

    def cb(ctx, out, x):
        got.append(np.from_dlpack(x).copy())
        np.asarray(out)[...] = 0

    fbc.buffer_callback(cb, ftrans.ShapeDtypeStruct(X.shape, X.dtype))(X)
    np.testing.assert_array_equal(got[0], X)


def test_float64_declared_without_x64_is_kept_as_jax_keeps_it():
    def cb(ctx, out, x):
        np.asarray(out)[...] = 2.5

    j, f = _both(lambda lib, _, bc: bc.buffer_callback(cb, lib.ShapeDtypeStruct((3,), np.float64))(X[0, :3]))
    _assert_same(j, f)


def test_command_buffer_compatible_on_cpu_is_an_ordinary_call():
    _assert_same(*_both(lambda lib, _, bc: lib.jit(bc.buffer_callback(
        _add_one, lib.ShapeDtypeStruct(X.shape, X.dtype), command_buffer_compatible=True))(X)))


# ---------------------------------------------------------------- vmap


def _batched_sum(record):
    def cb(ctx, out, x, y):
        record.append((np.asarray(x).shape, np.asarray(y).shape, np.asarray(out).shape))
        z = np.asarray(out)
        z[...] = np.asarray(x)
        z[...] += np.asarray(y)
    return cb


@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                                    "legacy_vectorized"])
@pytest.mark.parametrize("y_batched", [True, False])
def test_vmap_each_method_matches_jax(method, y_batched):
    def run(lib, _, bc):
        rec = []
        f = bc.buffer_callback(_batched_sum(rec), lib.ShapeDtypeStruct((4,), np.float32), vmap_method=method)
        if y_batched:
            out = lib.vmap(f)(X, Y)
        else:
            out = lib.vmap(f, in_axes=(0, None))(X, Y[0])
        jitted = lib.jit(lib.vmap(f, in_axes=(1, None), out_axes=1))(X.T.copy(), Y[0])
        return lib.block_until_ready((out, jitted)) + (rec,)

    (jo, jj, jrec), (fo, fj, frec) = _both(run)
    _assert_same(jo, fo)
    _assert_same(jj, fj)
    assert jrec == frec  # the callback saw the same buffers, as often (once, or once per element)


def test_vmap_without_a_method_is_refused():
    def run(lib, _, bc):
        f = bc.buffer_callback(_add_one, lib.ShapeDtypeStruct((), np.float32))
        with pytest.raises(NotImplementedError, match="vmap_method"):
            lib.vmap(f)(X[0])
        return True

    assert _both(run) == (True, True)


def test_vmap_of_jit_and_jit_of_vmap_with_closed_over_operand():
    def run(lib, np_mod, bc):
        f = bc.buffer_callback(_batched_sum([]), lib.ShapeDtypeStruct((4,), np.float32), vmap_method="expand_dims")
        return lib.vmap(lib.jit(lambda x: f(x, np_mod.ones(4, np.float32))))(X)

    _assert_same(*_both(run))


# ---------------------------------------------------------------- aliasing and effects


def test_input_output_aliases_share_the_buffer():
    def run(lib, _, bc):
        ptrs = []

        def cb(ctx, out, arg):
            x, y = np.asarray(arg), np.asarray(out)
            ptrs.append(x.ctypes.data == y.ctypes.data)
            y[...] = x * 2

        f = bc.buffer_callback(cb, lib.ShapeDtypeStruct(X.shape, X.dtype), input_output_aliases={0: 0})
        return lib.block_until_ready((f(X), lib.jit(f)(X))) + (ptrs,)

    (je, jj, jp), (fe, fj, fp) = _both(run)
    _assert_same(je, fe)
    _assert_same(jj, fj)
    assert jp == fp == [True, True]


@pytest.mark.parametrize("aliases,match", [
    ({1: 0}, "input index 1 outside the range"),
    ({0: 1}, "output index 1 outside the range"),
])
def test_alias_out_of_range_is_a_value_error(aliases, match):
    def run(lib, _, bc):
        f = bc.buffer_callback(_add_one, lib.ShapeDtypeStruct(X.shape, X.dtype), input_output_aliases=aliases)
        with pytest.raises(ValueError, match=match):
            f(X)
        return True

    assert _both(run) == (True, True)


def test_alias_of_another_type_is_a_value_error_naming_the_line():
    def run(lib, _, bc):
        f = bc.buffer_callback(_add_one, lib.ShapeDtypeStruct(X.shape, np.int32), input_output_aliases={0: 0})
        with pytest.raises(ValueError, match="different abstract value") as e:
            f(X)
        return str(e.value)

    _, msg = _both(run)
    assert "test_buffer_callback.py" in msg


def test_side_effect_keeps_an_unused_call_and_a_pure_one_is_dropped():
    def run(lib, _, bc):
        calls = []

        def cb(ctx, out, x):
            calls.append(1)
            np.asarray(out)[...] = 0

        pure = bc.buffer_callback(cb, lib.ShapeDtypeStruct((3, 4), np.float32))
        effect = bc.buffer_callback(cb, lib.ShapeDtypeStruct((3, 4), np.float32), has_side_effect=True)
        lib.block_until_ready(lib.jit(lambda x: (pure(x), x * 2)[1])(X))
        n_pure = len(calls)
        lib.block_until_ready(lib.jit(lambda x: (effect(x), x * 2)[1])(X))
        return n_pure, len(calls)

    assert _both(run) == ((0, 1), (0, 1))


def test_side_effect_with_no_arguments():
    called = []

    def cb(*_):
        called.append(1)

    ftrans.block_until_ready(fbc.buffer_callback(cb, ftrans.ShapeDtypeStruct((), np.float32),
                                                 has_side_effect=True)())
    assert called == [1]


def test_effects_in_the_jaxpr():
    def run(lib, _, bc):
        eff = lib.make_jaxpr(bc.buffer_callback(_add_one, lib.ShapeDtypeStruct((3, 4), np.float32),
                                                has_side_effect=True))(X).effects
        pure = lib.make_jaxpr(bc.buffer_callback(_add_one, lib.ShapeDtypeStruct((3, 4), np.float32)))(X).effects
        return sorted(str(e) for e in eff), list(pure)

    j, f = _both(run)
    assert j == f == (["BufferCallback"], [])


# ---------------------------------------------------------------- refusals and bad input


def test_grad_and_transpose_are_refused():
    def run(lib, _, bc):
        f = bc.buffer_callback(_add_one, lib.ShapeDtypeStruct((3, 4), np.float32))
        with pytest.raises(ValueError, match="do not support JVP"):
            lib.grad(lambda x: f(x).sum())(X)
        with pytest.raises(ValueError, match="do not support transpose"):
            lib.linear_transpose(f, X)(X)
        return True

    assert _both(run) == (True, True)


def test_grad_with_a_stopped_operand_is_fine():
    def run(lib, _, bc):
        f = bc.buffer_callback(_add_one, lib.ShapeDtypeStruct((3, 4), np.float32))
        return lib.grad(lambda x: (f(lib.lax.stop_gradient(x)) * x).sum())(X)

    _assert_same(*_both(run))


def test_a_leaf_without_shape_is_refused():
    def run(lib, _, bc):
        with pytest.raises(AttributeError):
            bc.buffer_callback(_add_one, 3)(X)
        return True

    assert _both(run) == (True, True)
    with pytest.raises(TypeError, match="result_shape_dtypes must be a pytree"):
        fbc.buffer_callback(_add_one, 3)


def test_a_string_argument_is_refused():
    def run(lib, _, bc):
        with pytest.raises(TypeError):
            bc.buffer_callback(lambda c, o, x, s: None, lib.ShapeDtypeStruct((3, 4), np.float32))(X, "s")
        return True

    assert _both(run) == (True, True)


@pytest.mark.parametrize("jit", [False, True])
def test_returning_a_value_is_a_runtime_error_naming_the_line(jit):
    def run(lib, _, bc):
        f = bc.buffer_callback(lambda c, o, x: 1, lib.ShapeDtypeStruct((3, 4), np.float32))
        with pytest.raises(RuntimeError, match="must not return any values") as e:
            (lib.jit(f) if jit else f)(X)
        return str(e.value)

    _, msg = _both(run)
    assert "test_buffer_callback.py" in msg and isinstance(msg, str)


@pytest.mark.parametrize("jit", [False, True])
def test_writing_a_result_of_the_wrong_shape_names_the_line(jit):
    """The callback writes a (5,) array into its (3,) output: NumPy's ValueError (also JAX's RuntimeError),
    with a note naming the line of the buffer_callback call."""
    def bad(ctx, out, x):
        np.asarray(out)[...] = np.ones(5, np.float32)

    def run(lib, _, bc):
        f = bc.buffer_callback(bad, lib.ShapeDtypeStruct((3,), np.float32))
        with pytest.raises(RuntimeError, match="could not broadcast") as e:
            (lib.jit(f) if jit else f)(X[0, :3])
        return e.value

    _, err = _both(run)
    assert isinstance(err, ValueError)
    assert any("test_buffer_callback.py" in n for n in getattr(err, "__notes__", []))


def test_writing_a_result_of_the_wrong_dtype_is_cast_as_numpy_casts():
    def cb(ctx, out, x):
        np.asarray(out)[...] = np.asarray(x) * 1.5  # floats into an int32 buffer: NumPy's assignment truncates

    def run(lib, _, bc):
        f = bc.buffer_callback(cb, lib.ShapeDtypeStruct((3,), np.int32))
        return f(np.arange(3, dtype=np.int32))

    _assert_same(*_both(run))


def test_a_callback_exception_keeps_its_type():
    def bad(ctx, out, x):
        raise KeyError("boom")

    def run(lib, _, bc):
        with pytest.raises(RuntimeError, match="boom") as e:
            lib.jit(bc.buffer_callback(bad, lib.ShapeDtypeStruct((3,), np.float32)))(X[0, :3])
        return e.value

    _, err = _both(run)
    assert isinstance(err, KeyError)


def test_the_eager_program_is_compiled_once_per_signature():
    from ftrans.lowering import device_eager

    f = fbc.buffer_callback(_add_one, ftrans.ShapeDtypeStruct((3,), np.float32))
    f(X[0, :3])
    before = device_eager.stats["compiles"]
    for _ in range(3):
        np.testing.assert_array_equal(f(X[1, :3]), X[1, :3] + 1)
    assert device_eager.stats["compiles"] == before


# ---------------------------------------------------------------- several devices, control flow


def _doubler(seen):
    def cb(ctx, out, x):
        seen.append(np.asarray(x).shape)
        np.asarray(out)[...] = np.asarray(x) * 2
    return cb


@pytest.mark.needs_devices(2)
@pytest.mark.parametrize("where", ["jit", "shard_map", "eager"])
def test_on_a_mesh_of_two_devices(where):
    """Over whole arrays each device calls it on the whole (replicated) operand, as JAX's does; in a shard_map
    body each device calls it on its own shard."""
    def run(lib, _, bc):
        seen = []
        mesh = lib.make_mesh((2,), ("i",))
        spec = lib.sharding.PartitionSpec("i")
        x = lib.device_put(np.arange(8, dtype=np.float32), lib.sharding.NamedSharding(mesh, spec))
        if where == "shard_map":
            g = bc.buffer_callback(_doubler(seen), lib.ShapeDtypeStruct((4,), np.float32))
            out = lib.jit(lib.shard_map(g, mesh=mesh, in_specs=spec, out_specs=spec))(x)
        else:
            f = bc.buffer_callback(_doubler(seen), lib.ShapeDtypeStruct((8,), np.float32))
            out = lib.jit(f)(x) if where == "jit" else f(x)
        return lib.block_until_ready(out), sorted(seen)  # (JAX's calls run asynchronously)

    (jo, js), (fo, fs) = _both(run)
    _assert_same(jo, fo)
    assert js == fs


@pytest.mark.parametrize("flow", ["scan", "cond", "while"])
def test_in_control_flow_bodies(flow):
    def run(lib, _, bc):
        seen = []
        h = bc.buffer_callback(_doubler(seen), lib.ShapeDtypeStruct((2,), np.float32))
        xs = np.arange(8, dtype=np.float32).reshape(4, 2)
        lax = lib.lax
        if flow == "scan":
            out = lib.jit(lambda xs: lax.scan(lambda c, r: (c, h(r)), 0.0, xs)[1])(xs)
        elif flow == "cond":
            out = lib.jit(lambda p, r: lax.cond(p, h, lambda r: r, r))(True, xs[1])
        else:
            out = lib.jit(lambda r: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, h(c[1])), (0, r)))(xs[1])
        return lib.block_until_ready(out), seen

    (jo, js), (fo, fs) = _both(run)
    _assert_same(jo, fo)
    assert js == fs


def test_export_is_refused_as_jax_refuses_it():
    def run(lib, _, bc):
        f = bc.buffer_callback(_add_one, lib.ShapeDtypeStruct((3,), np.float32))
        with pytest.raises(NotImplementedError) as e:
            lib.export.export(lib.jit(f))(lib.ShapeDtypeStruct((3,), np.float32))
        return str(e.value)

    _, msg = _both(run)
    assert "buffer_callback" in msg


@pytest.mark.needs_devices(2)
def test_pmap():
    _assert_same(*_both(lambda lib, _, bc: lib.pmap(bc.buffer_callback(
        _add_one, lib.ShapeDtypeStruct((3,), np.float32)))(np.ones((2, 3), np.float32))))
