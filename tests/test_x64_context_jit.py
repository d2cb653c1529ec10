"""``enable_x64`` contexts and ``jit``'s caches, against jax: a function first compiled inside a context
gives the types of the switch in force at each later call (JAX's x64_context_test)."""

import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp

SIDES = [(jax, jjnp), (ftrans, fjnp)]


def _dtypes(lib, jnp, make, first, args):
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with lib.enable_x64(first):
            f = lib.jit(make(jnp))
            out.append(str(f(*args).dtype))
        out.append(str(f(*args).dtype))  # the global switch (off)
        for on in (True, False, True):
            with lib.enable_x64(on):
                out.append(str(f(*args).dtype))
        out.append(str(f(*args).dtype))
    return out


CASES = {
    "no_args": (lambda jnp: (lambda: jnp.array(np.float64(0))), ()),
    "array_arg": (lambda jnp: (lambda x: x * 2), (np.ones(3, np.float64),)),
    "two_numpy_args": (lambda jnp: (lambda x, y: x * y), (np.ones(3, np.float64), np.ones(3, np.float64))),
    "pytree_arg": (lambda jnp: (lambda d: d["a"] + 1), ({"a": np.ones(2, np.int64)},)),
    "python_scalar": (lambda jnp: (lambda x: x + 1), (3,)),
}


@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize("case", sorted(CASES))
def test_context_then_global(case, first):
    make, args = CASES[case]
    got = [_dtypes(lib, jnp, make, first, args) for lib, jnp in SIDES]
    assert got[1] == got[0], got


def test_device_array_argument():
    """A jitted function called on an ftrans array inside a context, then outside (the fast keys)."""
    for lib, jnp in SIDES:
        x = jnp.arange(3)
        f = lib.jit(lambda x: x * np.float64(1.5))
        with lib.enable_x64(True):
            inside = f(x).dtype
        outside = f(x).dtype
        assert (str(inside), str(outside)) == ("float64", "float32"), lib.__name__


@pytest.mark.needs_devices(2)
def test_sharded_argument():
    """The same for an argument laid out over several devices (the sharded fast key)."""
    for lib, jnp in SIDES:
        mesh = lib.make_mesh((2,), ("x",), devices=lib.devices()[:2])
        x = lib.device_put(jnp.arange(4), lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x")))
        f = lib.jit(lambda x: x * np.float64(1.5))
        with lib.enable_x64(True):
            inside = [str(f(x).dtype) for _ in range(2)]
        outside = [str(f(x).dtype) for _ in range(2)]
        assert (inside, outside) == (["float64"] * 2, ["float32"] * 2), lib.__name__
