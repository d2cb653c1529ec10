"""``ftrans.experimental.control_deps`` against ``jax.experimental.control_deps``: ``control_dep`` and
``schedule`` put XLA's ``control_dep`` custom call into the compiled program (JAX's control_deps_test
checks the HLO text for it), leave values unchanged, return what JAX's return, and refuse ``grad``/``vmap``
as JAX's do."""

import jax
import numpy as np
import pytest

import ftrans
import ftrans.experimental.control_deps as fcd
from tests.backend_util import host_oracle

try:
    import jax.experimental.control_deps as jcd
except ImportError:  # jax 0.11 removed it; ftrans keeps jax 0.10's (docs/differences.md), checked alone
    jcd = None


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """XLA has a ``control_dep`` handler on the CPU only (on a GPU: "No FFI handler registered for
    control_dep on a platform CUDA", for jax's programs as for ftrans's), and JAX's control_deps_test
    runs on the CPU only (``run_on_devices("cpu")``): so do these, on every backend."""
    with host_oracle():
        yield


class _NoDeps:  # the values without the dependencies (jax 0.11 has no control_deps)
    schedule = control_dep = staticmethod(lambda *_: None)


def _math(F, cd):
    def f(x, y, z):
        a = F.numpy.sin(x @ x)
        b = F.numpy.cos(y @ y)
        c = F.numpy.exp(z @ z * 0.01)
        cd.schedule([c, b, a])
        cd.control_dep(c, a)
        return a + b + c
    return f


def test_schedule_in_hlo_and_values():
    x = np.linspace(-1, 1, 67 * 67, dtype=np.float32).reshape(67, 67)
    hlo_f = ftrans.jit(_math(ftrans, fcd)).lower(x, x, x).as_text(dialect="hlo")
    hlo_j = jax.jit(_math(jax, jcd)).lower(x, x, x).as_text(dialect="hlo") if jcd else hlo_f
    for hlo in (hlo_f, hlo_j):
        assert hlo.count('custom_call_target="control_dep"') == 3
    got = ftrans.jit(_math(ftrans, fcd))(x, x, x)
    want = jax.jit(_math(jax, jcd if jcd else _NoDeps))(x, x, x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)


def test_eager_results_match_jax():
    xf, xj = ftrans.numpy.ones(3), jax.numpy.ones(3)
    assert fcd.control_dep(xf, xf + 1) == (jcd.control_dep(xj, xj + 1) if jcd else ()) == ()
    assert fcd.schedule([xf, xf + 1, xf * 2]) is None
    assert fcd.schedule([xf]) is None and fcd.schedule([]) is None
    assert "control_deps" in ftrans.experimental.__all__


def test_jaxpr_has_side_effecting_ffi_call():
    x = np.ones(3, np.float32)
    jf = ftrans.make_jaxpr(lambda a, b: (fcd.schedule([a, b]), a + b)[1])(x, x)
    jj = jax.make_jaxpr(lambda a, b: (jcd.schedule([a, b]), a + b)[1])(x, x) if jcd else jf
    assert [e.primitive.name for e in jf.eqns] == [e.primitive.name for e in jj.eqns] == ["ffi_call", "add"]
    assert jf.eqns[0].params["target_name"] == "control_dep" and jf.eqns[0].params["has_side_effect"]


def test_grad_and_vmap_refused_as_jax():
    x = np.ones(3, np.float32)
    for F, cd in ((jax, jcd), (ftrans, fcd)) if jcd else ((ftrans, fcd),):
        with pytest.raises(ValueError, match="cannot be differentiated"):
            F.grad(lambda a: (cd.control_dep(a, a * 2), (a * a).sum())[1])(x)
        with pytest.raises(NotImplementedError, match="vmap_method"):
            F.vmap(lambda a, b: (cd.control_dep(a, b), a + b)[1])(np.ones((2, 3)), np.ones((2, 3)))
