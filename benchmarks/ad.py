"""Reverse-mode autodiff: ftrans next to jax in one process -- tracing, compile time, steady state.

    python benchmarks/ad.py                      # about a minute
    python benchmarks/ad.py --quick              # fewer repeats: a smoke test, noisier figures
    python benchmarks/ad.py --json out.json      # also write the figures as JSON

(A) An SGD training step of the MLP 784-512-512-10 (relu hidden layers,
    batch 128, float32, parameters a list of ``(w, b)`` tuples, softmax
    cross-entropy against one-hot labels)::

        loss, grads = value_and_grad(loss_fn)(params, x, y)
        params = tree_map(lambda p, g: p - lr * g, params, grads)
        return params, loss

    (a) ``make_jaxpr(step)``, a fresh function object each time so no tracing
        cache can answer (median ms), with both jaxprs' equation counts;
    (b) time to first result of ``jit(step)``: a fresh function and a fresh
        ``jit`` each time, jax's caches cleared (``jax.clear_caches()``),
        ftrans's in-memory XLA cache cleared, persistent/disk caches off,
        inputs on the device: trace + lower + compile + run + block (median
        ms).  The script checks that each run really compiled;
    (c) the compiled steady-state step, inputs on the device,
        ``block_until_ready()`` after each call (median of best-of, us).
    The two libraries' losses and gradients are checked to agree first.
(B) ``grad`` of the 60-layer tanh MLP of ``eager.py`` (width 32, batch 8,
    ``x = tanh(x @ w + b)`` per layer, loss = the sum of the output):
    (a) trace time of ``make_jaxpr(grad(loss))`` (median ms);
    (b) time to first result of ``jit(grad(loss))``, cold as in (A)(b).
    The two libraries' gradients are checked to agree first.

Targets (ratios ftrans / jax): A.make_jaxpr <= 0.5x, A.first_result <= 0.8x,
A.steady <= 1.0x, B.trace <= 0.5x, B.first_result <= 0.8x.  The script prints
whether each is met but never fails on a miss: timings on a shared machine are
noisy.  The timing helpers, the cache switches and the report come from
``jit.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The comparison is of cold compiles: neither library may answer from a cache on disk.
os.environ["FTRANS_ENABLE_COMPILATION_CACHE"] = "0"  # ftrans's disk cache is on by default
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
# Run from a checkout without installing: put the repository root on the path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402
import numpy as np  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as fjnp  # noqa: E402
from benchmarks.eager import mlp as tanh_mlp  # noqa: E402
from benchmarks.eager import mlp_args as tanh_mlp_args  # noqa: E402
from benchmarks.jit import (  # noqa: E402
    MLP_BATCH,
    MLP_SIZES,
    Figure,
    JaxCompileCounter,
    disable_persistent_caches,
    environment,
    mlp,
    mlp_args,
    paired_once_ms,
    paired_per_call_us,
    print_table,
    write_json,
)
from ftrans.lowering import executable as _ftrans_executable  # noqa: E402

TARGETS = {  # ftrans / jax, lower is better
    "A.make_jaxpr": 0.5,
    "A.first_result": 0.8,
    "A.steady": 1.0,
    "B.trace": 0.5,
    "B.first_result": 0.8,
}
LEARNING_RATE = 0.01
# ftrans's and jax's programs may order a contraction differently; on a GPU, XLA runs float32
# matrix products in TF32 by default (about 1e-3 relative), so the agreement check allows that there.
RTOL = 1e-4 if jax.default_backend() == "cpu" else 1e-2

# The two libraries, side by side: (the module with grad/jit/..., its numpy).
FT = (ftrans, fjnp)
JX = (jax, jjnp)


# ----------------------------------------------------------------------------
# Shared helpers


def block(lib: Any, out: Any) -> Any:
    """Wait for every leaf of ``out`` (a pytree of arrays)."""
    return lib.block_until_ready(out)


def clear_caches() -> None:
    """Forget every compiled program of both libraries (outside the clock)."""
    _ftrans_executable._xla_cache.clear()
    jax.clear_caches()


def cold(lib: Any, run: Callable[[], Any], counter: JaxCompileCounter, what: str) -> Callable[[], None]:
    """``run`` (build, jit, call, block) with a check that it really compiled."""
    if lib is ftrans:
        def cold_f() -> None:
            before = _ftrans_executable.stats["compiles"]
            run()
            if _ftrans_executable.stats["compiles"] == before:
                raise SystemExit(f"{what}: ftrans answered from a cache instead of compiling")
        return cold_f

    def cold_j() -> None:
        before = counter.count
        run()
        if counter.available and counter.count == before:
            raise SystemExit(f"{what}: jax answered from a cache instead of compiling")
    return cold_j


def assert_trees_close(got_f: Any, got_j: Any, what: str) -> None:
    """Same structure, dtypes and shapes; values within ``RTOL`` (atol scaled to each leaf's size)."""
    leaves_f, tree_f = jax.tree_util.tree_flatten(ftrans.device_get(got_f))
    leaves_j, tree_j = jax.tree_util.tree_flatten(jax.device_get(got_j))
    if tree_f != tree_j:
        raise SystemExit(f"{what}: ftrans returns {tree_f}, jax {tree_j}")
    for i, (a, b) in enumerate(zip(leaves_f, leaves_j)):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != b.dtype or a.shape != b.shape:
            raise SystemExit(f"{what}, leaf {i}: ftrans gives {a.dtype}{list(a.shape)}, jax {b.dtype}{list(b.shape)}")
        atol = RTOL * max(float(np.max(np.abs(b))), 1e-30)
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=atol, err_msg=f"{what}, leaf {i}: ftrans and jax disagree")


# ----------------------------------------------------------------------------
# (A) the SGD step


def xent_loss(params: list, x: Any, y: Any, np_mod: Any) -> Any:
    """Softmax cross-entropy of the MLP's logits against one-hot labels, averaged over the batch."""
    logits = mlp(params, x, np_mod)
    m = np_mod.max(logits, axis=-1, keepdims=True)
    lse = np_mod.log(np_mod.sum(np_mod.exp(logits - m), axis=-1, keepdims=True)) + m
    return -np_mod.mean(np_mod.sum(y * (logits - lse), axis=-1))


def fresh_step(lib_np: tuple) -> Callable:
    """A new SGD-step function object on every call: no cache keyed by the function can answer."""
    lib, np_mod = lib_np

    def loss(params: list, x: Any, y: Any) -> Any:
        return xent_loss(params, x, y, np_mod)

    def step(params: list, x: Any, y: Any) -> tuple:
        value, grads = lib.value_and_grad(loss)(params, x, y)
        new = lib.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)
        return new, value

    return step


def step_args(seed: int = 0) -> tuple[list, np.ndarray, np.ndarray]:
    params, x = mlp_args(seed)
    labels = np.random.default_rng(seed + 1).integers(0, MLP_SIZES[-1], MLP_BATCH)
    return params, x, np.eye(MLP_SIZES[-1], dtype=np.float32)[labels]


def step_outputs(lib_np: tuple, args: tuple) -> tuple:
    """Eager ``value_and_grad`` of the loss, the same under ``jit``, and the jitted step's output."""
    lib, np_mod = lib_np

    def loss(params: list, x: Any, y: Any) -> Any:
        return xent_loss(params, x, y, np_mod)

    value_and_grad = lib.value_and_grad(loss)
    return value_and_grad(*args), lib.jit(value_and_grad)(*args), lib.jit(fresh_step(lib_np))(*args)


def check_step_agrees(args_f: tuple, args_j: tuple) -> None:
    """Loss and gradients (eager and jitted), and the jitted step's new parameters, agree."""
    got_f, got_j = step_outputs(FT, args_f), step_outputs(JX, args_j)
    for what, a, b in zip(("SGD step: eager value_and_grad", "SGD step: jit(value_and_grad)",
                           "SGD step: jit(step)"), got_f, got_j):
        assert_trees_close(a, b, what)
    loss = float(np.asarray(got_f[0][0]))
    if not np.isfinite(loss) or not 0.5 < loss < 20.0:
        raise SystemExit(f"SGD step: implausible loss {loss}")


def step_make_jaxpr_figure(args: tuple, runs: int) -> Figure:
    n_f = len(ftrans.make_jaxpr(fresh_step(FT))(*args).eqns)
    n_j = len(jax.make_jaxpr(fresh_step(JX))(*args).eqns)
    t_f, t_j = paired_once_ms(lambda: ftrans.make_jaxpr(fresh_step(FT))(*args),
                              lambda: jax.make_jaxpr(fresh_step(JX))(*args), runs, warmup=2)
    return Figure("A_make_jaxpr_ms", f"A. SGD make_jaxpr ({n_f} / {n_j} eqns)", "ms", t_f, t_j,
                  TARGETS["A.make_jaxpr"])


def step_first_result_figure(args_f: tuple, args_j: tuple, runs: int, counter: JaxCompileCounter) -> Figure:
    run_f = cold(ftrans, lambda: block(ftrans, ftrans.jit(fresh_step(FT))(*args_f)), counter, "A. first result")
    run_j = cold(jax, lambda: block(jax, jax.jit(fresh_step(JX))(*args_j)), counter, "A. first result")
    t_f, t_j = paired_once_ms(run_f, run_j, runs, warmup=2, setup=clear_caches)
    return Figure("A_first_result_ms", "A. SGD time to first result", "ms", t_f, t_j, TARGETS["A.first_result"])


def step_steady_figure(args_f: tuple, args_j: tuple, number: int, repeat: int, runs: int) -> Figure:
    f = ftrans.jit(fresh_step(FT))
    g = jax.jit(fresh_step(JX))
    t_f, t_j = paired_per_call_us(lambda: block(ftrans, f(*args_f)), lambda: block(jax, g(*args_j)),
                                  number, repeat, runs, warmup=5)
    if f.cache_info()["misses"] != 1:
        raise SystemExit("A. steady state: ftrans.jit recompiled during the timing")
    return Figure("A_steady_us", "A. SGD compiled step + block", "us", t_f, t_j, TARGETS["A.steady"])


# ----------------------------------------------------------------------------
# (B) grad of the deep tanh MLP


def fresh_tanh_grad(lib_np: tuple) -> Callable:
    """``grad`` of a new loss function object on every call."""
    lib, np_mod = lib_np

    def loss(params: list, x: Any) -> Any:
        return np_mod.sum(tanh_mlp(params, x, np_mod))

    return lib.grad(loss)


def check_tanh_agrees(args_f: tuple, args_j: tuple) -> None:
    assert_trees_close(fresh_tanh_grad(FT)(*args_f), fresh_tanh_grad(JX)(*args_j), "tanh MLP: grad")
    assert_trees_close(ftrans.jit(fresh_tanh_grad(FT))(*args_f), jax.jit(fresh_tanh_grad(JX))(*args_j),
                       "tanh MLP: jit(grad)")


def tanh_trace_figure(args: tuple, runs: int) -> Figure:
    n_f = len(ftrans.make_jaxpr(fresh_tanh_grad(FT))(*args).eqns)
    n_j = len(jax.make_jaxpr(fresh_tanh_grad(JX))(*args).eqns)
    t_f, t_j = paired_once_ms(lambda: ftrans.make_jaxpr(fresh_tanh_grad(FT))(*args),
                              lambda: jax.make_jaxpr(fresh_tanh_grad(JX))(*args), runs, warmup=2)
    return Figure("B_trace_ms", f"B. tanh grad trace ({n_f} / {n_j} eqns)", "ms", t_f, t_j, TARGETS["B.trace"])


def tanh_first_result_figure(args_f: tuple, args_j: tuple, runs: int, counter: JaxCompileCounter) -> Figure:
    run_f = cold(ftrans, lambda: block(ftrans, ftrans.jit(fresh_tanh_grad(FT))(*args_f)), counter,
                 "B. first result")
    run_j = cold(jax, lambda: block(jax, jax.jit(fresh_tanh_grad(JX))(*args_j)), counter, "B. first result")
    t_f, t_j = paired_once_ms(run_f, run_j, runs, warmup=2, setup=clear_caches)
    return Figure("B_first_result_ms", "B. tanh jit(grad) first result", "ms", t_f, t_j,
                  TARGETS["B.first_result"])


# ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test, noisier)")
    ap.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    args = ap.parse_args(argv)
    if args.quick:
        settings = dict(trace_runs=5, cold_runs=3, steady=(5, 3, 3))
    else:
        settings = dict(trace_runs=21, cold_runs=11, steady=(20, 5, 7))

    disable_persistent_caches()
    counter = JaxCompileCounter()
    env = environment()
    print(", ".join(f"{k} {v}" for k, v in env.items()))
    if env["jax_device"] != env["ftrans_device"]:
        print(f"warning: the libraries run on different devices ({env['ftrans_device']} vs {env['jax_device']})")

    step_np = step_args()
    step_f = tuple(ftrans.device_put(a) for a in step_np)
    step_j = tuple(jax.device_put(a) for a in step_np)
    check_step_agrees(step_f, step_j)
    tanh_np = tanh_mlp_args()
    tanh_f = tuple(ftrans.device_put(a) for a in tanh_np)
    tanh_j = tuple(jax.device_put(a) for a in tanh_np)
    check_tanh_agrees(tanh_f, tanh_j)

    figures = [
        step_make_jaxpr_figure(step_np, settings["trace_runs"]),
        step_first_result_figure(step_f, step_j, settings["cold_runs"], counter),
        step_steady_figure(step_f, step_j, *settings["steady"]),
        tanh_trace_figure(tanh_np, settings["trace_runs"]),
        tanh_first_result_figure(tanh_f, tanh_j, settings["cold_runs"], counter),
    ]

    print()
    print_table(figures)
    print("\nratio = ftrans / jax (lower is better); figures are medians over runs, so expect noise on a busy machine")
    if args.json:
        write_json(args.json, figures, env, {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()})
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
