"""``config.debug_nans`` / ``debug_infs``: the op that made a NaN (inf) raises, naming the user's line."""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.core import trace as ftrace


@contextlib.contextmanager
def _flag(name: str, lib=ftrans):
    lib.config.update(name, True)
    try:
        yield
    finally:
        lib.config.update(name, False)


def _line_of(fn, marker: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, ln in enumerate(lines) if marker in ln)


def test_eager_nan_raises_at_the_op_like_jax():
    x = np.array([1.0, -1.0], np.float32)

    def f(lib, x):
        y = lib.sin(x)
        return lib.log(y)  # MARK

    with _flag("jax_debug_nans", jax), pytest.raises(FloatingPointError):
        f(jjnp, jjnp.asarray(x))
    with _flag("debug_nans"), pytest.raises(FloatingPointError, match=r"nan.*log") as info:
        f(jnp, jnp.asarray(x))
    assert f"test_debug_nans.py:{_line_of(f, 'MARK')}" in str(info.value)


def test_eager_operators_and_shortcuts_are_checked():
    x = jnp.asarray(np.array([0.0, 1.0], np.float32))
    inf = jnp.asarray(np.array([np.inf, 1.0], np.float32))
    with _flag("debug_nans"):
        with pytest.raises(FloatingPointError, match="mul"):
            inf * x  # the Array operator fast path
        with pytest.raises(FloatingPointError, match="div"):
            x / x
        with pytest.raises(FloatingPointError, match="sqrt"):
            jnp.sqrt(-inf)
        jnp.log(x)  # -inf is not a NaN
    with _flag("debug_infs"), pytest.raises(FloatingPointError, match=r"\(inf\).*log"):
        jnp.log(x)


def _checking() -> bool:
    """Whether eager primitives go through the debug check (the device backend, which an earlier test in
    this process may have installed by committing an array, is another wrapper and does not count)."""
    return "_with_checks" in ftrace.eager_apply.__qualname__


def test_off_means_no_check_and_no_wrapper():
    assert not _checking()
    if ftrace.device_backend() is None:
        assert ftrace.eager_apply is ftrace._host_apply
    assert np.isnan(np.asarray(jnp.log(jnp.asarray(-1.0))))
    with _flag("debug_nans"):
        assert _checking()
        assert not ftrace.eager_everywhere
    assert not _checking()
    if ftrace.device_backend() is None:
        assert ftrace.eager_apply is ftrace._host_apply
    assert ftrace.eager_everywhere


def test_jit_reruns_op_by_op_to_find_the_nan():
    def f(x):
        y = jnp.cos(x) * 2.0
        z = jnp.log(y - 3.0)  # MARK
        return z + 1.0

    jf = ftrans.jit(f)
    x = np.ones(3, np.float32)
    assert np.isnan(np.asarray(jf(x))).all()
    with _flag("debug_nans"), pytest.raises(FloatingPointError, match=r"nan.*log") as info:
        jf(x)
    assert f"test_debug_nans.py:{_line_of(f, 'MARK')}" in str(info.value)
    with _flag("jax_debug_nans", jax), pytest.raises(FloatingPointError):
        jax.jit(lambda x: jjnp.log(jjnp.cos(x) * 2.0 - 3.0) + 1.0)(x)


def test_nested_jit_reruns_the_inner_body():
    @ftrans.jit
    def inner(x):
        return jnp.sqrt(x - 5.0)  # MARK

    def outer(x):
        return inner(x * 2.0) + 1.0

    with _flag("debug_nans"), pytest.raises(FloatingPointError, match="sqrt") as info:
        ftrans.jit(outer)(np.ones(2, np.float32))
    assert f"test_debug_nans.py:{_line_of(inner.__wrapped__, 'MARK')}" in str(info.value)


def test_jit_clean_outputs_pass_and_cache_stays_usable():
    jf = ftrans.jit(lambda x: x * 2.0)
    x = ftrans.device_put(np.ones(2, np.float32))
    with _flag("debug_nans"):
        for _ in range(3):
            np.testing.assert_array_equal(np.asarray(jf(x)), [2.0, 2.0])
    np.testing.assert_array_equal(np.asarray(jf(x)), [2.0, 2.0])


def test_integer_outputs_are_not_checked():
    with _flag("debug_nans"), _flag("debug_infs"):
        assert int(jnp.asarray(3) // 2) == 1
        np.testing.assert_array_equal(np.asarray(ftrans.jit(lambda a: a + 1)(np.arange(3))), [1, 2, 3])


def test_debug_flags_from_config_update_spellings():
    for name in ("debug_infs", "jax_debug_infs"):
        ftrans.config.update(name, True)
        assert ftrans.config.debug_infs
        ftrans.config.update(name, False)


def test_nan_inside_scan_names_the_scan_or_its_body():
    from ftrans import lax

    def body(c, x):
        return c, jnp.log(x)

    xs = jnp.asarray(np.array([1.0, -1.0], np.float32))
    with _flag("debug_nans"), pytest.raises(FloatingPointError, match="nan"):
        lax.scan(body, jnp.asarray(0.0), xs)
    with _flag("debug_nans"), pytest.raises(FloatingPointError, match="nan"):
        ftrans.jit(lambda xs: lax.scan(body, 0.0, xs))(xs)


def test_jit_nan_literal_output_says_the_deoptimized_run_found_nothing_like_jax():
    # The op-by-op re-run finds no operation that made the NaN (it is a literal output): the error says so.
    def f(lib, np_):
        return lib.jit(lambda x: (np_.nan, x + 2))

    pattern = "the de-optimized function did not .*literal"
    with jax.debug_nans(True), pytest.raises(FloatingPointError, match=pattern):
        f(jax, jjnp)(3)
    with ftrans.debug_nans(True), pytest.raises(FloatingPointError, match=pattern):
        f(ftrans, jnp)(3)



def test_jit_nan_input_passed_through_names_the_input_like_jax():
    # A NaN argument reaches the output through Python arithmetic on the de-optimized run (no operation makes
    # it): JAX's message says inputs can cause this; ftrans's names the argument that holds it.
    def f(lib):
        return lib.jit(lambda x: x * 3.0)

    pattern = "the de-optimized function did not .*input"
    with jax.debug_nans(True), pytest.raises(FloatingPointError, match=pattern):
        f(jax)(np.nan)
    with ftrans.debug_nans(True), pytest.raises(FloatingPointError, match="input 0 holds a nan"):
        f(ftrans)(np.nan)
    with ftrans.debug_infs(True), pytest.raises(FloatingPointError, match="input 1 holds an inf"):
        ftrans.jit(lambda a, b: (a, b))(1.0, np.array([np.inf, 1.0]))

def test_reductions_own_infinite_fill_and_initial_are_not_invalid_values_like_jax():
    # JAX's reductions, softmax and dot_product_attention run under jit, so debug_infs looks at their
    # outputs only: a -inf initial or masked fill inside them is no error when the result is finite.
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    keep = np.array([True, False, True])
    q, kv = np.zeros((5, 6, 4), np.float32), np.zeros((7, 3, 4), np.float32)
    mask = np.arange(7) <= 3
    cases = [
        lambda lib, x: lib.numpy.max(x, initial=-np.inf),
        lambda lib, x: lib.numpy.max(x, axis=1, where=keep, initial=-np.inf),
        lambda lib, x: lib.numpy.sum(x, axis=1, where=keep),
        lambda lib, x: lib.numpy.any(x > 2, axis=1, where=keep),
        lambda lib, x: lib.nn.softmax(x),
        lambda lib, x: lib.nn.log_softmax(x, axis=0),
        lambda lib, x: lib.nn.dot_product_attention(q, kv, kv, mask=mask),
    ]
    for case in cases:
        with _flag("jax_debug_infs", jax):
            want = case(jax, jjnp.asarray(x))
        with _flag("jax_debug_infs"):
            got = case(ftrans, jnp.asarray(x))
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


def test_reduction_whose_result_is_inf_still_raises_like_jax():
    x = np.arange(3, dtype=np.float32)
    with _flag("jax_debug_infs", jax), pytest.raises(FloatingPointError):
        jjnp.max(jjnp.asarray(x), where=x > 10, initial=-np.inf)
    with _flag("jax_debug_infs"), pytest.raises(FloatingPointError):
        jnp.max(jnp.asarray(x), where=x > 10, initial=-np.inf)


_INSIDE_JIT_IN_JAX = {  # library functions JAX runs under jit: their own -inf fills and NaN masks are no error
    "nanmax": lambda L, x: L.numpy.nanmax(x),
    "nanmin": lambda L, x: L.numpy.nanmin(x, axis=1),
    "nanargmax": lambda L, x: L.numpy.nanargmax(x),
    "nanargmin": lambda L, x: L.numpy.nanargmin(x, axis=0),
    "median": lambda L, x: L.numpy.median(x),
    "nanmedian": lambda L, x: L.numpy.nanmedian(x, axis=1),
    "percentile": lambda L, x: L.numpy.percentile(x, 50.0),
    "nanquantile": lambda L, x: L.numpy.nanquantile(x, 0.25, axis=0),
    "var_where": lambda L, x: L.numpy.var(x, axis=1, where=np.array([True, False, True])),
    "nanstd": lambda L, x: L.numpy.nanstd(x),
    "ndtri": lambda L, x: L.scipy.special.ndtri(L.numpy.abs(x) / 4),
    "where_inf": lambda L, x: L.numpy.where(x > -5, x, -np.inf),
    "hypot": lambda L, x: L.numpy.hypot(x, x),
    "nancumsum": lambda L, x: L.numpy.nancumsum(x, axis=1),
    "pinv": lambda L, x: L.numpy.linalg.pinv(x),
    "logsumexp_sign": lambda L, x: L.scipy.special.logsumexp(x, axis=1, b=np.array([1.0, -1.0, 1.0]),
                                                             return_sign=True)[0],
    "zeta": lambda L, x: L.scipy.special.zeta(3.0, L.numpy.abs(x) + 1),
    "polygamma": lambda L, x: L.scipy.special.polygamma(1, L.numpy.abs(x) + 0.5),
    "gammainc": lambda L, x: L.scipy.special.gammainc(2.0, L.numpy.abs(x)),
    "betainc": lambda L, x: L.scipy.special.betainc(2.0, 3.0, L.numpy.abs(x) / 4),
    "spence": lambda L, x: L.scipy.special.spence(L.numpy.abs(x)),
    "gamma_logpdf": lambda L, x: L.scipy.stats.gamma.logpdf(L.numpy.abs(x), 2.0),
    "beta_logpdf": lambda L, x: L.scipy.stats.beta.logpdf(L.numpy.abs(x) / 4, 2.0, 3.0),
    "poisson_logpmf": lambda L, x: L.scipy.stats.poisson.logpmf(np.array([0.0, 1.0, 3.0]), 2.0),
    "geom_logpmf": lambda L, x: L.scipy.stats.geom.logpmf(np.array([1, 2]), 0.3),
}


@pytest.mark.parametrize("flag", ["jax_debug_nans", "jax_debug_infs"])
@pytest.mark.parametrize("name", sorted(_INSIDE_JIT_IN_JAX))
def test_library_functions_jax_jits_check_their_outputs_only(name, flag):
    import jax.scipy.special
    import jax.scipy.stats  # noqa: F401

    import ftrans.scipy.special
    import ftrans.scipy.stats  # noqa: F401

    fn = _INSIDE_JIT_IN_JAX[name]
    x = np.array([[0.5, -1.0, 2.0], [3.0, 0.1, -2.0]], np.float32)
    with _flag(flag, jax):
        want = fn(jax, jjnp.asarray(x))
    with _flag(flag):
        got = fn(ftrans, jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


def test_library_function_with_a_bad_output_still_raises_like_jax():
    x = np.array([np.nan, np.nan], np.float32)
    with _flag("jax_debug_nans", jax), pytest.raises(FloatingPointError):
        jjnp.nanmax(jjnp.asarray(x))
    with _flag("jax_debug_nans"), pytest.raises(FloatingPointError):
        jnp.nanmax(jnp.asarray(x))
    y = np.array([np.inf, 1.0], np.float32)  # var: inf - inf makes the NaN
    with _flag("jax_debug_nans", jax), pytest.raises(FloatingPointError):
        jjnp.var(jjnp.asarray(y))
    with _flag("jax_debug_nans"), pytest.raises(FloatingPointError):
        jnp.var(jnp.asarray(y))
