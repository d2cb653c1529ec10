"""Train a small transformer with sharded ``jit``: the batch split over one mesh axis, the weights over another.

    python examples/sharded_transformer.py [--steps 300] [--host-devices 8]

The task: read a sequence of random digits and output it reversed (a
one-layer, causal-mask-free transformer learns it from positions alone).  The
devices form a ``(data, model)`` mesh: every batch is split over ``data``;
the attention heads and the MLP's hidden units are split over ``model``
(Megatron-style: the first matrix of each block by columns, the second by
rows), so each device holds a quarter of the weights and XLA's partitioner
inserts the reductions between the two halves of each block.  The whole
training step (loss, ``grad``, the SGD-with-momentum update) is one program
compiled with ``in_shardings``/``out_shardings``; the parameters and optimizer
state stay on the devices, laid out the same way, from step to step.

On a CPU the host is split into ``--host-devices`` XLA devices (default 8, a
2x4 mesh).  Written against the JAX API: replace ``ftrans`` by ``jax`` in the
imports and it runs on JAX unchanged.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=positive_int, default=300, help="training steps (default 300)")
    p.add_argument("--batch-size", type=positive_int, default=64, help="sequences per step (default 64)")
    p.add_argument("--length", type=positive_int, default=8, help="sequence length (default 8)")
    p.add_argument("--width", type=positive_int, default=64, help="model width (default 64)")
    p.add_argument("--heads", type=positive_int, default=4, help="attention heads (default 4)")
    p.add_argument("--host-devices", type=int, default=8,
                   help="on a CPU, split the host into this many devices (default 8; 0 keeps XLA's default)")
    args = p.parse_args(argv)
    if args.host_devices < 0:
        p.error("--host-devices must be >= 0")
    return args


args = parse_args()
if args.host_devices:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count={args.host_devices}")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as jnp  # noqa: E402
from ftrans.sharding import AxisType, NamedSharding  # noqa: E402
from ftrans.sharding import PartitionSpec as P  # noqa: E402

VOCAB = 10


def make_mesh() -> ftrans.sharding.Mesh:
    n = len(ftrans.devices())
    model = 4 if n % 4 == 0 and n >= 4 else (2 if n % 2 == 0 else 1)
    return ftrans.make_mesh((n // model, model), ("data", "model"), axis_types=(AxisType.Auto,) * 2)


def init(rng: np.random.Generator, d: int, length: int) -> dict:
    def w(*shape: int) -> np.ndarray:
        return (rng.normal(size=shape) / np.sqrt(shape[0])).astype(np.float32)

    return {"embed": w(VOCAB, d), "pos": w(length, d), "wq": w(d, d), "wk": w(d, d), "wv": w(d, d),
            "wo": w(d, d), "w1": w(d, 4 * d), "w2": w(4 * d, d), "out": w(d, VOCAB)}


def param_specs() -> dict:
    """Heads and hidden units over ``model``: column-split first matrices, row-split second ones."""
    return {"embed": P(), "pos": P(), "wq": P(None, "model"), "wk": P(None, "model"), "wv": P(None, "model"),
            "wo": P("model", None), "w1": P(None, "model"), "w2": P("model", None), "out": P()}


def layer_norm(x):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)


def forward(p: dict, tokens, heads: int):
    b, t = tokens.shape
    d = p["embed"].shape[1]
    x = p["embed"][tokens] + p["pos"][None]
    h = layer_norm(x)
    q, k, v = (jnp.reshape(h @ p[n], (b, t, heads, d // heads)) for n in ("wq", "wk", "wv"))
    att = ftrans.nn.softmax(jnp.einsum("bthd,bshd->bhts", q, k) / np.sqrt(d // heads), axis=-1)
    x = x + jnp.reshape(jnp.einsum("bhts,bshd->bthd", att, v), (b, t, d)) @ p["wo"]
    x = x + ftrans.nn.gelu(layer_norm(x) @ p["w1"]) @ p["w2"]
    return layer_norm(x) @ p["out"]


def loss_fn(p: dict, tokens, targets, heads: int):
    logp = ftrans.nn.log_softmax(forward(p, tokens, heads))
    return -jnp.take_along_axis(logp, targets[..., None], axis=-1).mean()


def main() -> None:
    mesh = make_mesh()
    rng = np.random.default_rng(0)
    shard = {k: NamedSharding(mesh, s) for k, s in param_specs().items()}
    batch = NamedSharding(mesh, P("data"))
    params = ftrans.device_put(init(rng, args.width, args.length), shard)
    momentum = ftrans.device_put({k: np.zeros_like(np.asarray(v)) for k, v in params.items()}, shard)

    def step(params, momentum, tokens, targets):
        loss, g = ftrans.value_and_grad(loss_fn)(params, tokens, targets, args.heads)
        momentum = {k: 0.9 * momentum[k] + g[k] for k in g}
        params = {k: params[k] - 0.05 * momentum[k] for k in params}
        return params, momentum, loss

    train = ftrans.jit(step, in_shardings=(shard, shard, batch, batch),
                       out_shardings=(shard, shard, NamedSharding(mesh, P())))
    print(f"mesh {dict(mesh.shape)} on {mesh.size} devices; wq is split {params['wq'].sharding.spec}, each "
          f"device holds {params['wq'].addressable_shards[0].data.shape} of {params['wq'].shape}")
    t0 = time.perf_counter()
    first = last = None
    for i in range(args.steps):
        tokens = rng.integers(0, VOCAB, size=(args.batch_size, args.length)).astype(np.int32)
        params, momentum, loss = train(params, momentum, tokens, tokens[:, ::-1].copy())
        if i == 0:
            first = float(loss)
        if (i + 1) % max(1, args.steps // 5) == 0 or i + 1 == args.steps:
            last = float(loss)
            print(f"step {i + 1:4d}  loss {last:.4f}")
    tokens = rng.integers(0, VOCAB, size=(args.batch_size, args.length)).astype(np.int32)
    pred = np.asarray(ftrans.jit(forward, static_argnums=2)(params, tokens, args.heads)).argmax(-1)
    acc = float((pred == tokens[:, ::-1]).mean())
    print(f"first loss {first:.4f}, final loss {last:.4f}, reversal accuracy {acc:.3f} "
          f"({time.perf_counter() - t0:.1f} s); parameters still split: {params['w1'].sharding.spec}")


if __name__ == "__main__":
    main()
