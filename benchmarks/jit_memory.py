"""Memory kept by jitted functions that are gone: ftrans next to jax, in separate processes.

    python benchmarks/jit_memory.py            # 1000 jitted lambdas each
    python benchmarks/jit_memory.py --n 300

Each library, in a fresh process: jit and call ``n`` lambdas that close over
distinct constants (so each is its own XLA program), note the RSS, drop them,
``gc.collect()`` and ``malloc_trim``, and note the RSS again. What is kept is
what the caches hold for functions that no longer exist.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

_CHILD = r'''
import ctypes, gc, os, sys
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["FTRANS_ENABLE_COMPILATION_CACHE"] = "0"  # ftrans's disk cache is on by default
lib, n = sys.argv[1], int(sys.argv[2])
if lib == "jax":
    import jax
    import jax.numpy as jnp
else:
    import ftrans as jax
    import ftrans.numpy as jnp
_libc = ctypes.CDLL("libc.so.6")

def rss():
    gc.collect()
    _libc.malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

def make(c):
    return jax.jit(lambda a: jnp.sin(a) * c + c)

x = jnp.ones((4,), jnp.float32)
make(0.5)(x).block_until_ready()
r0 = rss()
fs = [make(float(i) + 1.0) for i in range(n)]
for f in fs:
    f(x).block_until_ready()
r1 = rss()
del fs, f
r2 = rss()
print(f"{lib:7s} {n} jitted lambdas: alive +{r1 - r0:.0f} MiB, after they are gone +{r2 - r0:.0f} MiB kept")
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for lib in ("ftrans", "jax"):
        subprocess.run([sys.executable, "-c", _CHILD, lib, str(args.n)], env=env, check=True)


if __name__ == "__main__":
    main()
