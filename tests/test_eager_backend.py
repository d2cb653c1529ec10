"""Core's pluggable eager backend: the runtime plugs in, core never imports it."""

from __future__ import annotations

import ast
import pathlib

import numpy as np

import ftrans.numpy as jnp
from ftrans.core import trace as ftrace


def test_core_trace_imports_nothing_from_lowering():
    src = pathlib.Path(ftrace.__file__).read_text()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.ImportFrom):
            assert not (node.module or "").startswith("ftrans.lowering"), node.module
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("ftrans.lowering") for a in node.names)


def test_host_only_path_has_no_backend_in_between():
    if ftrace.device_backend() is None:
        assert ftrace.eager_apply is ftrace._host_apply


def test_a_registered_backend_sees_every_eager_primitive_and_may_decline():
    seen = []

    def backend(prim, args, params):
        seen.append(prim.name)
        if prim.name == "cos":
            return jnp.asarray(np.float32(42.0))
        return NotImplemented

    prev = ftrace.device_backend()
    ftrace.set_device_backend(backend)
    try:
        from ftrans.core.prims import elementwise as E

        x = jnp.asarray(np.float32(0.5))
        assert float(E.cos_p.bind(x)) == 42.0  # the backend answered cos
        np.testing.assert_allclose(float(E.exp_p.bind(x)), np.exp(np.float32(0.5)), rtol=1e-6)  # declined
    finally:
        ftrace.set_device_backend(prev)
    assert "cos" in seen and "exp" in seen
    assert ftrace.device_backend() is prev


def test_device_eager_installs_itself_and_declines_host_operands():
    from ftrans.lowering import device_eager

    prev = ftrace.device_backend()
    try:
        device_eager.install()
        device_eager.install()  # idempotent
        assert ftrace.device_backend() is device_eager.dispatch
        x = jnp.asarray(np.arange(3, dtype=np.float32))
        np.testing.assert_allclose(np.asarray(jnp.sin(x)), np.sin(np.arange(3, dtype=np.float32)), rtol=1e-6)
        from ftrans.core.prims import elementwise as E

        assert device_eager.dispatch(E.sin_p, [x], {}) is NotImplemented  # a host (CPU) operand
    finally:
        ftrace.set_device_backend(prev)
