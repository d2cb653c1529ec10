"""Behaviours found by running scientific-computing JAX programs under ftrans (imports swapped), each
checked against jax on the same inputs."""

from __future__ import annotations

import jax
import jax.scipy.special as jsp
import numpy as np
import pytest

import ftrans
from ftrans.scipy import special as fsp


def close(ours, theirs, rtol=2e-5, atol=1e-6):
    a, b = np.asarray(ours), np.asarray(theirs)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# ftrans's own custom-JVP special functions differentiated at Python-scalar arguments: their rules see
# arrays (the Python scalar a jvp/grad was given must not reach them as a float).
@pytest.mark.parametrize("name,args,argnum", [
    ("betainc", (2.0, 3.0, 0.4), 2),
    ("gammainc", (1.3, 2.0), 1),
    ("gammaincc", (1.3, 2.0), 1),
    ("logit", (0.3,), 0),
    ("log_ndtr", (1.3,), 0),
    ("erfcx", (1.3,), 0),
    ("expi", (1.3,), 0),
    ("exp1", (1.3,), 0),
    ("hyp1f1", (1.3, 2.0, 0.5), 2),
])
def test_special_grad_at_python_scalars(name, args, argnum):
    ours = ftrans.grad(getattr(fsp, name), argnums=argnum)(*args)
    theirs = jax.grad(getattr(jsp, name), argnums=argnum)(*args)
    close(ours, theirs, rtol=2e-5)
    ours = ftrans.jvp(lambda v: getattr(fsp, name)(*args[:argnum], v, *args[argnum + 1:]), (args[argnum],), (1.0,))
    theirs = jax.jvp(lambda v: getattr(jsp, name)(*args[:argnum], v, *args[argnum + 1:]), (args[argnum],), (1.0,))
    close(ours[1], theirs[1], rtol=2e-5)


def test_fresnel_grad_at_python_scalar():
    ours = ftrans.grad(lambda x: fsp.fresnel(x)[0])(1.3)
    theirs = jax.grad(lambda x: jsp.fresnel(x)[0])(1.3)
    close(ours, theirs, rtol=2e-5)
