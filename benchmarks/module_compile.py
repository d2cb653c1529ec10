"""Do ftrans's StableHLO modules compile slower than jax's? Both modules, one XLA client, the same options.

    python benchmarks/module_compile.py                          # first_result's programs + a 100-layer gradient
    python benchmarks/module_compile.py --programs tanh60_grad,mlp_step --rounds 5
    python benchmarks/module_compile.py --programs layers_grad --layers 1000 --rounds 1

Not a benchmark with targets: it separates what is in the module from how it
is compiled. For each program it lowers the same Python function with both
libraries and then:

1. counts the module's StableHLO ops by kind (and its constants, how many of
   them are distinct, the text's size and its number of ``loc(...)`` entries),
   so a pattern one library emits more of shows up;
2. compiles **both modules through the same PJRT client with the same compile
   options**, interleaved, alternating which goes first: ftrans's module text
   as ftrans hands it to XLA, and jax's module as jax hands it over (MLIR
   bytecode). Two option sets: ftrans's CPU default
   (``xla_backend_optimization_level=1``, ``executable.DEFAULT_COMPILER_OPTIONS``)
   and XLA's defaults (what jax compiles with). A difference in this column is
   the module's; the same difference in neither column would be the options'.
3. times each library's own ``lowered.compile()`` (its own options and path),
   which is what ``scaling.py``'s compile column measures.

Times are process CPU time (XLA's compile runs in a thread pool; CPU time is
what a loaded machine cannot hide) and wall time, medians over ``--rounds``.
Programs: ``first_result.py``'s four and ``layers_grad``, ``scaling.py``'s
``grad`` of an N-layer tanh MLP (width 16, batch 4; ``--layers``).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["FTRANS_ENABLE_COMPILATION_CACHE"] = "0"  # ftrans's disk cache is on by default
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import first_result  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402
import scaling  # noqa: E402
from jax import lax as jlax  # noqa: E402
from jax._src.interpreters import mlir as jax_mlir  # noqa: E402  (jax's module as jax hands it to XLA)
from jax._src.lib import xla_client as jax_xc  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as fjnp  # noqa: E402
from ftrans import lax as flax  # noqa: E402
from ftrans.lowering import compat, executable  # noqa: E402

PROGRAMS = (*first_result.PROGRAMS, "layers_grad")
OPTION_SETS = {"ftrans default": executable.DEFAULT_COMPILER_OPTIONS.get("cpu", ()), "XLA default": ()}


def program(name: str, lib, np_mod, lax, layers: int):
    if name == "layers_grad":
        return scaling.fresh("grad", lib, np_mod), scaling.args_for(layers)
    return first_result._program(name, lib, np_mod, lax)


def lowered_pair(name: str, layers: int):
    """(ftrans's Lowered, jax's Lowered) of the same program."""
    fn, args = program(name, ftrans, fjnp, flax, layers)
    f_low = ftrans.jit(fn).lower(*args)
    fn, args = program(name, jax, jjnp, jlax, layers)
    j_low = jax.jit(fn).lower(*args)
    return f_low, j_low


_OP = re.compile(r'(?:^\s*|= )"?((?:stablehlo|func|chlo|sdy)\.[a-z_]+)"?[ (]', re.M)


def op_counts(pretty: str) -> collections.Counter:
    """StableHLO ops by kind in a module printed without locations."""
    return collections.Counter(m.group(1) for m in _OP.finditer(pretty))


def constants(pretty: str) -> tuple[int, int]:
    """(constant ops, distinct constant values) in a pretty-printed module."""
    vals = re.findall(r"stablehlo\.constant (dense<[^>]*>\s*:\s*tensor<[^>]*>)", pretty)
    return len(vals), len(set(vals))


def describe(name: str, f_low, j_low) -> None:
    f_text, j_text = f_low.as_text(), j_low.as_text()
    f_raw, j_raw = f_low._text, j_low.as_text(debug_info=True)  # what each compiles (jax: as bytecode)
    fc, jc = op_counts(f_text), op_counts(j_text)
    print(f"\n{name}: StableHLO ops by kind (ftrans / jax)")
    for k in sorted(set(fc) | set(jc)):
        mark = "" if fc[k] == jc[k] else "   <-"
        print(f"  {k:32s} {fc[k]:6d} {jc[k]:6d}{mark}")
    print(f"  {'total':32s} {sum(fc.values()):6d} {sum(jc.values()):6d}")
    (fn_, fd), (jn, jd) = constants(f_text), constants(j_text)
    print(f"  constants (distinct)             {fn_:3d} ({fd:2d}) {jn:3d} ({jd:2d})")
    print(f"  module text with locations, KB   {len(f_raw) / 1e3:6.0f} {len(j_raw) / 1e3:6.0f}"
          f"   (jax hands XLA {len(jax_mlir.module_to_bytecode(j_low.compiler_ir())) / 1e3:.0f} KB of bytecode)")
    print(f"  loc(...) entries                 {f_raw.count('loc('):6d} {j_raw.count('loc('):6d}")


def compile_once(client, device, module, options: tuple) -> tuple[float, float]:
    opts = compat._compile_options([device])
    if options:
        compat._set_options(opts, options)
    c0, w0 = time.process_time(), time.perf_counter()
    if isinstance(module, str):
        exe = compat.compile(client, module, [device], options)
    else:
        exe = client.compile_and_load(module, jax_xc.DeviceList((device,)), opts)
    c1, w1 = time.process_time(), time.perf_counter()
    del exe
    return (c1 - c0) * 1e3, (w1 - w0) * 1e3


def own_compile(lib, name: str, layers: int) -> tuple[float, float]:
    """Each library's own ``jit(f).lower(*args).compile()``, timing ``compile()``; caches cleared."""
    np_mod, lax = (fjnp, flax) if lib is ftrans else (jjnp, jlax)
    lib.clear_caches()
    fn, args = program(name, lib, np_mod, lax, layers)
    low = lib.jit(fn).lower(*args)
    c0, w0 = time.process_time(), time.perf_counter()
    low.compile()
    return (time.process_time() - c0) * 1e3, (time.perf_counter() - w0) * 1e3


def measure(name: str, layers: int, rounds: int) -> dict:
    f_low, j_low = lowered_pair(name, layers)
    describe(name, f_low, j_low)
    device = jax.devices("cpu")[0]
    client = device.client
    modules = {"ftrans": f_low._text, "jax": jax_mlir.module_to_bytecode(j_low.compiler_ir())}
    samples: dict[tuple, list] = collections.defaultdict(list)
    for r in range(rounds):
        libs = ("ftrans", "jax") if r % 2 == 0 else ("jax", "ftrans")
        for oname, options in OPTION_SETS.items():
            for lib_name in libs:
                samples[(oname, lib_name)].append(compile_once(client, device, modules[lib_name], options))
        for lib_name in libs:
            samples[("own compile()", lib_name)].append(own_compile(ftrans if lib_name == "ftrans" else jax,
                                                                    name, layers))
    print(f"  compile ms, medians of {rounds} (CPU / wall); ratio ftrans / jax of the CPU medians:")
    out = {}
    for oname in (*OPTION_SETS, "own compile()"):
        f, j = samples[(oname, "ftrans")], samples[(oname, "jax")]
        fc, jc = statistics.median(c for c, _ in f), statistics.median(c for c, _ in j)
        fw, jw = statistics.median(w for _, w in f), statistics.median(w for _, w in j)
        label = f"same client, {oname}" if oname in OPTION_SETS else oname
        print(f"  {label:34s} ftrans {fc:8.1f} / {fw:8.1f}   jax {jc:8.1f} / {jw:8.1f}   {fc / jc:5.2f}x"
              f"   (CPU samples ftrans {' '.join(f'{c:.0f}' for c, _ in f)}; jax {' '.join(f'{c:.0f}' for c, _ in j)})")
        out[oname] = {"ftrans_cpu_ms": fc, "jax_cpu_ms": jc, "ftrans_wall_ms": fw, "jax_wall_ms": jw}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", default="tanh60_grad,mlp_step,rnn_scan_grad,per_example_grads,layers_grad",
                    help="comma-separated subset of " + ", ".join(PROGRAMS))
    ap.add_argument("--layers", type=int, default=100, help="layers of layers_grad (default 100)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (medians are reported)")
    args = ap.parse_args(argv)
    names = [p.strip() for p in args.programs.split(",") if p.strip()]
    for p in names:
        if p not in PROGRAMS:
            ap.error(f"unknown program {p!r}; choose from {', '.join(PROGRAMS)}")
    try:
        jax.config.update("jax_enable_compilation_cache", False)
    except (AttributeError, KeyError, ValueError):
        pass
    print(f"jax {jax.__version__}, ftrans {ftrans.__version__}; ftrans's CPU compile options: "
          f"{dict(OPTION_SETS['ftrans default'])}")
    own_compile(ftrans, "mlp_step", 0)  # first-use costs (backend start, first compile) off the clock
    own_compile(jax, "mlp_step", 0)
    for p in names:
        measure(p, args.layers, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
