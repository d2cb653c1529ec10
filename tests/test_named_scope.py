"""``named_scope``/``named_call`` names reach the printed IR (``pretty_print(name_stack=True)``) and the
StableHLO locations (``loc("jit(f)/outer/sin"(...))``) and XLA's op metadata, as in JAX."""

import re
import threading

import jax
import jax.numpy as jnp_jax
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans import lax


def _make(J, np_):
    def f(x):
        with J.named_scope("outer"):
            y = np_.sin(x)
            with J.named_scope("inner"):
                z = y * 2
        return J.named_call(lambda a: a + 1, name="myfn")(z)
    return f


def _stacks(text: str) -> list[str]:
    """The ``[name/stack]`` note of each equation line (empty for none)."""
    out = []
    for line in text.splitlines():
        if " = " not in line:
            continue
        m = re.search(r"#.*\[([^\]]*)\]\s*$", line)
        out.append(m.group(1) if m else "")
    return out


def test_printed_ir_shows_name_stack_like_jax():
    x = np.float32(1.0)
    ft = ftrans.make_jaxpr(_make(ftrans, jnp))(x)
    jx = jax.make_jaxpr(_make(jax, jnp_jax))(x)
    assert _stacks(ft.pretty_print(name_stack=True)) == _stacks(jx.jaxpr.pretty_print(name_stack=True)) == [
        "outer", "outer/inner", "myfn"]
    assert "#" not in str(ft)  # the default printout is unchanged, as JAX's
    both = ft.pretty_print(name_stack=True, source_info=True)
    assert "test_named_scope.py:" in both and "[outer/inner]" in both
    assert [e.source_info.name_stack for e in ft.eqns] == ["outer", "outer/inner", "myfn"]


def _loc_names(text: str) -> set[str]:
    return {m for m in re.findall(r'loc\("([^"]*)"\(', text) if "/" in m}


def _resolved(text: str) -> str:
    """``as_text(debug_info=True)`` with each op's location alias (``loc(#loc12)``) replaced by its
    definition (``#loc12 = loc("jit(f)/sin"(#loc3))``, printed at the end, as MLIR prints them)."""
    defs = dict(re.findall(r"^(#loc\d*) = (loc\(.*\))$", text, re.M))
    return re.sub(r"loc\((#loc\d*)\)", lambda m: defs.get(m.group(1), m.group(0)), text)


def test_stablehlo_locations_carry_the_names_like_jax():
    x = np.float32(1.0)
    ft = ftrans.jit(_make(ftrans, jnp)).lower(x).as_text(debug_info=True)
    jx = jax.jit(_make(jax, jnp_jax)).lower(x).as_text(debug_info=True)
    want = {"jit(f)/outer/sin", "jit(f)/outer/inner/mul", "jit(f)/myfn/add"}
    assert want <= _loc_names(ft)
    assert want <= set(re.findall(r'loc\("([^"]*)"', jx))
    assert re.search(r'stablehlo\.sine .*loc\("jit\(f\)/outer/sin"\(#loc\d*\)\)', _resolved(ft))
    assert re.search(r'loc\("[^"]*test_named_scope.py":\d+:\d+\)', ft)


def test_xla_keeps_names_as_op_metadata():
    def f(x):
        with ftrans.named_scope("layer1"):
            return jnp.tanh(x) * 3

    exe = ftrans.jit(f).lower(np.ones(3, np.float32)).compile().executable
    hlo = exe.hlo_modules()[0].to_string()
    assert 'op_name="jit(f)/layer1/tanh"' in hlo


def test_names_inside_control_flow_and_nested_jit():
    @ftrans.jit
    def inner(v):
        with ftrans.named_scope("in_jit"):
            return v * 2

    def f(x):
        with ftrans.named_scope("loop"):
            return lax.fori_loop(0, 3, lambda i, c: inner(c) + 1, x)

    text = ftrans.jit(f).lower(np.float32(1)).as_text(debug_info=True)
    names = _loc_names(text)
    # a body's names restart (as JAX's) and the lowering joins them to the equation that runs it
    assert "jit(f)/loop/scan" in names
    # the loop's body is named as JAX's: the scan lowers to a while loop, ``while/body``
    assert "jit(f)/loop/while/body/jit(inner)/in_jit/mul" in names
    closed = ftrans.make_jaxpr(f)(np.float32(1))
    (scan,) = closed.eqns
    assert scan.source_info.name_stack == "loop"
    assert all(e.source_info.name_stack == "" for e in scan.params["jaxpr"].eqns)
    assert float(ftrans.jit(f)(np.float32(1))) == float(jax.jit(
        lambda x: jax.lax.fori_loop(0, 3, lambda i, c: c * 2 + 1, x))(np.float32(1)))


def test_names_survive_grad():
    def f(x):
        with ftrans.named_scope("block"):
            return jnp.sin(x) * x

    text = _resolved(ftrans.jit(ftrans.grad(f)).lower(np.float32(1)).as_text(debug_info=True))
    ops = re.findall(r'stablehlo\.(sine|cosine) .*loc\("([^"]*)"', text)
    assert ops and all("block" in name for _, name in ops)


def test_name_stack_is_per_thread():
    seen = {}

    def work(tag):
        def f(x):
            with ftrans.named_scope(tag):
                return x + 1
        closed = ftrans.make_jaxpr(f)(1.0)
        seen[tag] = closed.eqns[0].source_info.name_stack

    threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {f"t{i}": f"t{i}" for i in range(4)}
    assert ftrans.core.trace.current_name_stack() == ()


def test_jit_body_does_not_store_outer_name_stack_like_jax():
    def make(J, np_):
        def f(x):
            with J.named_scope("foo"):
                @J.jit
                def g(v):
                    with J.named_scope("bar"):
                        return v + 1
                return g(x)
        return f

    for J, np_ in ((jax, jnp_jax), (ftrans, jnp)):
        closed = J.make_jaxpr(make(J, np_))(2.0)
        assert str(closed.eqns[0].source_info.name_stack) == "foo"
        assert str(closed.eqns[0].params["jaxpr"].eqns[0].source_info.name_stack) == "bar"
    text = ftrans.jit(make(ftrans, jnp)).lower(2.0).as_text(debug_info=True)
    assert "jit(f)/foo/jit(g)/bar/add" in _loc_names(text)
    assert "foo/jit(g)" in jax.jit(make(jax, jnp_jax)).lower(2.0).as_text(debug_info=True)
    with ftrans.named_scope("outside"):  # make_jaxpr starts a fresh stack, as JAX's
        assert ftrans.make_jaxpr(lambda x: x + 1)(1.0).eqns[0].source_info.name_stack == ""


def test_scope_restored_after_error():
    with pytest.raises(RuntimeError):
        with ftrans.named_scope("boom"):
            raise RuntimeError
    assert ftrans.core.trace.current_name_stack() == ()
    with pytest.raises(TypeError, match="string"):
        with ftrans.named_scope(3):
            pass


def _transformed(J, np_, lax_):
    """Functions whose equations are staged under transforms, each with JAX's expected name stacks."""
    def body(x):
        with J.named_scope("bar"):
            with J.named_scope("baz"):
                return np_.sin(x) * 2

    def sc(x):
        with J.named_scope("foo"):
            return body(x)

    return {
        "vmap": (J.vmap(lambda x: J.named_scope("foo")(body)(x)), (np.ones(2, np.float32),)),
        "scope_around_vmap": (J.named_scope("foo")(J.vmap(body)), (np.ones(2, np.float32),)),
        "jvp": (lambda x, t: J.jvp(sc, (x,), (t,)), (np.float32(1), np.float32(1))),
        "value_and_grad": (J.value_and_grad(sc), (np.float32(1),)),
        "vmap_of_grad": (J.vmap(J.grad(sc)), (np.ones(2, np.float32),)),
        "grad_of_jit": (J.grad(J.named_scope("foo")(J.jit(body))), (np.float32(1),)),
        "while": (lambda x: J.named_scope("foo")(lambda v: lax_.while_loop(
            J.named_scope("c")(lambda c: c < 5), J.named_scope("b")(lambda c: c + 1), v))(x), (np.float32(0),)),
        "cond": (lambda x, p: J.named_scope("foo")(lambda v, q: lax_.cond(
            q, J.named_scope("t")(lambda c: c + 1), J.named_scope("f")(lambda c: c - 1), v))(x, p),
                 (np.float32(0), True)),
    }


@pytest.mark.parametrize("case", list(_transformed(jax, jnp_jax, jax.lax)))
def test_transforms_enter_the_name_stack_like_jax(case):
    """``vmap``/``jvp``/``grad`` put the transform in the name stack of the equations they stage, wrapping
    the name inside it (``foo/vmap(bar)/baz``, ``transpose(jvp(foo))``), and the StableHLO locations of
    loop and branch bodies are named as JAX's (``while/body``, ``cond/branch_0_fun``)."""
    f, args = _transformed(ftrans, jnp, lax)[case]
    g, _ = _transformed(jax, jnp_jax, jax.lax)[case]
    ft, jx = ftrans.make_jaxpr(f)(*args), jax.make_jaxpr(g)(*args)
    assert sorted({str(e.source_info.name_stack) for e in ft.eqns}) == \
        sorted({str(e.source_info.name_stack) for e in jx.eqns})
    if case in ("while", "cond", "value_and_grad", "scope_around_vmap"):
        names = _loc_names(ftrans.jit(f).lower(*args).as_text(debug_info=True))
        want = _loc_names(jax.jit(g).lower(*args).as_text(debug_info=True))
        assert {n for n in want if n.startswith("jit(")} <= names


def test_a_jitted_call_op_is_named_after_its_transformed_callee_as_jax():
    # JAX's metadata_test.test_grad_jit_metadata: the call into a jitted function differentiated is located
    # at ``jit(foo)/jvp(jit(foo))``, its transpose at ``jit(foo)/transpose(jvp(jit(foo)))``.
    def locs(J, np_):
        @J.jit
        def foo(x):
            return np_.sin(x)

        ir = J.jit(J.grad(foo)).lower(1.0).compiler_ir()
        text = ir.operation.get_asm(enable_debug_info=True)
        return set(re.findall(r'loc\("([^"]*jvp\(jit\(foo\)\)\)?)"', text))

    want = locs(jax, jnp_jax)
    assert want == {"jit(foo)/jvp(jit(foo))", "jit(foo)/transpose(jvp(jit(foo)))"}
    assert locs(ftrans, jnp) == want
