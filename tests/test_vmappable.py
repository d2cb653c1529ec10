"""``register_vmappable`` (JAX's ``jax.interpreters.batching``): vmap over container types with map specs
of their own, checked against jax with the same container registered in both."""

from __future__ import annotations

import jax
import jax.interpreters.batching as jbatching
import numpy as np
import pytest

import ftrans
import ftrans.interpreters.batching as fbatching
import ftrans.numpy as fjnp


class Named:
    def __init__(self, names, data):
        self.names, self.data = list(names), data


class Spec:
    def __init__(self, name, axis):
        self.name, self.axis = name, axis


def _to_elt(cont, _, val, spec):
    if spec.name is None:
        return val
    names = list(val.names)
    assert names.pop(spec.axis) == spec.name
    return Named(names, cont(val.data, spec.axis))


def _from_elt(cont, size, elt, spec):
    data = cont(size, elt.data, spec.axis)
    if spec.axis is None:
        return Named(elt.names, data)
    names = list(elt.names)
    names.insert(spec.axis, spec.name)
    return Named(names, data)


@pytest.fixture
def registered():
    for b in (fbatching, jbatching):
        b.register_vmappable(Named, Spec, int, _to_elt, _from_elt, None)
    yield
    for b in (fbatching, jbatching):
        b.unregister_vmappable(Named)


@pytest.mark.parametrize("out_axis", [0, 1])
def test_named_container(registered, out_axis):
    data = np.arange(12.0).reshape(3, 4)
    res = {}
    for lib, jnp in ((ftrans, fjnp), (jax, jax.numpy)):
        def f(x, jnp=jnp):
            return Named(x.names, jnp.sin(x.data) * 2)

        g = lib.vmap(f, in_axes=Spec("i", 0), out_axes=Spec("i", out_axis), axis_size=3)
        out = g(Named(["i", "j"], jnp.asarray(data)))
        res[lib.__name__] = (out.names, np.asarray(out.data))
    assert res["ftrans"][0] == res["jax"][0]
    np.testing.assert_allclose(res["ftrans"][1], res["jax"][1], rtol=1e-6)


def test_to_elt_and_from_elt_may_compute_under_jit():
    class Box:
        def __init__(self, data):
            self.data = data

    def to_elt(cont, _, val, spec):
        return cont(val.data + 1, spec)

    def from_elt(cont, size, elt, spec):
        return Box(cont(size, elt.data * 10, spec))

    def wrap(cont, _, val, spec):
        return Box(cont(val.data, spec))

    fbatching.register_vmappable(Box, int, int, to_elt, from_elt, None)
    try:
        out = ftrans.jit(lambda: ftrans.vmap(lambda x: x - 1, axis_size=3)(Box(fjnp.arange(3.0))))()
        np.testing.assert_allclose(np.asarray(out), np.arange(3.0))
        fbatching.register_vmappable(Box, int, int, wrap, from_elt, None)
        out = ftrans.jit(lambda: ftrans.vmap(lambda x: x, axis_size=3)(Box(fjnp.arange(3.0))).data)()
        np.testing.assert_allclose(np.asarray(out), np.arange(3.0) * 10)
    finally:
        fbatching.unregister_vmappable(Box)
    assert not fbatching.is_vmappable(Box(1))


def test_bad_spec_for_an_array_names_it(registered):
    with pytest.raises(TypeError, match="map spec"):
        ftrans.vmap(lambda x: x, in_axes=Spec("i", 0), axis_size=2)(np.ones(2))


def test_plain_vmap_unchanged_while_a_type_is_registered(registered):
    f = ftrans.vmap(lambda x, y: x * y, in_axes=(0, None))
    np.testing.assert_allclose(np.asarray(f(np.arange(3.0), 2.0)), np.arange(3.0) * 2)
    g = ftrans.vmap(lambda d: d["a"] + d["b"], in_axes=({"a": 0, "b": None},))
    np.testing.assert_allclose(np.asarray(g({"a": np.arange(3.0), "b": 1.0})), np.arange(3.0) + 1)
