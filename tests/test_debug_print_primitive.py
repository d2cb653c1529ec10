"""``debug.print`` stages a ``debug_print`` equation, as JAX's does (``debug.callback`` stays
``debug_callback``), under ``grad`` and inside ``scan`` too. (What it prints is compared with JAX in
test_debug_callbacks.py.)"""

from __future__ import annotations

import jax
import numpy as np

import ftrans


def _names(J, f, *args):
    return [e.primitive.name for e in J.make_jaxpr(f)(*args).eqns]


def test_print_and_callback_equation_names_match_jax():
    for J in (jax, ftrans):
        assert _names(J, lambda x, J=J: J.debug.print("{}", x), 1.0) == ["debug_print"]
        assert _names(J, lambda x, J=J: J.debug.callback(lambda v: None, x), 1.0) == ["debug_callback"]
    assert str(ftrans.make_jaxpr(lambda x: ftrans.debug.print("{}", x))(np.int32(0)).eqns[0]).startswith(
        "debug_print[")


def test_print_in_differentiated_scan_body():
    def g(J):
        def body(c, _):
            J.debug.print("c = {c}", c=c, ordered=True)
            return c + 1, None
        return lambda x: J.lax.scan(body, x, length=2)[0]

    names = []
    for J in (jax, ftrans):
        closed = J.make_jaxpr(J.value_and_grad(g(J)))(1.0)
        names.append("debug_print" in [e.primitive.name for e in closed.eqns[0].params["jaxpr"].eqns])
    assert names == [True, True]
