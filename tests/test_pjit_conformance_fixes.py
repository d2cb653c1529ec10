"""Sharding in types, the cases JAX's pjit_test.py exercises: ``sort`` and the cumulative reductions refuse an
operand split along the axis they scan (JAX's ShardingTypeError), keep the operand's type otherwise, and a
rank-0 operand broadcast inside an elementwise operation of a typed result is laid out as that result."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import NamedSharding as JNamedSharding

import ftrans
import ftrans.numpy as fjnp
from ftrans.errors import ShardingTypeError
from ftrans.sharding import NamedSharding, P

HERE = os.path.abspath(__file__)

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")

X = np.arange(16.0, dtype=np.float32).reshape(8, 2)[::-1].copy()


@pytest.fixture(scope="module")
def meshes():
    return ftrans.make_mesh((2, 2), ("x", "y")), jax.make_mesh((2, 2), ("x", "y"))


def put_both(meshes, x, spec):
    fm, jm = meshes
    return (ftrans.device_put(x, NamedSharding(fm, P(*spec))),
            jax.device_put(x, JNamedSharding(jm, jax.P(*spec))))


def spec_tuple(spec) -> tuple:
    t = list(spec)
    while t and t[-1] is None:
        t.pop()
    return tuple(t)


OPS = [
    ("sort0", lambda np_, a: np_.sort(a, axis=0)),
    ("sort1", lambda np_, a: np_.sort(a, axis=1)),
    ("argsort0", lambda np_, a: np_.argsort(a, axis=0)),
    ("cumsum0", lambda np_, a: np_.cumsum(a, axis=0)),
    ("cumsum1", lambda np_, a: np_.cumsum(a, axis=1)),
    ("cummax0", lambda np_, a: jax.lax.cummax(a, axis=0) if np_ is jjnp else ftrans.lax.cummax(a, axis=0)),
]


@pytest.mark.parametrize("name, op", OPS, ids=[o[0] for o in OPS])
def test_scan_axis_rules_as_jax(meshes, name, op):
    fx, jx = put_both(meshes, X, ("x", None))
    try:
        want = jax.typeof(jax.jit(lambda a: op(jjnp, a)).trace(jx).out_info).sharding.spec
    except Exception as e:  # noqa: BLE001 - the oracle's error class is jax's own
        assert "unsharded over the" in str(e)
        with pytest.raises(ShardingTypeError, match="unsharded over the") as err:
            ftrans.jit(lambda a: op(fjnp, a)).trace(fx)
        assert HERE in str(err.value)
        return
    got = ftrans.jit(lambda a: op(fjnp, a))(fx)
    assert spec_tuple(ftrans.typeof(got).sharding.spec) == spec_tuple(want)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.jit(lambda a: op(jjnp, a))(jx)))


def test_scalar_operand_broadcast_is_typed_in_the_lowering(meshes):
    fx, jx = put_both(meshes, X, ("x", "y"))

    def f(a):
        b = a * 2
        return b * b

    want = jax.jit(f).lower(jx).as_text().count("sdy.sharding_constraint")
    got = ftrans.jit(f).lower(fx).as_text().count("sdy.sharding_constraint")
    assert got == want == 3


LIKE = [
    ("zeros_like", lambda np_, lax_, a: np_.zeros_like(a)),
    ("ones_like_int", lambda np_, lax_, a: np_.ones_like(a, dtype=np.int32)),
    ("full_like", lambda np_, lax_, a: np_.full_like(a, 3.0)),
    ("lax_full_like", lambda np_, lax_, a: lax_.full_like(a, 2)),
]


@pytest.mark.parametrize("name, op", LIKE, ids=[o[0] for o in LIKE])
def test_like_functions_keep_the_operands_layout(meshes, name, op):
    fx, jx = put_both(meshes, X, ("x", "y"))
    want = op(jjnp, jax.lax, jx)  # eager: the committed operand's layout
    got = op(fjnp, ftrans.lax, fx)
    assert spec_tuple(got.sharding.spec) == spec_tuple(want.sharding.spec) == ("x", "y")
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    seen = []  # traced: the operand's sharding type (jax needs the mesh in context to compile, not to trace)
    ftrans.jit(lambda a: seen.append(ftrans.typeof(op(fjnp, ftrans.lax, a)).sharding.spec) or a).trace(fx)
    with jax.set_mesh(meshes[1]):
        jseen = []
        jax.jit(lambda a: jseen.append(jax.typeof(op(jjnp, jax.lax, a)).sharding.spec) or a).trace(jx)
    assert [spec_tuple(s) for s in seen] == [spec_tuple(s) for s in jseen] == [("x", "y")]


def test_like_of_an_array_committed_to_one_device():
    fdev, jdev = ftrans.devices()[1], jax.devices()[1]
    got = fjnp.zeros_like(ftrans.device_put(X, fdev))
    want = jjnp.zeros_like(jax.device_put(X, jdev))
    assert got.devices() == {fdev} and want.devices() == {jdev}
    assert got.committed == want.committed
    # an uncommitted operand leaves the result uncommitted, on the default device
    assert fjnp.zeros_like(fjnp.asarray(X)).committed == jjnp.zeros_like(jjnp.asarray(X)).committed


BITCASTS = [
    ("same", np.float32, (8, 4), ("x", "y"), np.int32),
    ("narrower", np.float32, (8, 4), ("x", "y"), np.int16),  # adds an unsplit minor dimension
    ("wider", np.int16, (8, 4, 2), ("x", "y", None), np.float32),  # drops the minor dimension
]


@pytest.mark.parametrize("name, src, shape, spec, to", BITCASTS, ids=[b[0] for b in BITCASTS])
def test_bitcast_convert_type_is_typed_as_jax(meshes, name, src, shape, spec, to):
    fx, jx = put_both(meshes, np.arange(np.prod(shape)).astype(src).reshape(shape), spec)
    seen, jseen = [], []
    ftrans.jit(lambda a: seen.append(ftrans.typeof(ftrans.lax.bitcast_convert_type(a, to)).sharding.spec) or a
               ).trace(fx)
    jax.jit(lambda a: jseen.append(jax.typeof(jax.lax.bitcast_convert_type(a, to)).sharding.spec) or a).trace(jx)
    assert [spec_tuple(s) for s in seen] == [spec_tuple(s) for s in jseen]
    got = ftrans.jit(lambda a: ftrans.lax.bitcast_convert_type(a, to))(fx)
    assert spec_tuple(got.sharding.spec) == spec_tuple(jseen[0])


def test_eager_cotangents_take_their_primals_sharding_type(meshes):
    """Eager grad/vjp of an input over Explicit axes: its cotangent is laid out as its type (JAX's cotangents
    carry their primals' types), also when the backward pass runs through a jitted function's transpose."""
    fm, jm = meshes
    x = np.arange(16.0, dtype=np.float32)
    fx = ftrans.device_put(x, NamedSharding(fm, P("x")))
    jx = jax.device_put(x, JNamedSharding(jm, jax.P("x")))

    def make(lib, lax_, np_):
        f = lib.jit(lambda v: lax_.dynamic_slice_in_dim(v, np_.array(1, dtype=np.int32), 2))
        return lambda v: np_.sum(f(v) * 3.0)

    with jax.set_mesh(jm):
        want = jax.grad(make(jax, jax.lax, jjnp))(jx)
    got = ftrans.grad(make(ftrans, ftrans.lax, fjnp))(fx)
    assert spec_tuple(got.sharding.spec) == spec_tuple(want.sharding.spec) == ("x",)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    _, pull = ftrans.vjp(make(ftrans, ftrans.lax, fjnp), fx)
    (ct,) = pull(fjnp.float32(1.0))
    assert spec_tuple(ct.sharding.spec) == ("x",)


RESHAPES = [  # (source shape, new sizes, source spec): JAX's split/merge-one-axis cases
    ((4, 6, 8), (4, 2, 3, 8), ("x", None, "y")),
    ((4, 6, 8), (4, 2, 3, 4, 2), ("x", None, None)),  # two splits: refused
    ((4, 6, 8), (4, 4, 2, 6), ("x", None, None)),  # a split and a merge in one group: refused
    ((4, 8, 9), (4, 2, 2, 3, 3, 2), ("x", None, None)),
    ((4, 2, 3, 2, 4), (4, 6, 8), ("x", None, None, None, None)),  # two merges: refused
    ((4, 2, 3, 8), (4, 6, 8), ("x", None, None, "y")),
    ((10, 1), (2, 5, 1, 1), ("x", None)),
]


@pytest.mark.parametrize("src, new, spec", RESHAPES, ids=[f"{a}->{b}" for a, b, _ in RESHAPES])
def test_reshape_types_and_refusals_as_jax(meshes, src, new, spec):
    fx, jx = put_both(meshes, np.zeros(src, np.float32), spec)
    try:
        jseen = []
        jax.jit(lambda a: jseen.append(jax.typeof(jax.lax.reshape(a, new)).sharding.spec) or a).trace(jx)
    except Exception as e:  # noqa: BLE001 - the oracle's error class is jax's own
        assert "This reshape is not supported" in str(e)
        with pytest.raises(ShardingTypeError, match="This reshape is not supported"):
            ftrans.jit(lambda a: ftrans.lax.reshape(a, new)).trace(fx)
        return
    seen = []
    ftrans.jit(lambda a: seen.append(ftrans.typeof(ftrans.lax.reshape(a, new)).sharding.spec) or a).trace(fx)
    assert [spec_tuple(s) for s in seen] == [spec_tuple(s) for s in jseen]


@pytest.mark.parametrize("inner_jit", [False, True])
def test_vmap_of_a_typed_array_shows_each_examples_type(meshes, inner_jit):
    fx, jx = put_both(meshes, X, ("x", "y"))

    def run(lib, x):
        seen = []

        def f(v):
            seen.append(spec_tuple(lib.typeof(v).sharding.spec))
            v = v * 2
            seen.append(spec_tuple(lib.typeof(v).sharding.spec))
            return v * v

        out = lib.vmap(lib.jit(f) if inner_jit else f)(x)
        return seen, spec_tuple(out.sharding.spec), np.asarray(out)

    with jax.set_mesh(meshes[1]):
        want = run(jax, jx)
    got = run(ftrans, fx)
    assert got[:2] == want[:2] == ([("y",), ("y",)], ("x", "y"))
    np.testing.assert_array_equal(got[2], want[2])


def test_like_functions_of_a_shape_dtype_struct_take_its_sharding():
    fm = ftrans.make_mesh((2, 1), ("x", "y"), axis_types=(ftrans.sharding.AxisType.Auto,) * 2)
    jm = jax.make_mesh((2, 1), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    fs = ftrans.ShapeDtypeStruct((4, 4), np.float32, sharding=NamedSharding(fm, P("x", "y")))
    js = jax.ShapeDtypeStruct((4, 4), np.float32, sharding=JNamedSharding(jm, jax.P("x", "y")))
    for fop, jop in [(lambda s: fjnp.zeros_like(s), lambda s: jjnp.zeros_like(s)),
                     (lambda s: ftrans.lax.full_like(s, 2.0), lambda s: jax.lax.full_like(s, 2.0))]:
        got, want = fop(fs), jop(js)
        assert got.sharding == fs.sharding and want.sharding == js.sharding
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_jit_keeps_constraints_on_values_computed_from_constants():
    """A constraint (or device_put) on a value that depends on no argument is not folded away: the jitted
    program is partitioned and its result laid out as asked, as in JAX."""
    fm = ftrans.make_mesh((2, 2), ("x", "y"), axis_types=(ftrans.sharding.AxisType.Auto,) * 2)
    jm = jax.make_mesh((2, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    inp = np.arange(16).reshape(8, 2)
    const = fjnp.asarray(inp)
    cases = [
        (lambda: ftrans.lax.with_sharding_constraint(fjnp.arange(8), NamedSharding(fm, P("x"))),
         lambda: jax.lax.with_sharding_constraint(jjnp.arange(8), JNamedSharding(jm, jax.P("x")))),
        (lambda: fjnp.array(inp, dtype=np.float32, device=NamedSharding(fm, P("x", "y"))),
         lambda: jjnp.array(inp, dtype=np.float32, device=JNamedSharding(jm, jax.P("x", "y")))),
        (lambda: ftrans.lax.with_sharding_constraint(const, NamedSharding(fm, P(None, "y"))),
         lambda: jax.lax.with_sharding_constraint(jjnp.asarray(inp), JNamedSharding(jm, jax.P(None, "y")))),
    ]
    for f, j in cases:
        got, want = ftrans.jit(f)(), jax.jit(j)()
        assert spec_tuple(got.sharding.spec) == spec_tuple(want.sharding.spec)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_results_laid_out_as_an_argument_keep_its_sharding():
    """JAX keeps an argument's sharding for a result XLA lays out the same way (the spec as written, size-1
    mesh axes included), eagerly and under jit."""
    fm = ftrans.make_mesh((1, 8, 1), ("x", "y", "z"), axis_types=(ftrans.sharding.AxisType.Auto,) * 3)
    jm = jax.make_mesh((1, 8, 1), ("x", "y", "z"), axis_types=(jax.sharding.AxisType.Auto,) * 3)
    v = np.arange(32).reshape(1, -1, 1)
    fx = ftrans.device_put(v, NamedSharding(fm, P("x", "y", "z")))
    jx = jax.device_put(v, JNamedSharding(jm, jax.P("x", "y", "z")))
    for fop, jop in [(lambda a: a + 1, lambda a: a + 1),
                     (ftrans.jit(lambda a: a * 2), jax.jit(lambda a: a * 2)),
                     (lambda a: fjnp.sum(a), lambda a: jjnp.sum(a))]:
        got, want = fop(fx), jop(jx)
        assert tuple(got.sharding.spec) == tuple(want.sharding.spec)
        assert (got.sharding == fx.sharding) == (want.sharding == jx.sharding)


def test_control_flow_results_and_scan_slices_are_typed_as_jax(meshes):
    fm, jm = meshes
    c0, xs0 = np.arange(16.0, dtype=np.float32).reshape(2, 8), np.arange(128.0, dtype=np.float32).reshape(8, 8, 2)
    fc, jc = put_both(meshes, c0, (None, "x"))
    fxs, jxs = put_both(meshes, xs0, (None, "x", "y"))

    def prog(lib, np_, P_, c, xs, seen):
        def body(carry, x):
            seen.append(spec_tuple(lib.typeof(x).sharding.spec))
            y = np_.einsum("xy,yz->xz", carry, x, out_sharding=P_(None, "y"))
            return np_.einsum("xy,yz->xz", y, x.T, out_sharding=P_(None, "x")), y

        a, m = lib.lax.scan(body, c, xs)
        r = lib.lax.fori_loop(0, 3, lambda i, v: v * 2, c)
        r2 = lib.lax.cond(True, lambda v: v * 2, lambda v: v, c)
        for v in (a, m, r, r2):
            seen.append(spec_tuple(lib.typeof(v).sharding.spec))
        return a, m

    got, want = [], []
    with ftrans.set_mesh(fm):  # a bare out_sharding spec needs the mesh in context, as in JAX
        ftrans.jit(lambda c, xs: prog(ftrans, fjnp, P, c, xs, got)).trace(fc, fxs)
    with jax.set_mesh(jm):
        jax.jit(lambda c, xs: prog(jax, jjnp, jax.P, c, xs, want)).trace(jc, jxs)
    assert got == want == [("x", "y"), (None, "x"), (None, None, "y"), (None, "x"), (None, "x")]


def test_creation_device_sharding_of_a_traced_value_lays_it_out():
    """``jnp.array(x, device=NamedSharding(...))`` inside jit lays the traced value out there, as JAX's
    (a single device stays the compiled program's business)."""
    fm = ftrans.make_mesh((2, 2), ("x", "y"), axis_types=(ftrans.sharding.AxisType.Auto,) * 2)
    jm = jax.make_mesh((2, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    inp = np.arange(16).reshape(8, 2)
    got = ftrans.jit(lambda x: fjnp.array(x, dtype=np.float32, device=NamedSharding(fm, P("x", "y"))))(inp)
    want = jax.jit(lambda x: jjnp.array(x, dtype=np.float32, device=JNamedSharding(jm, jax.P("x", "y"))))(inp)
    assert spec_tuple(got.sharding.spec) == spec_tuple(want.sharding.spec) == ("x", "y")
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_unstack_and_split_of_key_arrays_as_jax():
    fk, jk = ftrans.random.split(ftrans.random.key(0), 4), jax.random.split(jax.random.key(0), 4)
    for fop, jop in [(fjnp.unstack, jjnp.unstack), (lambda k: fjnp.split(k, 2), lambda k: jjnp.split(k, 2)),
                     (lambda k: fjnp.array_split(k, 3), lambda k: jjnp.array_split(k, 3))]:
        got, want = fop(fk), jop(jk)
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(ftrans.random.key_data(g)), np.asarray(jax.random.key_data(w)))


def test_broadcast_and_iota_take_out_sharding(meshes):
    fm, jm = meshes
    fx, jx = put_both(meshes, np.arange(16, dtype=np.float32), ("y",))

    def prog(lib, P_, x):
        b = lib.lax.broadcast(x, sizes=[2], out_sharding=P_("x", "y"))
        i = lib.lax.broadcasted_iota(np.float32, (8, 2), 0, out_sharding=P_("x", "y"))
        return b, i, lib.jit(lib.jacfwd(lambda v: lib.lax.broadcast(v, sizes=[2], out_sharding=P_("x", "y"))))(x)

    with ftrans.set_mesh(fm):
        got = ftrans.jit(lambda x: prog(ftrans, P, x)[:2])(fx) + (prog(ftrans, P, fx)[2],)
    with jax.set_mesh(jm):
        want = jax.jit(lambda x: prog(jax, jax.P, x)[:2])(jx) + (prog(jax, jax.P, jx)[2],)
    assert [spec_tuple(g.sharding.spec) for g in got] == [spec_tuple(w.sharding.spec) for w in want]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_stages_out_info_and_compiled_shardings_like_jax():
    """``Traced.out_info``/``in_avals``, ``Lowered.out_info`` (no sharding before compiling),
    ``Compiled.out_info`` (the compiled sharding) and ``Compiled.input_shardings``/``output_shardings``
    (pytrees, arguments the program drops included), for one-device and partitioned programs, as JAX's."""
    inp = np.arange(8, dtype=np.int32)
    for jit in (jax.jit, ftrans.jit):
        ins, kw = jit(lambda x, y: x).lower(inp, inp).compile().input_shardings
        assert len(ins) == 2 and kw == {} and type(ins[0]).__name__ == "SingleDeviceSharding"
        oi = jit(lambda x: x).lower((inp, inp)).out_info
        assert (oi[0].shape, oi[0].dtype, oi[0].sharding) == ((8,), np.int32, None)
        tr = jit(lambda x: x * 2).trace(inp)
        assert (jax.tree.structure(tr.out_info).num_leaves, tr.out_info.shape, len(tr.in_avals)) == (1, (8,), 2)
        co = jit(lambda x: (x * 2, x)).lower(inp).compile()
        assert co.out_info[0].shape == (8,) and type(co.out_info[1].sharding).__name__ == "SingleDeviceSharding"
        assert type(co.output_shardings).__name__ == "tuple" and len(co.output_shardings) == 2
    mesh = ftrans.make_mesh((2,), ("x",))
    arr = ftrans.device_put(inp, NamedSharding(mesh, P("x")))
    lowered = ftrans.jit(lambda x: x * 2).lower(arr)
    assert lowered.out_info.shape == (8,) and lowered.out_info.sharding == NamedSharding(mesh, P("x"))  # (JAX's)
    info = lowered.compile().out_info
    assert (info.shape, info.dtype) == ((8,), np.int32) and info.sharding == NamedSharding(mesh, P("x"))
