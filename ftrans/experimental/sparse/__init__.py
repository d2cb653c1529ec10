"""ftrans's sparse arrays: JAX's ``jax.experimental.sparse``.

``BCOO`` (batched coordinate format) is the main format; ``BCSR``, ``COO``,
``CSR`` and ``CSC`` are also provided.  A sparse array is a pytree of ordinary
arrays, so it passes through ``jit``, ``vmap`` and ``grad``; its operations are
built from ftrans's numpy/lax functions (gathers, scatter-adds, ``dot_general``,
sorts) on the stored buffers.  ``sparsify`` runs ordinary ftrans.numpy code on
sparse arguments.
"""

from ftrans.experimental.sparse import bcoo, bcsr, coo, csr, linalg, transform, util  # noqa: E402  (the submodules, as in JAX)
from ftrans.experimental.sparse._base import JAXSparse
from ftrans.experimental.sparse.api import empty, eye, grad, jacfwd, jacobian, jacrev, todense, value_and_grad
from ftrans.experimental.sparse.bcoo import (
    BCOO,
    bcoo_broadcast_in_dim,
    bcoo_concatenate,
    bcoo_conv_general_dilated,
    bcoo_dot_general,
    bcoo_dot_general_sampled,
    bcoo_dynamic_slice,
    bcoo_eliminate_zeros,
    bcoo_extract,
    bcoo_fromdense,
    bcoo_multiply_dense,
    bcoo_multiply_sparse,
    bcoo_reduce_sum,
    bcoo_reshape,
    bcoo_rev,
    bcoo_slice,
    bcoo_sort_indices,
    bcoo_squeeze,
    bcoo_sum_duplicates,
    bcoo_todense,
    bcoo_transpose,
    bcoo_update_layout,
)
from ftrans.experimental.sparse.bcsr import (
    BCSR,
    bcsr_broadcast_in_dim,
    bcsr_concatenate,
    bcsr_dot_general,
    bcsr_extract,
    bcsr_fromdense,
    bcsr_sum_duplicates,
    bcsr_todense,
)
from ftrans.experimental.sparse.coo import COO, coo_fromdense, coo_matmat, coo_matvec, coo_todense
from ftrans.experimental.sparse.csr import CSC, CSR, csr_fromdense, csr_matmat, csr_matvec, csr_todense
from ftrans.experimental.sparse.random import random_bcoo
from ftrans.experimental.sparse.transform import SparseTracer, sparsify
from ftrans.experimental.sparse.util import (
    CuSparseEfficiencyWarning,
    SparseEfficiencyError,
    SparseEfficiencyWarning,
)

__all__ = [
    "JAXSparse", "BCOO", "BCSR", "COO", "CSR", "CSC", "sparsify", "SparseTracer", "empty", "eye", "todense", "grad",
    "value_and_grad", "jacfwd", "jacrev", "jacobian", "random_bcoo", "util", "bcoo", "bcsr", "coo", "csr", "linalg", "transform",
    "SparseEfficiencyError", "SparseEfficiencyWarning", "CuSparseEfficiencyWarning",
    "bcoo_broadcast_in_dim", "bcoo_concatenate", "bcoo_conv_general_dilated", "bcoo_dot_general", "bcoo_dot_general_sampled", "bcoo_dynamic_slice",
    "bcoo_eliminate_zeros", "bcoo_extract", "bcoo_fromdense", "bcoo_multiply_dense", "bcoo_multiply_sparse",
    "bcoo_reduce_sum", "bcoo_reshape", "bcoo_rev", "bcoo_slice", "bcoo_sort_indices", "bcoo_squeeze",
    "bcoo_sum_duplicates", "bcoo_todense", "bcoo_transpose", "bcoo_update_layout",
    "bcsr_broadcast_in_dim", "bcsr_concatenate", "bcsr_dot_general", "bcsr_extract", "bcsr_fromdense",
    "bcsr_sum_duplicates", "bcsr_todense",
    "coo_fromdense", "coo_matmat", "coo_matvec", "coo_todense", "csr_fromdense", "csr_matmat", "csr_matvec",
    "csr_todense",
]


def __getattr__(name: str):
    # ``test_util`` needs JAX's test harness (absl): imported on first use only.
    if name in ("test_util", "_lowerings"):
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
