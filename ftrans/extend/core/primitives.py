"""``ftrans.extend.core.primitives``: the primitive objects under JAX's names (JAX's
``extend.core.primitives``), for interpreters that dispatch on ``eqn.primitive``.

Everything ``ftrans.lax`` exports as ``*_p`` (one list, kept in ``ftrans/lax/_primitives.py``), plus the
call-like and linear-algebra primitives JAX lists here but not in ``lax``."""

from __future__ import annotations

from ftrans.core.prims.calls import (  # noqa: F401
    call_p,
    closed_call_p,
    custom_jvp_call_p,
    custom_lin_p,
    custom_vjp_call_p,
    name_p,
    remat_p,
)
from ftrans.core.prims.linalg import (  # noqa: F401
    cholesky_p,
    eig_p,
    eigh_p,
    hessenberg_p,
    householder_product_p,
    lu_p,
    qr_p,
    schur_p,
    svd_p,
    triangular_solve_p,
    tridiagonal_p,
    tridiagonal_solve_p,
)
from ftrans.lax._primitives import *  # noqa: F403
from ftrans.lax._primitives import __all__ as _lax_names

__all__ = sorted([*_lax_names, "call_p", "cholesky_p", "closed_call_p", "custom_jvp_call_p", "custom_lin_p", "custom_vjp_call_p", "eig_p",
                  "eigh_p", "hessenberg_p", "householder_product_p", "lu_p", "name_p", "qr_p", "remat_p", "schur_p",
                  "svd_p", "triangular_solve_p", "tridiagonal_p", "tridiagonal_solve_p"])
