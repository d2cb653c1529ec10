"""JVP of ``call_exported``: the primitive has none; ``Exported.call`` differentiates through the exported VJP
(``custom_vjp``), so reaching this rule means no VJP was exported (``serialize(vjp_order=0)``)."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.exported import call_exported_p
from ftrans.errors import FtransValueError
from ftrans.transforms.ad import register_jvp


def no_vjp(exported: Any) -> FtransValueError:
    return FtransValueError(
        f"The exported function '{exported.fun_name}' cannot be differentiated: no VJP is available (it was "
        "deserialized from bytes that held fewer orders of VJP than this derivative needs). Serialize it with "
        "serialize(vjp_order=n) for n orders of reverse-mode differentiation.")


@register_jvp(call_exported_p)
def _call_exported_jvp(primals: list, tangents: list, *, exported: Any) -> Any:
    raise no_vjp(exported)
