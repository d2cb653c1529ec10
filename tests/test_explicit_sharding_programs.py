"""Explicit sharding as JAX's documents use it (docs/parallel.md), against jax on 8 CPU devices: what
``typeof(x).sharding`` and ``get_abstract_mesh()`` print, bare specs under ``use_abstract_mesh``, values
closed over or put inside ``jit``, the sharding rules of gather/scatter, linear algebra, FFT and convolution
(types, values and gradients), and the layout an Auto-mode ``jit`` reports for its results."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")

LIBS = {"jax": (jax, jjnp, jax.lax), "ftrans": (ftrans, fjnp, flax)}
RNG = np.random.RandomState(0)
IMG = RNG.randn(4, 2, 8, 8).astype(np.float32)
KER = RNG.randn(3, 2, 3, 3).astype(np.float32)
MAT = RNG.randn(8, 8).astype(np.float32)
BATCH = (RNG.randn(8, 4, 4) + 4 * np.eye(4)).astype(np.float32)


def explicit(lib, shape=(2, 4), names=("x", "y")):
    return lib.make_mesh(shape, names)


def auto(lib, shape=(4, 2), names=("X", "Y")):
    return lib.make_mesh(shape, names, axis_types=(lib.sharding.AxisType.Auto,) * len(names))


@pytest.mark.parametrize("lib_name", ["jax", "ftrans"])
def test_typeof_and_abstract_mesh_print_as_jax(lib_name):
    """One program under each library; compared below (reprs, not just specs)."""
    lib, np_, _ = LIBS[lib_name]
    out = []
    out.append(repr(lib.sharding.get_abstract_mesh()))
    out.append(repr(lib.typeof(np_.ones((8, 4))).sharding))
    am = auto(lib)
    ya = lib.device_put(np.ones((8, 4), np.float32), lib.NamedSharding(am, lib.P("X")))
    out.append(repr(lib.typeof(ya).sharding))
    out.append(repr(lib.typeof(3.0).sharding))
    with lib.set_mesh(explicit(lib)):
        out.append(repr(lib.sharding.get_abstract_mesh()))
        x = lib.device_put(np.ones((8, 4), np.float32), lib.P("x", "y"))
        out.append(repr(lib.typeof(x).sharding))
        out.append(str(lib.typeof(x)))
        lib.jit(lambda a: out.append(repr(lib.typeof(a).sharding)) or a)(x)
    with lib.set_mesh(am):
        lib.jit(lambda a: out.append(repr(lib.typeof(a).sharding)) or a)(ya)
    test_typeof_and_abstract_mesh_print_as_jax.seen[lib_name] = out
    if len(test_typeof_and_abstract_mesh_print_as_jax.seen) == 2:
        seen = test_typeof_and_abstract_mesh_print_as_jax.seen
        assert seen["ftrans"] == seen["jax"]


test_typeof_and_abstract_mesh_print_as_jax.seen = {}


def run_both(program):
    return program(*LIBS["ftrans"]), program(*LIBS["jax"])


def test_bare_spec_under_use_abstract_mesh_inside_jit():
    def program(lib, np_, lax):
        with lib.set_mesh(lib.make_mesh((4, 2), ("X", "Y"))):
            x = lib.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), lib.P("X", "Y"))

            @lib.jit
            def f(x):
                am = lib.sharding.AbstractMesh((8,), ("A",), (lib.sharding.AxisType.Explicit,))
                with lib.sharding.use_abstract_mesh(am):
                    return lib.reshard(x, lib.P("A", None)) * 2

            z = f(x)
            return str(lib.typeof(z)), np.asarray(z)

    (ft, fv), (jt, jv) = run_both(program)
    assert ft == jt == "float32[8@A,4]"
    np.testing.assert_array_equal(fv, jv)


def test_illegal_elementwise_result_is_jax_error():
    def program(lib, np_, lax):
        with lib.set_mesh(lib.make_mesh((4, 2), ("X", "Y"))):
            x = lib.device_put(np.arange(16).reshape(4, 4), lib.P("X", None))
            y = lib.device_put(np.arange(16).reshape(4, 4), lib.P(None, "X"))
            with pytest.raises(Exception) as e:
                x + y
            return str(e.value).splitlines()[0]

    ft, jt = run_both(program)
    assert ft == jt


def test_auto_mode_constraint_result_layout_is_xla_s():
    """An Auto-mode result keeps an argument's sharding only when laid out as the first one given; else JAX
    states XLA's layout without trailing unsplit dimensions."""
    def program(lib, np_, lax):
        mesh = auto(lib)
        x = lib.device_put(np.ones((8, 4), np.float32), lib.NamedSharding(mesh, lib.P(None, "X")))
        y = lib.device_put(np.ones((4, 16), np.float32), lib.NamedSharding(mesh, lib.P("X", None)))
        with lib.set_mesh(mesh):
            z = lib.jit(lambda a, b: lax.with_sharding_constraint(np_.dot(a, b), lib.P("X", None)))(x, y)
            w = lib.jit(lambda a: a * 2)(x)
        return repr(z.sharding.spec), repr(w.sharding.spec), np.asarray(z)

    (fz, fw, fv), (jz, jw, jv) = run_both(program)
    assert (fz, fw) == (jz, jw) == ("P('X',)", "P(None, 'X')")
    np.testing.assert_allclose(fv, jv)


def test_closed_over_and_device_put_values_are_typed_inside_jit():
    def program(lib, np_, lax):
        with lib.set_mesh(explicit(lib)):
            b = lib.device_put(MAT, lib.P("x", None))
            seen = []

            @lib.jit
            def f():
                c = lib.device_put(np.ones((8, 8), np.float32), lib.P(None, "y"))
                r = np_.einsum("ij,jk->ik", b, c)
                seen.extend([str(lib.typeof(b.T)), str(lib.typeof(c)), str(lib.typeof(r))])
                return r

            return seen, np.asarray(f())

    (fs, fv), (js, jv) = run_both(program)
    assert fs == js == ["float32[8,8@x]", "float32[8,8@y]", "float32[8@x,8@y]"]
    np.testing.assert_allclose(fv, jv, rtol=1e-5)


CASES = {
    "take": (lambda lib, np_, lax, b: np_.take(b, np_.array([1, 2]), axis=1), MAT, ("x", None)),
    "index_col": (lambda lib, np_, lax, b: b[:, 3], MAT, ("x", None)),
    "at_set": (lambda lib, np_, lax, b: b.at[:, 1].set(0.0), MAT, ("x", None)),
    "at_add_cols": (lambda lib, np_, lax, b: b.at[:, np_.array([1, 3])].add(1.0), MAT, ("x", None)),
    "gather_sharded_rows": (lambda lib, np_, lax, b: b[np_.array([0, 3, 1])], MAT, (None, "y")),
    "conv": (lambda lib, np_, lax, a: lax.conv_general_dilated(a, KER, (1, 1), "SAME"), IMG, ("x",)),
    "reduce_window_max": (lambda lib, np_, lax, a: lax.reduce_window(a, -np.inf, lax.max, (1, 1, 2, 1), (1, 1, 2, 1),
                                                                      "SAME"), IMG, ("x", None, None, "y")),
    "reduce_window_sum": (lambda lib, np_, lax, a: lax.reduce_window(a, 0.0, lax.add, (1, 1, 3, 3), (1, 1, 1, 1),
                                                                      "SAME"), IMG, ("x",)),
    "svd": (lambda lib, np_, lax, m: np_.linalg.svd(m)[1], BATCH, ("x",)),
    "eigh": (lambda lib, np_, lax, m: np_.linalg.eigh(m + np_.swapaxes(m, -1, -2))[0], BATCH, ("x",)),
    "triangular_solve": (lambda lib, np_, lax, m: lax.linalg.triangular_solve(
        m, lib.reshard(np_.ones((8, 4, 4), np.float32), lib.P("x")), left_side=True, lower=True), BATCH, ("x",)),
    "fft": (lambda lib, np_, lax, b: np_.fft.fft(b, axis=1), MAT, ("x", None)),
    "rfft": (lambda lib, np_, lax, b: np_.fft.rfft(b, axis=1), MAT, ("x", None)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_types_and_values_match_jax(name):
    op, value, spec = CASES[name]

    def program(lib, np_, lax):
        with lib.set_mesh(explicit(lib)):
            x = lib.device_put(value, lib.P(*spec))
            seen = []
            out = lib.jit(lambda a: (lambda r: seen.append(str(lib.typeof(r))) or r)(op(lib, np_, lax, a)))(x)
            eager = op(lib, np_, lax, x)
            return seen[0], str(lib.typeof(out)), str(lib.typeof(eager)), np.asarray(out), np.asarray(eager)

    f, j = run_both(program)
    assert f[:3] == j[:3]
    np.testing.assert_allclose(f[3], j[3], rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(f[4], j[4], rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("op, spec, fragment", [
    (lambda lib, np_, b: b[np_.array([0, 3])], ("x", "y"), "Use `.at[...].get(out_sharding=)`"),
    (lambda lib, np_, b: b.at[np_.array([0, 3])].add(1.0), ("x", None),
     "Use `.at[...].set/add/mul/...(out_sharding=)`"),
])
def test_ambiguous_gather_and_scatter_raise_as_jax(op, spec, fragment):
    for name in ("ftrans", "jax"):
        lib, np_, _ = LIBS[name]
        with lib.set_mesh(explicit(lib)):
            x = lib.device_put(MAT, lib.P(*spec))
            with pytest.raises(Exception, match=fragment.replace("[", r"\[").replace("(", r"\(").replace(
                    ")", r"\)").replace(".", r"\.").replace("*", r"\*")):
                lib.jit(lambda a: op(lib, np_, a))(x)


GRADS = {
    "conv": (lambda np_, lax, a: (lax.conv_general_dilated(a, KER, (1, 1), "SAME") ** 2).sum(), IMG, ("x",)),
    "max_pool": (lambda np_, lax, a: lax.reduce_window(a, -np.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2),
                                                       "VALID").sum(), IMG, ("x",)),
    "take": (lambda np_, lax, b: (np_.take(b, np_.array([1, 3, 5]), axis=1) ** 2).sum(), MAT, ("x", None)),
    "at_set": (lambda np_, lax, b: (b.at[:, 1].set(3.0) ** 2).sum(), MAT, ("x", None)),
    "eigh": (lambda np_, lax, m: np_.linalg.eigh(m + np_.swapaxes(m, -1, -2))[0].sum(), BATCH, ("x",)),
    "fft": (lambda np_, lax, b: np_.abs(np_.fft.fft(b, axis=1)).sum(), MAT, ("x", None)),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_through_the_rules_match_jax(name):
    f, value, spec = GRADS[name]

    def program(lib, np_, lax):
        with lib.set_mesh(explicit(lib)):
            x = lib.device_put(value, lib.P(*spec))
            v, g = lib.jit(lib.value_and_grad(lambda a: f(np_, lax, a)))(x)
            return float(v), np.asarray(g), str(lib.typeof(g))

    (fv, fg, ft), (jv, jg, jt) = run_both(program)
    assert ft == jt
    np.testing.assert_allclose(fv, jv, rtol=1e-4)
    np.testing.assert_allclose(fg, jg, rtol=1e-3, atol=1e-3)


def test_batched_linalg_on_a_sharded_batch_runs_where_jax_raises():
    """jnp.linalg.inv/cholesky of a batch split over an Explicit axis: ftrans keeps the batch layout (JAX's
    own implementations raise on these, docs/differences.md)."""
    with ftrans.set_mesh(explicit(ftrans)):
        m = ftrans.device_put(BATCH, ftrans.P("x"))
        inv = ftrans.jit(fjnp.linalg.inv)(m)
        assert str(ftrans.typeof(inv)) == "float32[8@x,4,4]"
        np.testing.assert_allclose(np.asarray(inv), np.linalg.inv(BATCH), rtol=1e-4, atol=1e-5)
        spd = BATCH @ np.swapaxes(BATCH, -1, -2)
        ch = fjnp.linalg.cholesky(ftrans.device_put(spd, ftrans.P("x")))
        assert str(ftrans.typeof(ch)) == "float32[8@x,4,4]"
        np.testing.assert_allclose(np.asarray(ch), np.linalg.cholesky(spd), rtol=1e-4, atol=1e-4)
    with jax.set_mesh(explicit(jax)):
        with pytest.raises(Exception):
            jax.jit(jjnp.linalg.inv)(jax.device_put(BATCH, jax.P("x")))


@pytest.mark.parametrize("which", ["fori", "while", "scan", "cond"])
def test_control_flow_carries_and_branches_keep_their_layout_types(which):
    """A carry (or a cond branch) whose layout type changes is JAX's TypeError, with its wording."""
    def program(lib, np_, lax):
        with lib.set_mesh(explicit(lib)):
            w = lib.device_put(np.ones((8, 8), np.float32), lib.P("x", "y"))
            f = {
                "fori": lambda: lax.fori_loop(0, 3, lambda i, c: c @ np_.ones((8, 8)), w),
                "while": lambda: lax.while_loop(lambda s: s[0] < 3,
                                                lambda s: (s[0] + 1, lib.reshard(s[1], lib.P("x", None))), (0, w)),
                "scan": lambda: lax.scan(lambda c, _: (lib.reshard(c, lib.P()), None), w, None, length=2),
                "cond": lambda: lax.cond(True, lambda a: a, lambda a: lib.reshard(a, lib.P("y", "x")), w),
            }[which]
            with pytest.raises(TypeError) as e:
                lib.jit(f)()
            ok = lib.jit(lambda: lax.fori_loop(0, 2, lambda i, c: c * 2, w))()
            return str(e.value).split("\n\n")[0], str(lib.typeof(ok)), np.asarray(ok)

    (fe, ft, fv), (je, jt, jv) = run_both(program)
    assert fe == je
    assert ft == jt == "float32[8@x,8@y]"
    np.testing.assert_array_equal(fv, jv)


def test_vmap_batch_layout_scatter_mul_grad_and_repeat_out_sharding():
    """vmap keeps a typed batch dimension through a constraint; a scalar-index ``.at[i].mul`` under vmap is
    differentiable (its index is unique, as JAX's basic indexing); ``jnp.repeat(out_sharding=)``."""
    def program(lib, np_, lax):
        with lib.set_mesh(lib.make_mesh((2, 2), ("x", "y"))):
            x = lib.device_put(np.arange(16.0, dtype=np.float32).reshape(4, 4), lib.P("x", None))
            a = lib.jit(lib.vmap(lambda r: lib.reshard(r * 2, lib.P("y"))))(x)
            b = lib.jit(lib.vmap(lambda r: lax.with_sharding_constraint(r * 2, lib.P(None))))(x)
            op = lib.device_put(np_.ones((2, 10, 8)), lib.P("x", None, None))
            ind = lib.device_put(np_.array([2, 3], dtype=np_.int32), lib.P("x"))
            upd = lib.device_put(np_.full((2, 8), 2.0), lib.P("x", None))
            f = lib.jit(lib.vmap(lambda o, i, u: o.at[i].mul(u)))
            g = lib.grad(lambda o, i, u: (f(o, i, u) ** 2).sum(), argnums=(0, 2))(op, ind, upd)
            r = lib.jit(lambda v: np_.repeat(v, 2, axis=0, out_sharding=lib.P("x")))(x)
            return ([str(lib.typeof(v)) for v in (a, b, g[0], g[1], r)],
                    [np.asarray(v) for v in (a, b, g[0], g[1], r)])

    (ft, fv), (jt, jv) = run_both(program)
    assert ft == jt
    for p, q in zip(fv, jv):
        np.testing.assert_allclose(p, q, rtol=1e-6)


def test_with_sharding_constraint_asserts_over_explicit_axes():
    for name in ("ftrans", "jax"):
        lib, np_, lax = LIBS[name]
        with lib.set_mesh(lib.make_mesh((2, 2), ("x", "y"))):
            x = lib.device_put(np.ones((4, 4), np.float32), lib.P("x", None))
            with pytest.raises(AssertionError, match="acts as an assert when all axes of mesh are of type"):
                lib.jit(lambda v: lax.with_sharding_constraint(v * 2, lib.P(None, "y")))(x)
            out = lib.jit(lambda v: lax.with_sharding_constraint(v * 2, lib.P("x")))(x)  # the same layout: fine
            assert str(lib.typeof(out)) == "float32[4@x,4]"


def test_with_sharding_constraint_asserts_eagerly_too():
    for name in ("ftrans", "jax"):
        lib, np_, lax = LIBS[name]
        with lib.set_mesh(lib.make_mesh((2, 2), ("x", "y"))):
            x = lib.device_put(np.ones((4, 4), np.float32), lib.P("x", None))
            with pytest.raises(AssertionError, match="acts as an assert"):
                lax.with_sharding_constraint(x, lib.P(None, "y"))
            assert lax.with_sharding_constraint(x, lib.P("x")).sharding.spec == lib.P("x", None)


def test_embedding_lookup_with_out_sharding_and_its_gradient():
    """A replicated table indexed by batch-split tokens needs ``.at[t].get(out_sharding=)`` (JAX's
    auto_axes): the gather inside is not refused, the result has the asked type, and the gradient flows."""

    def program(lib, np_, _):
        P = lib.P
        mesh = lib.make_mesh((8,), ("fsdp",), axis_types=(lib.sharding.AxisType.Explicit,))
        with lib.set_mesh(mesh):
            emb = lib.device_put(np.arange(32 * 16, dtype=np.float32).reshape(32, 16) / 100, P(None, None))
            tok = lib.device_put((np.arange(64, dtype=np.int32).reshape(8, 8) * 7) % 32, P("fsdp", None))
            types = []

            def loss(e, t):
                x = e.at[t].get(out_sharding=P("fsdp", None, None))
                types.append(str(lib.typeof(x)))
                return (x * x).sum()

            val = lib.jit(loss)(emb, tok)
            g = lib.jit(lib.grad(loss))(emb, tok)
            return np.asarray(val), np.asarray(g), types[0], str(lib.typeof(g))

    (fv, fg, ft, fgt), (jv, jg, jt, jgt) = run_both(program)
    np.testing.assert_allclose(fv, jv, rtol=1e-5)
    np.testing.assert_allclose(fg, jg, rtol=1e-5)
    assert (ft, fgt) == (jt, jgt)
