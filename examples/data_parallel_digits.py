"""Train the digits MLP data-parallel with ftrans.pmap: per-device gradients, averaged with pmean.

    pip install -e ".[examples]" && python examples/data_parallel_digits.py [--epochs 30] [--batch-size 64]

The same model, data split, optimizer and schedule as ``train_digits.py``, but
each step runs on every local device at once: the batch is split into one block
per device, each device computes the loss and gradient of its block, the
gradients are averaged over the devices with ``lax.pmean`` and every device
applies the same Adam update, so the parameters stay replicated (they live on
the devices between steps, put there once with ``device_put_replicated``).
Averaging equal-sized blocks' mean gradients is the whole batch's mean
gradient, so training follows ``train_digits.py`` step for step and reaches the
same test accuracy (about 97%).

On a CPU the host is split into ``--host-devices`` XLA devices (default 8) so
the example runs anywhere; on GPUs/TPUs the real devices are used.

The script is written against the JAX API: replace ``ftrans`` by ``jax`` in
the imports and it runs on JAX unchanged.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from train_digits import fraction, load_digits, positive_float, positive_int  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=positive_int, default=30, help="passes over the training set (default 30)")
    p.add_argument("--batch-size", type=positive_int, default=64,
                   help="examples per step over all devices; a multiple of the device count (default 64)")
    p.add_argument("--learning-rate", type=positive_float, default=1e-3, help="Adam's step size (default 1e-3)")
    p.add_argument("--hidden", type=positive_int, default=128, help="width of the two hidden layers (default 128)")
    p.add_argument("--test-fraction", type=fraction, default=0.25, help="held-out share of the data (default 0.25)")
    p.add_argument("--host-devices", type=positive_int, default=8,
                   help="XLA devices to split a CPU host into, unless XLA_FLAGS already says (default 8)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (for logs)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:  # must precede the runtime's start
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={args.host_devices}".strip()
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

    import numpy as np

    import ftrans
    import ftrans.numpy as jnp
    from ftrans import lax, random
    from ftrans.example_libraries import optimizers, stax

    devices = ftrans.local_devices()
    n = len(devices)
    if args.batch_size % n:
        print(f"{os.path.basename(sys.argv[0])}: error: --batch-size {args.batch_size} must be a multiple of the "
              f"number of devices ({n})", file=sys.stderr)
        return 2
    if args.batch_size > len(x_train):
        print(f"{os.path.basename(sys.argv[0])}: error: --batch-size {args.batch_size} is larger than the training "
              f"set ({len(x_train)} examples)", file=sys.stderr)
        return 2

    init_fun, predict = stax.serial(
        stax.Dense(args.hidden), stax.Relu,
        stax.Dense(args.hidden), stax.Relu,
        stax.Dense(10), stax.LogSoftmax,
    )
    key = random.PRNGKey(args.seed)
    _, params = init_fun(key, (-1, x_train.shape[1]))
    opt_init, opt_update, get_params = optimizers.adam(args.learning_rate)
    opt_state = ftrans.device_put_replicated(opt_init(params), devices)  # one copy per device

    def loss(params, x, y):
        logp = predict(params, x)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    def step(i, opt_state, x, y):
        value, grads = ftrans.value_and_grad(loss)(get_params(opt_state), x, y)
        grads = lax.pmean(grads, "devices")  # every device now holds the whole batch's gradient
        return opt_update(i, grads, opt_state), lax.pmean(value, "devices")

    p_step = ftrans.pmap(step, axis_name="devices", in_axes=(None, 0, 0, 0), donate_argnums=1)

    @ftrans.jit
    def accuracy(params, x, y):
        return jnp.mean(jnp.argmax(predict(params, x), axis=1) == y)

    per_device = args.batch_size // n
    steps_per_epoch = len(x_train) // args.batch_size
    rng = np.random.RandomState(args.seed)
    start = time.perf_counter()
    i = 0
    bar = tqdm(total=args.epochs * steps_per_epoch, disable=args.no_progress, unit="step")
    for epoch in range(args.epochs):
        perm = rng.permutation(len(x_train))
        for b in range(steps_per_epoch):
            idx = perm[b * args.batch_size:(b + 1) * args.batch_size]
            xb = x_train[idx].reshape(n, per_device, -1)  # one block per device
            yb = y_train[idx].reshape(n, per_device)
            opt_state, value = p_step(i, opt_state, xb, yb)
            i += 1
            bar.update(1)
        bar.set_postfix(epoch=epoch + 1, loss=f"{float(value[0]):.4f}")
    bar.close()
    params = ftrans.tree_util.tree_map(lambda leaf: leaf[0], get_params(opt_state))  # replica 0
    train_acc = float(accuracy(params, x_train, y_train))
    test_acc = float(accuracy(params, x_test, y_test))
    print(f"trained {i} steps on {n} devices ({per_device} examples each) in {time.perf_counter() - start:.1f} s")
    print(f"train accuracy {train_acc:.4f}")
    print(f"test accuracy {test_acc:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
