"""Interop with jax and the array API, checked against jax itself.

* ftrans.numpy / lax / jit take jax.Arrays (a jax.Array on one device becomes
  an ftrans array over the same buffer, no copy) and objects with ``__array__``
  or ``__dlpack__``;
* ``Array.__dlpack__`` / ``__dlpack_device__`` export to NumPy and jax;
  ``jnp.from_dlpack`` imports from NumPy, jax and ftrans;
* ``__array_namespace__``, ``jnp.__array_namespace_info__()``, ``to_device``,
  ``device``;
* ``UnexpectedTracerError`` is a ``TypeError``.
"""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ftrans
import ftrans.numpy as jnp
from ftrans import errors, lax
from ftrans.core.array import DeviceArray

X = np.linspace(-1.5, 2.0, 12, dtype=np.float32).reshape(3, 4)


class HasArray:
    """Only ``__array__`` (a pandas/xarray-like container)."""

    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return np.array(self.a, dtype=dtype, copy=True)


class HasDlpack:
    """Only the DLPack protocol (a producer that is not NumPy)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def _same(got, want, rtol=1e-6):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6)


# ---------------------------------------------------------------- jax.Arrays as operands
_FUNCS = [
    ("sin", lambda m, a, b: m.sin(a)),
    ("add", lambda m, a, b: m.add(a, b)),
    ("operator", lambda m, a, b: m.asarray(a) * b + 1),
    ("matmul", lambda m, a, b: m.matmul(a, m.transpose(b))),
    ("concatenate", lambda m, a, b: m.concatenate([a, b], axis=0)),
    ("where", lambda m, a, b: m.where(a > 0, a, b)),
    ("sum", lambda m, a, b: m.sum(a, axis=1)),
    ("reshape", lambda m, a, b: m.reshape(a, (4, 3))),
    ("take", lambda m, a, b: m.take(a, m.asarray([2, 0]), axis=1)),
    ("stack", lambda m, a, b: m.stack([a, b])),
]


@pytest.mark.parametrize("name, fn", _FUNCS, ids=[n for n, _ in _FUNCS])
def test_numpy_functions_take_jax_arrays(name, fn):
    a, b = jax.device_put(X), jax.device_put(X[::-1].copy())
    _same(fn(jnp, a, b), fn(jjnp, a, b))


@given(hnp.arrays(st.sampled_from([np.float32, np.int32, np.int8, np.bool_, np.uint16]),
                  hnp.array_shapes(max_dims=3, max_side=4)))
def test_jax_array_operands_keep_dtype_and_values(a):
    j = jax.device_put(a)
    _same(jnp.asarray(j), jjnp.asarray(j))
    _same(jnp.negative(j) if a.dtype != np.bool_ else jnp.logical_not(j),
          jjnp.negative(j) if a.dtype != np.bool_ else jjnp.logical_not(j))


def test_lax_and_jit_take_jax_arrays():
    a = jax.device_put(X)
    _same(lax.add(a, a), jax.lax.add(a, a))
    _same(ftrans.jit(lambda x, y: x * y + 1)(a, a), jax.jit(lambda x, y: x * y + 1)(a, a))
    _same(ftrans.grad(lambda x: jnp.sum(jnp.sin(x)))(a), jax.grad(lambda x: jjnp.sum(jjnp.sin(x)))(a))
    _same(ftrans.vmap(jnp.sum)(a), jax.vmap(jjnp.sum)(a))


def test_jax_array_converts_without_a_copy():
    j = jax.device_put(X)
    f = jnp.asarray(j)
    assert type(f) is DeviceArray and f._buf is j  # the same device buffer
    assert f.device == j.device
    c = jnp.array(j)  # jnp.array copies (copy=True), as JAX's does
    assert c._buf is not j if isinstance(c, DeviceArray) else True
    _same(c, j)


def test_jax_array_weak_type_is_kept():
    w = jjnp.asarray(2.0)
    assert w.weak_type
    assert jnp.asarray(w).weak_type == jjnp.asarray(w).weak_type
    # a weak jax scalar does not promote an int8 array, in either library
    i8 = np.arange(3, dtype=np.int8)
    assert jnp.add(jnp.asarray(i8), jnp.asarray(jjnp.asarray(2))).dtype == jjnp.add(i8, jjnp.asarray(2)).dtype


def test_non_canonical_jax_array_is_canonicalised():
    # jax with x64 off has no float64 arrays; an int8 one stays int8 in both.
    j = jax.device_put(np.arange(4, dtype=np.int8))
    assert jnp.asarray(j).dtype == jjnp.asarray(j).dtype == np.int8


def test_array_like_objects_convert_like_jax():
    _same(jnp.asarray(HasArray(X)), jjnp.asarray(HasArray(X)))
    _same(jnp.array(HasArray(X), dtype=np.int32), jjnp.array(HasArray(X), dtype=np.int32))
    # __dlpack__-only producers: NumPy's conversion of the same data is the reference
    _same(jnp.asarray(HasDlpack(X)), jjnp.asarray(X))
    _same(jnp.asarray(HasDlpack(X.astype(np.float64))), jjnp.asarray(X.astype(np.float64)))


def test_array_like_objects_are_operands():
    """ftrans goes further than JAX here (see docs/differences.md): functions take them directly."""
    _same(jnp.sin(HasArray(X)), jjnp.sin(X))
    _same(jnp.add(HasDlpack(X), 1.0), jjnp.add(X, 1.0))
    assert jnp.shape(HasDlpack(X)) == X.shape


def test_conversion_copies_mutable_foreign_memory():
    buf = X.copy()
    a = jnp.asarray(HasArray(buf))
    d = jnp.asarray(HasDlpack(buf))
    buf[0, 0] = 100.0
    assert float(a[0, 0]) == float(d[0, 0]) == float(X[0, 0])


def test_object_arrays_are_rejected():
    with pytest.raises(TypeError):
        jnp.asarray(HasArray(np.array([object()])))


# ---------------------------------------------------------------- DLPack export
@pytest.mark.parametrize("where", ["host", "device"])
def test_numpy_and_jax_import_ftrans_arrays(where):
    a = jnp.asarray(X) if where == "host" else ftrans.device_put(X)
    j = jax.device_put(X)
    if where == "device":
        assert a.__dlpack_device__() == j.__dlpack_device__()
        if j.__dlpack_device__()[0] != 1:  # a GPU buffer: NumPy imports host memory only, as from jax's
            for arr in (a, j):
                with pytest.raises(BufferError):
                    np.from_dlpack(arr)
            _same(jjnp.from_dlpack(a), X)
            return
    n = np.from_dlpack(a)
    _same(n, X)
    assert not n.flags.writeable  # DLPack 1.0 carries the read-only flag
    _same(jjnp.from_dlpack(a), X)  # jax asks for pre-1.0 DLPack: gets a copy or the device buffer
    _same(np.from_dlpack(a, copy=True), X)
    assert a.__dlpack_device__() == (1, 0)  # a host array exports host memory, whatever the default device


def test_dlpack_keywords():
    a = jnp.asarray(X)
    for kw in ({}, {"stream": None}, {"max_version": (1, 0)}, {"dl_device": (1, 0)}, {"copy": True},
               {"max_version": (1, 0), "copy": False}):
        cap = a.__dlpack__(**kw)
        assert type(cap).__name__ == "PyCapsule"
    with pytest.raises(BufferError, match="read-only"):
        a.__dlpack__(copy=False)  # pre-1.0 consumers cannot be told the data is read-only
    d = ftrans.device_put(X)
    assert type(d.__dlpack__(max_version=(1, 0))).__name__ == "PyCapsule"


def test_deleted_array_does_not_export():
    d = ftrans.device_put(X)
    d.delete()
    with pytest.raises(errors.DeletedArrayError):
        d.__dlpack__()


def test_dlpack_round_trip_through_a_read_only_producer():
    """np.from_dlpack(ftrans array) is read-only; jax cannot import that back, ftrans can (differences.md)."""
    ro = np.from_dlpack(jnp.asarray(X))
    if jax.__version_info__ < (0, 12):  # (jax 0.12 imports it too)
        with pytest.raises(BufferError):
            jjnp.from_dlpack(ro)
    _same(jnp.from_dlpack(ro), X)
    _same(jnp.from_dlpack(HasDlpack(ro)), X)


# ---------------------------------------------------------------- DLPack import
@pytest.mark.parametrize("src", ["numpy", "jax", "ftrans", "ftrans-device", "producer"])
def test_from_dlpack_like_jax(src):
    make = {
        "numpy": lambda: X.copy(),
        "jax": lambda: jax.device_put(X),
        "ftrans": lambda: jnp.asarray(X),
        "ftrans-device": lambda: ftrans.device_put(X),
        "producer": lambda: HasDlpack(X.copy()),
    }[src]
    got = jnp.from_dlpack(make())
    if src.startswith("ftrans"):
        _same(got, X)
    else:
        _same(got, jjnp.from_dlpack(make()))
    _same(jnp.from_dlpack(make(), copy=True), X)


def test_from_dlpack_device_and_copy():
    devs = ftrans.devices()
    if len(devs) < 2:
        pytest.skip("needs two devices")
    got = jnp.from_dlpack(X.copy(), device=devs[1])
    want = jjnp.from_dlpack(X.copy(), device=jax.devices()[1])
    _same(got, want)
    assert got.device == devs[1] == want.device
    with pytest.raises(ValueError):
        jjnp.from_dlpack(X.copy(), device=jax.devices()[1], copy=False)
    with pytest.raises(ValueError, match="copy=False"):
        jnp.from_dlpack(X.copy(), device=devs[1], copy=False)


def test_from_dlpack_unaligned_without_copy_is_a_value_error_as_in_jax():
    # Host data not aligned for the device can be imported only by copying: copy=False is a ValueError.
    raw = np.zeros(4 * 8 + 2, np.uint8)
    x = raw[2:].view(np.float32)  # 2 bytes past an aligned allocation
    x[:] = np.arange(8, dtype=np.float32)
    with pytest.raises(ValueError, match="Specified .* which requires a copy"):
        jjnp.from_dlpack(x, copy=False)
    with pytest.raises(ValueError, match="Specified .* which requires a copy"):
        jnp.from_dlpack(x, copy=False)
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(x)), np.asarray(jjnp.from_dlpack(x)))


def test_cuda_array_interface_only_on_gpu_buffers_as_in_jax():
    gpu = jax.default_backend() == "gpu"
    a, b = ftrans.jit(lambda v: v + 1)(np.ones(2)), jjnp.ones(2) + 1  # device buffers on the default device
    assert hasattr(a, "__cuda_array_interface__") == hasattr(b, "__cuda_array_interface__") == gpu
    if gpu:
        fa, ja = a.__cuda_array_interface__, b.__cuda_array_interface__
        assert (fa["shape"], fa["typestr"], fa["version"]) == (ja["shape"], ja["typestr"], ja["version"])
    else:
        with pytest.raises(AttributeError, match="only defined for .*GPU buffers"):
            _ = a.__cuda_array_interface__
    # A host array (ftrans's eager results) holds no GPU buffer, whatever the default device (differences.md).
    host = jnp.arange(3)
    assert not hasattr(host, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="only defined for .*GPU buffers"):
        _ = host.__cuda_array_interface__


def test_from_dlpack_rejects_non_producers():
    with pytest.raises(TypeError):
        jjnp.from_dlpack([1, 2])
    with pytest.raises(TypeError, match="__dlpack__"):
        jnp.from_dlpack([1, 2])


def test_from_dlpack_float64_is_canonicalised():
    x64 = np.arange(3, dtype=np.float64)
    assert jnp.from_dlpack(x64).dtype == jjnp.from_dlpack(x64).dtype == np.float32


# ---------------------------------------------------------------- array API
def test_array_namespace():
    for a in (jnp.asarray(X), ftrans.device_put(X)):
        assert a.__array_namespace__() is jnp
        assert a.__array_namespace__(api_version=jnp.__array_api_version__) is jnp
    # jax 0.11's version (the array API 2025.12); jax 0.10 says "2024.12"
    assert jnp.__array_api_version__ == "2025.12" and jjnp.__array_api_version__ in ("2024.12", "2025.12")
    with pytest.raises(ValueError):
        jax.device_put(X).__array_namespace__(api_version="2021.12")
    with pytest.raises(ValueError, match="2021.12"):
        jnp.asarray(X).__array_namespace__(api_version="2021.12")


def test_array_namespace_of_a_tracer():
    seen = []
    ftrans.jit(lambda x: seen.append(x.__array_namespace__()) or x)(X)
    assert seen == [jnp]


def test_array_namespace_info_matches_jax():
    ours, theirs = jnp.__array_namespace_info__(), jjnp.__array_namespace_info__()
    assert ours.capabilities() == theirs.capabilities()
    assert ours.default_device() is theirs.default_device() is None
    assert ours.default_dtypes() == theirs.default_dtypes()
    assert ours.default_dtypes(device=ftrans.devices()[0]) == theirs.default_dtypes(device=jax.devices()[0])
    for kind in (None, "bool", "signed integer", "unsigned integer", "integral", "real floating",
                 "complex floating", "numeric", ("bool", "real floating")):
        assert ours.dtypes(kind=kind) == theirs.dtypes(kind=kind), kind
    # the array API 2025.12 asks for a tuple, as jax 0.11 gives (jax 0.10 gives a list)
    assert isinstance(ours.devices(), tuple)
    assert ours.devices() == tuple(theirs.devices())
    with pytest.raises(KeyError):
        theirs.dtypes(kind="strings")
    with pytest.raises(KeyError, match="strings"):
        ours.dtypes(kind="strings")


def test_to_device_and_device():
    devs = ftrans.devices()
    target = devs[-1]
    for a in (jnp.asarray(X), ftrans.device_put(X)):
        moved = a.to_device(target)
        _same(moved, X)
        assert moved.device == target
        assert a.device in devs
    # an unplaced array reports the default device, as JAX's (the GPU on a GPU machine, not the host CPU)
    assert jnp.asarray(X).device == jjnp.asarray(X).device == ftrans.devices()[0]
    assert jnp.asarray(X).sharding == jjnp.asarray(X).sharding
    j = jax.device_put(X).to_device(jax.devices()[-1])
    assert j.device == jax.devices()[-1] and str(target) == str(j.device)
    with pytest.raises(ValueError, match="stream"):
        jnp.asarray(X).to_device(target, stream=1)


# ---------------------------------------------------------------- errors
def test_unexpected_tracer_error_is_a_type_error_like_jax():
    assert issubclass(jax.errors.UnexpectedTracerError, TypeError)
    assert issubclass(errors.UnexpectedTracerError, TypeError)
    leaked = []
    ftrans.jit(lambda x: leaked.append(x) or x)(X)
    with pytest.raises(TypeError) as ei:
        leaked[0] + 1.0
    assert isinstance(ei.value, errors.UnexpectedTracerError)


def test_jax_arrays_as_indices_and_device_get():
    j = jax.device_put(np.array([2, 0], np.int32))
    _same(jnp.arange(5.0)[j], jjnp.arange(5.0)[j])
    _same(jnp.zeros(4).at[j].set(1.0), jjnp.zeros(4).at[j].set(1.0))
    for leaf in (jax.device_put(X), np.float32(2.5), jnp.asarray(X)):
        ours, theirs = ftrans.device_get({"a": leaf}), jax.device_get({"a": leaf})
        assert type(ours["a"]) is type(theirs["a"]) is np.ndarray
        _same(ours["a"], theirs["a"])


class _JaxArrayLike:
    """An object standing for an array through JAX's ``__jax_array__`` protocol."""

    def __init__(self, value):
        self.value = value

    def __jax_array__(self):
        return self.value


def test_jax_array_protocol_operands():
    """``obj * x`` with an ``__jax_array__`` object, eagerly and under jit/grad/vmap, as in JAX."""
    want = jjnp.array(3.0) * jjnp.arange(10.0)
    got = _JaxArrayLike(jnp.array(3.0)) * jnp.arange(10.0)
    assert isinstance(got, ftrans.Array) and got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    got = ftrans.jit(lambda x: _JaxArrayLike(x) * jnp.arange(3.0))(2.0)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.jit(lambda x: _JaxArrayLike(x) * jjnp.arange(3.0))(2.0)))
    x = np.arange(3.0, dtype=np.float32)
    got = ftrans.vmap(lambda v: _JaxArrayLike(v) * jnp.arange(2.0))(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.vmap(lambda v: _JaxArrayLike(v) * jjnp.arange(2.0))(x)))
    gr = ftrans.grad(lambda v: (_JaxArrayLike(v) * jnp.arange(3.0)).sum())(2.0)
    assert float(gr) == float(jax.grad(lambda v: (_JaxArrayLike(v) * jjnp.arange(3.0)).sum())(2.0))
    np.testing.assert_array_equal(np.asarray(jnp.asarray(_JaxArrayLike(jnp.arange(3)))), np.arange(3))


class _DuckWithErroringJaxArray:
    shape = (2, 3)
    dtype = np.dtype("float32")

    def __jax_array__(self):
        raise ValueError("__jax_array__ was called")


def test_jax_array_protocol_for_value_arguments_and_like_functions():
    """Arguments whose values are read (roll's shift, delete's obj, compress's condition) and the
    ``*_like`` functions take ``__jax_array__`` objects, as JAX's; a duck-typed array's own shape and dtype
    are preferred to converting it."""
    x = np.arange(5.0, dtype=np.float32)
    cases = [
        (lambda m, v: m.roll(v, _JaxArrayLike(np.array([2], np.int32)))),
        (lambda m, v: m.delete(v, _JaxArrayLike(np.array(1, np.int32)))),
        (lambda m, v: m.compress(_JaxArrayLike(v > 1), v)),
        (lambda m, v: m.zeros_like(_JaxArrayLike(v))),
        (lambda m, v: m.full_like(_JaxArrayLike(v), 2.0)),
    ]
    for case in cases:
        got, want = case(jnp, x), case(jjnp, x)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    for m in (jnp, jjnp):
        out = m.ones_like(_DuckWithErroringJaxArray())
        assert out.shape == (2, 3) and out.dtype == np.float32


def test_from_dlpack_copy_where_the_plugin_cannot_import_with_a_copy(monkeypatch):
    # A PJRT C API plugin (the GPU's) imports a DLPack tensor only in place: copy=True imports it so and
    # copies it on the device.
    from jax._src.lib import _jax

    real = _jax.dlpack_managed_tensor_to_buffer

    def plugin(capsule, device, stream, copy, *rest):
        if copy:
            raise _jax.JaxRuntimeError("UNIMPLEMENTED: PJRT C API does not support HostBufferSemantics other than "
                                       "HostBufferSemantics::kImmutableOnlyDuringCall.")
        return real(capsule, device, stream, copy, *rest)

    monkeypatch.setattr(_jax, "dlpack_managed_tensor_to_buffer", plugin)
    src = jax.device_put(X)
    got = jnp.from_dlpack(src, copy=True)
    _same(got, X)
    assert got.unsafe_buffer_pointer() != src.unsafe_buffer_pointer()
    _same(jnp.from_dlpack(ftrans.device_put(X), copy=True), X)
