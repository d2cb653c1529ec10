"""Eager library composites replayed from a cached program (``ftrans/core/eager_programs.py``).

The replay must give, bit for bit, what the op-by-op path gives (values, dtype, weak type, the sign of
zeros and NaNs), and must step aside wherever that path does something a program would not: under a
transform or a debug check, for value-dependent functions, for bad input, for warnings.
"""

from __future__ import annotations

import functools
import importlib
import pickle
import threading
import types
import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as jnp
from ftrans import lax
from ftrans.core import eager_programs as ep
from ftrans.core.array import Array
from tests.thorough import THOROUGH

MODULES = ["ftrans.numpy", "ftrans.numpy.linalg", "ftrans.numpy.fft", "ftrans.nn", "ftrans.scipy.special", "ftrans.lax",
           "ftrans.scipy.linalg", "ftrans.scipy.signal",
           *[f"ftrans.scipy.stats.{d}" for d in ("norm", "gamma", "beta", "t", "poisson", "truncnorm", "uniform",
                                                  "cauchy", "logistic", "expon", "vonmises", "binom")]]


def _replayed_functions() -> list[tuple[str, str]]:
    out = []
    for modname in MODULES:
        mod = importlib.import_module(modname)
        for name in sorted(vars(mod)):
            f = getattr(mod, name)
            if isinstance(f, types.FunctionType) and getattr(f, "__wrapped_replay__", None) is not None:
                out.append((modname, name))
    return out


REPLAYED = _replayed_functions()
_KEYWORDS = {"bessel_jn": {"v": 2}}  # required keyword-only arguments of replayed functions

_rng = np.random.default_rng(0)
_X = _rng.normal(size=16).astype(np.float32)
_X[3], _X[7] = 0.0, -0.0
_Y = _rng.normal(size=16).astype(np.float32)
_P = _rng.uniform(0.05, 0.95, size=16).astype(np.float32)
_E = _rng.integers(0, 5, 16).astype(np.int32)
_M = _rng.normal(size=(4, 4)).astype(np.float32)
_M3 = _rng.normal(size=(2, 3, 4)).astype(np.float32)
_B = _rng.normal(size=16) > 0


def _kinded_patterns() -> list[tuple[str, tuple]]:
    """The argument patterns, each with its kind: the argument structure and dtype classes the replay's
    signature sees.  Patterns of one kind differ only in shapes or values (one program path)."""
    x, y, p, e = jnp.asarray(_X), jnp.asarray(_Y), jnp.asarray(_P), jnp.asarray(_E)
    m, m3, b = jnp.asarray(_M), jnp.asarray(_M3), jnp.asarray(_B)
    return [("f", (x,)), ("ff", (x, y)), ("f", (m,)), ("fi", (x, e)), ("i", (e,)), ("ii", (e, e)), ("f", (p,)),
            ("ff", (p, p)), ("fff", (x, y, p)), ("ff", (m, m)), ("b", (b,)), ("f", (m3,)), ("f,int", (m3, 1)),
            ("f,float", (p, 2.5)), ("f,int", (x, 0)), ("list", ([x, y],)), ("tuple", ((x, y),)),
            ("str", ("i,i->", x, y)), ("str", ("ij,jk->ik", m, m)), ("f,i0", (x, jnp.asarray(np.int32(3)))),
            ("f,i0", (m3, jnp.asarray(np.int32(1)))), ("f,b0", (x, jnp.asarray(True))), ("ffff", (p, y, x, p))]


def _same(a, b) -> bool:
    la, ta = ftrans.tree_util.tree_flatten(a)
    lb, tb = ftrans.tree_util.tree_flatten(b)
    if ta != tb or len(la) != len(lb):
        return False
    for u, v in zip(la, lb):
        if type(u) is not type(v) or u.dtype != v.dtype or u.shape != v.shape or u.weak_type != v.weak_type:
            return False
        nu, nv = np.asarray(u), np.asarray(v)
        if nu.dtype.kind not in "iub":  # floats, complex, ml_dtypes' (kind "V"): compared as bits
            bits = [np.ascontiguousarray(w).reshape(-1).view(np.uint8) for w in (nu, nv)]
            if not np.array_equal(*bits):  # bits: signed zeros and NaNs too
                return False
        elif not np.array_equal(nu, nv):
            return False
    return True


def _direct(fn, *args):
    ep.enabled = False
    try:
        return fn(*args)
    finally:
        ep.enabled = True


def check_patterns(fn, kinded_patterns) -> int:
    """Call ``fn`` on each (kind, args) pattern it accepts, twice, against its op-by-op result, bit for bit;
    the quick run takes the first accepted pattern of each kind. Returns how many patterns ran."""
    tried = 0
    kinds_done = set()
    for kind, args in kinded_patterns:
        if kind in kinds_done and not THOROUGH:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                want = _direct(fn, *args)
            except Exception:  # noqa: BLE001  (not a pattern this function takes)
                continue
            leaves = ftrans.tree_util.tree_leaves(want)
            if not leaves or not all(type(v) is Array for v in leaves):
                continue
            for _ in range(2):
                got = fn(*args)
                assert _same(got, want), (getattr(fn, "__name__", fn), [getattr(a, "dtype", a) for a in args], got, want)
        tried += 1
        kinds_done.add(kind)
    return tried


@pytest.mark.parametrize("modname,name", REPLAYED, ids=[f"{m.split('.')[-1]}.{n}" for m, n in REPLAYED])
def test_replay_matches_the_op_by_op_call(modname, name):
    """Every replayed function, on every argument pattern it accepts: the program's result (built at the
    first call, read from the cache at the second) is the op-by-op result, bit for bit.  The quick run takes
    the first pattern of each kind the function accepts (the others differ in shapes or values only)."""
    fn = getattr(importlib.import_module(modname), name)
    call = functools.partial(fn, **_KEYWORDS[name]) if name in _KEYWORDS else fn
    tried = check_patterns(call, _kinded_patterns())
    assert tried, f"no argument pattern exercised {modname}.{name}"
    assert fn._replay_state.programs, f"{name} never reached the replay"


def _dtype_patterns(dt) -> list[tuple]:
    rng = np.random.default_rng(5)
    v = ((rng.normal(size=12) + 1j * rng.normal(size=12)).astype(dt) if np.dtype(dt).kind == "c"
         else rng.normal(size=12).astype(dt))
    m = np.resize(v, (3, 4))
    cases = [(jnp.asarray(v),), (jnp.asarray(v), jnp.asarray(v[::-1].copy())), (jnp.asarray(m), 0)]
    if THOROUGH:
        cases += [(jnp.asarray(m),), (jnp.asarray(m), jnp.asarray(m.T.copy()))]
    return cases


_DTYPES = [np.float16, ml_dtypes.bfloat16, np.complex64, np.int8, np.uint16] + ([np.float64] if THOROUGH else [])


def _dtypes_for(i: int) -> list:
    """The dtypes function ``i`` of ``REPLAYED`` runs at: all of ``_DTYPES`` in the thorough run; in the quick
    run one of each class, the two half floats (one widen-and-round-back path) and the two narrow integers
    alternating between neighbouring functions, so that each dtype still meets half of the functions."""
    if THOROUGH:
        return _DTYPES
    return [_DTYPES[i % 2], np.complex64, _DTYPES[3 + (i + 1) % 2]]


@pytest.mark.parametrize("modname,name,i", [(m, n, i) for i, (m, n) in enumerate(REPLAYED)],
                         ids=[f"{m.split('.')[-1]}.{n}" for m, n in REPLAYED])
def test_replay_matches_at_other_dtypes(modname, name, i):
    """The same comparison at float16, bfloat16 (NumPy rules widen them and round back), complex64 and the
    narrow integers: bit for bit, NaN payloads included."""
    fn = getattr(importlib.import_module(modname), name)
    for dt in _dtypes_for(i):
        for args in _dtype_patterns(dt):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    want = _direct(fn, *args)
                except Exception:  # noqa: BLE001  (not a pattern or dtype this function takes)
                    continue
                leaves = ftrans.tree_util.tree_leaves(want)
                if not leaves or not all(type(v) is Array for v in leaves):
                    continue
                fn(*args)
                assert _same(fn(*args), want), (name, np.dtype(dt).name, [getattr(a, "shape", a) for a in args])


def _programs_built(fn) -> int:
    return sum(1 for p in fn._replay_state.programs.values() if type(p) is ep._Program)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["var", "std", "nan_to_num", "ldexp", "frexp", "sinc", "hypot", "isclose", "clip",
                        "logsumexp", "softmax", "mean_axis", "sum_keepdims"]),
       st.sampled_from([np.float32, np.float16, np.int32, np.bool_]),
       st.lists(st.sampled_from([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 1e-40, 3e38, 7.0]),
                min_size=1, max_size=12))
def test_replay_matches_at_edge_values(name, dtype, values):
    import ftrans.nn as nn

    x = jnp.asarray(np.array(values, np.float64).astype(dtype) if dtype is not np.bool_ else
                    np.array(values, np.float64) > 0)
    calls = {
        "var": lambda: jnp.var(x), "std": lambda: jnp.std(x, ddof=1), "nan_to_num": lambda: jnp.nan_to_num(x),
        "ldexp": lambda: jnp.ldexp(x, jnp.arange(x.shape[0]) - 3), "frexp": lambda: jnp.frexp(x),
        "sinc": lambda: jnp.sinc(x), "hypot": lambda: jnp.hypot(x, x[::-1]), "isclose": lambda: jnp.isclose(x, 1.5),
        "clip": lambda: jnp.clip(x, -1, 2), "logsumexp": lambda: nn.logsumexp(x), "softmax": lambda: nn.softmax(x),
        "mean_axis": lambda: jnp.mean(x, axis=0), "sum_keepdims": lambda: jnp.sum(x, keepdims=True),
    }
    f = calls[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = _direct(f)
        except Exception as e:  # noqa: BLE001  the replay raises the same error
            with pytest.raises(type(e)):
                f()
            return
        assert _same(f(), want)
        assert _same(f(), want)


def test_one_trace_per_signature_and_hits_after():
    ep.clear()  # (other tests may have called var at this signature)
    f = jnp.var
    before = dict(f._replay_state.programs)
    x = jnp.asarray(np.arange(7, dtype=np.float32))
    f(x)
    assert _programs_built(f) == 0  # a one-off call is not traced
    f(x + 1)
    assert _programs_built(f) == 1  # the second is
    f(x, ddof=1)
    new = [k for k in f._replay_state.programs if k not in before]
    assert len(new) == 2  # (7,) float32, and the same with ddof=1
    hits = f._replay_state.hits
    f(x * 2)
    assert f._replay_state.hits == hits + 1
    assert _programs_built(f) == 1


def test_static_values_are_told_apart():
    """``1``/``True``/``1.0`` and ``0.0``/``-0.0`` hash alike in Python; the key keeps them apart."""
    x = jnp.asarray(np.array([-2.0, 0.0, 3.0], np.float32))
    for a, b in [(0.0, -0.0), (1, True), (1, 1.0)]:
        ra, rb = jnp.copysign(x, a), jnp.copysign(x, b)
        assert _same(ra, _direct(jnp.copysign, x, a)) and _same(rb, _direct(jnp.copysign, x, b))
    assert np.signbit(np.asarray(jnp.copysign(x, -0.0))).all()


def test_sequences_of_arrays_are_arguments():
    x, y = jnp.asarray(_X), jnp.asarray(_Y)
    for f in (jnp.stack, jnp.concatenate, jnp.hstack, jnp.vstack, jnp.column_stack):
        for _ in range(2):
            assert _same(f([x, y]), _direct(f, [x, y]))
            assert _same(f((y, x)), _direct(f, (y, x)))
        assert _programs_built(f) >= 1


def test_not_replayed_under_a_transform():
    x = jnp.asarray(_X)
    builds = ep.stats["builds"]
    jaxpr = ftrans.make_jaxpr(lambda v: jnp.var(jnp.sinc(v)))(jnp.asarray(np.ones(5, np.float32)))
    assert "reduce_sum" in str(jaxpr) and "sin" in str(jaxpr)  # traced through, not a call of a program
    assert ep.stats["builds"] == builds
    g = ftrans.grad(lambda v: jnp.var(jnp.sinc(v)))(x)
    fd = ftrans.jit(ftrans.grad(lambda v: jnp.var(jnp.sinc(v))))(x)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6)
    vm = ftrans.vmap(jnp.var)(jnp.asarray(_M))
    np.testing.assert_allclose(vm, np.var(_M, axis=1), rtol=1e-6)


def test_debug_nans_still_raises_at_the_operation():
    x = jnp.asarray(np.array([1.0, np.inf], np.float32))
    assert np.isnan(np.asarray(jnp.var(x)))  # replayed: no check
    with ftrans.debug_nans(True):
        with pytest.raises(FloatingPointError):
            jnp.var(x)


def test_bad_input_raises_the_direct_error_every_time():
    z = jnp.asarray(np.ones(3, np.complex64))
    for _ in range(3):
        with pytest.raises(ValueError, match="ldexp not supported"):
            jnp.ldexp(z, 2)
    with pytest.raises(TypeError):
        jnp.frexp(z)
    assert _same(jnp.ldexp(jnp.asarray(_X), 2), _direct(jnp.ldexp, jnp.asarray(_X), 2))


def test_a_warning_shows_on_every_call():
    x = jnp.asarray(np.arange(4, dtype=np.float32))
    if ftrans.config.enable_x64:
        pytest.skip("float64 is available under x64: nothing to warn about")
    for _ in range(3):
        with pytest.warns(UserWarning, match="float64"):
            jnp.var(x, dtype=np.float64)


def test_value_dependent_calls_run_directly():
    ep.clear()
    x = jnp.asarray(np.array([0.0, 2.0, 0.0, 3.0], np.float32))
    for _ in range(2):
        (idx,) = jnp.where(x)  # one argument: nonzero, whose shape depends on values
        np.testing.assert_array_equal(idx, [1, 3])
    assert ep._UNCACHED in jnp.where._replay_state.programs.values()


def test_changing_static_values_give_up_on_the_cache():
    ep.clear()
    f = jnp.float_power
    x = jnp.asarray(np.linspace(0.5, 2, 8).astype(np.float32))
    for k in range(ep._GIVE_UP_MISSES + 10):
        p = 0.5 + k / 7
        for _ in range(2):  # (a signature is traced at its second call)
            assert _same(f(x, p), _direct(f, x, p))
    assert f._replay_state.given_up
    assert not f._replay_state.programs
    ep.clear()  # a config change starts over
    assert not f._replay_state.given_up


def test_the_cache_is_bounded():
    f = jnp.nan_to_num
    for n in range(1, ep.MAX_PROGRAMS + 20):
        f(jnp.asarray(np.full(n, np.nan, np.float32)))
        f(jnp.asarray(np.full(n, np.nan, np.float32)))
    assert len(f._replay_state.programs) <= ep.MAX_PROGRAMS


def test_results_own_their_values():
    x = jnp.asarray(np.arange(5, dtype=np.float32))
    a, b = jnp.zeros_like(x), jnp.zeros_like(x)  # both from one program's folded constant
    assert np.asarray(a) is not np.asarray(b) or not np.asarray(a).flags.writeable
    assert a.weak_type == _direct(jnp.zeros_like, x).weak_type


def test_x64_switch_changes_the_program():
    x = jnp.asarray(np.arange(6, dtype=np.int32))
    low = jnp.var(x)
    assert low.dtype == np.float32
    with ftrans.enable_x64(True):
        hi = jnp.var(jnp.asarray(np.arange(6, dtype=np.int64)))
    assert hi.dtype == np.float64 or not ftrans.config.enable_x64
    assert jnp.var(x).dtype == np.float32


def test_replayed_functions_pickle_by_reference():
    import ftrans.nn as nn
    import ftrans.scipy.special as sp

    for f in (jnp.var, jnp.concat, nn.softmax, sp.ndtri):
        assert pickle.loads(pickle.dumps(f)) is f


def test_threads_share_programs():
    xs = [jnp.asarray(_rng.normal(size=32).astype(np.float32)) for _ in range(8)]
    want = [_direct(jnp.var, x) for x in xs]
    errors = []

    def work():
        try:
            for _ in range(50):
                for x, w in zip(xs, want):
                    assert _same(jnp.var(x), w)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_eager_loop_bodies_run_as_programs():
    """``while``/``scan``/``cond`` bodies evaluated eagerly run as host programs: the same values as
    interpreting them equation by equation."""
    x = jnp.asarray(np.linspace(0.1, 3, 16).astype(np.float32))

    def loops(v):
        w = lax.while_loop(lambda c: c[0] < 20, lambda c: (c[0] + 1, c[1] * 1.01 + jnp.sin(c[1])), (0, v))[1]
        s = lax.scan(lambda c, t: (c + jnp.tanh(t * c), c * t), v, jnp.stack([v, v * 2, v * 3]))
        c = lax.cond(v[0] > 0, lambda u: jnp.exp(u) - 1, lambda u: u, v)
        return w, s, c

    bodies = ep.stats["bodies"]
    assert _same(loops(x), _direct(loops, x))
    assert ep.stats["bodies"] > bodies  # (the 20-step loop's body became a program)
    import ftrans.scipy.special as sp

    for f, args in [(sp.gammainc, (x, x)), (sp.betainc, (x, x, x / 4)), (sp.expi, (x,))]:
        assert _same(f(*args), _direct(f, *args))


def test_a_warnings_filter_that_raises_does_not_break_the_replay():
    x = jnp.asarray(np.array([0.0, 1.0, -1.0], np.float32))
    want = _direct(jnp.sinc, x)
    jnp.sinc(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _same(jnp.sinc(x), want)


def test_device_arrays_take_the_op_by_op_path():
    """A committed (device-resident) array is not replayed on the host: results stay where op by op puts
    them, loops included."""
    dev = ftrans.devices()[0]
    x = ftrans.device_put(np.linspace(0.1, 2, 8).astype(np.float32), dev)
    for f in (lambda v: jnp.var(v), lambda v: jnp.var(v),
              lambda v: lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 0.5), (0, v))[1]):
        got, want = f(x), _direct(f, x)
        assert type(got) is type(want)
        assert got.committed == want.committed
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_functions_compiled_when_eager_are_not_replayed_on_the_host():
    """``lax.igamma`` runs compiled (XLA's loop) when called eagerly and inline when traced; a composite
    holding it must give the eager call's bits, so its program declines and the call runs op by op."""
    x = jnp.asarray(np.linspace(0.1, 3, 8).astype(np.float32))
    f = ep.replayed(lambda a, b: lax.igamma(a, b) * 2 + lax.zeta(a + 1.5, b))
    want = _direct(f, x, x)
    for _ in range(3):
        assert _same(f(x, x), want)
    assert list(f._replay_state.programs.values()) == [ep._UNCACHED]


def test_ufunc_objects_call_their_replayed_function():
    x, y = jnp.asarray(_X), jnp.asarray(_Y)
    for u in (jnp.logaddexp, jnp.logaddexp2):
        fn = u.__wrapped__
        assert fn._replay_state is not None
        want = _direct(u, x, y)
        for _ in range(3):
            assert _same(u(x, y), want)
        assert _programs_built(fn) >= 1
        assert _same(u.reduce(x), _direct(u.reduce, x))


def test_a_program_holding_large_constants_is_not_kept():
    big = jnp.asarray(np.ones(3_000_000, np.float32))  # 12 MB, captured by the function
    f = ep.replayed(lambda v: v + big)
    x = jnp.asarray(np.zeros(3_000_000, np.float32))
    for _ in range(3):
        np.testing.assert_array_equal(f(x)[:3], [1, 1, 1])
    assert list(f._replay_state.programs.values()) == [ep._UNCACHED]


def test_scalar_integer_arrays_are_part_of_the_signature():
    """Eagerly, ``power(x, k)`` with a concrete scalar integer array ``k`` is ``integer_pow`` (repeated
    multiplication); traced, it would be ``pow``, which rounds differently in a third of these cases. Such
    arguments enter the program as values, keyed by value."""
    x = jnp.asarray(np.random.default_rng(1).uniform(0.5, 3, 500).astype(np.float32))
    for kv in (2, 3, 5, -3, 3):
        k = jnp.asarray(np.int32(kv))
        want = _direct(jnp.power, x, k)
        for _ in range(3):
            assert _same(jnp.power(x, k), want)
    assert _programs_built(jnp.power) >= 4


def test_reductions_replay_their_general_path_only():
    """``sum``/``mean``/``max``/``min`` keep their one-argument fast path unwrapped; every other call runs
    from a program of the general path, with the op-by-op bits."""
    from ftrans.numpy import _reductions as R

    m = jnp.asarray(_M3)
    mask = jnp.asarray(_M3 > 0)
    calls = [
        lambda: jnp.sum(m, axis=1), lambda: jnp.sum(m, axis=(0, 2), keepdims=True), lambda: jnp.sum(m, where=mask),
        lambda: jnp.sum(m, dtype=np.float16), lambda: jnp.sum(m, axis=0, initial=2.0),
        lambda: jnp.mean(m, axis=-1), lambda: jnp.mean(m, where=mask), lambda: jnp.mean(m, keepdims=True),
        lambda: jnp.max(m, axis=2), lambda: jnp.max(m, where=mask, initial=-5.0), lambda: jnp.min(m, axis=(1, 2)),
        lambda: jnp.min(m, keepdims=True), lambda: m.sum(axis=0), lambda: m.max(axis=1),
    ]
    for c in calls:
        want = _direct(c)
        for _ in range(3):
            assert _same(c(), want)
    for general in (R._sum_general, R._mean_general, R._max_general, R._min_general):
        assert _programs_built(general) >= 1
    assert getattr(jnp.sum, "__wrapped_replay__", None) is None  # (the fast path pays for no wrapper)
