"""JAX's offloading and combining remat policies (``save_and_offload_only_these_names``,
``offload_dot_with_no_batch_dims``, ``save_from_both_policies``): what each keeps for the backward pass
matches JAX's (``saved_residuals``), gradients match jax's, and bad arguments are JAX's errors.  ftrans
keeps an offloadable residual where it was made (memory kinds are not modelled), so "offloaded" and
"saved" residuals are the same residuals."""

from __future__ import annotations

import jax
import jax.ad_checkpoint
import jax.numpy as jjnp
import numpy as np
import pytest
from jax._src.ad_checkpoint import saved_residuals as jsaved  # public in older jax only

import ftrans
import ftrans.numpy as fjnp
from ftrans.ad_checkpoint import checkpoint_name as fname
from ftrans.ad_checkpoint import saved_residuals as fsaved

W = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
X = np.linspace(0.5, 2, 6, dtype=np.float32).reshape(2, 3)


def _f(np_, name, w, x):
    a = name(np_.sin(x @ w), "a")
    b = name(np_.cos(a) * 2.0, "b")
    c = name(np_.tanh(b @ w.T), "c")
    return (c * a.sum()).sum()


def _policies(lib):
    cp = lib.checkpoint_policies
    return {
        "save_b_offload_a": cp.save_and_offload_only_these_names(
            names_which_can_be_saved=["b"], names_which_can_be_offloaded=["a"], offload_src="device",
            offload_dst="pinned_host"),
        "offload_dots": cp.offload_dot_with_no_batch_dims("device", "pinned_host"),
        "both": cp.save_from_both_policies(cp.save_only_these_names("c"), cp.dots_with_no_batch_dims_saveable),
    }


@pytest.mark.parametrize("which", ["save_b_offload_a", "offload_dots", "both"])
def test_policies_keep_what_jax_keeps_and_grads_match(which):
    fp, jp = _policies(ftrans)[which], _policies(jax)[which]
    ff = ftrans.checkpoint(lambda w, x: _f(fjnp, fname, w, x), policy=fp)
    jf = jax.checkpoint(lambda w, x: _f(jjnp, jax.ad_checkpoint.checkpoint_name, w, x), policy=jp)
    fres = sorted(str(a.shape) for a, why in fsaved(ff, W, X) if "argument" not in why)
    jres = sorted(str(a.shape) for a, why in jsaved(jf, W, X) if "argument" not in why)
    assert fres == jres, (fres, jres)
    fg = ftrans.grad(ff, argnums=(0, 1))(W, X)
    jg = jax.grad(jf, argnums=(0, 1))(W, X)
    for a, b in zip(fg, jg):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_bad_arguments_are_errors():
    cp = ftrans.checkpoint_policies
    with pytest.raises(ValueError, match="not both.*'a'"):
        cp.save_and_offload_only_these_names(names_which_can_be_saved=["a"], names_which_can_be_offloaded=["a"],
                                             offload_src="device", offload_dst="pinned_host")
    with pytest.raises(ValueError, match="offload_dst must be one of"):
        cp.offload_dot_with_no_batch_dims("device", "disk")
