"""Time to first result in fresh processes: ftrans with an empty and a warm compilation cache, vs jax.

    python benchmarks/first_result.py              # 3 rounds, about two minutes
    python benchmarks/first_result.py --runs 1     # one round (noisier)
    python benchmarks/first_result.py --json out.json

Each measurement is a new Python process (``subprocess``) that imports one
library, builds its arguments on the host, and times one ``jit`` call from
creating the jitted function to the result being ready (trace, transform,
lower, compile or load, run, ``block_until_ready``). Four programs:

- ``mlp_step``: an SGD step (``value_and_grad`` of a 784-512-512-10 MLP's
  cross-entropy, batch 128, and the parameter update);
- ``tanh60_grad``: ``grad`` of a 60-layer tanh MLP (width 32, batch 8);
- ``rnn_scan_grad``: ``grad`` of an Elman RNN run through ``lax.scan``
  (50 steps, hidden 64, input 32, batch 8);
- ``per_example_grads``: ``vmap(grad(loss))`` over a batch of 64 examples of a
  784-128-10 MLP.

For ftrans, each round gives the program a fresh, empty cache directory
(``FTRANS_COMPILATION_CACHE_DIR``): the first process compiles and writes the
executable ("empty cache"); a second process finds it ("warm cache"). jax runs
with its defaults (its persistent compilation cache is off unless configured,
so every jax process compiles). Rounds interleave the libraries; medians are
reported. A third ftrans process per round runs with background compilation
(``FTRANS_BACKGROUND_COMPILATION=1``) and its own empty cache: its first call
is answered by the host interpreter while XLA compiles in a thread ("bg").
Targets (ftrans / jax, lower is better): empty cache <= 0.8, warm cache <=
0.2, background compilation <= 0.2. The "process" columns are the whole subprocess wall time
(interpreter start and imports included), for information.

The parent also checks that ftrans's and jax's results agree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = ("mlp_step", "tanh60_grad", "rnn_scan_grad", "per_example_grads")
TARGETS = {"empty": 0.8, "warm": 0.2, "bg": 0.2}


# ----------------------------------------------------------------------------
# The child: one library, one program, one timed first call


def _program(name: str, lib, jnp, lax):
    """(function to jit, host arguments) for ``name``, written once for both libraries."""
    import numpy as np

    rng = np.random.default_rng(0)

    def dense(sizes, scale=None):
        return [((rng.standard_normal((m, n)) * (scale or 1 / np.sqrt(m))).astype(np.float32),
                 np.zeros(n, np.float32)) for m, n in zip(sizes[:-1], sizes[1:])]

    def mlp(params, x):
        for w, b in params[:-1]:
            x = jnp.maximum(x @ w + b, 0.0)
        w, b = params[-1]
        return x @ w + b

    def xent(params, x, y):
        logits = mlp(params, x)
        logz = jnp.log(jnp.sum(jnp.exp(logits - jnp.max(logits, axis=-1, keepdims=True)), axis=-1,
                               keepdims=True)) + jnp.max(logits, axis=-1, keepdims=True)
        return -jnp.mean(jnp.sum(y * (logits - logz), axis=-1))

    if name == "mlp_step":
        params = dense((784, 512, 512, 10))
        x = rng.standard_normal((128, 784)).astype(np.float32)
        y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]

        def step(params, x, y):
            value, grads = lib.value_and_grad(xent)(params, x, y)
            return lib.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), value

        return step, (params, x, y)
    if name == "tanh60_grad":
        params = dense((32,) * 61)
        x = rng.standard_normal((8, 32)).astype(np.float32)

        def loss(params, x):
            for w, b in params:
                x = jnp.tanh(x @ w + b)
            return jnp.sum(x)

        return lib.grad(loss), (params, x)
    if name == "rnn_scan_grad":
        wx = (rng.standard_normal((32, 64)) / np.sqrt(32)).astype(np.float32)
        wh = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
        b = np.zeros(64, np.float32)
        xs = rng.standard_normal((50, 8, 32)).astype(np.float32)

        def loss(params, xs):
            wx, wh, b = params

            def cell(h, x):
                h = jnp.tanh(x @ wx + h @ wh + b)
                return h, jnp.sum(h * h)

            _, ys = lax.scan(cell, jnp.zeros((8, 64), jnp.float32), xs)
            return jnp.sum(ys)

        return lib.grad(loss), ((wx, wh, b), xs)
    if name == "per_example_grads":
        params = dense((784, 128, 10))
        x = rng.standard_normal((64, 784)).astype(np.float32)
        y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]

        def one(params, x, y):
            return xent(params, x[None], y[None])

        return lib.vmap(lib.grad(one), in_axes=(None, 0, 0)), (params, x, y)
    raise SystemExit(f"unknown program {name!r}; choose from {', '.join(PROGRAMS)}")


def child(lib_name: str, program: str) -> None:
    t_start = time.perf_counter()
    if lib_name == "ftrans":
        sys.path.insert(0, ROOT)
        import ftrans as lib
        import ftrans.numpy as jnp
        from ftrans import lax
    else:
        import jax as lib
        import jax.numpy as jnp
        from jax import lax
    import numpy as np

    t_imported = time.perf_counter()
    fn, args = _program(program, lib, jnp, lax)
    t0 = time.perf_counter()
    out = lib.block_until_ready(lib.jit(fn)(*args))
    t1 = time.perf_counter()
    leaves = [np.asarray(v, dtype=np.float64) for v in lib.tree_util.tree_leaves(out)]
    info = {"first_ms": (t1 - t0) * 1e3, "import_ms": (t_imported - t_start) * 1e3,
            "checksum": [float(np.sum(v)) for v in leaves], "scale": [float(np.sum(np.abs(v))) for v in leaves]}
    if lib_name == "ftrans":
        from ftrans.lowering import disk_cache
        from ftrans.lowering import executable as X
        from ftrans.transforms import jit as J

        info["disk"] = dict(disk_cache.stats)
        info["compiles"] = X.stats["compiles"]
        info["host_calls"] = J.stats["host_calls"]
    print("RESULT " + json.dumps(info))


# ----------------------------------------------------------------------------
# The parent: fresh processes, interleaved rounds, medians


def run_child(lib_name: str, program: str, env: dict) -> dict:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", lib_name, program], env=env,
                       capture_output=True, text=True, timeout=600)
    wall = (time.perf_counter() - t0) * 1e3
    if p.returncode != 0:
        raise SystemExit(f"{lib_name} {program} failed:\n{p.stderr[-4000:]}")
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("RESULT "))
    info = json.loads(line[len("RESULT "):])
    info["process_ms"] = wall
    return info


def base_env() -> dict:
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")
    for k in ("JAX_COMPILATION_CACHE_DIR", "JAX_ENABLE_COMPILATION_CACHE", "FTRANS_CACHE_DIR",
              "FTRANS_ENABLE_COMPILATION_CACHE", "FTRANS_COMPILATION_CACHE_DIR"):
        env.pop(k, None)  # jax with its defaults; ftrans's cache directory set per round below
    return env


def check_agree(program: str, f: dict, j: dict) -> None:
    import numpy as np

    for a, b, s in zip(f["checksum"], j["checksum"], j["scale"]):
        if not np.isclose(a, b, rtol=1e-3, atol=1e-4 * max(s, 1.0)):
            raise SystemExit(f"{program}: ftrans and jax disagree (sum {a} vs {b})")
    if len(f["checksum"]) != len(j["checksum"]):
        raise SystemExit(f"{program}: ftrans and jax return different numbers of arrays")


def measure(programs: list[str], runs: int) -> dict:
    env = base_env()
    samples = {p: {"empty": [], "warm": [], "jax": [], "bg": [], "empty_proc": [], "warm_proc": [], "jax_proc": []}
               for p in programs}
    with tempfile.TemporaryDirectory(prefix="ftrans-first-result-") as tmp:
        for r in range(runs):
            for i, program in enumerate(programs):
                d = os.path.join(tmp, f"{program}-{r}")
                fenv = dict(env, FTRANS_COMPILATION_CACHE_DIR=d)
                order = ("jax", "ftrans") if (r + i) % 2 else ("ftrans", "jax")
                for lib_name in order:
                    if lib_name == "jax":
                        j = run_child("jax", program, env)
                        samples[program]["jax"].append(j["first_ms"])
                        samples[program]["jax_proc"].append(j["process_ms"])
                    else:
                        e = run_child("ftrans", program, fenv)
                        w = run_child("ftrans", program, fenv)
                        if e["disk"]["hits"] != 0 or e["compiles"] == 0:
                            raise SystemExit(f"{program}: the empty-cache process did not compile")
                        if w["disk"]["hits"] == 0 or w["compiles"] != 0:
                            raise SystemExit(f"{program}: the warm-cache process compiled ({w})")
                        # background compilation, its own empty cache: the first call runs on the host
                        b = run_child("ftrans", program, dict(fenv, FTRANS_COMPILATION_CACHE_DIR=d + "-bg",
                                                              FTRANS_BACKGROUND_COMPILATION="1"))
                        if b["host_calls"] != 1:
                            raise SystemExit(f"{program}: background compilation did not answer on the host ({b})")
                        check_agree(program, b, e)  # the host interpreter computes the same
                        samples[program]["bg"].append(b["first_ms"])
                        samples[program]["empty"].append(e["first_ms"])
                        samples[program]["warm"].append(w["first_ms"])
                        samples[program]["empty_proc"].append(e["process_ms"])
                        samples[program]["warm_proc"].append(w["process_ms"])
                        check_agree(program, e, w)  # the loaded executable computes the same
                        last_f = e
                check_agree(program, last_f, j)
    return {p: {k: statistics.median(v) for k, v in s.items()} for p, s in samples.items()}


def report(results: dict) -> list[dict]:
    rows = []
    head = (f"{'program':<20} {'jax ms':>8} {'empty ms':>9} {'ratio':>6} {'warm ms':>8} {'ratio':>6} "
            f"{'bg ms':>8} {'ratio':>6}   {'process ms: jax / empty / warm':>32}")
    print(head)
    print("-" * len(head))
    for program, m in results.items():
        re_, rw, rb = m["empty"] / m["jax"], m["warm"] / m["jax"], m["bg"] / m["jax"]
        ok_e = "ok" if re_ <= TARGETS["empty"] else "MISS"
        ok_w = "ok" if rw <= TARGETS["warm"] else "MISS"
        ok_b = "ok" if rb <= TARGETS["bg"] else "MISS"
        print(f"{program:<20} {m['jax']:8.1f} {m['empty']:9.1f} {re_:5.2f}{ok_e[0]} {m['warm']:8.1f} {rw:5.2f}{ok_w[0]}"
              f" {m['bg']:8.1f} {rb:5.2f}{ok_b[0]}"
              f"   {m['jax_proc']:10.0f} / {m['empty_proc']:6.0f} / {m['warm_proc']:6.0f}")
        rows.append({"program": program, **m, "empty_ratio": re_, "warm_ratio": rw, "bg_ratio": rb,
                     "empty_met": re_ <= TARGETS["empty"], "warm_met": rw <= TARGETS["warm"],
                     "bg_met": rb <= TARGETS["bg"]})
    print(f"\nratio = ftrans / jax time to first result (o: meets the target, M: misses it); "
          f"targets: empty cache <= {TARGETS['empty']}, warm cache <= {TARGETS['warm']}, "
          f"background compilation (empty cache) <= {TARGETS['bg']}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", nargs=2, metavar=("LIB", "PROGRAM"), help=argparse.SUPPRESS)
    ap.add_argument("--runs", type=int, default=3, help="interleaved rounds (medians are reported)")
    ap.add_argument("--programs", default=",".join(PROGRAMS), help="comma-separated subset of " + ", ".join(PROGRAMS))
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    programs = [p.strip() for p in args.programs.split(",") if p.strip()]
    for p in programs:
        if p not in PROGRAMS:
            ap.error(f"unknown program {p!r}; choose from {', '.join(PROGRAMS)}")
    rows = report(measure(programs, args.runs))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"targets": TARGETS, "runs": args.runs, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
