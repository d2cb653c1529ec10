"""api_test.py's remaining gaps (session 41), each differential against jax.

* A token (``lax.create_token``) as an operand of a user's primitive: eagerly and under jit, vmap, jvp, vjp.
"""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp
from ftrans.extend.core import Primitive as FPrimitive
from ftrans.interpreters import ad as fad
from ftrans.interpreters import batching as fbatching
from ftrans.interpreters import mlir as fmlir
from tests.backend_util import host_oracle


def _token_primitives():
    """The same primitive ``(x, token) -> 2 x`` in jax and in ftrans, with every rule."""
    from jax.extend.core import Primitive as JPrimitive
    from jax.interpreters import ad as jad
    from jax.interpreters import batching as jbatching
    from jax.interpreters import mlir as jmlir

    out = []
    for P, ad, batching, mlir, lf_multi in ((JPrimitive, jad, jbatching, jmlir, True),
                                            (FPrimitive, fad, fbatching, fmlir, False)):
        p = P("tokentest")
        seen = []
        p.def_impl(lambda x, t: x * 2)

        def aeval(x, t, seen=seen):
            seen.append(type(t).__name__)
            return x

        p.def_abstract_eval(aeval)
        if lf_multi:
            mlir.register_lowering(p, mlir.lower_fun(lambda x, t: [x * 2], multiple_results=True))
        else:
            mlir.register_lowering(p, mlir.lower_fun(lambda x, t: x * 2, multiple_results=False))
        ad.defjvp(p, lambda g, x, t: g * 2, None)
        batching.primitive_batchers[p] = lambda args, dims, p=p: (p.bind(*args), dims[0])
        out.append((p, seen))
    return out


@pytest.mark.parametrize("how", ["eager", "jit", "jit_token_arg", "vmap", "jvp", "vjp", "grad_jit"])
def test_token_operand_of_a_users_primitive(how):
    (jp, jseen), (fp, fseen) = _token_primitives()
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    res = []
    for lib, np_, p in ((jax, jnp, jp), (ftrans, fnp, fp)):
        tok = lib.lax.create_token(123)
        f = lambda x, p=p, tok=tok: p.bind(x, tok)  # noqa: E731
        if how == "eager":
            r = f(np_.asarray(x))
        elif how == "jit":
            r = lib.jit(f)(x)
        elif how == "jit_token_arg":
            r = lib.jit(lambda x, t, p=p: p.bind(x, t))(x, tok)
        elif how == "vmap":
            r = lib.vmap(f)(x)
        elif how == "jvp":
            r = lib.jvp(f, (x,), (np.ones_like(x),))
        elif how == "vjp":
            out, vjp = lib.vjp(f, x)
            r = (out, vjp(np.ones_like(x)))
        else:
            r = lib.jit(lib.grad(lambda x, f=f: f(x).sum()))(x)
        res.append(r)
    jax.tree_util.tree_map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), *res)
    if how in ("jit", "jit_token_arg"):  # the abstract-evaluation rule saw an abstract token, as in jax
        assert fseen and set(fseen) == {"AbstractToken"} and jseen[-1] == "AbstractToken"


def test_token_operand_of_a_users_primitive_jax_test_5463():
    """JAX's test_grad_of_token_consuming_primitive (jax issue 5463), with ftrans's own impl rule."""
    p = FPrimitive("tokentest")
    p.def_impl(lambda x, y: x)
    p.def_abstract_eval(lambda x, y: x)
    fad.defjvp(p, (lambda g, x, token: x), None)
    token = ftrans.lax.create_token(123)
    arr = fnp.ones((3, 2))
    res, vjp_fun = ftrans.vjp(lambda x: p.bind(x, token), arr)
    (ct,) = vjp_fun(arr)
    assert ct.shape == (3, 2)


def test_token_operand_of_ftrans_primitive_is_an_error():
    with pytest.raises(TypeError, match="got a token"):
        ftrans.lax.add_p.bind(fnp.ones(2), ftrans.lax.create_token())
    with pytest.raises(TypeError, match="got a token"):
        ftrans.jit(lambda x: ftrans.lax.add_p.bind(x, ftrans.lax.create_token()))(fnp.ones(2))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("jit", [False, True])
def test_i0_half_precision_is_jaxs(dtype, jit):
    """jnp.i0 in bfloat16/float16 evaluates exp(-|x|) I0(x) in float32 and rounds it, as JAX does (the
    polynomial in bfloat16 was 2% off, JAX's lax_numpy_operators_test testOp_i0_bfloat16)."""
    x = (np.random.RandomState(0).randn(500) * 6).astype(jnp.dtype(dtype))
    with contextlib.nullcontext() if jit else host_oracle():  # ftrans's eager i0 is host NumPy (on a GPU too)
        j = (jax.jit(jnp.i0) if jit else jnp.i0)(x)
    f = (ftrans.jit(fnp.i0) if jit else fnp.i0)(x)
    assert f.dtype == j.dtype
    np.testing.assert_array_equal(np.asarray(f).astype(np.float32), np.asarray(j).astype(np.float32))
    xs = x[:8] / 4  # (where exp overflows ftrans's derivative is jax 0.11's inf: docs/differences.md)
    g = ftrans.grad(lambda x: fnp.i0(x).astype(np.float32).sum())(xs)
    gj = jax.grad(lambda x: jnp.i0(x).astype(np.float32).sum())(xs)
    np.testing.assert_allclose(np.asarray(g).astype(np.float32), np.asarray(gj).astype(np.float32), rtol=2e-2)


def _printed(lib, np_, simplified):
    from jax._src import config as jconfig

    from ftrans.core.config import config_context

    f = lambda x: (x, 1., np.zeros(3, np.float32), np.ones(1, np.float32) + x, np.float32(2) * x)  # noqa: E731
    ctx = (jconfig.use_simplified_jaxpr_constants(simplified) if lib is jax
           else config_context("use_simplified_jaxpr_constants")(simplified))
    with ctx:
        return str(lib.make_jaxpr(f)(np_.float32(0.)))


@pytest.mark.parametrize("simplified", [False, True])
def test_use_simplified_jaxpr_constants_printing(simplified):
    """JAX's option prints a program's constants where they are used (api_test's test_non_scalar_const)."""
    j, f = _printed(jax, jnp, simplified), _printed(ftrans, fnp, simplified)
    assert f == j
    if simplified:
        assert f.startswith("{ lambda ; a:f32[]. let") and "[...]:f32[3]" in f and "[...]:f32[1]" in f
    else:
        assert f.startswith("{ lambda a:f32[1] b:f32[3]; c:f32[]. let")
    ftrans.config.update("jax_use_simplified_jaxpr_constants", simplified)
    try:
        assert ftrans.config.read("use_simplified_jaxpr_constants") is simplified
    finally:
        ftrans.config.update("jax_use_simplified_jaxpr_constants", False)


def test_saved_residuals_keep_a_named_constant():
    """A checkpoint_name'd constant inside jit stays the named value (the constant folding pass keeps the
    marker), so saved_residuals lists what JAX's does (api_test's test_saved_residuals_utility_jit)."""
    from jax._src.ad_checkpoint import saved_residuals as jsaved

    from ftrans.ad_checkpoint import checkpoint_name as fname
    from ftrans.ad_checkpoint import saved_residuals as fsaved

    def make(lib, np_, name):
        @lib.jit
        def f(x, y):
            x1, x2 = x
            z = name(np_.sin(3.), "z")
            return z * ((x1 * x2) * y) * np.array([3.])
        return f

    from jax.ad_checkpoint import checkpoint_name as jname

    j = jsaved(make(jax, jnp, jname), (2., 3.), y=4.)
    f = fsaved(make(ftrans, fnp, fname), (2., 3.), y=4.)
    assert [(a.shape, a.dtype, s.split(" from ")[0]) for a, s in f] == \
        [(a.shape, a.dtype, s.split(" from ")[0]) for a, s in j]
    assert len(f) == 6


def _x64_cases(lib, np_, lax):
    f64 = np.float64
    return {
        "array": lambda: np_.array([1, 2, 3], dtype="float64"),
        "array_i64": lambda: np_.array(1, dtype=np.int64),
        "asarray_np": lambda: np_.asarray(np.ones(3)),
        "ones": lambda: np_.ones(3, dtype=f64),
        "zeros_i64": lambda: np_.zeros(3, "int64"),
        "full": lambda: np_.full((2, 3), 1, dtype="int64"),
        "arange": lambda: np_.arange(3, dtype=f64),
        "linspace": lambda: np_.linspace(0, 3, dtype=f64),
        "astype": lambda: np_.ones(3).astype("float64"),
        "astype_c128": lambda: np_.ones(3).astype(np.complex128),
        "convert": lambda: lax.convert_element_type(np_.ones(3), f64),
        "add_scalar": lambda: np_.ones(3, f64) + 1,
        "add_f32": lambda: np_.ones(3, f64) + np_.ones(3),
        "mul_i64_i32": lambda: np_.ones(3, np.int64) * np_.ones(3, np.int32),
        "i64_plus_f32": lambda: np_.ones(3, np.int64) + np_.ones(3, np.float32),
        "sin": lambda: np_.sin(np_.ones(3, f64)),
        "sum": lambda: np_.ones(3, f64).sum(),
        "sum_dtype": lambda: np_.sum(np_.ones(3), dtype=f64),
        "jit": lambda: lib.jit(lambda x: x * 2)(np_.ones(3, f64)),
        "jit_np": lambda: lib.jit(lambda x: x * 2)(np.ones(3)),
        "jit_inner": lambda: lib.jit(lambda x: np_.ones(3, f64) + x)(1.0),
        "grad": lambda: lib.grad(lambda x: (x * 2).sum())(np_.ones(3, f64)),
        "dot": lambda: np_.dot(np_.ones((2, 2), f64), np_.ones((2, 2), f64)),
        "matmul_mixed": lambda: np_.ones((2, 2), f64) @ np_.ones((2, 2)),
        "where": lambda: np_.where(True, np_.ones(3, f64), 0.),
        "concat": lambda: np_.concatenate([np_.ones(3, f64), np_.ones(3)]),
        "vmap": lambda: lib.vmap(lambda x: x + 1)(np_.ones(3, f64)),
    }


def test_explicit_x64_dtypes_allow_keeps_64_bit_types():
    """Under jax_explicit_x64_dtypes="allow" (x64 off) an explicitly requested 64-bit dtype is kept and
    promotes as one, as JAX's; NumPy float64 arrays and Python scalars still become 32-bit."""
    import warnings

    from jax._src import config as jconfig

    from ftrans.core.config import config_context

    assert not jax.config.jax_enable_x64
    got = {}
    for lib, np_, ctx in ((jax, jnp, jconfig.explicit_x64_dtypes("allow")),
                          (ftrans, fnp, config_context("explicit_x64_dtypes")("allow"))):
        with ctx, warnings.catch_warnings():
            warnings.simplefilter("error")
            got[lib] = {k: (np.asarray(f()).dtype, f().weak_type)
                        for k, f in _x64_cases(lib, np_, lib.lax).items()}
    assert got[ftrans] == got[jax]
    assert got[ftrans]["ones"][0] == np.float64 and got[ftrans]["jit_np"][0] == np.float32
    # outside the mode nothing is 64-bit (the default warns and narrows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert fnp.ones(3, np.float64).dtype == np.float32
        assert (fnp.ones(3) + 1).dtype == np.float32
