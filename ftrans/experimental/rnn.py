"""JAX's ``jax.experimental.rnn``: a multi-layer (optionally bidirectional) LSTM over one packed weight vector.

Inputs are batch-first: ``x`` is ``(batch, max_seq_len, input_size)``, the initial states ``h_0`` and
``c_0`` are ``(num_directions * num_layers, batch, hidden_size)``, and ``seq_lengths`` (int32, one per
batch row) says how many steps of each row are real; outputs past a row's length are zero.

The weights use cuDNN's packing, as JAX's: a bidirectional LSTM has ``2 * num_layers`` pseudo-layers
(forward 0, reverse 0, forward 1, ...).  The vector holds, for each pseudo-layer in order, ``W_ih`` then
``W_hh``, and after all of those, for each pseudo-layer, ``b_ih`` then ``b_hh``.  Each is the four gates
(input, forget, cell, output) stacked on the leading axis.

JAX runs :func:`lstm` through cuDNN (GPU only); ftrans evaluates it everywhere with the reference
recurrence of :func:`lstm_ref` (a ``scan`` per pseudo-layer), which gives the same values.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import ftrans.numpy as jnp
from ftrans import lax, nn
from ftrans import random as _random
from ftrans.errors import FtransValueError
from ftrans.transforms.batching import vmap
from ftrans.transforms.jit import jit

__all__ = ["get_num_params_in_lstm", "init_lstm_weight", "lstm", "lstm_ref", "swap_lstm_gates",
           "unpack_lstm_weights"]


def _shapes(input_size: int, hidden_size: int, num_layers: int, bidirectional: bool) -> list[tuple]:
    """The shapes in the packed vector, in order: (W_ih, W_hh) per pseudo-layer, then (b_ih, b_hh) per one."""
    dirs = 2 if bidirectional else 1
    n = num_layers * dirs
    mats = []
    for p in range(n):
        fan_in = input_size if p < dirs else dirs * hidden_size  # the first layer reads x, later ones the layer below
        mats += [(4 * hidden_size, fan_in), (4 * hidden_size, hidden_size)]
    return mats + [(4 * hidden_size,)] * (2 * n)


def get_num_params_in_lstm(input_size: int, hidden_size: int, num_layers: int, bidirectional: bool) -> int:
    """The length of the packed weight vector of an LSTM of this configuration.

    Args:
        input_size: the features per step of ``x``.
        hidden_size: the features of the hidden and cell states.
        num_layers: the number of stacked layers.
        bidirectional: whether each layer also runs over the reversed sequence.

    Returns:
        The number of parameters.
    """
    return sum(math.prod(s) for s in _shapes(input_size, hidden_size, num_layers, bidirectional))


def init_lstm_weight(rng: Any, input_size: int, hidden_size: int, num_layers: int, bidirectional: bool) -> Any:
    """A packed weight vector drawn uniformly from ``[-k, k)`` with ``k = 1 / sqrt(hidden_size)``.

    Args:
        rng: a PRNG key.
        input_size: the features per step of ``x``.
        hidden_size: the features of the hidden and cell states.
        num_layers: the number of stacked layers.
        bidirectional: whether each layer also runs over the reversed sequence.

    Returns:
        A float32 vector of ``get_num_params_in_lstm(...)`` weights.
    """
    k = float(np.sqrt(1.0 / hidden_size))
    n = get_num_params_in_lstm(input_size, hidden_size, num_layers, bidirectional)
    return _random.uniform(rng, shape=(n,), dtype=jnp.float32, minval=-k, maxval=k)


def _pieces(weights: Any, shapes: list[tuple]) -> list:
    out, at = [], 0
    for s in shapes:
        size = math.prod(s)
        out.append(weights[at:at + size].reshape(s))
        at += size
    return out


def unpack_lstm_weights(weights: Any, input_size: int, hidden_size: int, num_layers: int,
                        bidirectional: bool) -> tuple[dict, dict, dict, dict]:
    """The packed vector split into per-pseudo-layer matrices and biases.

    Args:
        weights: the packed weight vector.
        input_size: the features per step of ``x``.
        hidden_size: the features of the hidden and cell states.
        num_layers: the number of stacked layers.
        bidirectional: whether each layer also runs over the reversed sequence.

    Returns:
        ``(W_ih, W_hh, b_ih, b_hh)``, each a dict from pseudo-layer index to its array (the four gates
        stacked on the leading axis).
    """
    shapes = _shapes(input_size, hidden_size, num_layers, bidirectional)
    parts = _pieces(jnp.asarray(weights), shapes)
    n = len(shapes) // 4
    mats, biases = parts[:2 * n], parts[2 * n:]
    return ({p: mats[2 * p] for p in range(n)}, {p: mats[2 * p + 1] for p in range(n)},
            {p: biases[2 * p] for p in range(n)}, {p: biases[2 * p + 1] for p in range(n)})


def swap_lstm_gates(weights: Any, input_size: int, hidden_size: int, num_layers: int, bidirectional: bool) -> Any:
    """The packed vector with the third and fourth gate blocks of every matrix and bias exchanged.

    Args:
        weights: the packed weight vector.
        input_size: the features per step of ``x``.
        hidden_size: the features of the hidden and cell states.
        num_layers: the number of stacked layers.
        bidirectional: whether each layer also runs over the reversed sequence.

    Returns:
        The reordered vector.
    """
    # JAX walks the shape list four entries at a time per (layer, direction); the same entries, in order.
    parts = _pieces(jnp.asarray(weights), _shapes(input_size, hidden_size, num_layers, bidirectional))
    flat = []
    for m in parts:
        g = jnp.split(m, 4, axis=0)
        flat.append(jnp.concatenate([g[0], g[1], g[3], g[2]], axis=0).ravel())
    return jnp.concatenate(flat)


def _cell(carry: tuple, x: Any, w_ih: Any, w_hh: Any, b_ih: Any, b_hh: Any) -> tuple:
    h, c = carry
    z = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh  # (batch, 4 * hidden): the gates side by side
    i, f, g, o = jnp.split(z, 4, axis=-1)
    c = nn.sigmoid(f) * c + nn.sigmoid(i) * jnp.tanh(g)
    h = nn.sigmoid(o) * jnp.tanh(c)
    return (h, c), (h, c)


def _run(seq: Any, h0: Any, c0: Any, w: tuple, seq_lengths: Any) -> tuple:
    """One pseudo-layer over the time-major ``seq``: its outputs (zero past each row's length) and the
    state at each row's last real step."""
    _, (hs, cs) = lax.scan(lambda carry, x: _cell(carry, x, *w), (h0, c0), seq)
    rows = jnp.arange(seq.shape[1])
    last = seq_lengths - 1
    real = jnp.arange(seq.shape[0], dtype=jnp.int32)[:, None] < seq_lengths[None, :]
    return jnp.where(real[..., None], hs, 0), hs[last, rows], cs[last, rows]


def _reverse_each(seq: Any, seq_lengths: Any) -> Any:
    """Each row's first ``seq_lengths`` steps reversed in place (the padding moves to the front and back)."""
    shift = seq.shape[0] - seq_lengths
    return vmap(lambda s, k: jnp.roll(s, k, axis=0), in_axes=(1, 0), out_axes=1)(seq, shift)[::-1]


def _lstm_ref(x: Any, h_0: Any, c_0: Any, W_ih: dict, W_hh: dict, b_ih: dict, b_hh: dict,  # noqa: N803
              seq_lengths: Any, input_size: int, hidden_size: int, num_layers: int, dropout: float,
              bidirectional: bool) -> tuple:
    if jnp.asarray(seq_lengths).dtype != np.dtype("int32"):
        raise NotImplementedError("`seq_lengths` can only be int32.")
    if dropout != 0.0:
        raise NotImplementedError("Dropout not supported in LSTM reference: the cuDNN dropout mask cannot be "
                                  "reproduced; pass dropout=0.0")
    dirs = 2 if bidirectional else 1
    seq = jnp.swapaxes(x, 0, 1)  # time-major
    h_n, c_n = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            p = layer * dirs + d
            w = (W_ih[p], W_hh[p], b_ih[p], b_hh[p])
            inp = seq if d == 0 else _reverse_each(seq, seq_lengths)
            y, h, c = _run(inp, h_0[p], c_0[p], w, seq_lengths)
            outs.append(y if d == 0 else _reverse_each(y, seq_lengths))
            h_n.append(h)
            c_n.append(c)
        seq = outs[0] if dirs == 1 else jnp.concatenate(outs, axis=-1)
    return jnp.swapaxes(seq, 0, 1), jnp.stack(h_n), jnp.stack(c_n)


lstm_ref = jit(_lstm_ref, static_argnums=(8, 9, 10, 11, 12))
lstm_ref.__doc__ = """The LSTM computed step by step (JAX's reference for its cuDNN kernel).

Args:
    x: the inputs, ``(batch, max_seq_len, input_size)``.
    h_0: the initial hidden states, ``(num_directions * num_layers, batch, hidden_size)``.
    c_0: the initial cell states, of the shape of ``h_0``.
    W_ih: per pseudo-layer, the input-to-hidden matrix ``(4 * hidden_size, fan_in)``.
    W_hh: per pseudo-layer, the hidden-to-hidden matrix ``(4 * hidden_size, hidden_size)``.
    b_ih: per pseudo-layer, the input bias ``(4 * hidden_size,)``.
    b_hh: per pseudo-layer, the hidden bias ``(4 * hidden_size,)``.
    seq_lengths: int32 ``(batch,)``, the real steps of each row.
    input_size: the features per step of ``x``.
    hidden_size: the features of the hidden and cell states.
    num_layers: the number of stacked layers.
    dropout: must be 0.0.
    bidirectional: whether each layer also runs over the reversed sequence.

Returns:
    ``(y, h_n, c_n)``: the outputs ``(batch, max_seq_len, num_directions * hidden_size)`` (zero past each
    row's length) and the final hidden and cell states.
"""


def lstm(x: Any, h_0: Any, c_0: Any, weights: Any, seq_lengths: Any, input_size: int, hidden_size: int,
         num_layers: int, dropout: float, bidirectional: bool, precision: Any = None) -> tuple:
    """The LSTM of a packed weight vector (JAX's cuDNN ``lstm``; here the reference recurrence).

    Args:
        x: the inputs, ``(batch, max_seq_len, input_size)``.
        h_0: the initial hidden states, ``(num_directions * num_layers, batch, hidden_size)``.
        c_0: the initial cell states, of the shape of ``h_0``.
        weights: the packed weight vector (see :func:`get_num_params_in_lstm`).
        seq_lengths: int32 ``(batch,)``, the real steps of each row.
        input_size: the features per step of ``x``.
        hidden_size: the features of the hidden and cell states.
        num_layers: the number of stacked layers.
        dropout: must be 0.0.
        bidirectional: whether each layer also runs over the reversed sequence.
        precision: accepted for JAX's signature; the matrix products use the default precision.

    Returns:
        ``(y, h_n, c_n)`` as :func:`lstm_ref` returns them.
    """
    del precision
    n = get_num_params_in_lstm(input_size, hidden_size, num_layers, bidirectional)
    if tuple(jnp.shape(weights)) != (n,):
        raise FtransValueError(f"lstm: weights must be a vector of {n} parameters for this configuration, got "
                               f"shape {tuple(jnp.shape(weights))}")
    parts = unpack_lstm_weights(weights, input_size, hidden_size, num_layers, bidirectional)
    return lstm_ref(x, h_0, c_0, *parts, seq_lengths, input_size, hidden_size, num_layers, dropout, bidirectional)
