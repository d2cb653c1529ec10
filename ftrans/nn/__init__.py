"""``ftrans.nn``: JAX's neural-network functions (JAX's ``nn`` module) and ``nn.initializers``.

Activations, ``softmax``/``log_softmax``/``logsumexp``, ``one_hot`` and
``standardize`` follow JAX's formulas and derivative conventions; see
``docs/nn.md``.
"""

from ftrans.nn import initializers
from ftrans.nn._functions import (
    celu,
    dot_product_attention,
    elu,
    gelu,
    glu,
    hard_sigmoid,
    hard_silu,
    hard_swish,
    hard_tanh,
    identity,
    leaky_relu,
    log1mexp,
    log_sigmoid,
    log_softmax,
    logmeanexp,
    logsumexp,
    mish,
    one_hot,
    relu,
    relu6,
    selu,
    sigmoid,
    silu,
    soft_sign,
    softmax,
    softplus,
    sparse_plus,
    sparse_sigmoid,
    squareplus,
    standardize,
    swish,
    tanh,
)
from ftrans.nn._scaled import get_scaled_dot_general_config, scaled_dot_general, scaled_matmul

__all__ = [
    "celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "identity",
    "initializers", "leaky_relu", "log1mexp", "log_sigmoid", "log_softmax", "logmeanexp", "logsumexp",
    "mish", "one_hot", "relu", "relu6", "selu", "sigmoid", "silu", "soft_sign", "softmax", "softplus",
    "sparse_plus", "sparse_sigmoid", "squareplus", "standardize", "swish", "tanh",
    "get_scaled_dot_general_config", "scaled_dot_general", "scaled_matmul",
]
