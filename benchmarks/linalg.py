"""Linear algebra and FFT: a 256x256 Cholesky solve and a batched FFT, ftrans next to jax in one process.

    python benchmarks/linalg.py            # about twenty seconds
    python benchmarks/linalg.py --quick    # fewer repeats: a smoke test, noisier figures

The program, float32, ``a`` a 256x256 symmetric positive-definite matrix and
``b`` a 256x16 right-hand side::

    c = cho_factor(a, lower=True)      # scipy.linalg names, from each library
    x = cho_solve(c, b)

(S) the compiled solve: ``jit`` of the program, inputs on the device,
    ``block_until_ready()`` after each call (median of best-of, us);
(G) the compiled gradient of ``sum(x ** 2)`` with respect to ``a`` and ``b``
    (reverse mode through the Cholesky JVP and the triangular solves);
(E) ftrans eager (NumPy/SciPy LAPACK on the host, no compile) against SciPy
    itself and jax's eager call;
(F) ``jit`` of ``jnp.fft.fft`` over a 256x1024 complex64 array (a batch of
    256 1024-point transforms).

The two libraries' solutions and gradients are checked to agree first.  Ratios
are ftrans / jax (and ftrans / SciPy for the eager row); the compiled figures
interleave the two libraries' runs, so a burst of load hits both alike.
Targets: S <= 1.0x, G <= 1.5x, E (ftrans / SciPy) <= 2x, F <= 1.0x; the
script prints whether each is met and never fails on a miss: timings on a
shared machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import timeit

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
from jit import paired_per_call_us  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as fjnp  # noqa: E402
import ftrans.scipy.linalg as fsl  # noqa: E402

N, K = 256, 16
FFT_SHAPE = (256, 1024)


def us_per_call(fn, repeats: int, number: int) -> float:
    """Median over ``repeats`` of the best of 3 timings of ``number`` calls, in microseconds per call."""
    fn()
    runs = [min(timeit.repeat(fn, number=number, repeat=3)) / number for _ in range(repeats)]
    return statistics.median(runs) * 1e6


def make(lib_sl, lib_np):
    def solve(a, b):
        return lib_sl.cho_solve(lib_sl.cho_factor(a, lower=True), b)

    def loss(a, b):
        return lib_np.sum(solve(a, b) ** 2)

    return solve, loss


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test)")
    args = p.parse_args(argv)
    repeats, number = (3, 5) if args.quick else (7, 20)

    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.standard_normal((N, N)))
    a = ((q * rng.uniform(1, 3, N)) @ q.T).astype(np.float32)
    b = rng.standard_normal((N, K)).astype(np.float32)

    f_solve, f_loss = make(fsl, fjnp)
    j_solve, j_loss = make(jsl, jjnp)
    fs, js = ftrans.jit(f_solve), jax.jit(j_solve)
    fg, jg = ftrans.jit(ftrans.grad(f_loss, argnums=(0, 1))), jax.jit(jax.grad(j_loss, argnums=(0, 1)))
    fa, fb = ftrans.device_put(a), ftrans.device_put(b)
    ja, jb = jax.device_put(a), jax.device_put(b)

    np.testing.assert_allclose(np.asarray(fs(fa, fb)), np.asarray(js(ja, jb)), rtol=1e-3, atol=1e-4)
    for x, y in zip(fg(fa, fb), jg(ja, jb)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(np.asarray(f_solve(a, b)), np.asarray(js(ja, jb)), rtol=1e-3, atol=1e-4)
    print(f"Cholesky solve, {N}x{N} float32, {K} right-hand sides: results agree (rtol 1e-3)\n")

    z = (rng.standard_normal(FFT_SHAPE) + 1j * rng.standard_normal(FFT_SHAPE)).astype(np.complex64)
    zf, zj = ftrans.device_put(z), jax.device_put(z)
    fft_f, fft_j = ftrans.jit(lambda x: fjnp.fft.fft(x)), jax.jit(lambda x: jjnp.fft.fft(x))
    np.testing.assert_allclose(np.asarray(fft_f(zf)), np.asarray(fft_j(zj)), rtol=1e-3, atol=1e-2)

    rows = []
    t_f, t_j = paired_per_call_us(lambda: fs(fa, fb).block_until_ready(), lambda: js(ja, jb).block_until_ready(),
                                  number, 3, repeats, warmup=3)
    rows.append(("S  jit(cho_solve(cho_factor))", t_f, t_j, "jax", 1.0))
    t_f, t_j = paired_per_call_us(lambda: [x.block_until_ready() for x in fg(fa, fb)],
                                  lambda: [x.block_until_ready() for x in jg(ja, jb)], number, 3, repeats, warmup=3)
    rows.append(("G  jit(grad(sum(x**2)))", t_f, t_j, "jax", 1.5))
    t_f, t_j = paired_per_call_us(lambda: fft_f(zf).block_until_ready(), lambda: fft_j(zj).block_until_ready(),
                                  number, 3, repeats, warmup=3)
    rows.append((f"F  jit(fft) {FFT_SHAPE[0]}x{FFT_SHAPE[1]} c64", t_f, t_j, "jax", 1.0))
    t_f = us_per_call(lambda: f_solve(a, b), repeats, number)
    t_s = us_per_call(lambda: scipy.linalg.cho_solve(scipy.linalg.cho_factor(a, lower=True), b), repeats, number)
    t_j = us_per_call(lambda: j_solve(ja, jb).block_until_ready(), repeats, max(1, number // 4))
    rows.append(("E  eager", t_f, t_s, "SciPy", 2.0))

    print(f"{'figure':34s} {'ftrans us':>10s} {'other us':>10s}  ratio   target")
    for name, tf, to, other, target in rows:
        ratio = tf / to
        ok = "met" if ratio <= target else "MISSED"
        print(f"{name:34s} {tf:10.1f} {to:10.1f}  {ratio:5.2f}x  <= {target}x vs {other}: {ok}")
    print(f"{'   (jax eager, for reference)':34s} {'':10s} {t_j:10.1f}  ftrans/jax {rows[-1][1] / t_j:5.2f}x")


if __name__ == "__main__":
    main()
