"""Train a small transformer with sharded ``jit``: the batch split over one mesh axis, the weights over another.

    python examples/sharded_transformer.py [--steps 300] [--host-devices 8]
    python examples/sharded_transformer.py --processes 2     # the same mesh over 2 processes of 4 devices
    python examples/sharded_transformer.py --single-device   # the same training, unsharded, on one device

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
2x4 mesh).  With ``--processes N`` the script starts itself N times on
localhost (process 0 hosts the coordinator on a free port); each process
joins with ``ftrans.distributed.initialize`` before the runtime starts, holds
``host-devices / N`` of the host's CPU devices (on a GPU machine too: the
processes of one host would share its GPUs), builds the same global mesh, and feeds
only its own rows of every batch (``make_array_from_process_local_data``);
process 0 prints the report.  Every process draws the same batches from the
same seed, so the losses match the one-process run and ``--single-device``
(the same steps with no sharding) up to float rounding.  Written against the JAX API: replace ``ftrans`` by ``jax`` in the
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
    p.add_argument("--processes", type=positive_int, default=1,
                   help="run as this many processes on localhost, each with host-devices/N devices (default 1)")
    p.add_argument("--single-device", action="store_true",
                   help="train the same model on one device with no sharding (the reference for the losses)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (for logs)")
    p.add_argument("--coordinator", help=argparse.SUPPRESS)  # set by --processes for the processes it starts
    p.add_argument("--process-id", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.host_devices < 0:
        p.error("--host-devices must be >= 0")
    if args.processes > 1:
        if args.single_device:
            p.error("--single-device runs in one process; leave out --processes")
        if not args.host_devices or args.host_devices % args.processes:
            p.error(f"--processes {args.processes} must divide --host-devices ({args.host_devices})")
    return args


def launch(args: argparse.Namespace) -> int:
    """Start this script as ``args.processes`` processes joined through a coordinator on a free local port."""
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    argv = [a for a in sys.argv[1:]]
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    # The processes split the host's CPU into devices: on a GPU machine they would otherwise all open the same
    # GPUs, which the GPUs' collectives (NCCL) refuse ("Duplicate GPU detected").
    env["JAX_PLATFORMS"] = "cpu"
    procs = []
    for i in range(args.processes):
        cmd = [sys.executable, os.path.abspath(__file__), *argv, "--coordinator", f"localhost:{port}",
               "--process-id", str(i)]
        # Process 0 reports (its stdout and stderr are this one's); the others stay quiet unless they fail.
        procs.append(subprocess.Popen(cmd, env=env, stdout=None if i == 0 else subprocess.DEVNULL,
                                      stderr=None if i == 0 else subprocess.PIPE, text=True))
    # Wait for all; if one fails, stop the others (they would wait for it in a collective).
    try:
        while any(p.poll() is None for p in procs):
            if any(p.returncode for p in procs):
                for p in procs:
                    if p.poll() is None:
                        p.kill()
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    rc = 0
    for i, p in enumerate(procs):
        err = p.stderr.read() if p.stderr else ""
        if p.returncode:
            rc = rc or p.returncode
            if err:
                print(f"process {i} failed:\n{err[-3000:]}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    # Run as a script: read the arguments and split the host into devices before the runtime starts.  Imported
    # (benchmarks/sharding.py does), the module only defines the model, the training step and the layout.
    args = parse_args()
    if args.processes > 1 and args.coordinator is None:
        sys.exit(launch(args))
    local_devices = args.host_devices // args.processes if args.coordinator else args.host_devices
    if local_devices:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={local_devices}")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as jnp  # noqa: E402
from ftrans.sharding import AxisType, NamedSharding  # noqa: E402
from ftrans.sharding import PartitionSpec as P  # noqa: E402

if __name__ == "__main__":
    if args.coordinator:
        ftrans.distributed.initialize(args.coordinator, num_processes=args.processes, process_id=args.process_id,
                                      initialization_timeout=120)
    try:
        from tqdm import tqdm  # noqa: E402
    except ImportError:
        print("this example needs tqdm: pip install -e \".[examples]\"", file=sys.stderr)
        raise SystemExit(1) from None
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


def make_step(heads: int):
    """One training step: the loss, its gradient and an SGD-with-momentum update of every parameter."""
    def step(params, momentum, tokens, targets):
        loss, g = ftrans.value_and_grad(loss_fn)(params, tokens, targets, heads)
        momentum = {k: 0.9 * momentum[k] + g[k] for k in g}
        params = {k: params[k] - 0.05 * momentum[k] for k in params}
        return params, momentum, loss

    return step


def shardings(mesh) -> tuple[dict, NamedSharding, NamedSharding]:
    """The layout on ``mesh``: each parameter's (and its momentum's), a batch's (rows over ``data``), replicated."""
    return ({k: NamedSharding(mesh, s) for k, s in param_specs().items()}, NamedSharding(mesh, P("data")),
            NamedSharding(mesh, P()))


def put_global(x: np.ndarray, sharding: NamedSharding):
    """``x`` (the same on every process) as a global Array: each process supplies its own devices' blocks."""
    return ftrans.make_array_from_callback(x.shape, sharding, lambda idx: x[idx])


def put_batch(x: np.ndarray, sharding: NamedSharding):
    """A batch split over ``data``: this process passes only the rows its devices hold."""
    me = ftrans.process_index()
    rows = [idx[0].indices(x.shape[0]) for d, idx in sharding.devices_indices_map(x.shape).items()
            if d.process_index == me]
    lo, hi = min(r[0] for r in rows), max(r[1] for r in rows)
    return ftrans.make_array_from_process_local_data(sharding, x[lo:hi], x.shape)


def local(x) -> np.ndarray:
    """A replicated global Array's value, read from this process's first block."""
    return np.asarray(x.addressable_shards[0].data)


def main_single_device() -> None:
    dev = ftrans.devices()[0]
    rng = np.random.default_rng(0)
    params = ftrans.device_put(init(rng, args.width, args.length), dev)
    momentum = ftrans.device_put({k: np.zeros_like(np.asarray(v)) for k, v in params.items()}, dev)

    train = ftrans.jit(make_step(args.heads))
    print(f"one device ({dev}); no sharding")
    t0 = time.perf_counter()
    first = last = None
    bar = tqdm(total=args.steps, disable=args.no_progress, unit="step")
    for i in range(args.steps):
        tokens = rng.integers(0, VOCAB, size=(args.batch_size, args.length)).astype(np.int32)
        params, momentum, loss = train(params, momentum, ftrans.device_put(tokens, dev),
                                       ftrans.device_put(tokens[:, ::-1].copy(), dev))
        if i == 0:
            first = float(loss)
        if (i + 1) % max(1, args.steps // 5) == 0 or i + 1 == args.steps:
            last = float(loss)
            bar.set_postfix(loss=f"{last:.4f}")
            bar.write(f"step {i + 1:4d}  loss {last:.4f}")
        bar.update(1)
    bar.close()
    tokens = rng.integers(0, VOCAB, size=(args.batch_size, args.length)).astype(np.int32)
    pred = np.asarray(ftrans.jit(forward, static_argnums=2)(params, tokens, args.heads)).argmax(-1)
    acc = float((pred == tokens[:, ::-1]).mean())
    print(f"first loss {first:.4f}, final loss {last:.6f}, reversal accuracy {acc:.3f} "
          f"({time.perf_counter() - t0:.1f} s)")


def main() -> None:
    mesh = make_mesh()
    rng = np.random.default_rng(0)
    shard, batch, replicated = shardings(mesh)
    p0 = init(rng, args.width, args.length)
    params = {k: put_global(v, shard[k]) for k, v in p0.items()}
    momentum = {k: put_global(np.zeros_like(v), shard[k]) for k, v in p0.items()}
    report = ftrans.process_index() == 0

    train = ftrans.jit(make_step(args.heads), in_shardings=(shard, shard, batch, batch),
                       out_shardings=(shard, shard, replicated))
    procs = f" in {ftrans.process_count()} processes" if ftrans.process_count() > 1 else ""
    if report:
        print(f"mesh {dict(mesh.shape)} on {mesh.size} devices{procs}; wq is split "
              f"{params['wq'].sharding.spec}, each device holds {params['wq'].addressable_shards[0].data.shape} "
              f"of {params['wq'].shape}")
    t0 = time.perf_counter()
    first = last = None
    bar = tqdm(total=args.steps, disable=args.no_progress or not report, unit="step")
    for i in range(args.steps):
        tokens = rng.integers(0, VOCAB, size=(args.batch_size, args.length)).astype(np.int32)
        params, momentum, loss = train(params, momentum, put_batch(tokens, batch),
                                       put_batch(tokens[:, ::-1].copy(), batch))
        if i == 0:
            first = float(local(loss))
        if (i + 1) % max(1, args.steps // 5) == 0 or i + 1 == args.steps:
            last = float(local(loss))
            bar.set_postfix(loss=f"{last:.4f}")
            if report:
                bar.write(f"step {i + 1:4d}  loss {last:.4f}")
        bar.update(1)
    bar.close()
    tokens = rng.integers(0, VOCAB, size=(args.batch_size, args.length)).astype(np.int32)
    logits = ftrans.jit(forward, static_argnums=2, out_shardings=replicated)(params, put_batch(tokens, batch),
                                                                             args.heads)
    acc = float((local(logits).argmax(-1) == tokens[:, ::-1]).mean())
    if report:
        print(f"first loss {first:.4f}, final loss {last:.6f}, reversal accuracy {acc:.3f} "
              f"({time.perf_counter() - t0:.1f} s); parameters still split: {params['w1'].sharding.spec}")
    if args.coordinator:
        ftrans.distributed.shutdown()


if __name__ == "__main__":
    main_single_device() if args.single_device else main()
