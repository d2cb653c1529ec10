"""Train a small convolutional network on scikit-learn's handwritten digits with ftrans.

    pip install -e ".[examples]" && python examples/cnn_digits.py [--epochs 25] [--batch-size 64]

The 8x8 digit images (loaded and split exactly as ``train_digits.py`` does)
go through two 3x3 convolutions, a 2x2 max-pool and two dense layers, built
with ``ftrans.example_libraries.stax`` (``Conv`` is ``lax.conv_general_dilated``
in the ``NHWC``/``HWIO`` layout) and trained with Adam, one jitted step per
batch, with a tqdm progress bar. The test accuracy is printed at the end
(about 98.5% after the default 25 epochs).

The script is written against the JAX API: replace ``ftrans`` by ``jax`` in
the imports and it runs on JAX unchanged.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from train_digits import fraction, load_digits, positive_float, positive_int  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as jnp  # noqa: E402
from ftrans import random  # noqa: E402
from ftrans.example_libraries import optimizers, stax  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=positive_int, default=25, help="passes over the training set (default 25)")
    p.add_argument("--batch-size", type=positive_int, default=64, help="examples per step (default 64)")
    p.add_argument("--learning-rate", type=positive_float, default=2e-3, help="Adam's step size (default 2e-3)")
    p.add_argument("--channels", type=positive_int, default=32,
                   help="channels of the first convolution; the second has twice as many (default 32)")
    p.add_argument("--test-fraction", type=fraction, default=0.25, help="held-out share of the data (default 0.25)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (for logs)")
    return p.parse_args(argv)


def conv_net(channels: int):
    """Two SAME 3x3 convolutions, a 2x2 max-pool, a 128-unit dense layer and log-probabilities of 10 classes."""
    return stax.serial(
        stax.Conv(channels, (3, 3), padding="SAME"), stax.Relu,
        stax.Conv(2 * channels, (3, 3), padding="SAME"), stax.Relu,
        stax.MaxPool((2, 2), strides=(2, 2)),
        stax.Flatten,
        stax.Dense(128), stax.Relu,
        stax.Dense(10), stax.LogSoftmax,
    )


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
    x_train = x_train.reshape(-1, 8, 8, 1)  # NHWC images
    x_test = x_test.reshape(-1, 8, 8, 1)

    init_fun, predict = conv_net(args.channels)
    _, params = init_fun(random.PRNGKey(args.seed), (-1, 8, 8, 1))
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
