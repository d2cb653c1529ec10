"""JVP of ``ffi_call``: a foreign call is opaque, so differentiating one is JAX's ``ValueError`` saying to give
it a derivative with ``custom_jvp``/``custom_vjp``. (A call whose operands all have zero tangents is never
differentiated: the JVP trace binds it on the primals.)"""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.ffi import ffi_call_p
from ftrans.errors import FtransValueError
from ftrans.transforms.ad import register_jvp


def cannot_differentiate(target_name: str) -> FtransValueError:
    return FtransValueError(f"The FFI call to `{target_name}` cannot be differentiated. You can use "
                            "`ftrans.custom_jvp` or `ftrans.custom_vjp` to add support.")


@register_jvp(ffi_call_p)
def _ffi_call_jvp(primals: list, tangents: list, *, target_name: str, **params: Any) -> Any:
    raise cannot_differentiate(target_name)
