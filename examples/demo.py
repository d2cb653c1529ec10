"""A tour of what ftrans does today: eager arrays, JAX's type promotion, the IR, and jit on XLA.

    python examples/demo.py

Everything below is the jax.numpy API; swap the two imports for
``import jax, jax.numpy as jnp`` and the script prints the same arrays.
"""

from __future__ import annotations

import os
import sys

# Run from a checkout without installing: put the repository root on the path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as jnp  # noqa: E402


def section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 60 - len(title)))


def eager_arrays() -> None:
    section("eager arrays")
    x = jnp.arange(6.0).reshape(2, 3)
    print("x =", repr(x))
    print("x * 2 + 1 =", x * 2 + 1)
    print("x @ x.T =", x @ x.T)
    print("sum:", x.sum(), " mean over axis 0:", x.mean(axis=0), " max per row:", jnp.max(x, axis=1))
    print("argmax:", x.argmax(), " exp(x[0]):", jnp.exp(x[0]))
    print("indexing x[1, ::2] =", x[1, ::2], " x[:, -1] =", x[:, -1])
    y = x.at[0, 1].set(100.0)  # arrays are immutable: .at[] returns an updated copy
    print("x.at[0, 1].set(100.) =", y)
    print("x.at[:, 0].add(10.) =", x.at[:, 0].add(10.0))
    print("x is unchanged:", x[0, 1])
    print("where(x > 2, x, -1) =", jnp.where(x > 2, x, -1.0))
    print("np.asarray(x) is a NumPy array:", type(np.asarray(x)).__name__)


def promotion() -> None:
    section("dtype promotion and weak types")
    i8 = jnp.ones(3, jnp.int8)
    f16 = jnp.ones(3, jnp.float16)
    print("int8 array + 1      ->", (i8 + 1).dtype, "(a Python int is weakly typed: it never widens)")
    print("int8 array + 1.5    ->", (i8 + 1.5).dtype)
    print("float16 array * 2.0 ->", (f16 * 2.0).dtype)
    print("int8 + uint8 arrays ->", (i8 + jnp.ones(3, jnp.uint8)).dtype, "(JAX's lattice, not NumPy's)")
    print("jnp.asarray(1.0) is weakly typed:", repr(jnp.asarray(1.0)))
    print("result_type(int32, float16) =", jnp.result_type(jnp.int32, jnp.float16))
    print("default dtypes (x64 off): arange(3) ->", jnp.arange(3).dtype, ", zeros(2) ->", jnp.zeros(2).dtype)


def mlp(params, x):
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return jnp.sum(x, axis=-1)


def intermediate_representation() -> None:
    section("the IR: make_jaxpr")
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((4, 4)).astype(np.float32), np.zeros(4, np.float32)) for _ in range(2)]
    x = np.ones((3, 4), np.float32)
    closed = ftrans.make_jaxpr(mlp)(params, x)
    print(closed)
    print("\nwith source info:")
    print(closed.pretty_print(source_info=True))
    out = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *[a for wb in params for a in wb], x)
    print("\neval_jaxpr gives", repr(out[0]))
    print("the same as calling mlp eagerly:", bool(jnp.all(out[0] == mlp(params, x))))

    section("eval_shape: shapes and dtypes without computing")
    big = ftrans.ShapeDtypeStruct((1024, 4096), jnp.float32)
    print(ftrans.eval_shape(lambda a: {"gram": a.T @ a, "norms": jnp.sum(a * a, axis=1)}, big))


def compiled() -> None:
    section("jit: StableHLO, compiled by XLA")
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((4, 4)).astype(np.float32), np.zeros(4, np.float32)) for _ in range(2)]
    x = np.ones((3, 4), np.float32)
    fast = ftrans.jit(mlp)
    out = fast(params, x)  # traced, lowered and compiled on the first call; cached afterwards
    print("jit(mlp)(params, x) =", out, "on", out.device)
    print("agrees with eager:", bool(jnp.all(jnp.abs(out - mlp(params, x)) < 1e-5)))
    fast(params, x)
    print("cache:", fast.cache_info())
    text = fast.lower(params, x).as_text()
    print("the module XLA compiles starts:")
    print("\n".join(text.splitlines()[:6]))
    print("devices:", ftrans.devices()[:2], "... default backend:", ftrans.default_backend())


def derivatives() -> None:
    section("grad: reverse mode is linearize + transpose")
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((4, 4)).astype(np.float32), np.zeros(4, np.float32)) for _ in range(2)]
    x = np.ones((3, 4), np.float32)

    def loss(params, x):
        return jnp.mean(mlp(params, x) ** 2)

    value, grads = ftrans.value_and_grad(loss)(params, x)
    print("loss =", value, " d loss / d w0 has shape", grads[0][0].shape)
    step = ftrans.jit(ftrans.value_and_grad(loss))
    print("the same under jit:", bool(jnp.allclose(step(params, x)[1][0][0], grads[0][0], atol=1e-5)))
    print("the backward program of sum(sin(x) * x):")
    print(ftrans.make_jaxpr(ftrans.grad(lambda v: jnp.sum(jnp.sin(v) * v)))(jnp.arange(3.0)))
    print("d3/dx3 sin(x) at 1.0:", ftrans.grad(ftrans.grad(ftrans.grad(jnp.sin)))(1.0))


if __name__ == "__main__":
    eager_arrays()
    promotion()
    intermediate_representation()
    compiled()
    derivatives()
