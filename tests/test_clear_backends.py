"""``ftrans.clear_backends`` (JAX's ``jax.clear_backends``): the runtime's clients are dropped with every
program compiled for them, and the next call compiles afresh on a new client. Run in a child process so
the arrays other tests keep on the current client stay valid."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

_CHILD = textwrap.dedent("""
    import numpy as np
    import jax
    import ftrans
    import ftrans.numpy as jnp

    from ftrans.lowering import compat

    g = ftrans.jit(lambda x, y: x * y)
    assert int(g(1, 2)) == 2
    assert int(g(3, 2)) == 6                       # compiled by now
    old = compat.backend()
    assert old.live_executables()
    d = ftrans.device_put(np.arange(3.0, dtype=np.float32))
    assert float(jnp.sum(d * 2)) == 6.0            # a one-primitive program on the device
    ftrans.clear_backends()
    new = compat.backend()
    assert new is not old
    assert not new.live_executables()
    assert int(g(1, 2)) == 2 and int(g(4, 2)) == 8
    d = ftrans.device_put(np.arange(3.0, dtype=np.float32))
    np.testing.assert_allclose(np.asarray(jnp.sum(d * 2)), 6.0)
    assert [x.id for x in ftrans.devices()] == [x.id for x in jax.devices()]
    # an eager stack of factorizations runs a compiled program from its second call: a new one on the new client
    from ftrans.lowering import device_eager
    a = np.eye(3, dtype=np.float32)[None].repeat(9, 0) * 2
    for _ in range(2):
        q = np.asarray(jnp.linalg.qr(a)[1])
    assert device_eager.host_stats["compiles"] >= 1
    ftrans.clear_backends()
    assert not device_eager._host_cache and not device_eager._host_device
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(jnp.linalg.qr(a)[1]), q)
    print("ok")
""")


def test_clear_backends_drops_the_clients_and_the_programs():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
