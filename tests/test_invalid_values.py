"""Values that cannot be arrays (arguments, outputs, operands): the error is a TypeError, as JAX's, and
carries what JAX's carries: the value, its full type, the argument position or output component, the
function; float0 operands and Python casts of traced arrays say what to do instead."""

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans import lax
from ftrans.errors import FtransTypeError


def _both(run_ft, run_jax):
    """The ftrans and jax errors of the same call (both must be TypeErrors)."""
    with pytest.raises(TypeError) as ej:
        run_jax()
    with pytest.raises(FtransTypeError) as ef:
        run_ft()
    return str(ef.value), str(ej.value)


def _ident(x):
    return x


@pytest.mark.parametrize("name", ["grad", "jacfwd", "jacrev", "vmap", "jit"])
@pytest.mark.parametrize("bad", ["foo", np.array([1, 2], dtype=object)], ids=["str", "object_array"])
def test_bad_argument_shows_value_and_type(name, bad):
    msg, jmsg = _both(lambda: getattr(ftrans, name)(_ident)(bad), lambda: getattr(jax, name)(_ident)(bad))
    assert f"of type {type(bad)!r} is not a valid JAX type" in msg
    if name == "grad":  # jax's grad names the value and its full type (its jit and vmap less)
        assert f"of type {type(bad)!r} is not a valid JAX type" in jmsg
    if isinstance(bad, str):
        assert "'foo'" in msg
    else:
        assert "dtype=object" in msg  # the reason an ndarray is refused is visible
    assert "test_invalid_values.py" in msg  # points at the user's line


def test_bad_primal_of_jvp_vjp_linearize():
    for ft, jx, args in [(ftrans.vjp, jax.vjp, ("foo",)), (ftrans.linearize, jax.linearize, ("foo",)),
                         (ftrans.jvp, jax.jvp, (("foo",), ("foo",)))]:
        msg, jmsg = _both(lambda: ft(_ident, *args), lambda: jx(_ident, *args))
        assert "'foo' of type <class 'str'> is not a valid JAX type" in msg
        assert "'foo' of type <class 'str'> is not a valid JAX type" in jmsg


def _returns_function(x):
    return (2.0 * x, {"a": _ident})


@pytest.mark.parametrize("name", ["jit", "eval_shape", "make_jaxpr", "vmap", "grad", "jvp"])
def test_bad_output_names_function_and_component(name):
    def call(mod):
        if name == "eval_shape":
            return mod.eval_shape(_returns_function, 1.0)
        if name == "jvp":
            return mod.jvp(_returns_function, (1.0,), (1.0,))
        if name == "vmap":
            return mod.vmap(_returns_function)(np.ones(2, np.float32))
        if name == "grad":
            return mod.grad(lambda x: _ident)(1.0)
        return getattr(mod, name)(_returns_function)(1.0)

    msg, jmsg = _both(lambda: call(ftrans), lambda: call(jax))
    assert "<class 'function'>" in msg and "<class 'function'>" in jmsg
    assert "is not a valid JAX type" in msg
    if name != "grad":
        assert "returned a value of type <class 'function'>" in msg
        assert "at output component [1]['a']" in msg
        assert "_returns_function at " in msg and "test_invalid_values.py" in msg
    if name in ("jit", "eval_shape", "make_jaxpr"):
        assert "at output component [1]['a']" in jmsg


def test_unsupported_dtype_operand_names_operation_and_position():
    for ft, jx in [(lax.add, jax.lax.add), (jnp.add, jjnp.add)]:
        msg, jmsg = _both(lambda: ft(jnp.array(7), np.array("hello")), lambda: jx(jjnp.array(7), np.array("hello")))
        assert "add" in msg and "at position 1" in msg and "<U5" in msg
        assert "add" in jmsg


def test_float0_operand_says_float0_supports_no_operations():
    f0 = ftrans.grad(lambda x: x + 0.0, allow_int=True)(1)
    j0 = jax.grad(lambda x: x + 0.0, allow_int=True)(1)
    assert f0.dtype == j0.dtype == jax.dtypes.float0
    for ft, jx in [(lambda: f0 + jnp.zeros(()), lambda: j0 + jjnp.zeros(())),
                   (lambda: lax.add(f0, jnp.zeros(())), lambda: jax.lax.add(j0, jjnp.zeros(()))),
                   (lambda: jnp.sin(f0), lambda: jjnp.sin(j0))]:
        msg, jmsg = _both(ft, jx)
        assert "float0s do not support any operations by design" in msg
        assert "float0s do not support any operations by design" in jmsg


@pytest.mark.parametrize("cast", [float, complex, int])
def test_python_cast_of_traced_value_suggests_astype(cast):
    msg, jmsg = _both(lambda: ftrans.jit(lambda x: cast(x))(1.0), lambda: jax.jit(lambda x: cast(x))(1.0))
    hint = f"try using `x.astype({cast.__name__})`"
    assert hint in msg and hint in jmsg


@pytest.mark.parametrize("ret,got", [(lambda x: (1.0, 2.0, 3.0), "a tuple of length 3"),
                                     (lambda x: x, "a single array of type f32[]"),
                                     (lambda x: (x,), "a tuple of length 1")])
def test_has_aux_without_a_pair_says_what_was_returned(ret, got):
    msg, jmsg = _both(lambda: ftrans.grad(ret, has_aux=True)(1.0), lambda: jax.grad(ret, has_aux=True)(1.0))
    assert "two-element tuple" in msg and "two-element tuple" in jmsg
    assert got in msg
    with pytest.raises(FtransTypeError, match="two-element tuple") as e:  # JAX's jvp fails unpacking it
        ftrans.jvp(ret, (1.0,), (1.0,), has_aux=True)
    assert got in str(e.value)
