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


# Eager calls run from a program traced once per signature (``core/eager_programs.py``): each activation is
# a few primitives behind argument checks, three to ten times the program's time op by op.
from ftrans.core import eager_programs as _eager_programs  # noqa: E402

_eager_programs.install(globals(), (
    "celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh",
    "leaky_relu", "log_sigmoid", "log_softmax", "logmeanexp", "logsumexp", "mish", "selu", "soft_sign", "softmax",
    "softplus", "sparse_plus", "sparse_sigmoid", "squareplus", "standardize",
))
