"""``fwd_and_bwd``: vjp split into a forward and a backward function, each compiled once. Against jax."""

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp


def _f(x, W):
    return jnp.tanh(x @ W)


def _jf(x, W):
    return jjnp.tanh(x @ W)


X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
W = np.linspace(0.5, -0.5, 20, dtype=np.float32).reshape(4, 5)
COT = np.linspace(1, 2, 15, dtype=np.float32).reshape(3, 5)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1,), -1])
@pytest.mark.parametrize("jitted", [True, False])
def test_matches_jax(argnums, jitted):
    fwd, bwd = ftrans.fwd_and_bwd(_f, argnums=argnums, jitted=jitted)
    jfwd, jbwd = jax.fwd_and_bwd(_jf, argnums=argnums, jitted=jitted)
    y, res = fwd(X, W)
    jy, jres = jfwd(X, W)
    np.testing.assert_allclose(np.asarray(y), np.asarray(jy), rtol=1e-6)
    got, want = bwd(res, COT), jbwd(jres, COT)
    assert isinstance(got, tuple) == isinstance(want, tuple)
    if not isinstance(want, tuple):
        got, want = (got,), (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


def test_has_aux_and_no_retrace():
    def f(x, W):
        return (x @ W).sum(), {"n": x.shape[0]}

    fwd, bwd = ftrans.fwd_and_bwd(f, argnums=1, has_aux=True)
    y, res, aux = fwd(X, W)
    jy, jres, jaux = jax.fwd_and_bwd(lambda x, W: ((x @ W).sum(), {"n": x.shape[0]}), argnums=1,
                                     has_aux=True)[0](X, W)
    np.testing.assert_allclose(float(y), float(jy), rtol=1e-6)
    assert int(aux["n"]) == int(jaux["n"]) == 3
    np.testing.assert_allclose(np.asarray(bwd(res, 1.0)), np.asarray(jax.fwd_and_bwd(
        lambda x, W: ((x @ W).sum(), None), argnums=1, has_aux=True)[1](jres, 1.0)), rtol=1e-6)
    with ftrans.no_tracing():  # the second iteration reuses both compiled programs
        y2, res2, _ = fwd(X, W)
        bwd(res2, 1.0)


def test_errors():
    with pytest.raises(TypeError, match="expected a function"):
        ftrans.fwd_and_bwd(3, argnums=0)
    fwd, _ = ftrans.fwd_and_bwd(_f, argnums=2, jitted=False)
    with pytest.raises(TypeError, match="argnums"):
        fwd(X, W)
