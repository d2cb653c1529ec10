"""ftrans.experimental.rnn (the packed-weight LSTM) against jax.experimental.rnn."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.experimental import rnn as jrnn

import ftrans
from ftrans.experimental import rnn


def test_lstm_ref_values_and_grads_match_jax():
    # One bidirectional layer runs both directions (the reverse one over each row's real steps only).
    bidirectional = True
    b, t, i, h, layers = 3, 4, 2, 3, 1
    d = 2 if bidirectional else 1
    rng = np.random.default_rng(0)
    x = rng.normal(size=(b, t, i)).astype(np.float32)
    h0, c0 = (rng.normal(size=(d * layers, b, h)).astype(np.float32) for _ in range(2))
    lengths = np.array([0, 2, 4], np.int32)  # an empty row, a padded one, a full one
    assert rnn.get_num_params_in_lstm(i, h, layers, bidirectional) == jrnn.get_num_params_in_lstm(
        i, h, layers, bidirectional)
    w = np.asarray(jrnn.init_lstm_weight(jax.random.PRNGKey(1), i, h, layers, bidirectional))
    np.testing.assert_allclose(rnn.init_lstm_weight(ftrans.random.PRNGKey(1), i, h, layers, bidirectional), w)

    def build(mod, vg):
        def f(wv):
            parts = mod.unpack_lstm_weights(wv, i, h, layers, bidirectional)
            y, hn, cn = mod.lstm_ref(x, h0, c0, *parts, lengths, i, h, layers, 0.0, bidirectional)
            return y.sum(), (y, hn, cn)
        return vg(f, has_aux=True)

    (_, want), gwant = jax.jit(build(jrnn, jax.value_and_grad))(w)
    (_, got), ggot = build(rnn, ftrans.value_and_grad)(w)
    for g, r in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ggot), np.asarray(gwant), rtol=1e-5, atol=1e-6)
    y = rnn.lstm(x, h0, c0, w, lengths, i, h, layers, 0.0, bidirectional)[0]
    np.testing.assert_allclose(np.asarray(y), np.asarray(want[0]), rtol=1e-5, atol=1e-6)
    # swap_lstm_gates exchanges the last two gate blocks of every packed matrix and bias (as JAX's does).
    swapped = np.asarray(rnn.swap_lstm_gates(w, i, h, layers, bidirectional))
    mats = [(4 * h, i), (4 * h, h)] * 2 + [(4 * h,)] * 4
    at, want_swap = 0, []
    for shape in mats:
        m = w[at:at + int(np.prod(shape))].reshape(shape)
        at += m.size
        g = np.split(m, 4, axis=0)
        want_swap.append(np.concatenate([g[0], g[1], g[3], g[2]]).ravel())
    np.testing.assert_array_equal(swapped, np.concatenate(want_swap))


def test_lstm_ref_rejects_what_jax_rejects():
    x, s = np.zeros((1, 2, 1), np.float32), np.zeros((1, 1, 1), np.float32)
    parts = rnn.unpack_lstm_weights(rnn.init_lstm_weight(ftrans.random.PRNGKey(0), 1, 1, 1, False), 1, 1, 1, False)
    with pytest.raises(NotImplementedError, match="Dropout not supported"):
        rnn.lstm_ref(x, s, s, *parts, np.ones(1, np.int32), 1, 1, 1, 0.5, False)
