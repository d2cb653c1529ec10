"""``ftrans.extend.sharding``: XLA sharding protos to and from their serialized bytes (JAX's
``jax.extend.sharding``), for tools that store or exchange HLO shardings."""

from __future__ import annotations

from typing import Any

from ftrans.errors import FtransTypeError

__all__ = ["get_op_sharding_from_serialized_proto", "get_hlo_sharding_from_serialized_proto",
           "get_serialized_proto_from_hlo_sharding"]


def _check_bytes(name: str, sharding: Any) -> bytes:
    if not isinstance(sharding, (bytes, bytearray)):
        raise FtransTypeError(
            f"ftrans.extend.sharding.{name}: expected the serialized OpSharding proto as bytes, got "
            f"{type(sharding).__name__}")
    return bytes(sharding)


def get_op_sharding_from_serialized_proto(sharding: bytes) -> Any:
    """XLA's ``OpSharding`` proto parsed from its serialized bytes."""
    from ftrans.lowering import compat

    return compat.op_sharding_from_serialized(_check_bytes("get_op_sharding_from_serialized_proto", sharding))


def get_hlo_sharding_from_serialized_proto(sharding: bytes) -> Any:
    """XLA's ``HloSharding`` of a serialized ``OpSharding`` proto."""
    from ftrans.lowering import compat

    return compat.hlo_sharding_from_serialized(_check_bytes("get_hlo_sharding_from_serialized_proto", sharding))


def get_serialized_proto_from_hlo_sharding(sharding: Any) -> bytes:
    """The serialized ``OpSharding`` proto of an XLA ``HloSharding`` (the bytes the two readers above take)."""
    from ftrans.lowering import compat

    if not hasattr(sharding, "to_proto"):
        raise FtransTypeError(
            f"ftrans.extend.sharding.get_serialized_proto_from_hlo_sharding: expected an XLA HloSharding, got "
            f"{type(sharding).__name__}")
    return compat.serialized_hlo_sharding(sharding)
