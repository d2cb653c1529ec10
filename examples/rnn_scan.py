"""A small sequence model trained with ``lax.scan``: an Elman RNN learns to continue sine waves.

    pip install -e ".[examples]" && python examples/rnn_scan.py [--steps 300] [--hidden 32]

Each training sequence is a sine wave with a random frequency and phase; the
RNN reads it one value at a time (the recurrence is one ``lax.scan``) and
predicts the next value. Reverse mode through the scan gives the gradients
(``ftrans.grad`` transposes the scan into a scan running backwards); Adam
updates the parameters. The mean squared error printed at the start and the
end should fall by more than an order of magnitude.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as jnp  # noqa: E402
from ftrans import lax, random  # noqa: E402
from ftrans.example_libraries import optimizers  # noqa: E402


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
    p.add_argument("--steps", type=positive_int, default=300, help="training steps (default 300)")
    p.add_argument("--hidden", type=positive_int, default=32, help="hidden units (default 32)")
    p.add_argument("--length", type=positive_int, default=40, help="sequence length (default 40)")
    p.add_argument("--batch-size", type=positive_int, default=32, help="sequences per step (default 32)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    return p.parse_args(argv)


def init_params(key, hidden: int) -> dict:
    k1, k2, k3 = random.split(key, 3)
    return {
        "wx": random.normal(k1, (1, hidden)) * 0.5,
        "wh": random.normal(k2, (hidden, hidden)) / np.sqrt(hidden),
        "b": jnp.zeros(hidden),
        "wo": random.normal(k3, (hidden, 1)) / np.sqrt(hidden),
        "bo": jnp.zeros(1),
    }


def predict(params: dict, xs):
    """``xs``: [time, batch, 1] -> predictions of the next value, [time, batch, 1]."""
    def step(h, x):
        h = jnp.tanh(x @ params["wx"] + h @ params["wh"] + params["b"])
        return h, h @ params["wo"] + params["bo"]

    h0 = jnp.zeros((xs.shape[1], params["wh"].shape[0]))
    _, ys = lax.scan(step, h0, xs)
    return ys


def loss(params: dict, xs, targets):
    return jnp.mean((predict(params, xs) - targets) ** 2)


def batch(rng: np.random.RandomState, size: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(length + 1, dtype=np.float32)[:, None]
    freq = rng.uniform(0.1, 0.4, size=(1, size)).astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, size=(1, size)).astype(np.float32)
    wave = np.sin(freq * t + phase)[..., None]
    return wave[:-1], wave[1:]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    params = init_params(random.PRNGKey(args.seed), args.hidden)
    opt_init, opt_update, get_params = optimizers.adam(1e-2)
    opt_state = opt_init(params)

    @ftrans.jit
    def train_step(i, opt_state, xs, ys):
        value, grads = ftrans.value_and_grad(loss)(get_params(opt_state), xs, ys)
        return opt_update(i, grads, opt_state), value

    rng = np.random.RandomState(args.seed)
    eval_x, eval_y = batch(np.random.RandomState(args.seed + 1), 256, args.length)
    first = float(loss(params, eval_x, eval_y))
    print(f"initial mean squared error {first:.4f}")
    for i in range(args.steps):
        xs, ys = batch(rng, args.batch_size, args.length)
        opt_state, value = train_step(i, opt_state, xs, ys)
        if (i + 1) % max(1, args.steps // 5) == 0:
            print(f"step {i + 1:4d}  training loss {float(value):.4f}")
    last = float(loss(get_params(opt_state), eval_x, eval_y))
    print(f"final mean squared error {last:.4f} ({first / max(last, 1e-12):.0f}x lower)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
