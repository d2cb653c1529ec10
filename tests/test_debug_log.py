"""``debug.log`` (JAX's ``jax.debug.log``): ``debug.print``'s message as an INFO log record carrying the
call's file and line, eagerly, under ``jit``, ``vmap`` and in the two-call form, against jax's records
(jax's debugging_primitives_test ``test_debug_print_with_logging``)."""

from __future__ import annotations

import logging
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)


def _logged(logger_name, run):
    logger = logging.getLogger(logger_name)
    handler = _Records()
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        run()
        jax.effects_barrier()
        ftrans.effects_barrier()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    return handler.records


def _fun(lib):
    def log_fn(x):
        x = x * x
        lib.debug.log("x={}", x)
        lib.debug.log("y={y} z={z}", y=x + 1, z=x - 1)
        return x * x
    return log_fn


def _run(lib, np_, how):
    f = _fun(lib)
    if how == "jit":
        return lambda: lib.jit(f)(2)
    if how == "vmap":
        return lambda: lib.vmap(f)(np_.arange(3))
    return lambda: f(np_.asarray(2))


@pytest.mark.parametrize("how", ["eager", "jit", "vmap"])
def test_debug_log_records_match_jax(how):
    want = _logged("jax._src.debugging", _run(jax, jjnp, how))
    got = _logged("ftrans.debug", _run(ftrans, fjnp, how))
    assert [r.msg for r in got] == [r.msg for r in want]
    assert all(r.levelno == logging.INFO for r in got)
    assert all(r.pathname == __file__ for r in got)  # the debug.log call's file, as JAX's records
    assert [r.lineno for r in got] == [r.lineno for r in want]


def test_debug_log_two_call_form_and_nothing_on_stdout(capsys):
    got = _logged("ftrans.debug", lambda: ftrans.debug.log(ordered=True)("v={}", fjnp.float32(1.5)))
    want = _logged("jax._src.debugging", lambda: jax.debug.log(ordered=True)("v={}", jjnp.float32(1.5)))
    assert [r.msg for r in got] == [r.msg for r in want] == ["v=1.5"]
    assert capsys.readouterr().out == ""
    np.testing.assert_equal(len(got), 1)
