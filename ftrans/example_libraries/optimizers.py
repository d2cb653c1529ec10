"""``jax.example_libraries.optimizers`` for ftrans: optimizers as ``(init_fun, update_fun, get_params)`` triples.

An optimizer is written for one array (``init(x0) -> state``,
``update(i, g, state) -> state``, ``get_params(state) -> x``); the
:func:`optimizer` decorator lifts it to pytrees of parameters, keeping the
per-leaf states flattened inside an :class:`OptimizerState`. The update
formulas are JAX's, operation for operation, so trajectories agree with JAX's.

Usage::

    opt_init, opt_update, get_params = optimizers.adam(1e-3)
    opt_state = opt_init(params)

    def step(i, opt_state):
        value, grads = ftrans.value_and_grad(loss)(get_params(opt_state))
        return value, opt_update(i, grads, opt_state)
"""

from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Callable
from typing import Any, NamedTuple

from ftrans import numpy as jnp
from ftrans import tree_util

__all__ = [
    "JoinPoint", "Optimizer", "OptimizerState", "adagrad", "adam", "adamax", "clip_grads", "constant",
    "exponential_decay", "inverse_time_decay", "l2_norm", "make_schedule", "momentum", "nesterov",
    "optimizer", "pack_optimizer_state", "piecewise_constant", "polynomial_decay", "rmsprop",
    "rmsprop_momentum", "sgd", "sm3", "unpack_optimizer_state",
]

# The optimizer state: the flattened per-leaf states, the parameters' tree
# structure and each leaf state's own structure. Only ``packed_state`` holds
# arrays; the structures are static pytree metadata.
OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
tree_util.register_pytree_node(
    OptimizerState,
    lambda xs: ((xs.packed_state,), (xs.tree_def, xs.subtree_defs)),
    lambda data, xs: OptimizerState(xs[0], data[0], data[1]),
)

Params = Any
State = Any
Step = int
Updates = Params
InitFn = Callable[[Params], OptimizerState]
UpdateFn = Callable[[Step, Updates, OptimizerState], OptimizerState]
ParamsFn = Callable[[OptimizerState], Params]
Schedule = Callable[[Step], float]


class Optimizer(NamedTuple):
    init_fn: InitFn
    update_fn: UpdateFn
    params_fn: ParamsFn


def _unzip2(pairs: Any) -> tuple[tuple, tuple]:
    """Pairs to a pair of tuples (tuples, as in JAX, so the state's tree structure matches JAX's)."""
    firsts, seconds = [], []
    for a, b in pairs:
        firsts.append(a)
        seconds.append(b)
    return tuple(firsts), tuple(seconds)


def optimizer(opt_maker: Callable[..., tuple[Callable, Callable, Callable]]) -> Callable[..., Optimizer]:
    """Lift an optimizer written for single arrays to one over pytrees of arrays."""

    @functools.wraps(opt_maker)
    def tree_opt_maker(*args: Any, **kwargs: Any) -> Optimizer:
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree: Params) -> OptimizerState:
            x0_flat, tree = tree_util.tree_flatten(x0_tree)
            states_flat, subtrees = _unzip2(tree_util.tree_flatten(init(x0)) for x0 in x0_flat)
            return OptimizerState(states_flat, tree, subtrees)

        @functools.wraps(update)
        def tree_update(i: Step, grad_tree: Updates, opt_state: OptimizerState) -> OptimizerState:
            states_flat, tree, subtrees = opt_state
            grad_flat, tree2 = tree_util.tree_flatten(grad_tree)
            if tree2 != tree:
                raise TypeError(
                    "optimizer update function was passed a gradient tree that did not match the parameter "
                    f"tree structure with which it was initialized: parameter tree {tree} and grad tree {tree2}."
                )
            states = [tree_util.tree_unflatten(s, f) for s, f in zip(subtrees, states_flat)]
            new_states = [update(i, g, s) for g, s in zip(grad_flat, states)]
            new_flat, subtrees2 = _unzip2(tree_util.tree_flatten(s) for s in new_states)
            for subtree, subtree2 in zip(subtrees, subtrees2):
                if subtree2 != subtree:
                    raise TypeError(
                        "optimizer update function produced an output structure that did not match its input "
                        f"structure: input {subtree} and output {subtree2}."
                    )
            return OptimizerState(new_flat, tree, subtrees)

        @functools.wraps(get_params)
        def tree_get_params(opt_state: OptimizerState) -> Params:
            states_flat, tree, subtrees = opt_state
            states = [tree_util.tree_unflatten(s, f) for s, f in zip(subtrees, states_flat)]
            return tree_util.tree_unflatten(tree, [get_params(s) for s in states])

        return Optimizer(tree_init, tree_update, tree_get_params)

    return tree_opt_maker


# ----------------------------------------------------------------------------
# optimizers


@optimizer
def sgd(step_size: float | Schedule) -> tuple:
    """Stochastic gradient descent: ``x - step_size(i) * g``."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0

    def update(i: Step, g: Any, x: Any) -> Any:
        return x - step_size(i) * g

    def get_params(x: Any) -> Any:
        return x

    return Optimizer(init, update, get_params)


@optimizer
def momentum(step_size: float | Schedule, mass: float) -> tuple:
    """SGD with momentum ``mass``: ``v = mass * v + g; x -= step_size(i) * v``."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0, jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: Any) -> Any:
        x, velocity = state
        velocity = mass * velocity + g
        x = x - step_size(i) * velocity
        return x, velocity

    def get_params(state: Any) -> Any:
        return state[0]

    return init, update, get_params


@optimizer
def nesterov(step_size: float | Schedule, mass: float) -> tuple:
    """SGD with Nesterov momentum ``mass``."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0, jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: Any) -> Any:
        x, velocity = state
        velocity = mass * velocity + g
        x = x - step_size(i) * (mass * velocity + g)
        return x, velocity

    def get_params(state: Any) -> Any:
        return state[0]

    return init, update, get_params


@optimizer
def adagrad(step_size: float | Schedule, momentum: float = 0.9) -> tuple:
    """Adagrad (with momentum on the normalised gradient)."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: Any) -> Any:
        x, g_sq, m = state
        g_sq += jnp.square(g)
        g_sq_inv_sqrt = jnp.where(g_sq > 0, 1.0 / jnp.sqrt(g_sq), 0.0)
        m = (1.0 - momentum) * (g * g_sq_inv_sqrt) + momentum * m
        x = x - step_size(i) * m
        return x, g_sq, m

    def get_params(state: Any) -> Any:
        return state[0]

    return init, update, get_params


@optimizer
def rmsprop(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8) -> tuple:
    """RMSProp: divide by a running root-mean-square of the gradients."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0, jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: Any) -> Any:
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1.0 - gamma)
        x = x - step_size(i) * g / jnp.sqrt(avg_sq_grad + eps)
        return x, avg_sq_grad

    def get_params(state: Any) -> Any:
        return state[0]

    return init, update, get_params


@optimizer
def rmsprop_momentum(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8,
                     momentum: float = 0.9) -> tuple:
    """RMSProp with momentum."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: Any) -> Any:
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1.0 - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq_grad + eps)
        x = x - mom
        return x, avg_sq_grad, mom

    def get_params(state: Any) -> Any:
        return state[0]

    return init, update, get_params


@optimizer
def adam(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> tuple:
    """Adam, with bias-corrected first and second moment estimates."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: Any) -> Any:
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        mhat = m / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))
        vhat = v / (1 - jnp.asarray(b2, m.dtype) ** (i + 1))
        x = x - step_size(i) * mhat / (jnp.sqrt(vhat) + eps)
        return x, m, v

    def get_params(state: Any) -> Any:
        return state[0]

    return init, update, get_params


@optimizer
def adamax(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> tuple:
    """AdaMax: Adam with an exponentially weighted infinity norm in place of the second moment."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: Any) -> Any:
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        x = x - (step_size(i) / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))) * m / (u + eps)
        return x, m, u

    def get_params(state: Any) -> Any:
        return state[0]

    return init, update, get_params


@optimizer
def sm3(step_size: float | Schedule, momentum: float = 0.9) -> tuple:
    """SM3: Adagrad-like, with one accumulator per axis instead of per element."""
    step_size = make_schedule(step_size)

    def splice(seq: Any, i: int, x: list) -> list:
        lst = list(seq)
        lst[i:i + 1] = x
        return lst

    def broadcast_into(ndim: int, x: Any, axis: int) -> Any:
        idx = splice([None] * ndim, axis, [slice(None)])
        return x[tuple(idx)]

    def init(x0: Any) -> Any:
        x_shape = x0.shape
        x0 = jnp.atleast_1d(x0)
        vs = [jnp.zeros(sz, dtype=x0.dtype) for sz in x0.shape]
        return x0, jnp.zeros_like(x0), vs, x_shape

    def update(i: Step, g: Any, state: Any) -> Any:
        x, m, vs, x_shape = state
        vs = [broadcast_into(g.ndim, v, ax) for ax, v in enumerate(vs)]
        accum = functools.reduce(jnp.minimum, vs) + jnp.square(g)
        accum_inv_sqrt = jnp.where(accum > 0, 1.0 / jnp.sqrt(accum), 0)
        m = (1.0 - momentum) * (g * accum_inv_sqrt) + momentum * m
        x = x - step_size(i) * m
        vs = [accum.max(tuple(splice(range(x.ndim), j, []))) for j in range(x.ndim)]
        return x, m, vs, x_shape

    def get_params(state: Any) -> Any:
        x, _, _, x_shape = state
        return x.reshape(x_shape)

    return init, update, get_params


# ----------------------------------------------------------------------------
# learning-rate schedules


def constant(step_size: Any) -> Schedule:
    """The schedule that is always ``step_size``."""

    def schedule(i: Step) -> Any:
        return step_size

    return schedule


def exponential_decay(step_size: Any, decay_steps: Any, decay_rate: Any) -> Schedule:
    """``step_size * decay_rate ** (i / decay_steps)``."""

    def schedule(i: Step) -> Any:
        return step_size * decay_rate ** (i / decay_steps)

    return schedule


def inverse_time_decay(step_size: Any, decay_steps: Any, decay_rate: Any, staircase: bool = False) -> Schedule:
    """``step_size / (1 + decay_rate * i / decay_steps)`` (with ``floor`` of the ratio when ``staircase``)."""
    if staircase:
        def schedule(i: Step) -> Any:
            return step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    else:
        def schedule(i: Step) -> Any:
            return step_size / (1 + decay_rate * i / decay_steps)
    return schedule


def polynomial_decay(step_size: Any, decay_steps: Any, final_step_size: Any, power: float = 1.0) -> Schedule:
    """From ``step_size`` to ``final_step_size`` over ``decay_steps`` steps along ``(1 - t) ** power``."""

    def schedule(step_num: Step) -> Any:
        step_num = jnp.minimum(step_num, decay_steps)
        step_mult = (1 - step_num / decay_steps) ** power
        return step_mult * (step_size - final_step_size) + final_step_size

    return schedule


def piecewise_constant(boundaries: Any, values: Any) -> Schedule:
    """``values[k]`` where ``k`` is the number of ``boundaries`` that ``i`` exceeds."""
    boundaries = jnp.array(boundaries)
    values = jnp.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError("boundaries and values must be sequences")
    if not boundaries.shape[0] == values.shape[0] - 1:
        raise ValueError("boundaries length must be one shorter than values length")

    def schedule(i: Step) -> Any:
        return values[jnp.sum(i > boundaries)]

    return schedule


def make_schedule(scalar_or_schedule: float | Schedule) -> Schedule:
    """A callable as is; a scalar as the constant schedule."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(type(scalar_or_schedule))


# ----------------------------------------------------------------------------
# utilities


def l2_norm(tree: Any) -> Any:
    """The l2 norm of a pytree of arrays (all leaves together)."""
    leaves = tree_util.tree_leaves(tree)
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in leaves))


def clip_grads(grad_tree: Any, max_norm: Any) -> Any:
    """Scale ``grad_tree`` down so its l2 norm is at most ``max_norm``."""
    norm = l2_norm(grad_tree)

    def normalize(g: Any) -> Any:
        return jnp.where(norm < max_norm, g, g * (max_norm / norm))

    return tree_util.tree_map(normalize, grad_tree)


class JoinPoint:
    """Marks the boundary between two joined (nested) pytrees."""

    def __init__(self, subtree: Any):
        self.subtree = subtree

    def __iter__(self) -> Any:
        # Iterating over a JoinPoint gives its one child, so it reads as a one-element container.
        yield self.subtree


def unpack_optimizer_state(opt_state: OptimizerState) -> Any:
    """An ``OptimizerState`` as a pytree of the parameters' structure with ``JoinPoint`` leaves (for saving)."""
    states_flat, tree_def, subtree_defs = opt_state
    subtrees = [tree_util.tree_unflatten(s, f) for s, f in zip(subtree_defs, states_flat)]
    return tree_util.tree_unflatten(tree_def, [JoinPoint(s) for s in subtrees])


def pack_optimizer_state(marked_pytree: Any) -> OptimizerState:
    """The inverse of :func:`unpack_optimizer_state`."""
    sentinels, tree_def = tree_util.tree_flatten(marked_pytree)
    if not all(isinstance(s, JoinPoint) for s in sentinels):
        raise TypeError("pack_optimizer_state: every leaf of the marked pytree must be a JoinPoint")
    states_flat, subtree_defs = _unzip2(tree_util.tree_flatten(s.subtree) for s in sentinels)
    return OptimizerState(states_flat, tree_def, subtree_defs)
