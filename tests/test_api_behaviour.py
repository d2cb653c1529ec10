"""Small user-visible behaviours of the public transforms, each checked against JAX.

Docstrings of transformed functions, ``_std_basis``, attributes tracers refuse,
``convert_element_type`` of big Python ints, ``linearize`` tangent checks and
``linear_transpose`` (integer functions, the transposed function as a pytree).
"""

from __future__ import annotations

import gc
import re
import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax


def _doc_fun(a, b):
    """Does things with stuff."""
    return a * b


def _nodoc(a):
    return a


@pytest.mark.parametrize("name", ["vmap", "grad", "value_and_grad", "jacfwd", "jacrev", "hessian"])
@pytest.mark.parametrize("fun", [_doc_fun, _nodoc])
def test_transformed_function_docstrings_match_jax(name, fun):
    assert getattr(ftrans, name)(fun).__doc__ == getattr(jax, name)(fun).__doc__
    assert getattr(ftrans, name)(fun).__name__ == fun.__name__


def test_grad_docstring_names_tuple_argnums_like_jax():
    assert ftrans.grad(_doc_fun, argnums=[0, 1]).__doc__ == jax.grad(_doc_fun, argnums=(0, 1)).__doc__


@pytest.mark.parametrize("tree", [
    np.zeros(3, np.float32),
    np.zeros((3, 3), np.float32),
    [0.0, (np.zeros(3, np.float32), np.zeros((3, 4), np.float32))],
    [0, np.zeros(2, np.int32)],
])
def test_std_basis_matches_jax(tree):
    from jax._src import api as jax_api

    got = ftrans._std_basis(tree)
    want = jax_api._std_basis(tree)
    g_leaves, g_tree = jax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert g_tree == w_tree
    for g, w in zip(g_leaves, w_leaves):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_tracer_sharding_and_devices_are_refused_like_jax():
    seen = {}

    @ftrans.jit
    def f(x):
        seen["has"] = hasattr(x, "sharding")
        with pytest.raises(AttributeError, match="typeof"):
            x.sharding  # noqa: B018
        with pytest.raises(ftrans.errors.ConcretizationTypeError, match="devices"):
            x.devices()
        return x

    f(fjnp.arange(2.0))
    assert seen["has"] is False
    assert hasattr(fjnp.arange(2.0), "sharding")  # the concrete array keeps it


@pytest.mark.parametrize("value,dtype", [
    (2 ** 100, np.float32), (2 ** 100, np.complex64), (2 ** 100, np.bool_), (2 ** 63, np.float16),
    (2 ** 40, np.int32), (-1, np.uint8), (2 ** 31, np.uint32), (3, np.float32),
])
def test_convert_element_type_of_big_python_ints_matches_jax(value, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy's overflow warning on the host cast (JAX's too)
        got = flax.convert_element_type(value, dtype)
        want = jax.lax.convert_element_type(value, dtype)
    assert got.dtype == want.dtype and got.weak_type == want.weak_type
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_convert_element_type_of_an_int_no_integer_type_holds():
    with pytest.raises(OverflowError):
        jax.lax.convert_element_type(2 ** 100, np.int32)
    with pytest.raises(OverflowError, match=r"does not fit int32"):
        flax.convert_element_type(2 ** 100, np.int32)
    with pytest.raises(OverflowError):  # an arithmetic op still reads the int as int32, as in JAX
        fjnp.multiply(2 ** 100, 3.0)


def test_linearize_rejects_tangents_inconsistent_with_integer_primals():
    t = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    x = np.array([1, 2, 3], np.int32)
    for fun in (fjnp.sum, ftrans.jit(fjnp.sum)):
        _, f_jvp = ftrans.linearize(fun, x)
        with pytest.raises(ValueError, match="tangent values inconsistent with the original primal values"):
            f_jvp(t)
    _, j_jvp = jax.linearize(jjnp.sum, x)
    with pytest.raises(ValueError, match="tangent values inconsistent"):
        j_jvp(t)

    _, f_jvp = ftrans.linearize(lambda v: v, np.ones(2, np.int32))
    out = f_jvp(np.zeros(2, ftrans.dtypes.float0))  # the right tangent: float0 of the primal's shape
    assert out.dtype == ftrans.dtypes.float0 and out.shape == (2,)
    with pytest.raises(ValueError, match=r"tangent 0 has type i32\[2\].*must be float0\[2\]"):
        f_jvp(np.ones(2, np.int32))
    _, f_jvp = ftrans.linearize(lambda v: v, 1.0)
    with pytest.raises(ValueError, match=r"tangent 0 has type i32\[\] .*must be f32\[\]"):
        f_jvp(1)


def test_linear_transpose_of_an_integer_function_matches_jax():
    got = ftrans.linear_transpose(lambda x: 2 * x, 1)(3)
    want = jax.linear_transpose(lambda x: 2 * x, 1)(3)
    assert got[0].dtype == want[0].dtype == np.int32
    assert int(got[0]) == int(want[0]) == 6
    with pytest.raises(TypeError, match="linear_transpose only supports"):
        jax.linear_transpose(lambda x: 2.0 * x, 1)
    with pytest.raises(TypeError, match="linear_transpose only supports"):
        ftrans.linear_transpose(lambda x: 2.0 * x, 1)


def test_linear_transpose_result_is_a_pytree_through_jit():
    w = np.arange(6.0, dtype=np.float32).reshape(2, 3)

    @ftrans.jit(static_argnums=0)
    def transpose(f, x):
        return ftrans.linear_transpose(f, x)

    t = transpose(lambda x: 2.0 * x, 1.0)
    assert ftrans.jit(lambda f, x: f(x))(t, 3.0) == (6.0,)
    ft = ftrans.linear_transpose(lambda x: fjnp.asarray(w) @ x, np.ones(3, np.float32))
    jt = jax.linear_transpose(lambda x: jjnp.asarray(w) @ x, np.ones(3, np.float32))
    assert len(jax.tree_util.tree_leaves(ft)) >= 1  # its constant (w) is a leaf
    c = np.array([1.0, -2.0], np.float32)
    np.testing.assert_allclose(np.asarray(ftrans.jit(lambda t, c: t(c))(ft, c)[0]), np.asarray(jt(c)[0]))


def _count_traces(lib):
    counts = {"inner": 0, "outer": 0}

    @lib.jit
    def inner(s):
        counts["inner"] += 1
        return 2 * s

    @lib.jit
    def outer(x):
        counts["outer"] += 1
        old = x
        for _ in range(10):
            x = inner(x)
        return x + old

    state = np.arange(5, dtype=np.uint32)
    out1 = outer(state)
    outer(state)
    after_outer = dict(counts)
    out2 = inner(state)  # at top level: the trace done inside outer is reused
    return after_outer, dict(counts), np.asarray(out1), np.asarray(out2)


def test_inner_jit_is_traced_once_like_jax():
    f_outer, f_all, f1, f2 = _count_traces(ftrans)
    j_outer, j_all, j1, j2 = _count_traces(jax)
    assert f_outer == j_outer == {"inner": 1, "outer": 1}
    assert f_all == j_all
    np.testing.assert_array_equal(f1, j1)
    np.testing.assert_array_equal(f2, j2)


def test_inner_jit_trace_cache_respects_context():
    calls = []

    @ftrans.jit
    def g(x):
        calls.append(1)
        return x * 2

    g(1.0)
    g(np.float32(1.0))  # same signature (weak f32[] vs strong f32[] differ): traced per type
    n = len(calls)
    ftrans.jit(lambda x: g(x))(np.float32(3.0))
    assert len(calls) == n  # reused inside another jit
    with ftrans.enable_x64(True):
        ftrans.jit(lambda x: g(x))(np.float32(3.0))
    assert len(calls) == n + 1  # another config: traced again

    # A function closing over a value of an enclosing trace is traced each time (its program holds
    # that tracer), and gives the right values.
    box = {}

    @ftrans.jit
    def h(x):
        calls.append(2)
        return x + box["y"]

    def outer(y):
        box["y"] = y
        return h(1.0)

    np.testing.assert_allclose(np.asarray(ftrans.vmap(outer)(np.arange(3.0, dtype=np.float32))), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(np.asarray(ftrans.jit(outer)(5.0)), 6.0)
    assert calls.count(2) == 2


def test_jit_of_grad_with_an_integer_argument_returns_float0_like_jax():
    def body(x, i):
        return x[i]

    f_g = ftrans.jit(ftrans.grad(body, argnums=(0, 1), allow_int=True))
    j_g = jax.jit(jax.grad(body, argnums=(0, 1), allow_int=True))
    (fx, fi), (jx, ji) = f_g(np.ones(2, np.float32), 1), j_g(np.ones(2, np.float32), 1)
    np.testing.assert_array_equal(np.asarray(fx), np.asarray(jx))
    assert isinstance(fi, np.ndarray) and fi.dtype == ftrans.dtypes.float0 == ji.dtype and fi.shape == ji.shape
    # inside another jit and under vmap of the inner jit's float argument
    gx, gi = ftrans.jit(lambda x: f_g(x, 1))(np.ones(2, np.float32))
    np.testing.assert_array_equal(np.asarray(gx), [0.0, 1.0])
    assert gi.dtype == ftrans.dtypes.float0


def test_jit_takes_and_returns_float0_arrays_like_jax():
    z = np.zeros((), ftrans.dtypes.float0)
    _, f_vjp = ftrans.vjp(lambda x, y: x + y, 2, 1)
    _, j_vjp = jax.vjp(lambda x, y: x + y, 2, 1)
    f_out, j_out = ftrans.jit(f_vjp)(z), jax.jit(j_vjp)(z)
    assert [(o.dtype, o.shape) for o in f_out] == [(o.dtype, o.shape) for o in j_out]
    z2 = np.zeros((2, 3), ftrans.dtypes.float0)
    f_id, j_id = ftrans.jit(lambda a, b: (a, b * 2))(z2, 1.5), jax.jit(lambda a, b: (a, b * 2))(z2, 1.5)
    assert f_id[0].dtype == j_id[0].dtype and f_id[0].shape == j_id[0].shape == (2, 3)
    assert float(f_id[1]) == float(j_id[1]) == 3.0
    # a float0 argument and a bool one of the same shape are different signatures
    seen = []
    g = ftrans.jit(lambda a: seen.append(a.dtype) or 1.0)
    g(np.zeros(3, ftrans.dtypes.float0))
    g(np.zeros(3, np.bool_))
    assert seen == [ftrans.dtypes.float0, np.dtype(np.bool_)]


def test_core_eval_jaxpr_under_vmap_closing_over_a_tracer():
    def run(lib, inp):
        g = lambda x: x + inp  # noqa: E731
        closed = lib.make_jaxpr(g)(1)
        return lib.core.eval_jaxpr(closed.jaxpr, closed.consts, 1)

    got = ftrans.vmap(lambda v: run(ftrans, v))(np.arange(2, dtype=np.int32))
    want = jax.vmap(lambda v: run(jax, v))(np.arange(2, dtype=np.int32))
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))


def test_core_tracer_names_the_tracers_of_every_transform():
    # Libraries test isinstance(x, jax.core.Tracer) to avoid caching a traced value.
    for lib in (ftrans, jax):
        seen = []

        def f(x, lib=lib, seen=seen):
            seen.append(isinstance(x, lib.core.Tracer))
            return x * 2.0

        x = np.float32(1.5)
        lib.jit(f)(x), lib.grad(f)(x), lib.vmap(f)(np.ones(2, np.float32)), f(lib.numpy.asarray(x))
        assert seen == [True, True, True, False], lib
    assert isinstance(ftrans.make_jaxpr(lambda x: x)(1.0).in_avals[0], ftrans.core.ShapedArray)


def test_every_jit_compile_logs_its_xla_step_at_debug(caplog):
    import logging

    def twice(x):
        return x * 2

    def twice_again(x):  # a second function staging the same program: the executable is shared
        return x * 2

    caplog.set_level(logging.DEBUG, logger="ftrans")
    for fun in (twice, twice_again):
        caplog.clear()
        ftrans.jit(fun)(np.float32(2.0))
        msgs = [r.getMessage() for r in caplog.records if r.name.startswith("ftrans")]
        assert any(m.startswith("Finished tracing ") for m in msgs)
        assert any(m.startswith(f"Compiling jit({fun.__name__})") for m in msgs)
        assert any(m.startswith(f"Finished XLA compilation of jit({fun.__name__})") for m in msgs), msgs


def test_check_tracer_leaks_reports_a_leaked_tracer_and_its_reference_chain():
    class Holder:
        def __init__(self, dct):
            self.dct = dct

    holder = Holder({})

    def sketch(x):
        def foo():
            return x

        holder.dct["hi"] = [foo]
        return x

    with ftrans.check_tracer_leaks():
        with pytest.raises(ftrans.errors.UnexpectedTracerError) as e:
            ftrans.vmap(sketch)(np.arange(3))
    msg = str(e.value)
    assert "Leaked trace" in msg
    assert re.search(r"This BatchTracer with object id [0-9]+ was created on line:\n  .*test_api_behaviour.py", msg)
    assert re.search(r"<BatchTracer [0-9]+> is referred to by <function [0-9]+> \(.*foo\) closed-over variable x\n"
                     r"<function [0-9]+> is referred to by <list [0-9]+>\[0\]\n"
                     r"<list [0-9]+> is referred to by <dict [0-9]+>\['hi'\]", msg), msg
    ftrans.vmap(sketch)(np.arange(3))  # off again: nothing is checked


def test_check_tracer_leaks_catches_jit_scan_and_nested_leaks():
    kept = []
    with ftrans.checking_leaks():
        with pytest.raises(ftrans.errors.UnexpectedTracerError, match="Leaked trace"):
            ftrans.jit(lambda x: kept.append(x) or x)(3)
        with pytest.raises(ftrans.errors.UnexpectedTracerError, match="Leaked trace"):
            flax.scan(lambda c, x: (kept.append(c) or fjnp.sin(c), None), 1.0, np.arange(3.0))

        def outer(x):
            inner_kept = []
            y = ftrans.jit(lambda v: inner_kept.append(v) or v)(x)
            return y

        with pytest.raises(ftrans.errors.UnexpectedTracerError, match="Leaked trace"):
            ftrans.jit(outer)(3)


def test_check_tracer_leaks_has_no_false_positives():
    @ftrans.custom_jvp
    def t(y):
        return y

    t.defjvp(lambda p, tan: None)

    def apply_fn(inp):
        fn = ftrans.checkpoint(lambda x: ftrans.nn.relu(1.0 * x))
        return ftrans.vjp(fn, inp)

    # The checker collects garbage and scans the heap once per transform level: in a worker that has run
    # thousands of tests that takes a minute. Objects that existed before the test cannot hold its tracers,
    # so they are moved out of the collector's sight (gc.freeze) while it runs.
    gc.collect()
    gc.freeze()
    try:
        _run_programs_under_the_leak_checker(t, apply_fn)
    finally:
        gc.unfreeze()


def _run_programs_under_the_leak_checker(t, apply_fn):
    with ftrans.check_tracer_leaks():
        f = ftrans.jit(lambda x: x)
        f(3)
        ftrans.vmap(f)(np.arange(3))
        ftrans.grad(f)(3.0)
        ftrans.jit(apply_fn)(1.0)
        flax.scan(lambda c, x: (fjnp.sin(c), None), 1.0, np.arange(3.0))
        ftrans.jvp(lambda x: flax.scan(lambda c, _: (c, None), x, None, length=1), (3.0,), (1.0,))
        ftrans.vmap(lambda x: flax.scan(lambda c, _: (c, None), x, None, length=1))(np.arange(5.0))
        ftrans.jit(ftrans.remat(lambda x: x + 1))(fjnp.arange(3))
        ftrans.jit(lambda y: t(y))(3)
        ftrans.jacrev(fjnp.sin)(fjnp.ones(3))
        ftrans.grad(lambda x: flax.cond(x > 0, fjnp.sin, fjnp.cos, x))(1.0)


@pytest.mark.parametrize("case", ["kwargs", "two", "most", "nested", "starargs", "axis_size"])
def test_vmap_inconsistent_sizes_summary_matches_jax(case):
    def f3(x1, x2, a3):
        return x1

    x, u = np.ones((10, 4), np.float32), np.ones((10, 2), np.float32)
    cases = {
        "kwargs": (lambda lib: lib.vmap(f3), (np.ones(2, np.float32),),
                   {"a3": np.ones(1, np.float32), "x2": np.ones(2, np.float32)}),
        "two": (lambda lib: lib.vmap(lambda a, b: a, in_axes=(0, 1)), (x, u), {}),
        "most": (lambda lib: lib.vmap(lambda x, y, z: x, in_axes=(0, 1, 0)), (x, u, x), {}),
        "nested": (lambda lib: lib.vmap(lambda a, b: a, in_axes=(0, 1)), (x, [u, u]), {}),
        "starargs": (lambda lib: lib.vmap(lambda *a: a[0]),
                     (np.ones(4, np.float32), np.ones(2, np.float32), np.ones(2, np.float32)), {}),
        "axis_size": (lambda lib: lib.vmap(lambda v: v, axis_size=2), (np.ones(3, np.float32),), {}),
    }
    build, args, kwargs = cases[case]
    with pytest.raises(ValueError) as je:
        build(jax)(*args, **kwargs)
    with pytest.raises(ValueError) as fe:
        build(ftrans)(*args, **kwargs)
    assert str(fe.value).startswith(str(je.value) + "\n"), (str(fe.value), str(je.value))


def test_vmap_of_a_scalar_names_the_problem_like_jax():
    with pytest.raises(ValueError) as je:
        jax.vmap(lambda x: x)(np.float32(1.0))
    with pytest.raises(ValueError) as fe:
        ftrans.vmap(lambda x: x)(np.float32(1.0))
    assert str(fe.value).startswith(str(je.value) + "; argument args[0] of vmap(<lambda>)")


def test_vmap_mapping_nothing_is_refused_like_jax():
    with pytest.raises(ValueError, match="vmap must have at least one non-None value in in_axes"):
        jax.vmap(lambda x: x, in_axes=None)(np.ones(2, np.float32))
    with pytest.raises(ValueError, match="vmap must have at least one non-None value in in_axes.*vmap\\(<lambda>\\)"):
        ftrans.vmap(lambda x: x, in_axes=None)(np.ones(2, np.float32))


@pytest.mark.parametrize("axis_name", [None, "foo"])
def test_vmap_batched_output_with_out_axes_none_like_jax(axis_name):
    x = np.array([1.0, 2.0], np.float32)
    with pytest.raises(ValueError) as je:
        jax.vmap(lambda v: v, out_axes=None, axis_name=axis_name)(x)
    with pytest.raises(ValueError) as fe:
        ftrans.vmap(lambda v: v, out_axes=None, axis_name=axis_name)(x)
    assert str(fe.value).startswith(str(je.value) + ": vmap(<lambda>) has out_axes=None")


def test_core_shaped_array_public_like_jax():
    # jax.core.ShapedArray / AbstractValue / Tracer, as libraries (flax's nn.scan) use them.
    import ftrans.core

    for lib, np_ in ((jax, jjnp), (ftrans, fjnp)):
        a = lib.core.ShapedArray([2, 3], np_.float32)
        assert (a.shape, a.dtype, a.weak_type) == ((2, 3), np.dtype(np.float32), False)
        assert str(lib.core.ShapedArray((4,), "int32", True)) == "~int32[4]"
        assert a == lib.core.ShapedArray((2, 3), np.dtype(np.float32))
        assert isinstance(a, lib.core.AbstractValue)
        assert isinstance(np_.ones(3).aval, lib.core.ShapedArray)
        k = lib.core.ShapedArray((), np_.result_type(lib.random.key(0)))
        assert str(k) == "key<fry>[]"
        seen = []
        lib.jit(lambda x: seen.append(isinstance(x, lib.core.Tracer)))(1.0)
        assert seen == [True]
