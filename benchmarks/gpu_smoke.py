"""Differential smoke check on whatever device the default backend is (a GPU when one is present).

Why it exists: the test suite takes minutes and most of it runs on host devices; on a lent GPU the
first thing to learn is which families of programs lower, compile and agree with jax there, with
one line per family.  Each case runs the same program through ftrans and jax on the default device
and compares the results (values, gradients, batched results) at a tolerance fitting the dtype and
the device (GPU float32 matrix products may use TF32 in both).

    JAX_PLATFORMS=cuda,cpu python benchmarks/gpu_smoke.py  # on a GPU machine (callbacks need the CPU)
    python benchmarks/gpu_smoke.py                          # anywhere: the CPU
"""

from __future__ import annotations

import os
import sys
import time
import traceback

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ftrans  # noqa: E402
import ftrans.numpy as fjnp  # noqa: E402

RESULTS: list[tuple[str, str, str]] = []
print(f"jax {jax.__version__}, default backend {jax.default_backend()}, devices {jax.devices()}", flush=True)
print(f"ftrans default backend {ftrans.default_backend()}, devices {ftrans.devices()}", flush=True)


def _np(tree):
    return jax.tree_util.tree_map(lambda a: np.asarray(a), tree)


def _close(a, b, rtol, atol):
    la, lb = jax.tree_util.tree_leaves(_np(a)), jax.tree_util.tree_leaves(_np(b))
    if len(la) != len(lb):
        return f"{len(la)} leaves against {len(lb)}"
    for x, y in zip(la, lb):
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"{x.shape} {x.dtype} against {y.shape} {y.dtype}"
        if x.dtype.kind in "fc" or x.dtype.name == "bfloat16":
            xf, yf = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64), \
                y.astype(np.complex128 if y.dtype.kind == "c" else np.float64)
            if not np.allclose(xf, yf, rtol=rtol, atol=atol, equal_nan=True):
                return f"max abs diff {np.nanmax(np.abs(xf - yf)):.3g}"
        elif not np.array_equal(x, y):
            return "integer/bool values differ"
    return None


def case(name, rtol=2e-3, atol=2e-3):
    """Run ``fn(lib, jnp)`` for ftrans and jax; record PASS, FAIL (values) or ERROR (ftrans raised)."""
    def deco(fn):
        t0 = time.perf_counter()
        try:
            want = fn(jax, jjnp)
        except Exception as e:  # the program itself is wrong for jax: a broken case
            _record(name, "SKIP", f"jax raised {type(e).__name__}: {e}"[:300])
            return fn
        try:
            got = fn(ftrans, fjnp)
            ftrans.block_until_ready(got)
        except Exception as e:
            tb = traceback.format_exc().strip().splitlines()
            _record(name, "ERROR", f"{type(e).__name__}: {str(e)[:400]} | {' / '.join(tb[-4:-1])[:400]}")
            return fn
        try:
            msg = _close(got, want, rtol, atol)
        except Exception as e:  # reading a result back failed (a callback that raised, say)
            msg = f"reading the results raised {type(e).__name__}: {str(e)[:300]}"
        dt = time.perf_counter() - t0
        _record(name, "FAIL" if msg else "PASS", (msg or "") + f" ({dt:.1f}s)")
        return fn
    return deco


def _record(name: str, status: str, msg: str) -> None:
    # printed as it happens: a run cut off by a time limit still shows every case that finished
    RESULTS.append((name, status, msg))
    print(f"{status:<5} {name:<40}  {msg}", flush=True)


rng = np.random.default_rng(0)
A = rng.standard_normal((64, 64)).astype(np.float32)
SPD = (A @ A.T + 64 * np.eye(64)).astype(np.float32)
X = rng.standard_normal((8, 32)).astype(np.float32)
W = rng.standard_normal((32, 16)).astype(np.float32) * 0.1
IMG = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
KER = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.1
QKV = rng.standard_normal((2, 8, 4, 16)).astype(np.float32)


@case("jit elementwise")
def _(lib, jnp):
    return lib.jit(lambda x: jnp.tanh(x) * 2 + jnp.exp(-x * x))(X)


@case("jit matmul f32 (TF32 tolerance)", rtol=2e-2, atol=2e-2)
def _(lib, jnp):
    return lib.jit(lambda x, w: x @ w)(X, W)


@case("matmul f32 precision=highest", rtol=1e-5, atol=1e-5)
def _(lib, jnp):
    return lib.jit(lambda x, w: jnp.matmul(x, w, precision="highest"))(X, W)


@case("bf16 matmul", rtol=3e-2, atol=3e-2)
def _(lib, jnp):
    return lib.jit(lambda x, w: (x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16)).astype(jnp.float32))(X, W)


@case("eager ops on device")
def _(lib, jnp):
    x = lib.device_put(X)
    return [x + x, jnp.sin(x), x * 2.0, jnp.sum(x), jnp.max(x, axis=1), x[1:5, ::2], x.T @ x]


@case("grad of MLP loss", rtol=2e-2, atol=2e-2)
def _(lib, jnp):
    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2)
    return lib.grad(loss)(W, X)


@case("vmap + jit")
def _(lib, jnp):
    return lib.jit(lib.vmap(lambda v: jnp.sort(v) * jnp.cumsum(v)))(X)


@case("scan / while / cond")
def _(lib, jnp):
    def f(x):
        c, ys = lib.lax.scan(lambda c, v: (c + v, c * v), jnp.zeros(32), x)
        n = lib.lax.while_loop(lambda s: s[0] < 10, lambda s: (s[0] + 1, s[1] * 1.01), (0, c))[1]
        return lib.lax.cond(n.sum() > 0, lambda: n, lambda: -n), ys
    return lib.jit(f)(X)


@case("grad through scan")
def _(lib, jnp):
    def f(x):
        return lib.lax.scan(lambda c, v: (jnp.sin(c) + v, None), jnp.zeros(32), x)[0].sum()
    return lib.grad(f)(X)


@case("conv_general_dilated + grad", rtol=2e-2, atol=2e-2)
def _(lib, jnp):
    def f(img, k):
        return lib.lax.conv_general_dilated(img, k, (1, 1), "SAME").sum()
    return lib.jit(lib.value_and_grad(f, argnums=(0, 1)))(IMG, KER)


@case("reduce_window / max_pool")
def _(lib, jnp):
    return lib.jit(lambda x: lib.lax.reduce_window(x, -jnp.inf, lib.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID"))(IMG)


@case("cholesky + triangular solve", rtol=1e-3, atol=1e-3)
def _(lib, jnp):
    L = jnp.linalg.cholesky(SPD)
    return L, lib.scipy.linalg.solve_triangular(L, A, lower=True)


@case("lu / solve / inv / det", rtol=5e-3, atol=5e-3)
def _(lib, jnp):
    return [jnp.linalg.solve(SPD, A), jnp.linalg.inv(SPD), jnp.linalg.slogdet(SPD)[1],
            lib.scipy.linalg.lu_factor(SPD)[0]]


@case("qr", rtol=5e-3, atol=5e-3)
def _(lib, jnp):
    q, r = jnp.linalg.qr(A)
    return jnp.abs(q), jnp.abs(r)


@case("eigh", rtol=5e-3, atol=5e-3)
def _(lib, jnp):
    return jnp.linalg.eigh(SPD)[0]


@case("svd values", rtol=5e-3, atol=5e-3)
def _(lib, jnp):
    return jnp.linalg.svd(A, compute_uv=False)


@case("svd full (reconstruction)", rtol=5e-3, atol=5e-3)
def _(lib, jnp):
    u, s, vt = jnp.linalg.svd(A)
    return (u * s) @ vt


@case("eig (nonsymmetric) on the host", rtol=5e-3, atol=5e-3)
def _(lib, jnp):
    return jnp.sort_complex(jnp.linalg.eigvals(A[:8, :8]))


@case("batched linalg under vmap", rtol=5e-3, atol=5e-3)
def _(lib, jnp):
    m = jnp.stack([SPD, SPD * 2])
    return lib.vmap(jnp.linalg.cholesky)(m), lib.vmap(jnp.linalg.inv)(m)


@case("fft / ifft / rfft", rtol=1e-3, atol=1e-3)
def _(lib, jnp):
    return jnp.fft.fft(X), jnp.fft.irfft(jnp.fft.rfft(X)), jnp.fft.fft2(A)


@case("random bits / normal / uniform", rtol=1e-5, atol=1e-5)
def _(lib, jnp):
    k = lib.random.key(0)
    k1, k2 = lib.random.split(k)
    return [lib.random.normal(k1, (4, 5)), lib.random.uniform(k2, (7,)), lib.random.randint(k, (6,), 0, 100),
            lib.random.bits(k, (3,))]


@case("argsort / top_k / cumsum / searchsorted")
def _(lib, jnp):
    return [jnp.argsort(X, axis=1), lib.lax.top_k(X, 3)[0], jnp.cumsum(X, axis=0),
            jnp.searchsorted(jnp.sort(X[0]), X[1])]


@case("scatter-add / gather / segment_sum")
def _(lib, jnp):
    idx = jnp.array([0, 2, 2, 5])
    z = jnp.zeros((6, 32)).at[idx].add(X[:4])
    return z, X[idx], lib.ops.segment_sum(X[:4], idx, 6)


@case("float64 under enable_x64", rtol=1e-12, atol=1e-12)
def _(lib, jnp):
    with lib.enable_x64(True) if hasattr(lib, "enable_x64") else lib.experimental.enable_x64():
        return lib.jit(lambda x: jnp.sin(x) @ x.T)(np.asarray(A, np.float64))


@case("complex64 math", rtol=1e-4, atol=1e-4)
def _(lib, jnp):
    z = X + 1j * X[::-1]
    return lib.jit(lambda z: jnp.exp(z) * jnp.conj(z) / (1 + jnp.abs(z)))(z.astype(np.complex64))


@case("integer ops / bitwise / shifts")
def _(lib, jnp):
    i = np.arange(-20, 20, dtype=np.int32)
    return lib.jit(lambda i: [i // 3, i % 7, i << 2, i >> 1, i & 5, jnp.clip(i, -3, 4)])(i)


@case("checkpoint + custom_vjp grad")
def _(lib, jnp):
    @lib.custom_vjp
    def g(x):
        return jnp.sin(x)
    g.defvjp(lambda x: (jnp.sin(x), x), lambda x, ct: (ct * jnp.cos(x),))
    return lib.grad(lambda x: lib.checkpoint(lambda y: g(y) * y)(x).sum())(X)


@case("device_put / sharding on one device")
def _(lib, jnp):
    d = lib.devices()[0]
    mesh = lib.sharding.Mesh(np.array(lib.devices()[:1]), ("x",))
    s = lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x"))
    y = lib.device_put(X, s)
    return lib.jit(lambda y: y * 2, out_shardings=s)(y), lib.device_put(X, d)


@case("pure_callback")
def _(lib, jnp):
    return lib.jit(lambda x: lib.pure_callback(lambda a: np.sin(a), lib.ShapeDtypeStruct(x.shape, x.dtype), x))(X)


@case("nn: softmax / logsumexp / gelu")
def _(lib, jnp):
    return [lib.nn.softmax(X), lib.nn.logsumexp(X, axis=1), lib.nn.gelu(X)]


@case("dot_product_attention", rtol=2e-2, atol=2e-2)
def _(lib, jnp):
    return lib.nn.dot_product_attention(QKV, QKV[::-1], QKV)


def main() -> int:
    bad = [r for r in RESULTS if r[1] in ("FAIL", "ERROR")]
    print(f"smoke: {len(RESULTS) - len(bad)} of {len(RESULTS)} cases agree with jax on {jax.default_backend()}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
