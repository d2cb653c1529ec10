"""``ftrans.extend.sharding`` against ``jax.extend.sharding``: serialized OpSharding protos round-trip."""

import jax.extend as jex
import pytest
from jax._src.lib import xla_client

import ftrans.extend as fex
from ftrans.errors import FtransTypeError


def _shardings():
    tiled = xla_client.OpSharding()
    tiled.type = xla_client.OpSharding.Type.OTHER
    tiled.tile_assignment_dimensions = [2, 1]
    tiled.tile_assignment_devices = [0, 1]
    return [xla_client.HloSharding.from_proto(xla_client.OpSharding()), xla_client.HloSharding.replicate(),
            xla_client.HloSharding.from_proto(tiled)]


@pytest.mark.parametrize("i", range(3))
def test_round_trip_matches_jax(i):
    hlo = _shardings()[i]
    data = fex.sharding.get_serialized_proto_from_hlo_sharding(hlo)
    assert isinstance(data, bytes)
    assert data == jex.sharding.get_serialized_proto_from_hlo_sharding(hlo)
    back = fex.sharding.get_hlo_sharding_from_serialized_proto(data)
    assert isinstance(back, xla_client.HloSharding)
    assert back == hlo == jex.sharding.get_hlo_sharding_from_serialized_proto(data)
    op = fex.sharding.get_op_sharding_from_serialized_proto(data)
    assert isinstance(op, xla_client.OpSharding)
    assert op.SerializeToString() == data


def test_bad_input_raises():
    with pytest.raises(FtransTypeError, match="bytes"):
        fex.sharding.get_hlo_sharding_from_serialized_proto("not bytes")
    with pytest.raises(FtransTypeError, match="HloSharding"):
        fex.sharding.get_serialized_proto_from_hlo_sharding(3)
