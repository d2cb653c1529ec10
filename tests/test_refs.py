"""Mutable array references (``ftrans.new_ref`` / ``ftrans.ref``) against JAX's ``jax.new_ref``.

Each scenario is written once as a function of the library (``lib`` is ``ftrans`` or ``jax``) and
run on both; the results (returned values and the refs' final contents) must agree.
"""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans import errors

LIBS = {"ftrans": (ftrans, fjnp), "jax": (jax, jjnp)}


def both(scenario):
    """Run ``scenario(lib, jnp)`` on ftrans and on JAX and compare the (pytrees of) results."""
    got = scenario(ftrans, fjnp)
    want = scenario(jax, jjnp)
    g_leaves = jax.tree_util.tree_leaves(got)
    w_leaves = jax.tree_util.tree_leaves(want)
    assert len(g_leaves) == len(w_leaves)
    for g, w in zip(g_leaves, w_leaves):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)
    return got


def val(r):
    return np.asarray(r[...])


@pytest.mark.parametrize("jit", [False, True])
def test_argument_ref_updated_in_place(jit):
    def scenario(lib, jnp):
        def f(x_mut, y, z_mut, w):
            x_mut[...] += 1.
            x_mut[0] += 1
            x_mut[1] += 5
            z_mut[...] += 1
            return x_mut[...].sum() + y + z_mut[...] + w, y + w
        g = lib.jit(f) if jit else f
        x, z = lib.new_ref(jnp.zeros(3)), lib.new_ref(jnp.zeros((2, 3)))
        out = g(x, jnp.ones((2, 3)), z, jnp.ones((2, 1)))
        out2 = g(x, jnp.ones((2, 3)), z, jnp.ones((2, 1)))  # the cached program updates them again
        return out, out2, val(x), val(z)
    both(scenario)


@pytest.mark.parametrize("jit", [False, True])
def test_closed_over_ref(jit):
    def scenario(lib, jnp):
        x_mut = lib.new_ref(jnp.zeros(3))
        y_mut = lib.new_ref(np.zeros(3, np.float32))

        @lib.jit
        def inner(y, z):
            x_mut[...] += 1.
            y[2] += 7
            return z + 9

        f = lib.jit(inner) if jit else inner
        w = f(y_mut, 1)
        w = f(y_mut, w)
        return w, val(x_mut), val(y_mut)
    both(scenario)


@pytest.mark.parametrize("jit", [False, True])
def test_internal_ref_and_freeze_grad(jit):
    def scenario(lib, jnp):
        def f(x):
            r = lib.new_ref(x)
            r[()] = r[()] + r[()]
            return lib.freeze(r)

        def h():
            r = lib.new_ref(jnp.zeros(3))
            r[0] += 1
            r[2] += 1
            return r[...]
        g, k = (lib.jit(f), lib.jit(h)) if jit else (f, h)
        return lib.grad(g)(1.5), g(2.0), k()
    both(scenario)


@pytest.mark.parametrize("jit", [False, True])
def test_scan_refs(jit):
    def scenario(lib, jnp):
        closed = lib.new_ref(0)

        def body_closed(_, x):
            closed[...] += 2
            return (), closed[...]

        def body_internal(_, x):
            r = lib.new_ref(x)
            r[...] += 2
            return (), r[...]

        def body_scanned(_, ix):
            i, x = ix
            x[...] += i
            return (), x[...]

        scanned = lib.new_ref(np.arange(5, dtype=np.int32))

        def run():
            _, a = lib.lax.scan(body_closed, (), np.arange(5))
            _, b = lib.lax.scan(body_internal, (), np.arange(5))
            _, c = lib.lax.scan(body_scanned, (), (np.arange(5, dtype=np.int32), scanned))
            return a, b, c
        out = (lib.jit(run) if jit else run)()
        return out, val(closed), val(scanned)
    both(scenario)


@pytest.mark.parametrize("jit", [False, True])
def test_fori_while_cond_refs(jit):
    def scenario(lib, jnp):
        acc = lib.new_ref(jnp.zeros(3))
        cnt = lib.new_ref(0)
        flag = lib.new_ref(0.)

        def run(n, pred):
            def b(i, c):
                acc[...] += jnp.ones(3) * i
                return c + 1
            s = lib.lax.fori_loop(0, 4, b, 0)

            def wb(v):
                cnt[...] += 1
                return v + 3
            w = lib.lax.while_loop(lambda v: v < n, wb, 0)

            def t():
                flag[()] = 1.

            def fa():
                flag[()] = 2.
            lib.lax.cond(pred, t, fa)
            return s, w
        g = lib.jit(run) if jit else run
        out1 = g(10, True)
        f1 = val(flag)
        out2 = g(10, False)
        return out1, out2, f1, val(flag), val(acc), val(cnt)
    both(scenario)


def test_grad_through_refs_in_jit_and_scan():
    def scenario(lib, jnp):
        def f(x):
            r = lib.new_ref(x)

            @lib.jit
            def g():
                r[...] = jnp.sin(r[...]) + jnp.sin(r[...])
            g()

            def step(_, __):
                r[...] = r[...] * 3.
                return None, None
            lib.lax.scan(step, None, None, length=2)
            return lib.freeze(r)
        return lib.grad(f)(2.), lib.grad(lib.jit(f))(0.5)
    both(scenario)


def test_grad_leaves_an_unrelated_closed_over_ref_alone():
    def scenario(lib, jnp):
        counter = lib.new_ref(0)

        def f(x):
            def body(c, _):
                counter[...] += 1
                return c * 2., ()
            x, () = lib.lax.scan(body, x, (), length=3)
            return x
        return lib.grad(f)(1.0), val(counter)
    both(scenario)


def test_vmap_refs():
    def scenario(lib, jnp):
        @lib.vmap
        def square(x):
            r = lib.new_ref(x)
            r[...] = r[...] * r[...]
            return r[...]

        def add_twice(x_ref, v):
            x_ref[...] += v
            x_ref[...] += v

        y_ref = lib.new_ref(1)

        def read_closed(x_ref):
            x_ref[...] += y_ref[...]

        xs = lib.new_ref(jnp.array([0, 0, 0]))
        lib.vmap(add_twice)(xs, jnp.arange(3))
        zs = lib.new_ref(jnp.array([0, 0, 0]))
        lib.vmap(read_closed)(zs)
        us = lib.new_ref(jnp.zeros((2, 4)))
        lib.vmap(lambda r: r.__setitem__(..., jnp.ones(2)), in_axes=1)(us)  # unbatched write, broadcast back
        return square(jnp.arange(4.)), val(xs), val(zs), val(us)
    both(scenario)


def test_with_refs_accumulates_cotangents():
    def scenario(lib, jnp):
        def loss(ws, xs):
            act, _ = lib.lax.scan(lambda h, w: (jnp.dot(h, w), None), xs, ws)
            return jnp.mean(act)

        def process(ws, batch):
            acc = lib.new_ref(jnp.zeros_like(ws))

            def mub(_, xs):
                lv, pb = lib.vjp(lambda w: loss(w, xs), ws)
                pb.with_refs(acc)(jnp.ones_like(lv))
                return (), lv
            (), ls = lib.lax.scan(mub, (), batch)
            return lib.freeze(acc), ls
        ws = jnp.ones((3, 4, 4)) * 0.5
        batch = jnp.ones((5, 7, 4))
        return process(ws, batch), lib.jit(process)(ws, batch)
    both(scenario)


def test_ref_api_functions_and_indexing():
    def scenario(lib, jnp):
        r = lib.new_ref(jnp.arange(12.).reshape(3, 4))
        a = lib.ref.get(r, 1)
        b = lib.ref.swap(r, (0, slice(1, 3)), jnp.array([9., 8.]))
        lib.ref.set(r, (2,), jnp.zeros(4))
        lib.ref.addupdate(r, (1, 0), 5.)
        r.addupdate(jnp.ones((3, 4)))
        c = r[np.arange(2), np.arange(2)]
        d = r[..., 0]

        @lib.jit
        def e():
            e = lib.empty_ref(lib.ShapeDtypeStruct((2,), np.float32))
            e[...] = jnp.ones(2)
            return e[...]
        return a, b, c, d, val(r), e(), len(r), r.shape, r.ndim
    both(scenario)


def test_ref_type_and_repr():
    r = ftrans.new_ref(fjnp.arange(3.))
    assert isinstance(r, ftrans.Ref) and isinstance(r, ftrans.ref.Ref)
    assert not isinstance(fjnp.ones(3), ftrans.Ref)
    assert str(ftrans.typeof(r)) == "Ref{float32[3]}" == str(jax.typeof(jax.new_ref(jjnp.arange(3.))))
    assert isinstance(ftrans.typeof(r), ftrans.ref.AbstractRef)
    assert repr(r) == repr(jax.new_ref(jjnp.arange(3.)))

    @ftrans.jit
    def f(x_ref):
        assert isinstance(x_ref, ftrans.Ref)
        return x_ref[...]
    f(r)


def test_wrong_shape_and_dtype_are_value_errors():
    r = ftrans.new_ref(fjnp.zeros(3, np.int32))
    jr = jax.new_ref(jjnp.zeros(3, np.int32))
    for bad in (1.5, fjnp.ones(2, np.int32)):
        with pytest.raises(ValueError):
            jr[...] = jjnp.asarray(bad)
        with pytest.raises(errors.FtransValueError, match=r"(?s)Invalid (shape|dtype) for `swap`.*test_refs.py"):
            r[...] = bad
    with pytest.raises(ValueError):
        jr[...] += 1.0
    with pytest.raises(errors.FtransValueError, match="Invalid dtype"):
        r[...] += 1.0
    b = ftrans.new_ref(fjnp.array(0, dtype="bfloat16"))
    b[...] += 1.0  # a weak Python float keeps the ref's dtype


def test_freed_ref_errors():
    @ftrans.jit
    def double_free():
        r = ftrans.empty_ref(ftrans.ShapeDtypeStruct((), "float32"))
        ftrans.free_ref(r)
        ftrans.free_ref(r)
    with pytest.raises(errors.FtransValueError, match="(?s)freed at .*test_refs.py"):
        double_free()

    @ftrans.jit
    def use_after_free(x):
        r = ftrans.new_ref(x)
        ftrans.free_ref(r)
        return r[...]
    with pytest.raises(errors.FtransValueError, match="freed"):
        use_after_free(1.)

    @ftrans.jit
    def ok(x):
        r = ftrans.empty_ref(ftrans.ShapeDtypeStruct((), "float32"))
        r[...] = 2. * x
        out = r[...]
        ftrans.free_ref(r)
        return out
    assert float(ok(3.)) == 6.
    y, t = ftrans.jvp(ok, (3.,), (1.,))
    assert (float(y), float(t)) == (6., 2.)
    assert float(ftrans.grad(ok)(3.)) == 2.


def test_returning_or_aliasing_refs_is_an_error():
    with pytest.raises(ValueError, match=r"traced for jit returned a mutable array reference.*\n\n"
                                         r".*was created on line"):
        jax.jit(jax.new_ref)(jjnp.arange(3))
    with pytest.raises(errors.FtransValueError, match=r"traced for jit returned a mutable array reference.*\n\n"
                                                      r".*was created on line .*test_refs.py"):
        ftrans.jit(ftrans.new_ref)(fjnp.arange(3))
    with pytest.raises(errors.FtransValueError, match="was passed in as the argument x_ref"):
        ftrans.jit(lambda x_ref: x_ref)(ftrans.new_ref(fjnp.arange(3)))
    x_ref = ftrans.new_ref(0.)
    with pytest.raises(errors.FtransValueError, match="appeared at both x_ref and y_ref"):
        ftrans.jit(lambda x_ref, y_ref: x_ref[...] + y_ref[...])(x_ref, x_ref)
    with pytest.raises(errors.FtransValueError, match="closed over and passed as the argument y_ref"):
        ftrans.jit(lambda y_ref: x_ref[...] + y_ref[...])(x_ref)
    with pytest.raises(errors.FtransValueError, match="traced for scan returned a mutable array reference of type"):
        ftrans.lax.scan(lambda c, x: (ftrans.new_ref(c), x), 0, fjnp.arange(3))
    with pytest.raises(errors.FtransValueError, match=r"appeared at both c\[0\] and c\[1\]"):
        ftrans.lax.scan(lambda c, _: (None, None), (x_ref, x_ref), None, length=1)
    with pytest.raises(errors.FtransValueError, match="closed over and passed as the argument y_ref"):
        ftrans.lax.scan(lambda y_ref, _: (x_ref[...] + y_ref[...], None), x_ref, None, length=1)
    with pytest.raises(errors.FtransValueError, match="traced for cond returned a mutable array reference"):
        ftrans.lax.cond(True, lambda: ftrans.new_ref(1.0), lambda: ftrans.new_ref(2.0))
    with pytest.raises(errors.FtransValueError, match=r"for cond.*at both x1 and x2"):
        ftrans.lax.cond(True, lambda x1, x2: 0., lambda x1, x2: 0., x_ref, x_ref)


def test_vmap_aliased_ref_arguments():
    r = ftrans.new_ref(fjnp.zeros((3, 3)))
    with pytest.raises(errors.FtransValueError, match="only one reference to a mutable array may be passed"):
        ftrans.vmap(lambda a, b: None)(r, r)


def test_transformed_values_cannot_leak_into_outer_refs():
    x_ref = ftrans.new_ref(fjnp.zeros((), "int32"))

    def f(v):
        x_ref[...] += v
    with pytest.raises(errors.FtransValueError, match="unbatched array reference"):
        ftrans.vmap(f)(fjnp.arange(3, dtype="int32"))
    assert int(x_ref[...]) == 0

    ref = ftrans.new_ref(0.)

    def g(x):
        ref[...] = x
        return x
    with pytest.raises(errors.FtransValueError, match="Move the array reference"):
        ftrans.jvp(g, [1.], [1.])
    with pytest.raises(Exception, match="Move the array reference"):
        jax.jvp(lambda x: (jax_ref.__setitem__(..., x), x)[1], [1.], [1.])


jax_ref = jax.new_ref(0.)


def test_ref_created_in_jit_cannot_outlive_it():
    box = []

    @ftrans.jit
    def f(x):
        r = ftrans.new_ref(x)
        box.append(r)
        return r[...]
    f(1.)
    with pytest.raises(errors.FtransValueError, match="after that function returned"):
        box[0][...]


def test_jitted_function_with_closed_over_ref_dces_internal_refs():
    @ftrans.jit
    def f(x, y):
        @ftrans.jit
        def g(y):
            y_ref = ftrans.new_ref(y)
            y_ref[...] += 1
            return ftrans.freeze(y_ref)
        _ = g(y)
        return x
    assert "add" not in f.lower(1, 2).as_text()


def test_aot_lower_compile_with_refs():
    def scenario(lib, jnp):
        @lib.jit
        def f(x_mut):
            x_mut[...] += 1.
            x_mut[0] += 1

        x_mut = lib.new_ref(jnp.zeros(3))
        f.lower(x_mut).compile()(x_mut)
        y_mut = lib.new_ref(jnp.zeros(3))

        @lib.jit
        def g():
            y_mut[1] += 5

        c = g.lower().compile()
        c()
        c()
        return val(x_mut), val(y_mut)
    both(scenario)


def test_make_jaxpr_of_ref_functions_is_functional():
    r = ftrans.new_ref(fjnp.zeros(3))

    def f(x_ref):
        x_ref[...] += 1.
        return x_ref[0] * 2

    closed = ftrans.make_jaxpr(f)(r)
    assert [a.str_short() for a in closed.in_avals] == ["f32[3]"]
    assert [a.str_short() for a in closed.out_avals] == ["f32[]", "f32[3]"]  # the output, then the ref's value
    np.testing.assert_allclose(np.asarray(r[...]), 0.)  # tracing changes nothing

    def g():
        r[1] += 5.
    assert len(ftrans.make_jaxpr(g)().jaxpr.invars) == 1  # the closed-over ref's value
    assert str(ftrans.make_jaxpr(lambda x: x * 2)(1.)) == str(jax.make_jaxpr(lambda x: x * 2)(1.))


@pytest.mark.parametrize("jit", [False, True])
def test_custom_vjp_and_remat_with_refs(jit):
    def scenario(lib, jnp):
        @lib.custom_vjp
        def f(x_ref):
            return x_ref[...]
        f.defvjp(lambda x_ref: (f(x_ref), None), lambda _, g: (g,))
        ff = lib.jit(f) if jit else f
        y = ff(lib.new_ref(3.14))
        _, pb = lib.vjp(lambda x: ff(lib.new_ref(x)), 3.14)

        @lib.remat
        def h(y, x_ref):
            out = y * y
            x_ref[...] += out
            return out
        hh = lib.jit(h) if jit else h
        x_ref = lib.new_ref(1., kind="no_grad_no_remat")
        gr = lib.grad(lambda y: hh(y, x_ref))(2.)

        @lib.remat
        def k(y):
            out = y * z_ref[...]
            z_ref[...] += 1
            return out
        kk = lib.jit(k) if jit else k
        z_ref = lib.new_ref(1., kind="no_grad_no_remat")
        gk = lib.grad(kk)(2.)
        return y, pb(1.), gr, val(x_ref), gk, val(z_ref)
    both(scenario)

    @ftrans.custom_vjp
    def ret(ref):
        return ref
    ret.defvjp(lambda ref: ..., lambda *_: ...)
    with pytest.raises(errors.FtransValueError, match="returned a mutable array"):
        (ftrans.jit(ret) if jit else ret)(ftrans.new_ref(0.))


def test_custom_vjp_bwd_writes_into_a_ref_it_saved():
    def scenario(lib, jnp):
        @lib.custom_vjp
        def stash_grads(grads_ref, x):
            return x
        stash_grads.defvjp(lambda r, x: (x, r), lambda r, g: (r.__setitem__(..., g), g)[1:] and (None, g))

        def primal(grads_ref, x):
            x = jnp.sin(x)
            x = stash_grads(grads_ref, x)
            x = jnp.sin(x)
            return stash_grads(grads_ref, x)  # its bwd runs first; the earlier one's write is the last

        grads_ref = lib.new_ref(jnp.float32(0.))
        g = lib.grad(primal, 1)(grads_ref, jnp.float32(1.0))
        stash = lib.new_ref(jnp.float32(0.))
        _, pb = lib.vjp(lambda x: primal(stash, x), jnp.float32(0.5))
        g2 = pb(jnp.float32(1.))
        return g, val(grads_ref), g2, val(stash)
    both(scenario)

    @ftrans.custom_vjp
    def g(x, ref):
        return x

    def g_fwd(x, _):
        return x, ftrans.new_ref(0)
    g.defvjp(g_fwd, lambda ref, ct: (ct, None))
    with pytest.raises(errors.FtransValueError, match="custom_vjp fwd function"):
        r = ftrans.new_ref(0.)
        ftrans.vjp(lambda x: g(x, r), 3.)


def test_documented_differences_from_jax():
    """docs/differences.md "Mutable array references", asserted against jax itself."""
    # A frozen (or freed) ref cannot be read afterwards, even eagerly; JAX reads it outside jit.
    jr = jax.new_ref(jjnp.arange(3.))
    jax.freeze(jr)
    np.testing.assert_allclose(np.asarray(jr[...]), [0., 1., 2.])
    fr = ftrans.new_ref(fjnp.arange(3.))
    ftrans.freeze(fr)
    with pytest.raises(errors.FtransValueError, match="frozen at"):
        fr[...]
    # make_jaxpr shows the discharged, functional program: no Ref types, no ref effects.
    def f(r):
        r[...] += 1.
    assert "Ref{" in str(jax.make_jaxpr(f)(jax.new_ref(jjnp.zeros(3))))
    text = str(ftrans.make_jaxpr(f)(ftrans.new_ref(fjnp.zeros(3))))
    assert "Ref" not in text and "f32[3]" in text


@pytest.mark.parametrize("where", ["jit_arg", "jit_closed_scan_remat"])
def test_custom_vjp_bwd_writes_into_a_ref_inside_jit_and_scan(where):
    """Gradient-statistics plumbing inside staged code: a custom_vjp's bwd writes into a ref when the jit
    call or the scan is transposed (the backward program threads the ref), whether the ref is an argument
    of the jitted function or closed over; two calls of one jitted function with two refs each get theirs."""
    def scenario(lib, jnp):
        @lib.custom_vjp
        def stash(r, x):
            return x

        def bwd(r, g):
            r[...] = jnp.roll(r[...], 1).at[0].set(g)
            return None, g / 2
        stash.defvjp(lambda r, x: (x, r), bwd)

        def body(r, x):
            return stash(r, jnp.sin(stash(r, x)) * 3.)

        a, b = lib.new_ref(jnp.zeros(3)), lib.new_ref(jnp.zeros(3))
        if where == "jit_arg":
            pj = lib.jit(body)
            g = lib.grad(lambda x: pj(a, x) + pj(b, x * 2.))(jnp.float32(0.5))
        else:
            step = lib.remat(lambda c, _: (body(a, c), ()))
            pj = lib.jit(lambda x: lib.lax.scan(step, x, None, length=2)[0])
            _, pull = lib.vjp(pj, jnp.float32(0.5))
            g = pull(jnp.float32(1.))
        return g, val(a), val(b)
    both(scenario)


def test_custom_vjp_with_a_differentiated_ref_inside_jit_differentiates_the_function():
    """A ref holding a value being differentiated is no plumbing: inside jit too, its function is
    differentiated (JAX's fallback path), not bound as plumbing to the caller's ref."""
    def scenario(lib, jnp):
        @lib.custom_vjp
        def f(x_ref):
            return x_ref[...]
        f.defvjp(lambda x_ref: (f(x_ref), None), lambda _, g: (g,))
        jf = lib.jit(f)
        _, pull = lib.vjp(lambda x: jf(lib.new_ref(x)), 3.14)
        return pull(1.)
    both(scenario)


def test_control_flow_that_touches_no_ref_is_unchanged_once_refs_exist():
    """Refs existing somewhere must not change the errors (or programs) of control flow that never touches one."""
    keep = ftrans.new_ref(fjnp.zeros(2))  # noqa: F841 - a ref alive during the calls below
    with pytest.raises(TypeError, match=r"carry\['b'\]"):
        ftrans.lax.scan(lambda c, x: ({"b": c["b"] * 1.5}, x), {"b": fjnp.int32(1)}, fjnp.arange(3.0))
    with pytest.raises(TypeError, match=r"output\['x'\]\[1\]"):
        ftrans.lax.cond(True, lambda: {"x": (1.0, fjnp.ones(3))}, lambda: {"x": (1.0, fjnp.ones(3, "int32"))})
    closed = ftrans.make_jaxpr(lambda x: ftrans.lax.fori_loop(0, 3, lambda i, c: c + i, x))(1.0)
    assert "scan[" in str(closed)  # fori_loop with static bounds is a scan, as in JAX
    r = ftrans.new_ref(0.0)  # a closed-over ref is still threaded
    ftrans.lax.fori_loop(0, 3, lambda i, c: (r.__setitem__(..., r[...] + 1.0), c)[1], 0.0)
    assert float(r[...]) == 3.0


@pytest.mark.parametrize("jit", [False, True])
def test_vjp_with_ref_primals(jit):
    """A ref among vjp's primals is passed through undifferentiated (a custom_vjp may save it and write
    into it); the pullback gives a fresh zero ref in its place, as JAX's; aliased refs are refused."""
    def scenario(lib, jnp):
        @lib.custom_vjp
        def f(x, ref):
            return x * 2.

        def bwd(ref, g):
            ref[...] = g
            return g * 2., None
        f.defvjp(lambda x, ref: (f(x, ref), ref), bwd)
        ff = lib.jit(f) if jit else f
        r = lib.new_ref(jnp.float32(0.))
        y, pull = lib.vjp(ff, jnp.float32(3.), r)
        ct_x, ct_r = pull(jnp.float32(5.))
        assert isinstance(ct_r, type(r))
        return y, ct_x, val(ct_r), val(r)
    if jax.__version_info__ < (0, 11):
        both(scenario)
    else:
        # jax 0.11 refuses a Ref-typed primal's cotangent unless the pullback is given a gradient ref
        # (`with_refs`); ftrans keeps jax 0.10's zero ref (docs/differences.md), whose values are these.
        got = scenario(ftrans, fjnp)
        assert [float(v) for v in got] == [6.0, 10.0, 0.0, 5.0]
        with pytest.raises(ValueError, match="Ref-typed"):
            scenario(jax, jjnp)

    @ftrans.custom_vjp
    def h(x_ref, y_ref):
        return 0.
    h.defvjp(lambda x_ref, y_ref: (0., None), lambda _, g: (None, None))
    r = ftrans.new_ref(0.)
    with pytest.raises(ValueError, match="x_ref and y_ref"):
        ftrans.vjp(ftrans.jit(h) if jit else h, r, r)


def test_new_ref_keeps_the_sharding_of_its_initial_array():
    def scenario(lib, jnp):
        mesh = lib.sharding.Mesh(np.array(lib.devices()[:1]), ("i",))
        x = lib.device_put(jnp.arange(2.), lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("i")))
        a = lib.new_ref(x)
        same = [a.sharding == x.sharding, a[...].sharding == x.sharding]
        a[...] += 1.
        return np.asarray(same), val(a)
    both(scenario)


def test_a_ref_type_has_its_arrays_sharding_like_jax():
    # typeof(ref).sharding inside jit is the sharding of the array read from it (JAX's AbstractRef.sharding).
    got = []
    for lib, lnp in ((jax, jjnp), (ftrans, fjnp)):
        mesh = lib.make_mesh((1, 1), ("x", "y"), axis_types=(lib.sharding.AxisType.Explicit,) * 2)
        s = lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x", "y"))
        seen = []

        def f(r, lib=lib, seen=seen):
            seen.append((lib.typeof(r).sharding.spec, lib.typeof(r[...]).sharding.spec))
            return r[...] + 1

        with lib.set_mesh(mesh):
            lib.jit(f)(lib.new_ref(lnp.zeros((4, 4), device=s)))
        got.append(tuple(tuple(sp) for sp in seen[0]))
    assert got[0] == got[1] == (("x", "y"), ("x", "y"))


@pytest.mark.parametrize("how", ["sds", "typeof"])
def test_lower_takes_a_ref_type_like_jax(how):
    # jit(f).lower(ShapeDtypeStruct(..., is_ref=True)) or lower(typeof(ref)): the compiled program takes refs.
    def run(lib, lnp):
        def f(r):
            r[...] += 1.0
            r[0] += 1

        x = lnp.arange(4.0)
        ty = (lib.ShapeDtypeStruct(x.shape, x.dtype, is_ref=True) if how == "sds"
              else lib.typeof(lib.new_ref(x)))
        compiled = lib.jit(f).lower(ty).compile()
        r = lib.new_ref(x)
        if lib is jax and jax.__version_info__ >= (0, 11):
            # jax 0.11's compiled program fails to write its result into the ref ("Unable to replace an Array
            # with an Array of different committed"): its jit call is the oracle there
            lib.jit(f)(r)
        else:
            compiled(r)
        return r[...], repr(lib.ShapeDtypeStruct((3,), np.float32, is_ref=True))

    got, want = run(ftrans, fjnp), run(jax, jjnp)
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))
    assert got[1] == want[1]


def test_vmap_refuses_writes_to_outer_refs_even_unbatched():
    # JAX refuses any write, batched or not, to a ref made outside the vmap; reading it, and writing refs
    # made inside or passed mapped, stay allowed.
    x = np.arange(3.0, dtype=np.float32)
    for lib in (jax, ftrans):
        outer = lib.new_ref(np.float32(0.0))

        def add_one(r, v):
            lib.ref.addupdate(r, ..., np.float32(1.0))
            return v

        def set_closed(v):
            outer[...] = np.float32(2.0)
            return v
        with pytest.raises(Exception, match="performing an addupdate operation with vmapped value"):
            lib.vmap(add_one, in_axes=(None, 0))(outer, x)
        with pytest.raises(Exception, match="performing a set/swap operation with vmapped value"):
            lib.vmap(set_closed)(x)
        with pytest.raises(Exception, match="performing an addupdate operation with vmapped value"):
            lib.vmap(lib.jit(add_one), in_axes=(None, 0))(outer, x)  # through a jit's argument too
        assert float(outer[...]) == 0.0
        mapped = lib.new_ref(np.zeros(3, np.float32))
        lib.vmap(lib.jit(add_one))(mapped, x)  # a mapped ref is the function's own: writable
        np.testing.assert_allclose(mapped[...], np.ones(3))

        def inner(v):
            r = lib.new_ref(np.float32(0.0))
            r[...] += np.float32(1.0)
            return v + r[...] + outer[...]
        np.testing.assert_allclose(lib.vmap(inner)(x), x + 1)
