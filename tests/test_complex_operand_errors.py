"""Real-only jnp functions refuse a complex operand as JAX's do: the same exception class, and a message
that begins as JAX's (jax's own tests match on it), followed by ftrans's advice."""

from __future__ import annotations

import re

import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans.numpy as fjnp


@pytest.mark.parametrize("name", ["hypot", "copysign"])
def test_complex_operand_error_matches_jax(name):
    z = np.ones(3, np.complex64)
    with pytest.raises(Exception) as theirs:
        getattr(jjnp, name)(z, z)
    with pytest.raises(Exception) as ours:
        getattr(fjnp, name)(z, z)
    assert isinstance(ours.value, type(theirs.value))
    lead = re.split(r"[.;]", str(theirs.value))[0]
    assert str(ours.value).startswith(lead), (str(ours.value), lead)
    assert "convert to real values first" in str(ours.value)
