"""Arrays made eagerly inside ``with default_device(d)`` report ``d`` (uncommitted), as JAX's: checked against
jax on the 8 CPU devices, with jitted calls, a committed operand that keeps its device, and the default
restored after the block."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp


def _report(lib, jnp_):
    ids = lambda x: sorted(d.id for d in x.devices())  # noqa: E731
    td = lib.devices()[-1]
    f = lib.jit(lambda x: x + 1)
    out = []
    with lib.default_device(td):
        y = jnp_.ones(3)
        made = [jnp_.arange(4), y, jnp_.zeros((2, 2)) + 1, jnp_.array([1, 2]), jnp_.add(1, 1), jnp_.asarray(np.ones(2)),
                lib.device_put(np.ones(2)), y * 2, f(1)]
        out.append([ids(x) for x in made] + [x.committed for x in made])
        sticky = lib.device_put(1, lib.devices()[0])
        out.append([ids(jnp_.add(sticky, 1)), ids(f(sticky))])
    out.append([ids(y), ids(jnp_.add(1, 1)), ids(f(1))])
    return out


@pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")
def test_arrays_made_under_default_device_report_it_like_jax():
    assert _report(ftrans, fjnp) == _report(jax, jjnp)
