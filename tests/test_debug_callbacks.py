"""``ftrans.debug.print`` and ``ftrans.debug.callback`` against ``jax.debug``: what is printed (and in which
order) eagerly, under ``jit``, ``vmap``, ``grad``/``jvp`` and inside control flow; the equations they stage;
format strings that do not match their arguments."""

import inspect
import os

import jax
import jax.numpy as jnp_jax
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jax import lax as lax_jax

import ftrans
import ftrans.numpy as jnp
from ftrans import errors, lax
from ftrans.transforms.passes import run_pipeline

THIS = os.path.abspath(__file__)


def _lines(capsys, fn, *args, jax_mode=False):
    capsys.readouterr()
    out = fn(*args)
    if jax_mode:
        jax.effects_barrier()
    ftrans.effects_barrier()
    return capsys.readouterr().out.splitlines(), out


def _both(capsys, make, *args):
    """Run ``make(J, jnp, lax)`` with JAX and with ftrans on the same arguments; the printed lines of both."""
    jl, jout = _lines(capsys, make(jax, jnp_jax, lax_jax), *args, jax_mode=True)
    fl, fout = _lines(capsys, make(ftrans, jnp, lax), *args)
    return jl, fl, jout, fout


# ----------------------------------------------------------------------------
# debug.print


@pytest.mark.parametrize("wrap", ["eager", "jit"])
def test_print_positional_and_keyword(capsys, wrap):
    def make(J, np_, _):
        def f(x, y):
            J.debug.print("x={} y={y} sum={s}", x, y=y, s=x + y)
            return x * y
        return J.jit(f) if wrap == "jit" else f

    x = np.arange(3, dtype=np.float32)
    jl, fl, jout, fout = _both(capsys, make, x, np.float32(2.5))
    assert fl == jl == ["x=[0. 1. 2.] y=2.5 sum=[2.5 3.5 4.5]"]
    np.testing.assert_allclose(np.asarray(fout), np.asarray(jout))


def test_print_without_placeholders_joins_arguments(capsys):
    jl, fl, _, _ = _both(capsys, lambda J, np_, _: J.jit(
        lambda x: J.debug.print("values:", x, x + 1, skip_format_check=True)), np.arange(2, dtype=np.int32))
    assert fl == jl == ["values: [0 1] [1 2]"]
    with pytest.raises(ValueError, match="Unused positional"):  # checked unless told not to, as in JAX
        ftrans.debug.print("values:", 1)


def test_print_format_spec_and_numpy_printoptions(capsys):
    def make(J, np_, _):
        def f(x):
            J.debug.print("{:.3f}", x[0], ordered=True)
            with np.printoptions(precision=2):
                J.debug.print("{}", x, ordered=True)
        return J.jit(f)

    jl, fl, _, _ = _both(capsys, make, np.array([1 / 3, 2 / 3], np.float32))
    assert fl == jl == ["0.333", "[0.33 0.67]"]


@pytest.mark.parametrize("wrap", ["eager", "jit"])
def test_print_under_vmap_prints_each_element(capsys, wrap):
    def make(J, np_, _):
        f = J.vmap(lambda x, y: J.debug.print("v {} {y}", x, y=y), in_axes=(0, None))
        return J.jit(f) if wrap == "jit" else f

    jl, fl, _, _ = _both(capsys, make, np.ones((3, 2), np.float32) * np.arange(3, dtype=np.float32)[:, None],
                         np.float32(7))
    want = ["v [0. 0.] 7.0", "v [1. 1.] 7.0", "v [2. 2.] 7.0"]
    if wrap == "jit" and jax.default_backend() != "cpu":  # unordered prints: XLA:GPU runs them in any order
        assert sorted(fl) == sorted(jl) == want
    else:
        assert fl == jl == want


def test_print_under_vmap_of_axis_1(capsys):
    jl, fl, _, _ = _both(capsys, lambda J, np_, _: J.vmap(lambda x: J.debug.print("{}", x), in_axes=1),
                         np.arange(6, dtype=np.int32).reshape(2, 3))
    assert fl == jl == ["[0 3]", "[1 4]", "[2 5]"]


@pytest.mark.parametrize("wrap", ["eager", "jit"])
def test_print_under_grad_prints_primal_once(capsys, wrap):
    def make(J, np_, _):
        def loss(x):
            J.debug.print("primal {}", x)
            return x ** 3
        g = J.grad(loss)
        return J.jit(g) if wrap == "jit" else g

    jl, fl, jout, fout = _both(capsys, make, np.float32(2.0))
    assert fl == jl == ["primal 2.0"]
    assert float(fout) == float(jout) == 12.0


def test_print_under_jvp_and_vjp(capsys):
    def make(J, np_, _):
        def f(x):
            J.debug.print("jvp {}", x)
            return x * 2

        def run(x):
            J.jvp(f, (x,), (np_.ones_like(x),))
            _, pull = J.vjp(f, x)
            pull(np_.ones_like(x))
        return run

    jl, fl, _, _ = _both(capsys, make, np.float32(1.5))
    assert fl == jl == ["jvp 1.5", "jvp 1.5"]


@pytest.mark.parametrize("wrap", ["eager", "jit"])
def test_print_in_scan_body_in_order(capsys, wrap):
    def make(J, np_, lax_):
        def f(xs):
            def body(c, x):
                J.debug.print("c={} x={}", c, x, ordered=True)
                return c + x, c * x
            return lax_.scan(body, np_.float32(0), xs)
        return J.jit(f) if wrap == "jit" else f

    jl, fl, jout, fout = _both(capsys, make, np.arange(4, dtype=np.float32))
    assert fl == jl == ["c=0.0 x=0.0", "c=0.0 x=1.0", "c=1.0 x=2.0", "c=3.0 x=3.0"]
    np.testing.assert_allclose(np.asarray(fout[1]), np.asarray(jout[1]))


def test_print_in_scan_under_grad_only_forward(capsys):
    def make(J, np_, lax_):
        def body(c, x):
            J.debug.print("c={} x={}", c, x)
            return c * x + 1.0, None
        return J.jit(J.grad(lambda c: lax_.scan(body, c, np_.arange(1.0, 4.0))[0]))

    jl, fl, jout, fout = _both(capsys, make, np.float32(2.0))
    assert fl == jl == ["c=2.0 x=1.0", "c=3.0 x=2.0", "c=7.0 x=3.0"]
    assert float(fout) == float(jout)


def test_print_in_while_and_cond(capsys):
    def make(J, np_, lax_):
        def f(x):
            def body(c):
                J.debug.print("while {}", c)
                return c + 1
            n = lax_.while_loop(lambda c: c < 3, body, x)
            return lax_.cond(n > 2, lambda v: (J.debug.print("yes {}", v), v)[1],
                             lambda v: (J.debug.print("no {}", v), -v)[1], n)
        return J.jit(f)

    jl, fl, jout, fout = _both(capsys, make, np.int32(0))
    assert fl == jl == ["while 0", "while 1", "while 2", "yes 3"]
    assert int(fout) == int(jout) == 3


@pytest.mark.parametrize("batch", [[1], [1, 2]])
def test_print_in_a_while_with_a_batched_predicate_like_jax(capsys, batch):
    """Under vmap a batched predicate is evaluated by the loop and again in the body (for the mask), as in
    JAX, and in JAX's order: the body's prints before the mask's."""
    def make(J, np_, lax_):
        def cond(c):
            J.debug.print("cond {}", c)
            return c < 3

        def body(c):
            J.debug.print("body {}", c)
            return c + 1

        return J.vmap(lambda x: lax_.while_loop(cond, body, x))

    jl, fl, jout, fout = _both(capsys, make, np.array(batch, np.int32))
    assert len(fl) == len(jl)
    if len(batch) == 1 and jax.default_backend() == "cpu":  # (unordered prints: XLA:GPU picks another order)
        assert fl == jl
    assert sorted(fl) == sorted(jl)
    np.testing.assert_array_equal(np.asarray(fout), np.asarray(jout))


def test_ordered_prints_keep_program_order(capsys):
    def make(J, np_, _):
        def f(x):
            for i in range(6):
                J.debug.print("step {} {}", i, x + i, ordered=True)
            return x
        return J.jit(f)

    jl, fl, _, _ = _both(capsys, make, np.float32(1))
    assert fl == jl == [f"step {i} {1.0 + i}" for i in range(6)]


def test_two_call_form(capsys):
    jl, fl, _, _ = _both(capsys, lambda J, np_, _: J.jit(lambda x: J.debug.print(ordered=True)("x={x}", x=x)),
                         np.float32(4))
    assert fl == jl == ["x=4.0"]


def test_print_survives_dce_and_cse(capsys):
    """Nothing reads a print's (absent) result: dead-code elimination keeps it; two equal prints stay two."""
    def f(x):
        ftrans.debug.print("same {}", x)
        ftrans.debug.print("same {}", x)
        return x * 0 + 1

    closed = run_pipeline(ftrans.make_jaxpr(f)(1.0))
    assert [e.primitive.name for e in closed.eqns].count("debug_print") == 2
    lines, out = _lines(capsys, ftrans.jit(f), 3.0)
    assert lines == ["same 3.0", "same 3.0"]
    assert float(out) == 1.0


def test_print_in_unused_cond_branch_is_kept():
    def f(p, x):
        lax.cond(p, lambda v: (ftrans.debug.print("t {}", v), v)[1], lambda v: v, x)
        return x

    closed = run_pipeline(ftrans.make_jaxpr(f)(True, 1.0))
    (cond,) = [e for e in closed.eqns if e.primitive.name == "cond"]
    assert any("debug_print" in str(b) for b in cond.params["branches"])


@given(st.lists(st.integers(-100, 100), min_size=1, max_size=5))
def test_print_values_match_jax(xs):
    import contextlib
    import io

    x = np.asarray(xs, np.int32)
    outs = []
    for J in (jax, ftrans):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            J.jit(lambda v, J=J: J.debug.print("{} {s}", v, s=v.sum()))(x)
            J.effects_barrier()
        outs.append(buf.getvalue())
    assert outs[0] == outs[1]


def test_printed_ir_and_stablehlo():
    def f(x):
        ftrans.debug.print("x={}", x)
        return x

    line = inspect.getsourcelines(f)[1] + 1
    j = ftrans.make_jaxpr(f)(np.float32(1))
    text = str(j)
    assert "debug_print[" in text and " = debug_print" not in text
    assert f"{THIS}:{line}" in text  # the callback names the user's line
    hlo = ftrans.jit(f).lower(np.float32(1)).as_text()
    assert "xla_ffi_python_cpu_callback" in hlo and "has_side_effect = true" in hlo


# ----------------------------------------------------------------------------
# debug.callback


@pytest.mark.parametrize("wrap", ["eager", "jit"])
def test_callback_gets_arrays_in_structure(wrap):
    for J in (jax, ftrans):
        got = []
        f = lambda x, J=J: J.debug.callback(lambda a, d, s: got.append((np.asarray(a), float(d["k"]), s)),  # noqa: E731
                                            x, {"k": x[0] + 1}, s="static")
        (J.jit(f) if wrap == "jit" else f)(np.arange(3, dtype=np.float32))
        J.effects_barrier()
        assert len(got) == 1
        np.testing.assert_array_equal(got[0][0], [0, 1, 2])
        assert got[0][1:] == (1.0, "static")


def test_callback_under_vmap_and_scan_order():
    def run(J, lax_):
        got = []

        def f(xs):
            def body(c, x):
                J.debug.callback(lambda a, b: got.append((int(a), int(b))), c, x, ordered=True)
                return c + x, None
            return lax_.scan(body, 0, xs)[0]

        J.jit(J.vmap(f))(np.arange(6, dtype=np.int32).reshape(2, 3))
        J.effects_barrier()
        return got

    assert run(ftrans, lax) == run(jax, lax_jax)


def test_callback_python_scalars_are_weak():
    got = []
    ftrans.debug.callback(lambda a: got.append(a), 1.0)
    assert got[0].weak_type and got[0].dtype == np.float32


def test_callback_exception_surfaces_from_jit():
    def bad(a):
        raise ZeroDivisionError("from the callback")

    with pytest.raises(ZeroDivisionError, match="from the callback"):
        ftrans.jit(lambda x: ftrans.debug.callback(bad, x))(1.0)
    # the executable still works afterwards
    got = []
    ftrans.jit(lambda x: ftrans.debug.callback(got.append, x))(2.0)
    assert float(got[0]) == 2.0


def test_callback_not_a_function():
    with pytest.raises(errors.FtransTypeError, match="callable"):
        ftrans.debug.callback(3, 1.0)


# ----------------------------------------------------------------------------
# Format errors name the user's line


def _line_of(marker: str) -> int:
    src = open(THIS).read().splitlines()
    return next(i + 1 for i, s in enumerate(src) if marker in s and "_line_of" not in s)


@pytest.mark.parametrize("wrap", ["eager", "jit"])
def test_format_too_few_positional(wrap):
    def f(x):
        ftrans.debug.print("{} {}", x)  # MARK-few
    g = ftrans.jit(f) if wrap == "jit" else f
    with pytest.raises(IndexError) as ei:
        g(1.0)
    assert isinstance(ei.value, errors.FtransIndexError)
    assert f"{THIS}:{_line_of('MARK-few')}" in str(ei.value)
    with pytest.raises(IndexError):  # JAX raises the same built-in type
        jax.debug.print("{} {}", 1.0)


def test_format_missing_keyword():
    with pytest.raises(KeyError) as ei:
        ftrans.debug.print("{y}", 1.0)  # MARK-kw
    assert isinstance(ei.value, errors.FtransKeyError)
    msg = str(ei.value)
    assert "'y'" in msg and f"{THIS}:{_line_of('MARK-kw')}" in msg
    with pytest.raises(KeyError):
        jax.debug.print("{y}", 1.0)


def test_format_unused_arguments():
    with pytest.raises(ValueError, match="Unused positional") as ei:
        ftrans.debug.print("{}", 1.0, 2.0)  # MARK-unused
    assert f"{THIS}:{_line_of('MARK-unused')}" in str(ei.value)
    with pytest.raises(ValueError, match="f-string"):
        ftrans.debug.print("x", x=1.0)
    with pytest.raises(ValueError, match="Unused positional"):
        jax.debug.print("{}", 1.0, 2.0)


# ----------------------------------------------------------------------------
# Multi-device programs


@pytest.mark.needs_devices(4)
def test_callback_inside_pmap_runs_per_device():
    got = []
    n = 4
    f = ftrans.pmap(lambda x: (ftrans.debug.callback(lambda v: got.append(float(v)), x), lax.psum(x, "i"))[1],
                    axis_name="i", devices=ftrans.devices()[:n])
    out = f(jnp.arange(float(n)))
    ftrans.block_until_ready(out)
    np.testing.assert_allclose(np.asarray(out), [6.0] * n)
    assert sorted(got) == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.needs_devices(4)
def test_print_inside_sharded_jit_runs_once(capsys):
    from ftrans.sharding import PartitionSpec as P

    mesh = ftrans.make_mesh((4,), ("x",), devices=ftrans.devices()[:4])
    s = ftrans.NamedSharding(mesh, P("x"))
    f = ftrans.jit(lambda x: (ftrans.debug.print("total {}", x.sum()), x * 2)[1], in_shardings=s, out_shardings=s)
    capsys.readouterr()
    out = f(jnp.arange(8.0))
    ftrans.block_until_ready(out)
    np.testing.assert_allclose(np.asarray(out), np.arange(8.0) * 2)
    assert capsys.readouterr().out.splitlines() == ["total 28.0"]
    text = f.lower(jnp.arange(8.0)).as_text()
    assert "sdy.mesh @maximal_mesh_0" in text


@pytest.mark.parametrize("policy, times", [("everything_saveable", 1), ("nothing_saveable", 2), (None, 2)])
@pytest.mark.parametrize("wrap", ["eager", "jit"])
def test_print_in_checkpoint_reruns_when_recomputed(capsys, policy, times, wrap):
    """As JAX: a print the remat policy does not save runs again when the backward pass recomputes."""
    def make(J, np_, _):
        pol = getattr(J.checkpoint_policies, policy) if policy else None

        def f(x):
            y = x + 1.0
            J.debug.print("y: {}, z: {}", y, y * 2.0)
            return np_.exp(y * 2.0)

        g = J.grad(J.checkpoint(f, policy=pol))
        return J.jit(g) if wrap == "jit" else g

    jl, fl, jout, fout = _both(capsys, make, np.float32(2.0))
    assert fl == jl == ["y: 3.0, z: 6.0"] * times
    np.testing.assert_allclose(float(fout), float(jout), rtol=1e-6)


@pytest.mark.needs_devices(2)
def test_ordered_print_refused_on_several_devices():
    f = ftrans.pmap(lambda x: ftrans.debug.print("{}", x, ordered=True), devices=ftrans.devices()[:2])
    with pytest.raises(ValueError, match="ordered effects are not supported for more than 1 device"):
        f(jnp.arange(2.0))
    g = jax.pmap(lambda x: jax.debug.print("{}", x, ordered=True), devices=jax.devices()[:2])
    with pytest.raises(ValueError, match="ordered effects are not supported for more than 1 device"):
        g(np.arange(2.0))


def test_callback_weak_types_under_jit_vmap_grad_match_jax():
    """Under ``jit`` a callback gets the values of a running program, none weakly typed (a Python scalar
    argument included); eagerly, under ``vmap`` and ``grad`` a weak type stays, as in JAX."""
    def run(J, np_):
        got = []

        def cb(*vals):
            got.append(tuple((str(np.asarray(v).dtype), bool(v.weak_type)) for v in vals))

        J.jit(lambda x: J.debug.callback(cb, x, 1.0))(np_.asarray(2.0))
        J.jit(lambda x: J.debug.callback(cb, x * 2))(2.0)
        J.jit(lambda x: J.pure_callback(lambda v: (cb(v), np.asarray(v))[1], J.ShapeDtypeStruct((), np.float32), x))(2.0)
        J.debug.callback(cb, np_.asarray(2.0), 1.0)
        J.vmap(lambda x: J.debug.callback(cb, x, 1.0))(np_.arange(2.0))
        J.grad(lambda x: (J.debug.callback(cb, x), x)[1])(2.0)
        J.effects_barrier()
        return got

    assert run(ftrans, jnp) == run(jax, jax.numpy)
