"""``ftrans.ffi`` against ``jax.ffi``: calls of jaxlib's LAPACK typed-FFI targets give the same results
eagerly, under ``jit`` and under ``vmap`` with every ``vmap_method``; keyword attributes are encoded as JAX
encodes them; layouts, aliases, side effects and the errors follow JAX."""

import jax
import numpy as np
import pytest

import ftrans
from ftrans import ffi
from tests.backend_util import host_oracle


def _geqrf(F, x, **kw):
    """LAPACK's QR (Householder form), called the way JAX's ffi tests call it."""
    nd = x.ndim
    col_major = tuple(range(nd - 2)) + (nd - 1, nd - 2)
    out = [F.ShapeDtypeStruct(x.shape, x.dtype), F.ShapeDtypeStruct(x.shape[:-2] + (min(x.shape[-2:]),), x.dtype)]
    return F.ffi.ffi_call("lapack_sgeqrf_ffi", out, input_output_aliases={0: 0}, input_layouts=[col_major],
                          output_layouts=[col_major, None], **kw)(x)


def _potrf(F, x, **kw):
    """Cholesky with LAPACK's ``uplo`` attribute (a NumPy uint8 scalar, typed ``ui8``)."""
    nd = x.ndim
    col_major = tuple(range(nd - 2)) + (nd - 1, nd - 2)
    out = (F.ShapeDtypeStruct(x.shape, x.dtype), F.ShapeDtypeStruct(x.shape[:-2], np.int32))
    return F.ffi.ffi_call("lapack_spotrf_ffi", out, input_layouts=[col_major], output_layouts=[col_major, None],
                          **kw)(x, uplo=np.uint8(ord("L")))


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """The targets called here are jaxlib's LAPACK (CPU) ones: on a GPU machine both libraries call them
    on the CPU device (tests/backend_util.py)."""
    with host_oracle():
        yield


@pytest.fixture(autouse=True, scope="module")
def _lapack():
    import jax._src.lax.linalg  # noqa: F401  (jax registers its LAPACK targets when this is imported)
    from jaxlib import lapack
    lapack._lapack.initialize()


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _spd(n, seed=0):
    a = _rand(n, n, seed=seed)
    return (a @ a.T + n * np.eye(n)).astype(np.float32)


@pytest.mark.parametrize("shape", [(6, 5), (4, 5, 6)])
def test_geqrf_eager_and_jit_match_jax(shape):
    x = _rand(*shape)
    want = _geqrf(jax, x)
    for got in (_geqrf(ftrans, x), ftrans.jit(lambda x: _geqrf(ftrans, x))(x)):
        assert isinstance(got, list)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_attribute_reaches_the_target():
    x = _spd(4)
    want = jax.jit(lambda x: _potrf(jax, x))(x)
    got = ftrans.jit(lambda x: _potrf(ftrans, x))(x)
    assert isinstance(got, tuple)
    np.testing.assert_array_equal(np.tril(np.asarray(got[0])), np.tril(np.asarray(want[0])))
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))


@pytest.mark.parametrize("vmap_method", ["sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                                         "legacy_vectorized"])
@pytest.mark.parametrize("shape", [(6, 5), (4, 5, 6)])
def test_vmap_methods_match_jax(vmap_method, shape):
    x = _rand(3, *shape, seed=1)
    want = jax.vmap(lambda x: _geqrf(jax, x, vmap_method=vmap_method))(x)
    got = ftrans.vmap(lambda x: _geqrf(ftrans, x, vmap_method=vmap_method))(x)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


def test_vmap_with_an_unbatched_operand_matches_jax():
    # potrf's factor of a batch of matrices, with an unbatched second call in the same vmap
    xs = np.stack([_spd(3, seed=s) for s in range(4)])
    for method in ("sequential", "expand_dims", "broadcast_all"):
        want = jax.vmap(lambda x: _potrf(jax, x, vmap_method=method)[0])(xs)
        got = ftrans.vmap(lambda x: _potrf(ftrans, x, vmap_method=method)[0])(xs)
        np.testing.assert_allclose(np.tril(np.asarray(got)), np.tril(np.asarray(want)), rtol=1e-6)


def test_vmap_without_method_is_not_implemented():
    x = _rand(2, 3, 3)
    with pytest.raises(NotImplementedError, match="vmap_method"):
        ftrans.vmap(lambda x: _geqrf(ftrans, x))(x)


def _custom_calls(module):
    """Each custom call's attributes (as MLIR prints them), by target name."""
    out = {}
    for func in module.body.operations:
        if not hasattr(func, "body"):  # e.g. an sdy.mesh declaration
            continue
        for block in func.body.blocks:
            for op in block.operations:
                if op.OPERATION_NAME == "stablehlo.custom_call":
                    attrs = {name: str(op.attributes[name]) for name in op.attributes}
                    out[attrs["call_target_name"]] = attrs
    return out


def _backend_config(module):
    (attrs,) = _custom_calls(module).values()
    return attrs


ATTRIBUTES = [np.int8(-3), np.int16(7), np.int32(1), np.int64(-2), np.uint8(3), np.uint16(4), np.uint32(5),
              np.uint64(6), np.float16(1.5), np.float32(0.1), np.float64(-2.25), np.bool_(True), True, 3, 2.5,
              "name", np.arange(3), np.array(1.0, np.float32), np.arange(6.0).reshape(2, 3),
              np.array([True, False]), np.zeros((), dtype=jax.dtypes.float0), {"a": 1, "b": np.float32(2.0)},
              np.float32(np.inf), np.float64(np.nan)]


@pytest.mark.parametrize("value", ATTRIBUTES, ids=[f"{type(v).__name__}-{i}" for i, v in enumerate(ATTRIBUTES)])
def test_attributes_are_encoded_as_jax_encodes_them(value):
    def fun(F):
        return lambda x: F.ffi.ffi_call("test_ffi", F.ShapeDtypeStruct(x.shape, x.dtype))(x, param=value)

    x = np.ones(3, np.float32)
    want = _backend_config(jax.jit(fun(jax)).lower(x).compiler_ir("stablehlo"))
    got = _backend_config(ftrans.jit(fun(ftrans)).lower(x).compiler_ir("stablehlo"))
    for k in ("mhlo.backend_config", "operand_layouts", "result_layouts", "call_target_name", "api_version"):
        assert got.get(k) == want.get(k), k


def test_layouts_aliases_and_side_effects_in_the_module():
    x = _rand(2, 4, 3)

    def fun(F):
        def f(x):
            F.ffi.ffi_call("lapack_sgetrf_ffi", (), has_side_effect=True)()
            return _geqrf(F, x)
        return f

    want = _custom_calls(jax.jit(fun(jax)).lower(x).compiler_ir("stablehlo"))
    got = _custom_calls(ftrans.jit(fun(ftrans)).lower(x).compiler_ir("stablehlo"))
    assert set(got) == set(want) == {'"lapack_sgetrf_ffi"', '"lapack_sgeqrf_ffi"'}
    for target in want:
        for k in ("operand_layouts", "result_layouts", "output_operand_aliases", "mhlo.backend_config",
                  "has_side_effect"):
            assert got[target].get(k) == want[target].get(k), (target, k)
    text = ftrans.jit(fun(ftrans)).lower(x).as_text()
    assert "has_side_effect = true" in text  # the unused call is kept


def test_legacy_backend_config():
    f = lambda x: ffi.ffi_call("test", x, custom_call_api_version=2, legacy_backend_config="12345")(x)  # noqa: E731
    assert 'backend_config = "12345"' in ftrans.jit(f).lower(np.ones(5, np.float32)).as_text()


def test_errors_follow_jax():
    x = np.ones(5, np.float32)
    with pytest.raises(ValueError, match="The FFI call to `test_ffi` cannot be differentiated"):
        ftrans.jvp(lambda x: ffi.ffi_call("test_ffi", x)(x), (x,), (x,))
    with pytest.raises(ValueError, match="with input index"):
        ffi.ffi_call("test", x, input_output_aliases={1: 0})(x)
    with pytest.raises(ValueError, match="with output index"):
        ffi.ffi_call("test", x, input_output_aliases={0: 1})(x)
    with pytest.raises(ValueError, match="referring to an input with abstract value"):
        ffi.ffi_call("test", ftrans.ShapeDtypeStruct(x.shape, np.int32), input_output_aliases={0: 0})(x)
    with pytest.raises(ValueError, match="All elements of result_shape_dtypes.*position 1"):
        ffi.ffi_call("test", (ftrans.ShapeDtypeStruct((), np.float32), ()))
    with pytest.raises(ValueError, match="The use of the legacy_backend_config"):
        ffi.ffi_call("test", x, legacy_backend_config="1")
    with pytest.raises(ValueError, match="The use of ffi_call attributes requires"):
        ftrans.jit(lambda x: ffi.ffi_call("test", x, custom_call_api_version=2)(x, attribute=1)).lower(x)
    with pytest.raises(ValueError, match="vmap_method must be"):
        ffi.ffi_call("test", x, vmap_method="nope")
    with pytest.raises(TypeError, match="Non-hashable keyword argument"):
        ffi.ffi_call("test", x)(x, a=[1, 2])
    with pytest.raises(NotImplementedError, match="ffi_call"):
        ffi.ffi_lowering("test")
    with pytest.raises(ValueError, match="register_ffi_type_id is not supported"):
        ffi.register_ffi_type_id("t", None)


def test_non_hashable_attributes_are_printed_as_jax_names_them():
    x = np.ones(5, np.float32)
    j = ftrans.make_jaxpr(lambda x: ffi.ffi_call("t", x)(x, a={"a": 1}, b=np.arange(3)))(x)
    assert "FrozenDict" in str(j) and "HashableArray" in str(j)
    text = ftrans.jit(lambda x: ffi.ffi_call("t", x)(x, b=np.arange(3), a={"a": 1})).lower(x).as_text()
    assert "a = {a = 1 : i64}" in text and "b = dense<[0, 1, 2]> : tensor<3xi64>" in text


def test_include_dir_and_pycapsule_registration():
    import ctypes
    import os

    assert os.path.exists(os.path.join(ffi.include_dir(), "xla", "ffi", "api", "ffi.h"))
    assert ffi.include_dir() == jax.ffi.include_dir()
    libc = ctypes.CDLL(None)
    cap = ffi.pycapsule(libc.abs)
    assert type(cap).__name__ == "PyCapsule"
    # registration goes through XLA's registry (a legacy api_version 0 target; never called here)
    ffi.register_ffi_target("ftrans_test_abs_target", cap, platform="cpu", api_version=0)


_HANDLER = r"""
#include <cstdint>
#include "xla/ffi/api/ffi.h"
namespace ffi = xla::ffi;
// y = x * scale + delta, with a float32 and an int64 attribute
static ffi::Error Impl(ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y, float delta, int64_t scale) {
  for (size_t i = 0; i < x.element_count(); ++i) y->typed_data()[i] = x.typed_data()[i] * scale + delta;
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(FtransTestScaleAdd, Impl,
    ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>().Attr<float>("delta")
        .Attr<int64_t>("scale"));
"""


def test_a_registered_handler_of_our_own_matches_jax(tmp_path):
    """A typed-FFI handler compiled against ``include_dir()``, registered through ``pycapsule`` and
    ``register_ffi_target``, called with attributes eagerly, in jit and under vmap."""
    import ctypes
    import shutil
    import subprocess

    if shutil.which("g++") is None:
        pytest.skip("needs a C++ compiler")
    src, lib = tmp_path / "scale_add.cc", tmp_path / "libscaleadd.so"
    src.write_text(_HANDLER)
    subprocess.run(["g++", "-std=c++17", "-O1", "-shared", "-fPIC", f"-I{ffi.include_dir()}", "-o", str(lib),
                    str(src)], check=True, capture_output=True)
    handler = ctypes.CDLL(str(lib)).FtransTestScaleAdd
    ffi.register_ffi_target("ftrans_test_scale_add", ffi.pycapsule(handler), platform="cpu")
    x = np.arange(5, dtype=np.float32)

    def call(F, x, **kw):
        return F.ffi.ffi_call("ftrans_test_scale_add", F.ShapeDtypeStruct(x.shape, x.dtype), **kw)(
            x, delta=np.float32(0.5), scale=3)

    want = jax.jit(lambda x: call(jax, x))(x)
    np.testing.assert_array_equal(np.asarray(call(ftrans, x)), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(ftrans.jit(lambda x: call(ftrans, x))(x)), np.asarray(want))
    xs = np.stack([x, 2 * x])
    np.testing.assert_array_equal(
        np.asarray(ftrans.vmap(lambda x: call(ftrans, x, vmap_method="broadcast_all"))(xs)),
        np.asarray(jax.vmap(lambda x: call(jax, x, vmap_method="broadcast_all"))(xs)))


def test_64_bit_results_declared_with_shape_dtype_struct_stay_64_bit():
    """JAX's ShapeDtypeStruct keeps the dtype it is given (int64 without x64; Python int is int64), so an FFI
    result declared with it keeps it; an argument or eval_shape of it gets the canonical dtype."""
    for dt in (np.int64, np.float64, int, float, np.float32, "int16"):
        assert ftrans.ShapeDtypeStruct((2,), dt).dtype == jax.ShapeDtypeStruct((2,), dt).dtype, dt
    assert ftrans.ShapeDtypeStruct((), np.int64) != ftrans.ShapeDtypeStruct((), np.int32)

    def fun(lib):
        return lambda: lib.ffi.ffi_call("test", lib.ShapeDtypeStruct((), np.int64))()
    assert '@main() -> (tensor<i64> {jax.result_info = "result"})' in ftrans.jit(fun(ftrans)).lower().as_text()
    assert "tensor<i64>" in jax.jit(fun(jax)).lower().as_text()
    sds = ftrans.ShapeDtypeStruct((3,), np.int64)
    assert ftrans.eval_shape(lambda x: x + 1, sds).dtype == jax.eval_shape(
        lambda x: x + 1, jax.ShapeDtypeStruct((3,), np.int64)).dtype
    assert "tensor<3xi32>" in ftrans.jit(lambda x: x).lower(sds).as_text()


@pytest.mark.parametrize("shape", [(), (3,)])
def test_typed_key_operand_goes_as_its_key_data_as_jax(shape):
    def fun(F):
        return lambda k: F.ffi.ffi_call("edtype", (), has_side_effect=True)(k)

    def keys(F):
        k = F.random.key(0)
        return F.random.split(k, shape[0]) if shape else k

    want_mod = jax.jit(fun(jax)).lower(keys(jax)).compiler_ir("stablehlo")
    got_mod = ftrans.jit(fun(ftrans)).lower(keys(ftrans)).compiler_ir("stablehlo")
    want, got = _custom_calls(want_mod)['"edtype"'], _custom_calls(got_mod)['"edtype"']
    for k in ("operand_layouts", "result_layouts", "has_side_effect"):
        assert got.get(k) == want.get(k), k
    assert f"tensor<{'x'.join(map(str, (*shape, 2)))}xui32>" in ftrans.jit(fun(ftrans)).lower(keys(ftrans)).as_text()
