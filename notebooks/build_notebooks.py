"""Write the tutorial notebooks from the cell sources below (outputs cleared).

The notebooks are generated so their source stays reviewable as ordinary Python;
edit this file, then run::

    python notebooks/build_notebooks.py

``tests/test_notebooks.py`` executes every notebook in this folder and fails on
any cell that raises.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent


def md(src: str):
    return new_markdown_cell(textwrap.dedent(src).strip())


def code(src: str):
    return new_code_cell(textwrap.dedent(src).strip())


QUICKSTART = [
    md("""
    # ftrans quickstart

    ftrans is JAX's public API (`import ftrans.numpy as jnp` in place of
    `import jax.numpy as jnp`) on top of its own tracer, its own typed IR (the
    *jaxpr*) and its own lowering to StableHLO. This notebook tours the pieces:
    eager arrays, the IR, `jit`, `grad` and `vmap`.
    """),
    code("""
    import ftrans
    import ftrans.numpy as jnp
    """),
    md("""
    ## Eager arrays

    Without any transform, every operation runs at once (on the host through
    NumPy, or as a small compiled program on an accelerator). `ftrans.Array`
    is immutable: updates go through `.at[...]` and return a new array.
    """),
    code("""
    x = jnp.arange(6.0).reshape(2, 3)
    print(x)
    print(jnp.sin(x).sum(axis=0))
    print(x.at[0, 1].set(10.0))
    """),
    md("""
    Dtypes follow JAX: 32-bit by default, and Python scalars are *weakly
    typed*, so they do not widen an array's dtype.
    """),
    code("""
    small = jnp.ones(3, dtype=jnp.int8)
    print(x.dtype, (small + 1).dtype, (small + 1.5).dtype)
    """),
    md("""
    ## The IR

    `make_jaxpr` traces a function into a jaxpr: typed input variables, one
    equation per primitive, and the outputs. Each equation remembers the line
    of your code it came from.
    """),
    code("""
    def predict(x, w):
        h = x @ w + 1.0
        return jnp.tanh(h).sum()

    w = jnp.arange(6.0).reshape(3, 2) / 10
    closed = ftrans.make_jaxpr(predict)(x, w)
    print(closed)
    """),
    code("""
    print(closed.pretty_print(source_info=True))
    """),
    md("""
    In a notebook, a jaxpr left as the last expression of a cell is shown as
    HTML: one row per equation with its source line, types in colour, and the
    bodies of nested programs (loops, branches, `jit` calls) folded away in
    collapsible sections.
    """),
    code("""
    closed
    """),
    md("""
    ## `jit`: compile with XLA

    `jit` traces once per argument signature, lowers the jaxpr to StableHLO
    and compiles it. Later calls with the same shapes and dtypes reuse the
    executable.
    """),
    code("""
    fast = ftrans.jit(predict)
    print(fast(x, w), predict(x, w))
    print(fast.lower(x, w).as_text()[:700])
    """),
    md("""
    ## `grad`: reverse-mode derivatives

    `grad` differentiates with respect to the first argument by default
    (`argnums` picks others). Because it is a transform of the IR, you can
    look at the program it runs: the forward pass followed by the backward
    pass.
    """),
    code("""
    dw = ftrans.grad(predict, argnums=1)(x, w)
    print(dw)
    ftrans.make_jaxpr(ftrans.grad(predict, argnums=1))(x, w)
    """),
    md("""
    ## `vmap`: automatic batching

    `vmap` turns a function of one example into a function of a batch.
    `in_axes` says which arguments carry the batch; `None` means shared.
    Composed with `grad`, it gives per-example gradients; wrapped in `jit`,
    the whole thing compiles to one program.
    """),
    code("""
    def loss(w, x, y):
        return (jnp.tanh(x @ w).sum() - y) ** 2

    xs = jnp.arange(12.0).reshape(4, 3) / 10
    ys = jnp.array([0.0, 1.0, 0.5, -1.0])
    per_example = ftrans.jit(ftrans.vmap(ftrans.grad(loss), in_axes=(None, 0, 0)))
    print(per_example(w, xs, ys).shape)   # one gradient of w per example
    """),
    code("""
    ftrans.make_jaxpr(ftrans.vmap(loss, in_axes=(None, 0, 0)))(w, xs, ys)
    """),
    md("""
    ## Next

    * `autodiff.ipynb`: forward and reverse mode, the backward program, custom
      derivatives, checkpointing.
    * `control_flow.ipynb`: `cond`, `while_loop`, `scan` and their IR.
    * The docs site (`mkdocs serve`): the API reference and how-tos.
    """),
]


AUTODIFF = [
    md("""
    # Automatic differentiation

    ftrans differentiates its own IR. Forward mode (`jvp`) carries a tangent
    alongside every value. Reverse mode is forward mode *linearized* into a
    linear program, then *transposed*. Every step produces a jaxpr you can
    print.
    """),
    code("""
    import ftrans
    import ftrans.numpy as jnp


    def f(x):
        y = jnp.sin(x)
        return jnp.sum(y * x)

    x = jnp.arange(3.0)
    """),
    md("""
    ## Forward mode: `jvp`

    `jvp(f, primals, tangents)` gives the value and the directional
    derivative along the tangent.
    """),
    code("""
    y, dy = ftrans.jvp(f, (x,), (jnp.ones(3),))
    print(y, dy)
    """),
    md("""
    ## `linearize`: the linear part on its own

    `linearize` runs the JVP with the primal values computed now and the
    tangent computation staged into a linear program. Its constants are the
    *residuals*: primal values (here `cos x`, `x`, `sin x`) that the tangent
    computation reads.
    """),
    code("""
    y, f_lin = ftrans.linearize(f, x)
    print(f_lin(jnp.ones(3)))
    print(ftrans.make_jaxpr(f_lin)(x))
    """),
    md("""
    ## Reverse mode: `vjp` and `grad`

    The pullback of `vjp` is the transpose of that linear program: it maps an
    output cotangent back to the inputs. It reads the same residuals.
    """),
    code("""
    y, pullback = ftrans.vjp(f, x)
    print(pullback(1.0))
    print(ftrans.make_jaxpr(pullback)(1.0))
    """),
    md("""
    `grad` stages both halves into one program: forward pass, then backward
    pass. This is exactly what runs (and what `jit(grad(f))` compiles).
    """),
    code("""
    print(ftrans.make_jaxpr(ftrans.grad(f))(x))
    """),
    code("""
    print(ftrans.value_and_grad(f)(x))
    print(ftrans.jacfwd(jnp.sin)(x))
    print(ftrans.hessian(f)(x))
    """),
    md("""
    `ftrans.test_util.check_grads` compares derivatives of any order, in both
    modes, against finite differences.
    """),
    code("""
    from ftrans.test_util import check_grads

    check_grads(f, (x,), order=2)
    print("derivatives agree with finite differences")
    """),
    md("""
    ## `custom_jvp`: a better derivative rule

    The textbook `log(1 + exp(x))` overflows in its derivative for large `x`.
    A custom JVP rule states the derivative in a stable form; `grad`, `jit`
    and `vmap` all use it.
    """),
    code("""
    @ftrans.custom_jvp
    def log1pexp(x):
        return jnp.log1p(jnp.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return log1pexp(x), t * (1.0 - 1.0 / (1.0 + jnp.exp(x)))

    def naive(x):
        return jnp.log1p(jnp.exp(x))

    print(ftrans.grad(naive)(100.0), ftrans.grad(log1pexp)(100.0))
    """),
    md("""
    In the IR the function is one `custom_jvp_call` equation: its body is the
    original function, and the rule travels with it.
    """),
    code("""
    ftrans.make_jaxpr(log1pexp)(3.0)
    """),
    md("""
    ## `custom_vjp`: a hand-written backward pass

    `custom_vjp` takes a forward function that also returns residuals, and a
    backward function from residuals and output cotangent to input
    cotangents. Gradient clipping is the classic example.
    """),
    code("""
    @ftrans.custom_vjp
    def clip_gradient(x):
        return x

    def clip_fwd(x):
        return x, None

    def clip_bwd(_, g):
        return (jnp.clip(g, -1.0, 1.0),)

    clip_gradient.defvjp(clip_fwd, clip_bwd)

    print(ftrans.grad(lambda x: 5.0 * clip_gradient(x))(2.0))   # 1.0, not 5.0
    """),
    md("""
    ## `checkpoint`: trade compute for memory

    Reverse mode keeps the residuals of the forward pass until the backward
    pass reads them. `checkpoint` (alias `remat`) saves fewer of them and
    recomputes the rest during the backward pass; a policy says what may be
    saved. `print_saved_residuals` lists what would be kept.
    """),
    code("""
    from ftrans.ad_checkpoint import print_saved_residuals


    def block(w, x):
        return jnp.tanh(jnp.sin(x @ w))

    w = jnp.ones((4, 4)) / 4
    x4 = jnp.arange(4.0)
    print("plain:")
    print_saved_residuals(block, w, x4)
    print("checkpointed, dots saveable:")
    print_saved_residuals(ftrans.checkpoint(block, policy=ftrans.checkpoint_policies.dots_saveable), w, x4)
    """),
    md("""
    In the program `grad` runs, the checkpointed forward computation appears
    twice: once in the forward pass, and again at the start of the backward
    pass, behind an `optimization_barrier` that keeps XLA from merging the
    recomputation back into the forward pass.
    """),
    code("""
    ftrans.make_jaxpr(ftrans.grad(lambda w, x: ftrans.checkpoint(block)(w, x).sum()))(w, x4)
    """),
]


CONTROL_FLOW = [
    md("""
    # Control flow

    A Python `if` or `while` on a traced value cannot be staged: the value is
    only known when the compiled program runs. `ftrans.lax` has JAX's
    structured control flow instead: `cond`, `switch`, `while_loop`,
    `fori_loop`, `scan`. Each is a primitive whose parameters hold the bodies
    as jaxprs, and each works under `jit`, `grad` and `vmap`.
    """),
    code("""
    import ftrans
    import ftrans.numpy as jnp
    from ftrans import lax
    from ftrans.errors import ConcretizationTypeError
    """),
    md("""
    The error for Python control flow on a traced value names your line and
    says what to use instead.
    """),
    code("""
    @ftrans.jit
    def relu_wrong(x):
        if x > 0:
            return x
        return 0.0

    try:
        relu_wrong(1.0)
    except ConcretizationTypeError as e:
        print(type(e).__name__, ":", e)
    """),
    md("""
    ## `cond` and `switch`

    `cond(pred, true_fun, false_fun, *operands)` runs one of two functions;
    `switch(index, branches, *operands)` one of many (the index is clamped
    into range, as in JAX). Both functions are traced, so both must return
    the same types. In the IR, `cond` is one equation with its `branches`.
    """),
    code("""
    def f(x):
        return lax.cond(x.sum() > 0, lambda a: jnp.sin(a), lambda a: a * 2.0, x)

    x = jnp.array([1.0, -2.0, 3.0])
    print(f(x), f(-x))
    ftrans.make_jaxpr(f)(x)
    """),
    code("""
    branches = [lambda a: a + 1.0, lambda a: a * a, lambda a: -a]
    print([float(lax.switch(i, branches, 3.0)) for i in (-1, 0, 1, 2, 7)])
    """),
    md("""
    ## `while_loop` and `fori_loop`

    `while_loop(cond_fun, body_fun, init)` carries a state (any pytree of
    arrays) while `cond_fun` holds. `fori_loop(lower, upper, body, init)`
    calls `body(i, carry)`; with static bounds it becomes a `scan`, so it is
    differentiable in reverse mode.
    """),
    code("""
    def collatz_steps(n):
        def body(c):
            n, steps = c
            n = lax.cond(n % 2 == 0, lambda n: n // 2, lambda n: 3 * n + 1, n)
            return n, steps + 1
        return lax.while_loop(lambda c: c[0] != 1, body, (n, 0))[1]

    print(ftrans.jit(collatz_steps)(27))
    """),
    md("""
    The loop is one `while` equation with two nested programs: `cond_jaxpr`
    (the test) and `body_jaxpr` (one step).
    """),
    code("""
    def double_until(x):
        return lax.while_loop(lambda x: x.sum() < 100.0, lambda x: x * 2.0, x)

    print(double_until(jnp.ones(3)))
    ftrans.make_jaxpr(double_until)(jnp.ones(3))
    """),
    code("""
    def power_sum(x, n=5):
        return lax.fori_loop(0, n, lambda i, acc: acc + x ** i, 0.0)

    print(power_sum(2.0), ftrans.grad(power_sum)(2.0))   # 1+2+4+8+16, and 0+1+4+12+32
    """),
    md("""
    ## `scan`

    `scan(f, init, xs)` applies `f(carry, x) -> (carry, y)` along the leading
    axis of `xs` and stacks the `y`s: the loop of a recurrent network, a
    cumulative sum, an ODE integrator. Its body is one nested jaxpr.
    """),
    code("""
    def rnn(w, xs):
        def step(h, x):
            h = jnp.tanh(w @ h + x)
            return h, h.sum()
        h, ys = lax.scan(step, jnp.zeros(2), xs)
        return ys.sum()

    w = jnp.eye(2) * 0.5
    xs = jnp.ones((5, 2))
    print(rnn(w, xs))
    ftrans.make_jaxpr(rnn)(w, xs)
    """),
    md("""
    ### Reverse mode through a loop

    `grad` of a `scan` runs the loop forward, saving what the backward pass
    needs, and then a second `scan` in reverse. Both loops appear in the IR.
    """),
    code("""
    print(ftrans.jit(ftrans.grad(rnn))(w, xs))
    ftrans.make_jaxpr(ftrans.grad(rnn))(w, xs)
    """),
    md("""
    Compiled, loops become StableHLO `while` operations and branches `case`
    operations:
    """),
    code("""
    text = ftrans.jit(f).lower(x).as_text()
    print([line.strip()[:60] for line in text.splitlines() if "stablehlo.case" in line])
    """),
    md("""
    ## Batching control flow with `vmap`

    Under `vmap`, a predicate that differs per example turns `cond` into a
    `select` between both branches (both are computed), and a batched
    `while_loop` runs until every example is done, freezing the ones that
    finished.
    """),
    code("""
    print(ftrans.vmap(f)(jnp.array([[1.0, 2.0, 3.0], [-1.0, -2.0, -3.0]])))
    ftrans.make_jaxpr(ftrans.vmap(f))(jnp.ones((2, 3)))
    """),
    code("""
    print(ftrans.vmap(collatz_steps)(jnp.array([1, 6, 27, 97])))
    """),
]


NOTEBOOKS = {
    "quickstart.ipynb": QUICKSTART,
    "autodiff.ipynb": AUTODIFF,
    "control_flow.ipynb": CONTROL_FLOW,
}


def build(name: str, cells: list) -> nbformat.NotebookNode:
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for i, cell in enumerate(nb.cells):  # stable ids keep diffs small
        cell["id"] = f"{Path(name).stem}-{i:02d}"
    nbformat.validate(nb)
    return nb


def main() -> None:
    for name, cells in NOTEBOOKS.items():
        nbformat.write(build(name, cells), HERE / name)
        print(f"wrote notebooks/{name} ({len(cells)} cells)")


if __name__ == "__main__":
    main()
