"""``jax.example_libraries.stax`` for ftrans: a small neural-network library of ``(init_fun, apply_fun)`` pairs.

A layer is a pair ``init_fun(rng, input_shape) -> (output_shape, params)``
and ``apply_fun(params, inputs, **kwargs) -> outputs``; combinators
(``serial``, ``parallel``, ``shape_dependent``) build layers from layers. Keys
are split exactly as in JAX's stax, and the default initializers are JAX's
(``glorot_normal`` weights, ``normal`` biases), so the same key gives the same
parameters. Convolutions (``GeneralConv``/``Conv``, ``GeneralConvTranspose``/
``ConvTranspose``/``Conv1DTranspose``) use ``lax.conv_general_dilated``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.nn import elu, gelu, leaky_relu, log_softmax, relu, selu, sigmoid, softmax, softplus, standardize
from ftrans.nn.initializers import glorot_normal, normal, ones, zeros

__all__ = [
    "AvgPool", "BatchNorm", "Conv", "Conv1DTranspose", "ConvTranspose", "GeneralConv", "GeneralConvTranspose", "Dense", "Dropout", "Elu", "Exp", "FanInConcat", "FanInSum", "FanOut", "Flatten",
    "Gelu", "Identity", "LeakyRelu", "LogSoftmax", "MaxPool", "Relu", "Selu", "Sigmoid", "Softmax",
    "Softplus", "SumPool", "Tanh", "elementwise", "glorot", "logsoftmax", "parallel", "randn", "serial",
    "shape_dependent",
]

glorot = glorot_normal
randn = normal
logsoftmax = log_softmax

Layer = tuple[Callable, Callable]


def _random() -> Any:
    from ftrans import random

    return random


def Dense(out_dim: int, W_init: Callable = glorot_normal(), b_init: Callable = normal()) -> Layer:  # noqa: N802,N803
    """A fully connected layer: ``inputs @ W + b``."""

    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        output_shape = tuple(input_shape[:-1]) + (out_dim,)
        k1, k2 = _random().split(rng)
        W, b = W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,))  # noqa: N806
        return output_shape, (W, b)

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        W, b = params  # noqa: N806
        return jnp.dot(inputs, W) + b

    return init_fun, apply_fun


def _conv_layer(dimension_numbers: Sequence[str], out_chan: int, filter_shape: Sequence[int], strides: Any,
                padding: Any, W_init: Any, b_init: Callable, transpose: bool) -> Layer:  # noqa: N803
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    one = (1,) * len(filter_shape)
    strides = strides or one
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))  # noqa: N806

    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        spatial = iter(filter_shape)
        kernel_shape = [out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I" else next(spatial)
                        for c in rhs_spec]
        shape_fn = lax.conv_transpose_shape_tuple if transpose else lax.conv_general_shape_tuple
        output_shape = shape_fn(input_shape, kernel_shape, strides, padding, dimension_numbers)
        bias_shape = [out_chan if c == "C" else 1 for c in out_spec]
        k1, k2 = _random().split(rng)
        return output_shape, (W_init(k1, kernel_shape), b_init(k2, bias_shape))

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        W, b = params  # noqa: N806
        if transpose:
            return lax.conv_transpose(inputs, W, strides, padding, dimension_numbers=dimension_numbers) + b
        return lax.conv_general_dilated(inputs, W, strides, padding, one, one,
                                        dimension_numbers=dimension_numbers) + b

    return init_fun, apply_fun


def GeneralConv(dimension_numbers: Sequence[str], out_chan: int, filter_shape: Sequence[int],  # noqa: N802
                strides: Sequence[int] | None = None, padding: Any = "VALID", W_init: Any = None,  # noqa: N803
                b_init: Callable = normal(1e-6)) -> Layer:
    """A convolution layer with the given layouts (``dimension_numbers`` as three strings)."""
    return _conv_layer(dimension_numbers, out_chan, filter_shape, strides, padding, W_init, b_init, False)


def GeneralConvTranspose(dimension_numbers: Sequence[str], out_chan: int, filter_shape: Sequence[int],  # noqa: N802
                         strides: Sequence[int] | None = None, padding: Any = "VALID", W_init: Any = None,  # noqa: N803
                         b_init: Callable = normal(1e-6)) -> Layer:
    """A transposed-convolution layer (``lax.conv_transpose``) with the given layouts."""
    return _conv_layer(dimension_numbers, out_chan, filter_shape, strides, padding, W_init, b_init, True)


def Conv(out_chan: int, filter_shape: Sequence[int], strides: Sequence[int] | None = None,  # noqa: N802
         padding: Any = "VALID", W_init: Any = None, b_init: Callable = normal(1e-6)) -> Layer:  # noqa: N803
    """A 2-D convolution layer in the ``NHWC``/``HWIO`` layout (JAX's ``stax.Conv``)."""
    return GeneralConv(("NHWC", "HWIO", "NHWC"), out_chan, filter_shape, strides, padding, W_init, b_init)


def ConvTranspose(out_chan: int, filter_shape: Sequence[int], strides: Sequence[int] | None = None,  # noqa: N802
                  padding: Any = "VALID", W_init: Any = None, b_init: Callable = normal(1e-6)) -> Layer:  # noqa: N803
    """A 2-D transposed-convolution layer in the ``NHWC``/``HWIO`` layout."""
    return GeneralConvTranspose(("NHWC", "HWIO", "NHWC"), out_chan, filter_shape, strides, padding, W_init, b_init)


def Conv1DTranspose(out_chan: int, filter_shape: Sequence[int], strides: Sequence[int] | None = None,  # noqa: N802
                    padding: Any = "VALID", W_init: Any = None, b_init: Callable = normal(1e-6)) -> Layer:  # noqa: N803
    """A 1-D transposed-convolution layer in the ``NHC``/``HIO`` layout."""
    return GeneralConvTranspose(("NHC", "HIO", "NHC"), out_chan, filter_shape, strides, padding, W_init, b_init)


def BatchNorm(axis: Any = (0, 1, 2), epsilon: float = 1e-5, center: bool = True, scale: bool = True,  # noqa: N802
              beta_init: Callable = zeros, gamma_init: Callable = ones) -> Layer:
    """Normalise over ``axis`` (batch statistics), then scale by ``gamma`` and shift by ``beta``."""
    axis = (axis,) if jnp.isscalar(axis) else tuple(axis)

    def _beta_init(rng: Any, shape: tuple) -> Any:
        return beta_init(rng, shape) if center else ()

    def _gamma_init(rng: Any, shape: tuple) -> Any:
        return gamma_init(rng, shape) if scale else ()

    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        k1, k2 = _random().split(rng)
        beta, gamma = _beta_init(k1, shape), _gamma_init(k2, shape)
        return input_shape, (beta, gamma)

    def apply_fun(params: Any, x: Any, **kwargs: Any) -> Any:
        beta, gamma = params
        ed = tuple(None if i in axis else slice(None) for i in range(jnp.ndim(x)))
        z = standardize(x, axis, epsilon=epsilon)
        if center and scale:
            return gamma[ed] * z + beta[ed]
        if center:
            return z + beta[ed]
        if scale:
            return gamma[ed] * z
        return z

    return init_fun, apply_fun


def elementwise(fun: Callable, **fun_kwargs: Any) -> Layer:
    """A parameterless layer applying ``fun(inputs, **fun_kwargs)``."""

    def init_fun(rng: Any, input_shape: Any) -> tuple:
        return input_shape, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return fun(inputs, **fun_kwargs)

    return init_fun, apply_fun


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


def _window_shape(in_shape: Sequence[int], window: Sequence[int], strides: Sequence[int],
                  pads: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    return tuple((d + lo + hi - w) // s + 1 for d, w, s, (lo, hi) in zip(in_shape, window, strides, pads))


def _pooling_layer(reducer: Callable, init_val: float, rescaler: Callable | None = None) -> Callable:
    def PoolingLayer(window_shape: tuple, strides: tuple | None = None, padding: str = "VALID",  # noqa: N802
                     spec: str | None = None) -> Layer:
        """A pooling layer over the spatial axes (all but N and C, by default the first and last)."""
        strides = strides or (1,) * len(window_shape)
        rescale = rescaler(window_shape, strides, padding) if rescaler else None
        if spec is None:
            non_spatial_axes = 0, len(window_shape) + 1
        else:
            non_spatial_axes = spec.index("N"), spec.index("C")
        for i in sorted(non_spatial_axes):
            window_shape = window_shape[:i] + (1,) + window_shape[i:]
            strides = strides[:i] + (1,) + strides[i:]

        def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
            pads = lax.padtype_to_pads(input_shape, window_shape, strides, padding)
            return _window_shape(input_shape, window_shape, strides, pads), ()

        def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
            out = lax.reduce_window(inputs, init_val, reducer, window_shape, strides, padding)
            return rescale(out, inputs, spec) if rescale else out

        return init_fun, apply_fun

    return PoolingLayer


def _normalize_by_window_size(dims: tuple, strides: tuple, padding: str) -> Callable:
    def rescale(outputs: Any, inputs: Any, spec: str | None) -> Any:
        if spec is None:
            non_spatial_axes = 0, inputs.ndim - 1
        else:
            non_spatial_axes = spec.index("N"), spec.index("C")
        spatial_shape = tuple(inputs.shape[i] for i in range(inputs.ndim) if i not in non_spatial_axes)
        one = jnp.ones(spatial_shape, dtype=inputs.dtype)
        window_sizes = lax.reduce_window(one, 0.0, lax.add, dims, strides, padding)
        for i in sorted(non_spatial_axes):
            window_sizes = jnp.expand_dims(window_sizes, i)
        return outputs / window_sizes

    return rescale


MaxPool = _pooling_layer(lax.max, -float("inf"))
SumPool = _pooling_layer(lax.add, 0.0)
AvgPool = _pooling_layer(lax.add, 0.0, _normalize_by_window_size)


def _flatten() -> Layer:
    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        return (input_shape[0], math.prod(input_shape[1:])), ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return jnp.reshape(inputs, (inputs.shape[0], -1))

    return init_fun, apply_fun


Flatten = _flatten()  # flattens all but the leading (batch) dimension


def _identity() -> Layer:
    return (lambda rng, input_shape: (input_shape, ())), (lambda params, inputs, **kwargs: inputs)


Identity = _identity()


def FanOut(num: int) -> Layer:  # noqa: N802
    """``num`` copies of the input, as a list."""

    def init_fun(rng: Any, input_shape: Any) -> tuple:
        return [input_shape] * num, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return [inputs] * num

    return init_fun, apply_fun


def _fan_in_sum() -> Layer:
    def init_fun(rng: Any, input_shape: Any) -> tuple:
        return input_shape[0], ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return sum(inputs)

    return init_fun, apply_fun


FanInSum = _fan_in_sum()  # the sum of a list of inputs


def FanInConcat(axis: int = -1) -> Layer:  # noqa: N802
    """The concatenation of a list of inputs along ``axis``."""

    def init_fun(rng: Any, input_shape: Any) -> tuple:
        ax = axis % len(input_shape[0])
        concat_size = sum(shape[ax] for shape in input_shape)
        first = tuple(input_shape[0])
        return first[:ax] + (concat_size,) + first[ax + 1:], ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return jnp.concatenate(inputs, axis)

    return init_fun, apply_fun


def Dropout(rate: float, mode: str = "train") -> Layer:  # noqa: N802
    """Dropout. As in JAX's stax, ``rate`` is the probability of *keeping* an element (kept ones are
    scaled by ``1 / rate``); ``apply_fun`` needs ``rng=`` in ``"train"`` mode."""

    def init_fun(rng: Any, input_shape: Any) -> tuple:
        return input_shape, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.get("rng", None)
        if rng is None:
            raise ValueError(
                "Dropout layer requires apply_fun to be called with a PRNG key argument. That is, instead of "
                "`apply_fun(params, inputs)`, call it like `apply_fun(params, inputs, rng)` where `rng` is a "
                "PRNG key (e.g. from `ftrans.random.key`)."
            )
        if mode == "train":
            keep = _random().bernoulli(rng, rate, inputs.shape)
            return jnp.where(keep, inputs / rate, 0)
        return inputs

    return init_fun, apply_fun


def serial(*layers: Layer) -> Layer:
    """Compose layers one after another; keys are split one per layer."""
    nlayers = len(layers)
    init_funs, apply_funs = zip(*layers)

    def init_fun(rng: Any, input_shape: Any) -> tuple:
        random = _random()
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, param = init(layer_rng, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.pop("rng", None)
        rngs = _random().split(rng, nlayers) if rng is not None else (None,) * nlayers
        for fun, param, r in zip(apply_funs, params, rngs):
            inputs = fun(param, inputs, rng=r, **kwargs)
        return inputs

    return init_fun, apply_fun


def parallel(*layers: Layer) -> Layer:
    """Apply layer ``k`` to input ``k`` of a sequence of inputs (often between ``FanOut`` and ``FanInSum``)."""
    nlayers = len(layers)
    init_funs, apply_funs = zip(*layers)

    def init_fun(rng: Any, input_shape: Any) -> tuple:
        rngs = _random().split(rng, nlayers)
        return tuple(zip(*[init(r, shape) for init, r, shape in zip(init_funs, rngs, input_shape)]))

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.pop("rng", None)
        rngs = _random().split(rng, nlayers) if rng is not None else (None,) * nlayers
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]

    return init_fun, apply_fun


def shape_dependent(make_layer: Callable[[Any], Layer]) -> Layer:
    """A layer built by ``make_layer(input_shape)`` once the input shape is known."""

    def init_fun(rng: Any, input_shape: Any) -> tuple:
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)

    return init_fun, apply_fun
