"""``debug.breakpoint(stdin=..., stdout=...)``: the console debugger reads the given input and writes to the
given output with JAX's CLI debugger's commands and output (prompt, ``p``/``pp``, bare expressions,
``u``/``d``/``l`` context, error lines), eagerly, under ``jit`` and under ``vmap``. Differential: the same
sessions run on jax and on ftrans must print the same text."""
import contextlib
import io

import jax
import jax.numpy as jnp
import pytest

import ftrans
import ftrans.numpy as fnp
from tests.backend_util import host_oracle


def _session(lib, np_mod, commands, wrap, arg):
    stdin = io.StringIO("".join(c + "\n" for c in commands))
    stdout = io.StringIO()

    def f(x):
        y = np_mod.sin(x)
        lib.debug.breakpoint(stdin=stdin, stdout=stdout, backend="cli", num_frames=2)
        return y

    def g(x):
        z = f(x)
        return np_mod.exp(z)

    wrap(lib)(g)(np_mod.asarray(arg))
    lib.effects_barrier()
    return stdout.getvalue()


COMMANDS = [
    ["p x", "c"],
    ["pp y", "x + 1", "p (x, y)", "c"],
    ["p nope", "1 +", "c"],
    ["u", "p x", "d", "d", "c"],
    ["u", "u", "u", "l", "c"],
]


@pytest.mark.parametrize("commands", COMMANDS, ids=lambda c: "|".join(c))
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_session_output_matches_jax(commands, mode):
    def wrap(lib):
        return (lambda fun: fun) if mode == "eager" else lib.jit

    with contextlib.nullcontext() if mode == "jit" else host_oracle():  # eager ftrans: host arithmetic
        want = _session(jax, jnp, commands, wrap, 2.0)
    got = _session(ftrans, fnp, commands, wrap, 2.0)
    assert got == want


def test_vmap_stops_once_per_element_like_jax():
    def wrap(lib):
        return lambda fun: lib.jit(lib.vmap(fun))

    cmds = ["p x", "c", "p x", "c"]
    want = _session(jax, jnp, cmds, wrap, [1.0, 2.0])
    got = _session(ftrans, fnp, cmds, wrap, [1.0, 2.0])
    assert got == want and got.count("Entering jdb:") == 2
