"""Transform APIs fail as JAX's do: same error type, and the message opens with (or contains) JAX's own
sentence, which users and JAX's test-suite match on; ftrans's message then adds which argument and what to do.

Each case runs the same thunk against jax (the oracle) and ftrans.
"""

from __future__ import annotations

import operator
import re
from functools import partial

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp

# name -> (build(lib, np_lib) -> thunk, the error type, the part of JAX's message ftrans must carry: a regex
# on JAX's message whose match must appear verbatim in ftrans's)
CASES = {
    "grad_nonscalar": (lambda t, n: lambda: t.grad(lambda x: x)(np.zeros(3, np.float32)), TypeError,
                       r"^Gradient only defined for scalar-output functions\. Output had shape: \(3,\)\."),
    "grad_tuple": (lambda t, n: lambda: t.grad(lambda x: (x, x))(1.0), TypeError,
                   r"^Gradient only defined for scalar-output functions\. Output was "),
    "grad_unit": (lambda t, n: lambda: t.grad(lambda x: ())(np.zeros(3, np.float32)), TypeError,
                  r"^Gradient only defined for scalar-output functions\. Output was \(\)\."),
    "grad_complex_out": (lambda t, n: lambda: t.grad(lambda x: x ** 2 + 1j)(3.0), TypeError,
                         r"^grad requires real-valued outputs \(output dtype that is a sub-dtype of np\.floating\), "
                         r"but got complex64"),
    "grad_int_in": (lambda t, n: lambda: t.grad(lambda x: x ** 2)(3), TypeError,
                    r"^grad requires real- or complex-valued inputs \(input dtype that is a sub-dtype of "
                    r"np\.inexact\), but got int32"),
    "grad_holo_float_in": (lambda t, n: lambda: t.grad(lambda x: x ** 2, holomorphic=True)(3.0), TypeError,
                           r"^grad with holomorphic=True requires inputs with complex dtype, but got float32"),
    "jacrev_holo_float_in": (lambda t, n: lambda: t.jacrev(lambda x: x ** 2, holomorphic=True)(3.0), TypeError,
                             r"^jacrev with holomorphic=True requires inputs with complex dtype, but got float32"),
    "jacfwd_holo_float_in": (lambda t, n: lambda: t.jacfwd(lambda x: x ** 2, holomorphic=True)(3.0), TypeError,
                             r"^jacfwd with holomorphic=True requires inputs with complex dtype, but got float32"),
    "jacfwd_complex_in": (lambda t, n: lambda: t.jacfwd(lambda x: x ** 2)(3.0 + 1j), TypeError,
                          r"^jacfwd requires real-valued inputs \(input dtype that is a sub-dtype of np\.floating\), "
                          r"but got complex64"),
    "too_few_args": (lambda t, n: lambda: partial(t.grad(lambda x, y: x + y, argnums=0), x=0.0)(y=1.0), TypeError,
                     r"^differentiating with respect to argnums=0 requires at least 1 positional arguments to be "
                     r"passed by the caller, but got only 0 positional arguments\."),
    "vjp_ct_tree": (lambda t, n: lambda: t.vjp(lambda x, y: x * y, np.float32(3), np.float32(4))[1](
        (np.float32(7), np.float32(100))), ValueError, r"^unexpected tree structure"),
    "vjp_ct_dtype": (lambda t, n: lambda: t.vjp(lambda x, y: x * y, np.float32(3), np.float32(4))[1](
        np.float16(42)), ValueError, r"^unexpected JAX type"),
    "vjp_ct_shape": (lambda t, n: lambda: t.vjp(lambda x: x * 2, np.ones((2, 3), np.float32))[1](
        np.ones((2, 4), np.float32)), ValueError, r"^unexpected JAX type"),
    "transpose_ct_tree": (lambda t, n: lambda: t.linear_transpose(lambda x: [x, x], 1.0)(1.0), TypeError,
                          r"^cotangent tree does not match function output"),
    "transpose_ct_type": (lambda t, n: lambda: t.linear_transpose(lambda x: n.stack([x, x]), 1.0)(1.0), TypeError,
                          r"^cotangent type does not match function output"),
    "vmap_no_arrays": (lambda t, n: lambda: t.vmap(lambda x: x)({}), ValueError,
                       r"^vmap wrapped function must be passed at least one argument containing an array or "
                       r"axis_size must be specified, got empty \*args=\(\{\},\) and \*\*kwargs=\{\}"),
    "jvp_tuple_vs_list": (lambda t, n: lambda: t.jvp(lambda x, y: x * y, (np.float32(2),), [np.float32(2)]),
                          TypeError, r"must have the same tree structure"),
    "jit_static_unhashable": (lambda t, n: lambda: t.jit(lambda x, y: x + 3, static_argnums=[1])(1, np.asarray(1)),
                              ValueError, r"^Non-hashable static arguments are not supported"),
    "jit_bad_leaf": (lambda t, n: lambda: t.jit(lambda x: x)("foo"), TypeError,
                     r"^Error interpreting argument to .* as an abstract array\. The problematic value is of type "
                     r"<class 'str'> and was passed to the function at path x\."),
    # concretization errors open with JAX's words and the traced array's type
    "bool_of_tracer": (lambda t, n: lambda: t.jit(lambda x: 1 if x > 0 else 0)(0), TypeError,
                       r"^Attempted boolean conversion of traced array with shape bool\[\]\."),
    "index_of_tracer": (lambda t, n: lambda: t.jit(lambda x: hex(x))(0), TypeError,
                        r"^The __index__\(\) method was called on traced array with shape int32\[\]"),
    "numpy_of_tracer": (lambda t, n: lambda: t.jit(lambda x: np.exp(x))(np.zeros(3, np.float32)), TypeError,
                        r"^The numpy\.ndarray conversion method __array__\(\) was called on traced array with "
                        r"shape float32\[3\]"),
    "int_of_tracer": (lambda t, n: lambda: t.jit(lambda x: int(x))(1.0), TypeError,
                      r"^Abstract tracer value encountered where concrete value is expected: traced array with "
                      r"shape float32\[\]"),
    "compiled_arg_types": (lambda t, n: lambda: t.jit(lambda x: x + 1.0).lower(np.float32(1)).compile()(
        np.int32(1)), TypeError, r"^Argument types differ from the types for which this computation was compiled\."),
    "compiled_mismatch_lines": (lambda t, n: lambda: t.jit(lambda x: x + 1.0).lower(np.float32(1)).compile()(
        np.int32(1)), TypeError, r"The mismatches are:\nArgument 'x' compiled with float32\[\] and called with int32\[\]"),
    "compiled_under_vmap": (lambda t, n: lambda: (lambda c: t.vmap(lambda x: c(x))(n.ones(3)))(
        t.jit(lambda x: x + 4).lower(1.0).compile()), TypeError,
        r"^Cannot apply JAX transformations to a function lowered and compiled for a particular signature\. "
        r"Detected argument of Tracer type"),
    "pmap_nothing_mapped": (lambda t, n: lambda: t.pmap(lambda x: x)({}), ValueError,
                            r"^pmap requires at least one argument with a mapped axis\."),
    "pmap_static_by_keyword": (lambda t, n: lambda: t.pmap(lambda a, b: a + b, static_broadcasted_argnums=(1,))(
        n.ones((1, 1)), b=1), ValueError,
        r"pmapped function has static_broadcasted_argnums=\(1,\) but was called with only 1 positional argument\. "
        r"All static broadcasted arguments must be passed positionally"),
    "jax_array_object": (lambda t, n: lambda: t.jit(lambda x: x)(_HasJaxArray(n.arange(4))), ValueError,
                         r"^Triggering __jax_array__\(\) during abstractification is no longer supported"),
    "array_deleted": (lambda t, n: lambda: (lambda x: (x.delete(), repr(x)))(t.device_put(1.0)), RuntimeError,
                      r"^Array has been deleted"),
    "jit_static_eq_raises": (lambda t, n: lambda: _call_twice(t.jit(lambda x, y: x + 3, static_argnums=[1]),
                                                              lambda: (1, _EqRaises())), ValueError,
                             r"^static arguments should be comparable using __eq__"),
    "index_of_int_vector": (lambda t, n: lambda: operator.index(n.arange(3)), TypeError,
                            r"^Only integer scalar arrays can be converted to a scalar index"),
    "index_of_float_scalar": (lambda t, n: lambda: operator.index(n.float32(0)), TypeError,
                              r"^Only integer scalar arrays can be converted to a scalar index"),
    "int_of_vector": (lambda t, n: lambda: int(n.arange(3)), TypeError,
                      r"^Only scalar arrays can be converted to Python scalars"),
    "float_of_size1_vector": (lambda t, n: lambda: float(n.arange(1.0)), TypeError,
                              r"^Only scalar arrays can be converted to Python scalars"),
    # a traced value: the type alone decides first, as in JAX (a TypeError/ValueError, not a concretization error)
    "traced_index_of_vector": (lambda t, n: lambda: t.jit(operator.index)(n.arange(3)), TypeError,
                               r"^Only integer scalar arrays can be converted to a scalar index"),
    "traced_hex_of_float": (lambda t, n: lambda: t.jit(hex)(n.float32(1)), TypeError,
                            r"^Only integer scalar arrays can be converted to a scalar index"),
    "traced_float_of_vector": (lambda t, n: lambda: t.jit(float)(n.arange(1.0)), TypeError,
                               r"^Only scalar arrays can be converted to Python scalars"),
    "traced_bool_of_vector": (lambda t, n: lambda: t.jit(bool)(n.arange(3)), ValueError,
                              r"^The truth value of an array with more than one element is ambiguous"),
    "traced_bool_of_empty": (lambda t, n: lambda: t.jit(bool)(n.arange(0)), ValueError,
                             r"^The truth value of an empty array is ambiguous"),
    "index_of_bool": (lambda t, n: lambda: operator.index(n.array(True)), TypeError,
                      r"^Only integer scalar arrays can be converted to a scalar index"),
    "escaped_tracer": (lambda t, n: lambda: _use_escaped(t), Exception, r"^Encountered an unexpected tracer"),
}


def _use_escaped(t):
    saved = []
    t.jit(lambda x: saved.append(x) or x)(0.0)
    t.jit(lambda x: saved[0] + x)(0.0)


class _EqRaises:
    def __hash__(self):
        return 1

    def __eq__(self, other):
        raise NotImplementedError("no comparing")


def _call_twice(f, args):
    f(*args())
    f(*args())  # a lookup that compares with the cached static argument


class _HasJaxArray:
    def __init__(self, v):
        self.v = v

    def __jax_array__(self):
        return self.v


def _message(thunk, exc):
    with pytest.raises(exc) as info:
        thunk()
    return str(info.value)


@pytest.mark.parametrize("case", sorted(CASES))
def test_error_message_carries_jaxs_sentence(case):
    build, exc, pattern = CASES[case]
    want = re.search(pattern, _message(build(jax, jjnp), exc))
    assert want is not None, "the pattern no longer describes JAX's message"
    got = _message(build(ftrans, fjnp), exc)
    # the JAX part, with the function's name (its repr in JAX's message) left out
    head = want.group(0)
    head = re.sub(r"to <function \S*<lambda> at 0x[0-9a-f]+>", "to <lambda>", head)  # (all lambdas here)
    assert head in got, (head, got)


def test_grad_output_errors_name_the_users_function():
    with pytest.raises(TypeError, match=r"scalar-output functions.*grad\(sin\).*jacrev.*vjp"):
        ftrans.grad(fjnp.sin)(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match=r"but got float32 \(argument 0\)"):
        ftrans.grad(lambda x: x ** 2, holomorphic=True)(3.0)
