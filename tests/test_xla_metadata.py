"""``ftrans.experimental.xla_metadata.set_xla_metadata``: the attributes on staged equations
(``eqn.ctx.xla_metadata``) and on their lowered ops (``mhlo.frontend_attributes``), against JAX's."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
from jax.experimental.xla_metadata import set_xla_metadata as jax_set

import ftrans
import ftrans.numpy as fjnp
from ftrans.experimental.xla_metadata import set_xla_metadata as ft_set

APIS = ((jax, jjnp, jax_set), (ftrans, fjnp, ft_set))


def test_context_manager_marks_equations_and_ops():
    for api, np_, setm in APIS:
        @api.jit
        def f(a, b):
            with setm(a="b"):
                return a + b

        assert all(e.ctx.xla_metadata == {"a": "b"} for e in f.trace(1.0, 2.0).jaxpr.eqns)
        assert 'mhlo.frontend_attributes = {a = "b"}' in f.lower(1.0, 2.0).as_text()
        np.testing.assert_allclose(np.asarray(f(1.0, 2.0)), 3.0)


def test_values_nesting_and_unsetting():
    for api, np_, setm in APIS:
        @api.jit
        def f(x):
            with setm(a=True, n=10):
                y = np_.sin(x)
                with setm(c="d", n=None):
                    return np_.cos(y)

        text = f.lower(1.0).as_text()
        assert 'mhlo.frontend_attributes = {a = "true", n = "10"}' in text, api.__name__
        assert 'mhlo.frontend_attributes = {a = "true", c = "d"}' in text, api.__name__


def test_decorator_and_branches():
    for api, np_, setm in APIS:
        @setm(a="b")
        def g(x):
            return api.lax.cond(x > 0, np_.sin, np_.cos, x)

        lines = api.jit(g).lower(1.0).as_text().splitlines()
        for op in ("stablehlo.sine", "stablehlo.cosine"):
            (line,) = [ln for ln in lines if op in ln]
            assert 'mhlo.frontend_attributes = {a = "b"}' in line, (api.__name__, line)


def _tagged_ops(text):
    """(op, attributes) of each op of a module's text that carries ``mhlo.frontend_attributes``."""
    import re

    out = []
    for ln in text.splitlines():
        m = re.search(r"mhlo\.frontend_attributes = \{([^}]*)\}", ln)
        op = re.search(r"(stablehlo\.\w+)", ln)
        if m and op:
            out.append((op.group(1), m.group(1)))
    return sorted(out)


def test_value_form_tags_the_op_that_made_the_value():
    # docs/debugging/xla_metadata.md: set_xla_metadata(y * z, breakpoint=True) tags the multiply only
    outs = []
    for api, np_, setm in APIS:
        def f(x):
            y, z = np_.sin(x), np_.cos(x)
            w = setm(y * z, breakpoint=True, n=3)
            return setm({"a": w + 1.0, "b": (w, x)}, k="v")  # a pytree; x is an argument: nothing to tag

        text = api.jit(f).lower(1.0).as_text()
        hlo = api.jit(f).lower(1.0).as_text("hlo")
        res = api.jit(f)(np.float32(0.5))
        eager = f(np.float32(0.5))
        np.testing.assert_allclose(np.asarray(eager["a"]), np.asarray(res["a"]), rtol=1e-6)
        outs.append((_tagged_ops(text), hlo.count("frontend_attributes"), np.asarray(res["a"])))
    assert outs[0][0] == outs[1][0] and outs[0][1] == outs[1][1]
    np.testing.assert_allclose(outs[0][2], outs[1][2], rtol=1e-6)


def test_value_form_under_grad_and_vmap():
    outs = []
    for api, np_, setm in APIS:
        def f(x):
            return setm(np_.sin(x) * 2.0, tag="t").sum()

        g = api.grad(f)(np.arange(3.0, dtype=np.float32))
        v = api.vmap(lambda x: setm(x * 3.0, tag="v"))(np.arange(3.0, dtype=np.float32))
        gtext = api.jit(api.grad(f)).lower(np.arange(3.0, dtype=np.float32)).as_text()
        vtext = api.jit(api.vmap(lambda x: setm(x * 3.0, tag="v"))).lower(np.arange(3.0, dtype=np.float32)).as_text()
        outs.append((np.asarray(g), np.asarray(v), _tagged_ops(gtext), _tagged_ops(vtext),
                     api.make_jaxpr(f)(np.ones(3, np.float32)).eqns[2].primitive.name))
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-6)
    np.testing.assert_allclose(outs[0][1], outs[1][1])
    assert outs[0][2:] == outs[1][2:]


def test_decorator_over_a_jitted_function_keeps_lower():
    # docs/debugging/xla_metadata.md: @set_xla_metadata(...) over @jax.jit, then .lower(...).as_text("hlo")
    outs = []
    for api, np_, setm in APIS:
        @setm(_xla_log=True)
        @api.jit
        def f(x):
            y = np_.sin(x)
            return y * np_.cos(y)

        outs.append((_tagged_ops(f.lower(1.0).as_text()), f.__name__, float(f(1.0))))
    assert outs[0] == outs[1]


def test_traces_are_not_shared_across_attributes():
    # a jitted function lowered inside and outside set_xla_metadata blocks: each lowering has its own
    # block's attributes (the attributes are part of the trace's cache key, as in JAX's trace context)
    for api, np_, setm in APIS:
        @api.jit
        def f(a, b):
            return a + b

        with setm(b="c"):
            t1 = f.lower(2.0, 3.0).as_text()
        t2 = f.lower(1.0, 2.0).as_text()
        with setm(c="d"):
            t3 = f.lower(4.0, 5.0).as_text()
        assert 'mhlo.frontend_attributes = {b = "c"}' in t1, api.__name__
        assert "mhlo.frontend_attributes" not in t2, api.__name__
        assert 'mhlo.frontend_attributes = {c = "d"}' in t3 and 'b = "c"' not in t3, api.__name__
        np.testing.assert_allclose(np.asarray(f(1.0, 2.0)), 3.0)


def test_xla_metadata_call_tags_the_call_op():
    from jax.experimental.scheduling_groups import xla_metadata_call as jax_call

    from ftrans.experimental.scheduling_groups import scheduling_group
    from ftrans.experimental.scheduling_groups import xla_metadata_call as ft_call

    outs = []
    for (api, np_, _), call in zip(APIS, (jax_call, ft_call)):
        @api.jit
        def f(x):
            y = x + 2
            return call(lambda a: a * y, inlineable="false")(x)

        hlo = f.lower(np_.arange(8)).as_text("hlo")
        (line,) = [ln for ln in hlo.splitlines() if "frontend_attributes" in ln]
        assert " call(" in line and 'inlineable="false"' in line, (api.__name__, line)

        @call(inlineable="false")
        @api.jit
        def body(x):
            return api.nn.gelu(x)

        g = api.jit(api.grad(lambda x: body(x).sum()))(np.array([2.3, 4.5], np.float32))
        outs.append((np.asarray(f(np_.arange(8))), np.asarray(g)))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-6)
    text = ftrans.jit(scheduling_group("g1")(fjnp.sin)).lower(1.0).as_text()
    assert 'mhlo.frontend_attributes = {scheduling_group = "g1"}' in text
    try:
        ft_call(inlineable=False)
    except NotImplementedError as e:
        assert "inlineable" in str(e)
    else:
        raise AssertionError("a non-string attribute value was accepted")
