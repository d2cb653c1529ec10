"""Train an MLP on scikit-learn's handwritten digits with ftrans: jit + grad + Adam, no download.

    pip install -e ".[examples]" && python examples/train_digits.py [--epochs 30] [--batch-size 64]

The 1,797 8x8 digit images that ship with scikit-learn are split into a
training and a test set; a 64-128-128-10 MLP built with
``ftrans.example_libraries.stax`` is trained with Adam
(``ftrans.example_libraries.optimizers``), one jitted step per batch, with a
tqdm progress bar. The test accuracy is printed at the end (about 97%).

The script is written against the JAX API: replace ``ftrans`` by ``jax`` in
the imports and it runs on JAX unchanged.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as jnp  # noqa: E402
from ftrans import random  # noqa: E402
from ftrans.example_libraries import optimizers, stax  # noqa: E402


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number strictly between 0 and 1, got {value}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=positive_int, default=30, help="passes over the training set (default 30)")
    p.add_argument("--batch-size", type=positive_int, default=64, help="examples per step (default 64)")
    p.add_argument("--learning-rate", type=positive_float, default=1e-3, help="Adam's step size (default 1e-3)")
    p.add_argument("--hidden", type=positive_int, default=128, help="width of the two hidden layers (default 128)")
    p.add_argument("--test-fraction", type=fraction, default=0.25, help="held-out share of the data (default 0.25)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (for logs)")
    return p.parse_args(argv)


def load_digits(test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits as sk_digits

    data = sk_digits()
    x = (data.data / 16.0).astype(np.float32)  # pixel intensities 0..16
    y = data.target.astype(np.int32)
    order = np.random.RandomState(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        from tqdm import tqdm
    except ImportError:
        print("this example needs tqdm and scikit-learn: pip install -e \".[examples]\"", file=sys.stderr)
        return 2
    try:
        x_train, y_train, x_test, y_test = load_digits(args.test_fraction, args.seed)
    except ImportError:
        print("this example needs scikit-learn: pip install -e \".[examples]\"", file=sys.stderr)
        return 2
    if args.batch_size > len(x_train):
        print(f"--batch-size {args.batch_size} is larger than the training set ({len(x_train)} examples)",
              file=sys.stderr)
        return 2

    init_fun, predict = stax.serial(
        stax.Dense(args.hidden), stax.Relu,
        stax.Dense(args.hidden), stax.Relu,
        stax.Dense(10), stax.LogSoftmax,
    )
    key = random.PRNGKey(args.seed)
    _, params = init_fun(key, (-1, x_train.shape[1]))
    opt_init, opt_update, get_params = optimizers.adam(args.learning_rate)
    opt_state = opt_init(params)

    def loss(params, x, y):
        logp = predict(params, x)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    @ftrans.jit
    def step(i, opt_state, x, y):
        value, grads = ftrans.value_and_grad(loss)(get_params(opt_state), x, y)
        return opt_update(i, grads, opt_state), value

    @ftrans.jit
    def accuracy(params, x, y):
        return jnp.mean(jnp.argmax(predict(params, x), axis=1) == y)

    steps_per_epoch = len(x_train) // args.batch_size
    rng = np.random.RandomState(args.seed)
    start = time.perf_counter()
    i = 0
    bar = tqdm(total=args.epochs * steps_per_epoch, disable=args.no_progress, unit="step")
    for epoch in range(args.epochs):
        perm = rng.permutation(len(x_train))
        for b in range(steps_per_epoch):
            idx = perm[b * args.batch_size:(b + 1) * args.batch_size]
            opt_state, value = step(i, opt_state, x_train[idx], y_train[idx])
            i += 1
            bar.update(1)
        bar.set_postfix(epoch=epoch + 1, loss=f"{float(value):.4f}")
    bar.close()
    params = get_params(opt_state)
    train_acc = float(accuracy(params, x_train, y_train))
    test_acc = float(accuracy(params, x_test, y_test))
    print(f"trained {i} steps in {time.perf_counter() - start:.1f} s")
    print(f"train accuracy {train_acc:.4f}")
    print(f"test accuracy {test_acc:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
