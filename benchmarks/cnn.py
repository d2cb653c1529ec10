"""Convolutions and FFTs: ftrans next to jax in one process.

    python benchmarks/cnn.py            # about a minute
    python benchmarks/cnn.py --quick    # fewer repeats: a smoke test, noisier figures

(1) The compiled train step of ``examples/cnn_digits.py``'s network (two SAME
    3x3 convolutions with 32 and 64 channels, a 2x2 max-pool, dense 128 and
    10, log-softmax) on a batch of 64 8x8x1 images, ``value_and_grad`` of the
    cross-entropy plus an SGD update: steady state (inputs on the device,
    ``block_until_ready()`` after each call; median of best-of, us) and time
    to first result (a fresh function and ``jit`` each time, both libraries'
    in-memory caches cleared, persistent caches off; trace + lower + compile
    + run, median ms).
(2) A 1024-point complex64 FFT over a batch of 256 rows, ``jnp.fft.fft``
    under ``jit``, steady state (median of best-of, us).

Both libraries' results are checked to agree before any timing. Ratios are
ftrans / jax (lower is better); the script prints them and never fails on a
slow figure, since timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["FTRANS_ENABLE_COMPILATION_CACHE"] = "0"  # ftrans's disk cache is on by default
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.example_libraries import stax as jstax  # noqa: E402
from jit import disable_persistent_caches, paired_once_ms, paired_per_call_us  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as fjnp  # noqa: E402
from ftrans.example_libraries import stax as fstax  # noqa: E402
from ftrans.lowering import executable as _ftrans_executable  # noqa: E402

BATCH = 64
FFT_SHAPE = (256, 1024)


def net(stax):
    return stax.serial(
        stax.Conv(32, (3, 3), padding="SAME"), stax.Relu,
        stax.Conv(64, (3, 3), padding="SAME"), stax.Relu,
        stax.MaxPool((2, 2), strides=(2, 2)), stax.Flatten,
        stax.Dense(128), stax.Relu, stax.Dense(10), stax.LogSoftmax,
    )


def fresh_step(lib, jnp, predict):
    """A new train-step function object (so no tracing cache can answer)."""

    def loss(params, x, y):
        return -jnp.mean(jnp.take_along_axis(predict(params, x), y[:, None], axis=1))

    def step(params, x, y):
        value, grads = lib.value_and_grad(loss)(params, x, y)
        new = lib.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)
        return new, value

    return step


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test)")
    args = p.parse_args(argv)
    runs, number, repeat, cold_runs = (3, 3, 2, 2) if args.quick else (7, 20, 3, 5)
    disable_persistent_caches()
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}")

    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 8, 8, 1)).astype(np.float32)
    y = rng.integers(0, 10, BATCH).astype(np.int32)
    init_f, predict_f = net(fstax)
    init_j, predict_j = net(jstax)
    _, pf = init_f(ftrans.random.PRNGKey(0), (-1, 8, 8, 1))
    _, pj = init_j(jax.random.PRNGKey(0), (-1, 8, 8, 1))
    pf = ftrans.device_put(pf)
    pj = jax.device_put(pj)
    xf, yf, xj, yj = ftrans.device_put(x), ftrans.device_put(y), jax.device_put(x), jax.device_put(y)

    step_f = ftrans.jit(fresh_step(ftrans, fjnp, predict_f))
    step_j = jax.jit(fresh_step(jax, jjnp, predict_j))
    (_, vf), (_, vj) = step_f(pf, xf, yf), step_j(pj, xj, yj)
    np.testing.assert_allclose(float(vf), float(vj), rtol=1e-3, err_msg="train step: ftrans and jax disagree")

    rows = []
    t_f, t_j = paired_per_call_us(lambda: jax.block_until_ready(step_f(pf, xf, yf)),
                                  lambda: jax.block_until_ready(step_j(pj, xj, yj)), number, repeat, runs, warmup=3)
    rows.append(("conv net train step, compiled (us)", t_f, t_j))

    def cold_f():
        before = _ftrans_executable.stats["compiles"]
        jax.block_until_ready(ftrans.jit(fresh_step(ftrans, fjnp, predict_f))(pf, xf, yf))
        if _ftrans_executable.stats["compiles"] == before:
            raise SystemExit("time to first result: ftrans answered from a cache instead of compiling")

    def cold_j():
        jax.block_until_ready(jax.jit(fresh_step(jax, jjnp, predict_j))(pj, xj, yj))

    def clear():
        _ftrans_executable._xla_cache.clear()
        jax.clear_caches()

    t_f, t_j = paired_once_ms(cold_f, cold_j, cold_runs, warmup=1, setup=clear)
    rows.append(("conv net train step, time to first result (ms)", t_f, t_j))

    z = (rng.standard_normal(FFT_SHAPE) + 1j * rng.standard_normal(FFT_SHAPE)).astype(np.complex64)
    zf, zj = ftrans.device_put(z), jax.device_put(z)
    fft_f = ftrans.jit(lambda a: fjnp.fft.fft(a))
    fft_j = jax.jit(lambda a: jjnp.fft.fft(a))
    np.testing.assert_allclose(np.asarray(fft_f(zf)), np.asarray(fft_j(zj)), rtol=1e-3, atol=1e-2,
                               err_msg="FFT: ftrans and jax disagree")
    t_f, t_j = paired_per_call_us(lambda: fft_f(zf).block_until_ready(), lambda: fft_j(zj).block_until_ready(),
                                  number, repeat, runs, warmup=3)
    rows.append((f"batched FFT {FFT_SHAPE[0]}x{FFT_SHAPE[1]} complex64, compiled (us)", t_f, t_j))

    width = max(len(r[0]) for r in rows)
    print(f"{'figure':<{width}}  {'ftrans':>10}  {'jax':>10}  {'ratio':>6}")
    for label, a, b in rows:
        print(f"{label:<{width}}  {a:>10.1f}  {b:>10.1f}  {a / b:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
