"""Per-example gradients with ``vmap(grad(...))``, clipped and averaged (the core of DP-SGD).

    pip install -e ".[examples]" && python examples/per_example_grads.py [--clip 1.0] [--noise 0.5]

A softmax regression on scikit-learn's digits. Each step computes one
gradient per example in a single batched program
(``vmap(grad(loss), in_axes=(None, 0, 0))``), clips each to an L2 norm of at
most ``--clip``, averages them and adds Gaussian noise scaled by ``--noise``.
The script first checks the batched per-example gradients against a Python
loop of ``grad`` calls, then trains and prints the test accuracy.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as jnp  # noqa: E402
from ftrans import random, tree_util  # noqa: E402


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {value}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clip", type=non_negative_float, default=1.0, help="per-example L2 norm bound (default 1)")
    p.add_argument("--noise", type=non_negative_float, default=0.5, help="noise multiplier (default 0.5)")
    p.add_argument("--steps", type=positive_int, default=400, help="training steps (default 400)")
    p.add_argument("--batch-size", type=positive_int, default=64, help="examples per step (default 64)")
    p.add_argument("--learning-rate", type=non_negative_float, default=0.5, help="step size (default 0.5)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = p.parse_args(argv)
    if args.clip == 0:
        p.error("--clip must be positive")
    return args


def loss(params: dict, x, y):
    logits = x @ params["w"] + params["b"]
    m = logits.max()
    return m + jnp.log(jnp.sum(jnp.exp(logits - m))) - logits[y]


def clipped_mean(grads: dict, clip: float):
    """Clip each example's gradient (leading axis) to L2 norm ``clip`` and average over the batch."""
    leaves = tree_util.tree_leaves(grads)
    norms = jnp.sqrt(sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in leaves))
    scale = jnp.minimum(1.0, clip / (norms + 1e-12))
    return tree_util.tree_map(lambda g: jnp.mean(g * scale.reshape((-1,) + (1,) * (g.ndim - 1)), axis=0), grads)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        print("this example needs scikit-learn: pip install -e \".[examples]\"", file=sys.stderr)
        return 2
    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int32)
    order = np.random.RandomState(args.seed).permutation(len(x))
    x, y = x[order], y[order]
    x_train, y_train, x_test, y_test = x[:1400], y[:1400], x[1400:], y[1400:]
    if args.batch_size > len(x_train):
        print(f"--batch-size {args.batch_size} is larger than the training set ({len(x_train)})", file=sys.stderr)
        return 2

    params = {"w": jnp.zeros((64, 10)), "b": jnp.zeros(10)}
    per_example = ftrans.vmap(ftrans.grad(loss), in_axes=(None, 0, 0))

    # The batched gradients are exactly the loop's.
    xb, yb = x_train[:8], y_train[:8]
    batched = per_example(params, xb, yb)
    for i in range(len(xb)):
        one = ftrans.grad(loss)(params, xb[i], yb[i])
        for k in params:
            np.testing.assert_allclose(np.asarray(batched[k][i]), np.asarray(one[k]), rtol=1e-5, atol=1e-6)
    print(f"per-example gradients of {len(xb)} examples match a loop of grad calls")

    @ftrans.jit
    def step(params, x, y, key):
        g = clipped_mean(per_example(params, x, y), args.clip)
        keys = random.split(key, len(g))
        noisy = {k: g[k] + args.noise * args.clip / x.shape[0] * random.normal(kk, g[k].shape)
                 for kk, k in zip(keys, sorted(g))}
        return {k: params[k] - args.learning_rate * noisy[k] for k in params}

    key = random.PRNGKey(args.seed)
    rng = np.random.RandomState(args.seed)
    for _ in range(args.steps):
        idx = rng.choice(len(x_train), args.batch_size, replace=False)
        key, sub = random.split(key)
        params = step(params, x_train[idx], y_train[idx], sub)
    pred = np.asarray(jnp.argmax(x_test @ params["w"] + params["b"], axis=1))
    print(f"test accuracy with clipping {args.clip} and noise {args.noise}: {np.mean(pred == y_test):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
