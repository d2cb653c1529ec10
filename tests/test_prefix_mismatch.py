"""A spec that is not a tree prefix of its value (vmap/pmap in_axes, device_put's devices): the error lists
every mismatch with its key path and what differs, as JAX's "Mismatch details" do."""

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.tree_util import _prefix_mismatches


def _msgs(run_ft, run_jax):
    with pytest.raises(ValueError) as ej:
        run_jax()
    with pytest.raises(ValueError) as ef:
        run_ft()
    return str(ef.value), str(ej.value)


def test_vmap_in_axes_mismatch_details_like_jax():
    cases = [
        (([0],), lambda np_: (np_.ones(3),), "vmap in_axes[0]", "different types"),
        (({"a": 0, "b": 0}, 0), lambda np_: ({"a": np_.ones(3), "c": np_.ones(3)}, np_.ones(3)), "vmap in_axes[0]",
         "different pytree metadata"),
    ]
    for in_axes, args, where, what in cases:
        msg, jmsg = _msgs(lambda: ftrans.vmap(lambda *a: a[0], in_axes=in_axes)(*args(jnp)),
                          lambda: jax.vmap(lambda *a: a[0], in_axes=in_axes)(*args(jjnp)))
        for m in (msg, jmsg):
            assert "vmap in_axes specification must be a tree prefix of the corresponding value;" in m
            assert "Mismatch details (1 found)" in m and f"{what} at key path" in m and where in m
        assert "test_prefix_mismatch.py" in msg


def test_device_put_lists_every_mismatch_like_jax():
    def put(lib, np_):
        return lib.device_put({"a": np_.arange(2), "b": np_.arange(3)}, device={"a": [None, None], "b": (None, None)})

    msg, jmsg = _msgs(lambda: put(ftrans, jnp), lambda: put(jax, jjnp))
    for m in (msg, jmsg):
        assert "device_put device specification must be a tree prefix" in m and "Mismatch details (2 found)" in m
        assert "device_put device['a']" in m and "device_put device['b']" in m


def test_prefix_mismatches_of_prefixes_is_empty():
    assert _prefix_mismatches((0, None), (np.ones(2), [1, 2]), "x", lambda v: v is None) == []
    assert _prefix_mismatches({"a": 0}, {"a": {"b": 1}}, "x") == []
    (m,) = _prefix_mismatches([0, 1], [1, 2, 3], "x")
    assert "different numbers of children at key path x" in m
