"""The functions transforms return carry the wrapped function's name as JAX's do, a ``functools.partial``
included (named after the function it calls, unless it was given a name of its own)."""

from __future__ import annotations

import functools

import jax
import pytest

import ftrans


def _target(x):
    return x


def _partial():
    return functools.partial(_target)


def _named_partial():
    p = functools.partial(_target)
    p.__name__ = "my_partial"
    return p


TRANSFORMS = ["jit", "grad", "value_and_grad", "vmap", "jacfwd", "jacrev", "hessian", "checkpoint"]
FUNS = {"function": lambda: _target, "partial": _partial,
        "nested_partial": lambda: functools.partial(functools.partial(_target)), "named_partial": _named_partial}


@pytest.mark.parametrize("fun", list(FUNS))
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_wrapped_names_match_jax(transform, fun):
    j = getattr(jax, transform)(FUNS[fun]())
    f = getattr(ftrans, transform)(FUNS[fun]())
    assert (f.__name__, f.__qualname__) == (j.__name__, j.__qualname__)


@pytest.mark.parametrize("fun", list(FUNS))
def test_jit_state_names_the_function(fun):
    assert (ftrans.jit(FUNS[fun]()).__getstate__()["function_name"]
            == jax.jit(FUNS[fun]()).__getstate__()["function_name"])


def test_partial_named_in_errors():
    with pytest.raises(TypeError, match=r"grad\(_target\)"):
        ftrans.grad(_partial())()
