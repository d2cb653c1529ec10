"""``jit``'s options do what they say (none is accepted and ignored), and its one call path's error cases."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans import errors
from ftrans.core.trace import Tracer as _FTracer
from ftrans.errors import DeletedArrayError, FtransTypeError, FtransValueError


def _main_params(text: str) -> int:
    line = next(ln for ln in text.splitlines() if "@main(" in ln)
    head = line[line.index("@main(") + 6:line.index(") ->")]
    return head.count("%")


# ---------------------------------------------------------------- keep_unused
def test_keep_unused_false_prunes_unused_parameters_like_jax():
    def f(x, unused, y):
        return x * y

    args = (np.ones(3, np.float32), np.ones(2, np.float32), np.ones(3, np.float32))
    ours = ftrans.jit(f).lower(*args).as_text()
    theirs = jax.jit(f).lower(*args).as_text()
    assert _main_params(ours) == _main_params(theirs) == 2


def test_keep_unused_true_keeps_every_parameter_like_jax():
    def f(x, unused, y):
        return x * y

    args = (np.ones(3, np.float32), np.ones(2, np.float32), np.ones(3, np.float32))
    ours = ftrans.jit(f, keep_unused=True).lower(*args).as_text()
    theirs = jax.jit(f, keep_unused=True).lower(*args).as_text()
    assert _main_params(ours) == _main_params(theirs) == 3


@pytest.mark.parametrize("keep", [False, True])
def test_pruned_program_computes_the_same(keep):
    f = ftrans.jit(lambda a, b, c: {"s": a + c}, keep_unused=keep)
    a = np.arange(3, dtype=np.float32)
    for _ in range(3):  # general path, then the fast key
        out = f(a, np.float32(7.0), a)
        np.testing.assert_array_equal(np.asarray(out["s"]), 2 * a)
    da = ftrans.device_put(a)
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(f(da, ftrans.device_put(np.float32(1)), da)["s"]), 2 * a)
    compiled = ftrans.jit(lambda a, b: a * 2, keep_unused=keep).lower(a, a).compile()
    np.testing.assert_array_equal(np.asarray(compiled(a, a)), 2 * a)


def test_pruned_argument_donation():
    f = ftrans.jit(lambda a, b: a * 2, donate_argnums=(0, 1))
    a = ftrans.device_put(np.ones(3, np.float32))
    b = ftrans.device_put(np.ones(3, np.float32))
    np.testing.assert_array_equal(np.asarray(f(a, b)), 2 * np.ones(3, np.float32))
    with pytest.raises(DeletedArrayError, match="donated"):
        np.asarray(a)


# ---------------------------------------------------------------- inline
def test_inline_puts_the_body_in_the_callers_jaxpr():
    inner = ftrans.jit(lambda x: ftrans.numpy.sin(x) * 2, inline=True)
    plain = ftrans.jit(lambda x: ftrans.numpy.sin(x) * 2)
    x = np.ones(3, np.float32)
    got = [e.primitive.name for e in ftrans.make_jaxpr(lambda x: inner(x) + 1)(x).jaxpr.eqns]
    assert got == ["sin", "mul", "add"], got
    called = [e.primitive.name for e in ftrans.make_jaxpr(lambda x: plain(x) + 1)(x).jaxpr.eqns]
    assert called == ["jit_call", "add"], called
    # ftrans's inline=True is jax 0.10's: jax 0.11 spells it Inline.JAX_EARLY (its True is JAX_LATE, which keeps
    # the jit equation and inlines while lowering)
    early = jax.Inline.JAX_EARLY if hasattr(jax, "Inline") else True
    theirs = [e.primitive.name for e in jax.make_jaxpr(lambda x: jax.jit(lambda x: jjnp.sin(x) * 2,
                                                                         inline=early)(x) + 1)(x).jaxpr.eqns]
    assert theirs == got


def test_inline_still_compiles_when_called_eagerly():
    f = ftrans.jit(lambda x: x + 1, inline=True)
    np.testing.assert_array_equal(np.asarray(f(np.ones(2, np.float32))), 2 * np.ones(2, np.float32))
    assert f.cache_info()["misses"] == 1
    np.testing.assert_array_equal(np.asarray(ftrans.jit(lambda x: f(x) * 3)(np.ones(2, np.float32))),
                                  6 * np.ones(2, np.float32))


# ---------------------------------------------------------------- compiler_options
def test_compiler_options_reach_xla_and_key_the_cache():
    from ftrans.lowering import executable as X

    x = np.linspace(0, 1, 8, dtype=np.float32)
    plain = ftrans.jit(lambda x: jnp.exp(x) * 3)
    opt = ftrans.jit(lambda x: jnp.exp(x) * 3, compiler_options={"xla_backend_optimization_level": 0,
                                                                 "xla_cpu_enable_fast_math": False})
    np.testing.assert_allclose(np.asarray(plain(x)), np.exp(x) * 3, rtol=1e-6)
    before = X.stats["compiles"]
    np.testing.assert_allclose(np.asarray(opt(x)), np.exp(x) * 3, rtol=1e-6)
    assert X.stats["compiles"] == before + 1  # same module text, other options: not the cached program


def test_unknown_compiler_option_is_named():
    f = ftrans.jit(lambda x: x + 1, compiler_options={"xla_no_such_option_here": True})
    with pytest.raises(FtransValueError, match="xla_no_such_option_here"):
        f(np.ones(2, np.float32))


def test_bad_compiler_option_value():
    with pytest.raises(FtransTypeError, match="compiler_options"):
        ftrans.jit(lambda x: x, compiler_options={"xla_cpu_enable_fast_math": [1]})
    with pytest.raises(FtransTypeError, match="dict"):
        ftrans.jit(lambda x: x, compiler_options=[("a", 1)])
    f = ftrans.jit(lambda x: x + 1, compiler_options={"xla_cpu_enable_fast_math": "notabool"})
    with pytest.raises(FtransValueError, match="xla_cpu_enable_fast_math"):
        f(np.ones(2, np.float32))


# ---------------------------------------------------------------- one call path: deleted buffers
def test_deleted_argument_raises_on_every_cache_tier():
    f = ftrans.jit(lambda x: x * 2)
    g = ftrans.jit(lambda p: p["a"] * 2)
    x = ftrans.device_put(np.ones(3, np.float32))
    for _ in range(2):  # warm the fast keys
        f(x)
        g({"a": x})
    x.delete()
    with pytest.raises(DeletedArrayError):
        f(x)
    with pytest.raises(DeletedArrayError):
        g({"a": x})


@pytest.mark.parametrize("how", ["argnums", "argnames"])
def test_host_array_donated_is_deleted_as_in_jax(how):
    """An eagerly made (host) Array donated to a jitted call is gone afterwards, as a jax.Array is:
    ``is_deleted()`` and any later use raises DeletedArrayError, even after other jits cached its copy."""
    kw = {"donate_argnums": 0} if how == "argnums" else {"donate_argnames": "x"}
    for lib, np_ in ((jax, jjnp), (ftrans, jnp)):
        d = lib.jit(lambda x: x + x - x, **kw)
        f = lib.jit(lambda x: x * 2)
        a = np_.ones(3)
        for _ in range(2):
            f(a)
        out = d(a)
        assert a.is_deleted(), lib
        np.testing.assert_array_equal(np.asarray(out), np.ones(3, np.float32))
        with pytest.raises(RuntimeError):  # jax's RuntimeError; ftrans's DeletedArrayError subclasses it
            np.asarray(a)
    with pytest.raises(DeletedArrayError, match="donated"):
        f(a)
    with pytest.raises(DeletedArrayError, match="donated"):
        a + 1  # noqa: B018


def test_host_array_donated_weak_type_and_several_names_are_deleted():
    """JAX's test_jit_donate_weak_type and test_specify_donate_argnums_and_argnames on host Arrays."""
    move = ftrans.jit(lambda x: x.astype(int), donate_argnums=0)
    x = jnp.broadcast_to(2, (3,))
    assert x.weak_type
    move(x)
    assert x.is_deleted()
    f = ftrans.jit(lambda inp1, inp2, inp3: (inp1 * 2, inp2 * 2, inp3 * 2), donate_argnums=0,
                   donate_argnames=("inp2", "inp3"))
    x, y, z = jnp.ones((2, 5)) * 4, jnp.ones((2, 5)) * 2, jnp.ones((2, 5))
    f(x, inp2=y, inp3=z)
    assert x.is_deleted() and y.is_deleted() and z.is_deleted()


def test_no_catch_all_in_the_call_path():
    import inspect

    from ftrans.transforms import jit as J

    # The one catch-all allowed is the API boundary's, which filters the traceback and re-raises (bare
    # ``raise``): nothing in the call path swallows an exception.
    lines = inspect.getsource(J.JitWrapped).split("\n")
    for i, line in enumerate(lines):
        if "except Exception" in line:
            indent = len(line) - len(line.lstrip())
            block = []
            for nxt in lines[i + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                    break
                block.append(nxt.strip())
            block = [b for b in block if b]
            assert block and block[-1] == "raise", line


# ---------------------------------------------------------------- the XLA options ftrans compiles with by default
def test_default_compiler_options_reach_xla_unless_the_jit_names_them(monkeypatch):
    from ftrans.lowering import compat
    from ftrans.lowering import executable as X

    seen = []
    real = compat.compile

    def spy(client, text, devices, options=(), host_callbacks=()):
        seen.append(dict(options))
        return real(client, text, devices, options, host_callbacks)

    monkeypatch.setattr(compat, "compile", spy)
    monkeypatch.setattr(ftrans.config, "enable_compilation_cache", False)
    x = np.linspace(-1, 1, 7, dtype=np.float32)
    want = np.asarray(jax.jit(lambda a: jjnp.tanh(a) * 2.0 + 1.0)(x))
    for opts in (None, {"xla_backend_optimization_level": 2}, {"xla_llvm_disable_expensive_passes": True}):
        X._xla_cache.clear()
        got = ftrans.jit(lambda a: jnp.tanh(a) * 2.0 + 1.0, compiler_options=opts)(x)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)
    # none on a GPU; on the CPU none either where XLA_FLAGS names the level (tests/conftest.py does)
    defaults = dict(X.with_default_options((), ftrans.devices()[0].platform))
    assert seen[0] == defaults  # no options asked for: the platform's defaults
    assert seen[1] == {"xla_backend_optimization_level": 2}  # the jit's own value wins
    assert seen[2] == {**defaults, "xla_llvm_disable_expensive_passes": True}  # merged with other options


def test_default_options_are_part_of_the_cache_keys(monkeypatch):
    from ftrans.lowering import executable as X

    monkeypatch.setattr(X, "options_in_xla_flags", lambda: frozenset())  # XLA_FLAGS names none of them
    assert X.with_default_options((), "cpu") == X.DEFAULT_COMPILER_OPTIONS["cpu"]
    assert X.with_default_options((("xla_backend_optimization_level", 3),), "cpu") == (
        ("xla_backend_optimization_level", 3),)
    assert X.with_default_options((), "no-such-platform") == ()
    assert X.disk_text_of("m", X.with_default_options((), "cpu")) != X.disk_text_of("m", ())


def test_options_in_xla_flags_take_the_place_of_ftrans_defaults(monkeypatch):
    """XLA_FLAGS is XLA's default for every compile, JAX's included: ftrans's own default for an option the
    user set there steps aside (else ftrans would compile at another level than the user asked for)."""
    from ftrans.lowering import executable as X

    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=3")
    X.options_in_xla_flags.cache_clear()
    try:
        assert X.options_in_xla_flags() == {"xla_force_host_platform_device_count", "xla_backend_optimization_level"}
        assert X.with_default_options((), "cpu") == ()
        assert X.with_default_options((("xla_llvm_disable_expensive_passes", True),), "cpu") == (
            ("xla_llvm_disable_expensive_passes", True),)
        monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
        X.options_in_xla_flags.cache_clear()
        assert X.with_default_options((), "cpu") == X.DEFAULT_COMPILER_OPTIONS["cpu"]
    finally:
        monkeypatch.undo()
        X.options_in_xla_flags.cache_clear()


def test_ynnpack_fusions_off_per_jit_is_its_own_executable(monkeypatch):
    """docs/compilation_cache.md's recipe: XLA's CPU YNNPACK fusions turned off for one jit, through the
    compile options (no XLA_FLAGS); the result is jax's and the option keys its own executable."""
    from ftrans.lowering import executable as X

    monkeypatch.setattr(ftrans.config, "enable_compilation_cache", False)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 32)).astype(np.float32)
    ws = [(rng.standard_normal((32, 32)) / 6).astype(np.float32) for _ in range(3)]

    def loss(ws, x):
        for w in ws:
            x = jnp.tanh(x @ w)
        return jnp.sum(x)

    def jloss(ws, x):
        for w in ws:
            x = jjnp.tanh(x @ w)
        return jjnp.sum(x)

    want = jax.jit(jax.grad(jloss))(ws, x)
    off = {"xla_cpu_experimental_ynn_fusion_type": ""}
    g = ftrans.grad(loss)
    try:  # one line: the module texts (their locations included) are the same
        c_off, c_def = [ftrans.jit(g, compiler_options=o).lower(ws, x).compile() for o in (off, None)]
    except errors.CompilerOptionError:
        pytest.skip("this XLA has no xla_cpu_experimental_ynn_fusion_type")
    for got in (c_off(ws, x), c_def(ws, x)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
    assert c_off._exe.text == c_def._exe.text
    keys = [k for k in X._xla_cache if k[0] == c_off._exe.text]
    assert len({k[3] for k in keys}) == 2  # one module text, two option sets: two executables
    assert X.disk_text_of("m", X.with_default_options(tuple(off.items()), "cpu")) != \
        X.disk_text_of("m", X.with_default_options((), "cpu"))


# ------------------------------------------- argument-name/number validation (JAX's rules)
def _f3(a, b, c):
    return a


def _g_kw(a, b, **kwargs):
    return a


def _h_mixed(a, /, b, c, *args, **kwargs):
    return a


@pytest.mark.parametrize("what", ["static_argnames", "donate_argnames"])
@pytest.mark.parametrize("fun, names, ok", [
    (_f3, ("b", "c"), True),
    (_f3, ("b", "c", "not_defined"), False),   # unknown name, no **kwargs
    (_g_kw, ("a", "b", "not_defined"), True),  # **kwargs takes any name
    (_h_mixed, ("b", "c", "not_defined"), True),
    (_h_mixed, ("a", "c"), False),             # positional-only
    (_h_mixed, ("args", "c"), False),          # *args
])
def test_argnames_validated_like_jax(what, fun, names, ok):
    def build(mod):
        try:
            mod.jit(fun, **{what: names})
            return None
        except ValueError as e:
            return e

    j, f = build(jax), build(ftrans)
    assert (j is None) == ok
    assert (f is None) == (j is None), (j, f)
    if f is not None:
        assert isinstance(f, FtransValueError)
        assert repr(list(set(names) - {"b", "c"})[0]) in str(f)


@pytest.mark.parametrize("nums", [(3,), (5,), (-4,)])
def test_donate_argnums_out_of_range_raises_like_jax(nums):
    with pytest.raises(ValueError):
        jax.jit(_f3, donate_argnums=nums)
    with pytest.raises(FtransValueError, match="donate_argnums .* out of range"):
        ftrans.jit(_f3, donate_argnums=nums)
    ftrans.jit(lambda *a: a[0], donate_argnums=nums)  # *args: any position
    jax.jit(lambda *a: a[0], donate_argnums=nums)


def test_static_and_donate_argnames_cannot_intersect():
    with pytest.raises(ValueError, match="cannot intersect"):
        jax.jit(lambda x: x, static_argnames="x", donate_argnames="x")
    with pytest.raises(FtransValueError, match="static_argnames and donate_argnames cannot intersect"):
        ftrans.jit(lambda x: x, static_argnames="x", donate_argnames="x")


def test_donate_argnames_without_a_signature_raises():
    class NoSignature:
        @property
        def __signature__(self):
            raise TypeError("no signature")

        def __call__(self, *args, **kwargs):
            return None

    inp = np.arange(4)
    with pytest.raises(ValueError, match="Pass donate_argnums"):
        jax.jit(NoSignature(), donate_argnames="a")(inp, inp)
    with pytest.raises(FtransValueError, match="Pass donate_argnums instead of donate_argnames"):
        ftrans.jit(NoSignature(), donate_argnames="a")(inp, inp)
    assert ftrans.jit(NoSignature(), donate_argnums=0)(inp, inp) is None  # argnums need no signature


@pytest.mark.parametrize("mod", [jax, ftrans], ids=["jax", "ftrans"])
def test_staticmethod_classmethod_and_generators_are_refused(mod):
    with pytest.raises(TypeError, match="staticmethod arguments are not supported"):
        class A:
            @mod.jit
            @staticmethod
            def m(x):
                return x + 2

    with pytest.raises(TypeError, match="Expected a callable value"):
        class B:
            @mod.jit(static_argnums=(0,))
            @classmethod
            def m(cls, x):
                return x + 2

    def gen(x):
        yield x

    with pytest.raises(TypeError, match="generator function"):
        mod.jit(gen)

    class C:  # the supported spelling: staticmethod over jit
        @staticmethod
        @mod.jit
        def m(x):
            return x + 2

    assert int(C.m(1)) == 3


# ----------------------------------------------------------- args_info, compile options
def _fn_tree(x, y):
    return jax.tree.map(lambda i: i * 2, x), y * 2


def _info(tree):
    return jax.tree.map(lambda i: (i.shape, np.dtype(i.dtype), i.donated), tree,
                        is_leaf=lambda i: hasattr(i, "donated"))


@pytest.mark.parametrize("kw, call", [
    ({"donate_argnums": 1}, "pos"),
    ({"donate_argnums": 0}, "pos"),
    ({"donate_argnames": ("z", "y")}, "kw"),
    ({"donate_argnums": (0, 1)}, "kw"),
    ({"donate_argnames": ("z", "y")}, "mixed"),
    ({"donate_argnums": (0, 1)}, "mixed"),
    ({"static_argnums": 2}, "mixed"),
])
def test_args_info_matches_jax(kw, call):
    def f(z, y, x):
        return z, y

    z, y, x = {"c": 3.0}, {"b": np.ones(2, np.int32)}, 1.0
    args = {"pos": ((z, y, x), {}), "kw": ((), {"z": z, "y": y, "x": x}), "mixed": ((z,), {"y": y, "x": x})}[call]
    want = jax.jit(f, **kw).lower(*args[0], **args[1]).args_info
    got_lowered = ftrans.jit(f, **kw).lower(*args[0], **args[1]).args_info
    got_traced = ftrans.jit(f, **kw).trace(*args[0], **args[1]).args_info
    assert _info(got_lowered) == _info(want)
    assert _info(got_traced) == _info(want)


def test_compiled_args_info_matches_jax():
    # The Compiled stage lists every dynamic argument (an unread one too) with its donation, as JAX's.
    def f(x, dead):
        return x * 2

    a, b = np.arange(3.0, dtype=np.float32), np.arange(5.0, dtype=np.float32)
    want = jax.jit(f, donate_argnums=1).lower(a, b).compile().args_info
    got = ftrans.jit(f, donate_argnums=1).lower(a, b).compile().args_info
    assert _info(got) == _info(want)


def test_lowered_compile_takes_compiler_options():
    def f(x):
        return jnp.sqrt(x ** 2) + 1.0

    lowered = ftrans.jit(f).lower(1.0)
    c = lowered.compile(compiler_options={"xla_embed_ir_in_executable": True, "xla_dump_max_hlo_modules": 200})
    assert float(c(2.0)) == 3.0
    assert float(lowered.compile()(2.0)) == 3.0
    with pytest.raises(FtransValueError, match="no_such_option"):
        lowered.compile(compiler_options={"no_such_option": 1})
    with pytest.raises(FtransTypeError, match="compiler_options"):
        lowered.compile(compiler_options=[("a", 1)])


# jax 0.10's jit takes exec_time_optimization_effort/memory_fitting_effort; jax 0.11's refuses them
_JAX_HAS_FLOAT_EFFORTS = "jax_exec_time_optimization_effort" in jax.config.values


@pytest.mark.parametrize("opts", [{"optimization_level": 19}, {"memory_fitting_level": 9},
                                  {"exec_time_optimization_effort": 0.0}, {"memory_fitting_effort": 0.5}])
def test_build_option_names_are_accepted_like_jax(opts):
    def f(x):
        return x * 2.0 + 1.0

    if not _JAX_HAS_FLOAT_EFFORTS and set(opts) & {"exec_time_optimization_effort", "memory_fitting_effort"}:
        want = 7.0  # jax 0.11 refuses the float effort names XLA dropped; ftrans takes them as jax 0.10 does
    else:
        want = jax.jit(f, compiler_options=opts)(3.0)
    got = ftrans.jit(f, compiler_options=opts)(3.0)
    assert float(got) == float(want) == 7.0
    assert float(ftrans.jit(f).lower(3.0).compile(compiler_options=opts)(3.0)) == 7.0


@pytest.mark.parametrize("v", [2**31, -2**31 - 1, 2**31 - 1, -2**31])
def test_returned_python_int_overflow_like_jax(v):
    def run(mod):
        try:
            return mod.jit(lambda: v)()
        except OverflowError as e:
            return e

    j, f = run(jax), run(ftrans)
    assert isinstance(f, OverflowError) == isinstance(j, OverflowError)
    if isinstance(f, OverflowError):
        assert str(v) in str(f) and "default integer type" in str(f)
    else:
        assert f.dtype == j.dtype and int(f) == int(j) == v


def test_static_argnums_and_argnames_both_given_are_taken_as_given():
    # JAX: given both, neither is inferred from the other (a parameter static by position is
    # dynamic when passed by keyword, and the other way round).
    tracers = (jax.core.Tracer, _FTracer)

    def run(mod):
        want = {}
        traced = []

        def f(x, y):
            got = (isinstance(x, tracers), isinstance(y, tracers))
            assert got == want["v"], (got, want["v"])
            traced.append(got)
            return 1

        def call(fn, expect, *a, **k):
            want["v"] = expect
            assert int(fn(*a, **k)) == 1

        f_nums = mod.jit(f, static_argnums=1, static_argnames=())
        call(f_nums, (True, False), 2, "foo")
        call(f_nums, (True, True), 1, y=2)
        f_names = mod.jit(f, static_argnums=(), static_argnames="y")
        call(f_names, (True, True), 2, 3)
        call(f_names, (True, False), 1, y="foo")
        f_mixed = mod.jit(f, static_argnums=(1,), static_argnames="x")
        call(f_mixed, (True, False), 2, "foo")
        call(f_mixed, (True, True), 1, y=3)
        call(f_mixed, (False, True), x="foo", y=3)
        return traced

    assert run(jax)
    assert run(ftrans)
    # One of the two given: the other is still inferred.
    assert run_one(ftrans) == run_one(jax) == [False, False]


def run_one(mod):
    out = []

    def f(x, y):
        out.append(isinstance(y, (jax.core.Tracer, _FTracer)))
        return 1

    mod.jit(f, static_argnums=1)(1, y=2)
    mod.jit(f, static_argnames="y")(1, 2)
    return out


@pytest.mark.parametrize("kw", [{"donate_argnums": (0,)}, {"donate_argnames": "b"},
                                {"static_argnums": 0, "donate_argnums": 1},
                                {"static_argnums": 1, "donate_argnums": (0, 2)}])
def test_lowered_and_compiled_donate_argnums_like_jax(kw):
    def f(a, b, c=1.0):
        return a + b + c

    jl = jax.jit(f, **kw).lower(1.0, 1.0, 2.0)
    fl = ftrans.jit(f, **kw).lower(1.0, 1.0, 2.0)
    assert fl.donate_argnums == jl.donate_argnums
    assert fl.compile().donate_argnums == jl.compile().donate_argnums


def test_shape_dtype_struct_needs_a_dtype():
    with pytest.raises(ValueError, match="dtype must be specified"):
        jax.ShapeDtypeStruct(shape=(), dtype=None)
    with pytest.raises(FtransValueError, match="dtype must be specified"):
        ftrans.ShapeDtypeStruct(shape=(), dtype=None)


# ------------------------------------------------------- inputs JAX refuses
def _masked():
    return np.ma.array([1, 2, 3], mask=[True, False, True])


@pytest.mark.parametrize("use", [
    lambda m, x: m.jit(lambda a: a)(_masked()),
    lambda m, x: m.jit(lambda a: a["k"])({"k": _masked()}),
    lambda m, x: x.asarray(_masked()),
    lambda m, x: x.array(_masked(), copy=False),
    lambda m, x: m.device_put(_masked()),
    lambda m, x: x.sin(_masked()),
    lambda m, x: x.ones(3) + _masked(),
    lambda m, x: x.sum(_masked()),
], ids=["jit", "jit-tree", "asarray", "array", "device_put", "sin", "add", "sum"])
def test_numpy_masked_arrays_are_refused_like_jax(use):
    with pytest.raises(ValueError, match="masked arrays are not supported"):
        use(jax, jjnp)
    with pytest.raises(FtransValueError, match="masked arrays are not supported.*filled"):
        use(ftrans, jnp)
    # As JAX: a copy or a conversion reads the data (the mask is dropped).
    for f in (lambda m: m.array(_masked()), lambda m: m.asarray(_masked(), dtype="float32")):
        assert np.asarray(f(jnp)).tolist() == np.asarray(f(jjnp)).tolist()
    # the filled array is fine
    assert np.asarray(ftrans.jit(lambda a: a * 2)(_masked().filled(0))).tolist() == [0, 4, 0]


@pytest.mark.parametrize("bad", [lambda c: c([1.0]), lambda c: c((1.0,)), lambda c: c(1.0, 2.0),
                                 lambda c: c(x=1.0)])
def test_compiled_refuses_another_pytree_like_jax(bad):
    def f(x):
        return jnp.sqrt(x ** 2) + 1.0

    with pytest.raises(TypeError):
        bad(jax.jit(lambda x: jjnp.sqrt(x ** 2) + 1.0).lower(1.0).compile())
    c = ftrans.jit(f).lower(1.0).compile()
    with pytest.raises(FtransTypeError, match="pytree structure does not match"):
        bad(c)
    assert float(c(2.0)) == 3.0
    cs = ftrans.jit(lambda x, n: x * n, static_argnums=1).lower(1.0, 2).compile()
    assert float(cs(3.0)) == 6.0  # static arguments are left out of the call
    ck = ftrans.jit(lambda x, d: x * d["a"]).lower(1.0, {"a": 2.0}).compile()
    assert float(ck(3.0, {"a": 4.0})) == 12.0
    with pytest.raises(FtransTypeError, match="pytree structure"):
        ck(3.0, {"b": 4.0})


def test_compiled_names_each_argument_whose_type_differs_like_jax():
    def f(x, n, p):
        return jnp.sqrt(x ** 2) * n + p["w"]

    def jf(x, n, p):
        return jjnp.sqrt(x ** 2) * n + p["w"]

    args = (np.float32(1), 2, {"w": np.ones(3, np.float32)})
    c = ftrans.jit(f, static_argnums=1).lower(*args).compile()
    jc = jax.jit(jf, static_argnums=1).lower(*args).compile()
    for call in (lambda k: k(np.int32(1), {"w": np.ones(3, np.float32)}),
                 lambda k: k(np.float32(1), {"w": np.ones(2, np.float32)})):
        with pytest.raises(TypeError):
            call(jc)
    with pytest.raises(FtransTypeError, match=r"differ.*The mismatches are:\nArgument 'x' compiled with "
                                              r"float32\[\] and called with int32\[\]\n") as e:
        c(np.int32(1), {"w": np.ones(3, np.float32)})
    assert "p['w']" not in str(e.value)
    with pytest.raises(FtransTypeError, match=r"Argument \"p\['w'\]\" compiled with float32\[3\] and called with "
                                              r"float32\[2\]"):
        c(np.float32(1), {"w": np.ones(2, np.float32)})
    np.testing.assert_allclose(c(np.float32(-2), {"w": np.ones(3, np.float32)}),
                               jc(np.float32(-2), {"w": np.ones(3, np.float32)}))


@pytest.mark.parametrize("transform", ["vmap", "grad", "jit"])
def test_compiled_under_a_transform_is_refused_like_jax(transform):
    """A Compiled program takes concrete arrays only: under vmap/grad/jit it says so (it used to fail deep inside,
    converting a tracer to NumPy)."""
    c = ftrans.jit(lambda x: x + 4).lower(1.0).compile()
    jc = jax.jit(lambda x: x + 4).lower(1.0).compile()
    run = {"vmap": lambda t, k, m: t.vmap(lambda x: k(x) + 2)(m.ones(3)),
           "grad": lambda t, k, m: t.grad(lambda x: k(x))(1.0),
           "jit": lambda t, k, m: t.jit(lambda x: k(x))(1.0)}[transform]
    with pytest.raises(TypeError):
        run(jax, jc, jjnp)
    with pytest.raises(FtransTypeError, match="compiled for fixed argument types cannot be transformed"):
        run(ftrans, c, jnp)
    assert float(c(1.0)) == 5.0
    if jax.local_device_count() >= 2:  # a partitioned one too
        from ftrans.sharding import NamedSharding, P

        mesh = ftrans.make_mesh((2,), ("x",))
        cs = ftrans.jit(lambda x: x + 4, in_shardings=NamedSharding(mesh, P())).lower(1.0).compile()
        with pytest.raises(FtransTypeError, match="compiled for fixed argument types cannot be transformed"):
            run(ftrans, cs, jnp)


# ------------------------------------------------------- no_tracing / no_execution
@pytest.mark.parametrize("mod", [jax, ftrans], ids=["jax", "ftrans"])
def test_no_execution_like_jax(mod):
    np_ = jjnp if mod is jax else jnp

    @mod.jit
    def f():
        return np_.ones(3)

    assert np.asarray(f()).tolist() == [1.0, 1.0, 1.0]
    with mod.no_execution():
        with pytest.raises(RuntimeError, match="no_execution"):
            f()
        with pytest.raises(RuntimeError, match="no_execution"):
            f()  # the fast tiers do not answer either
        compiled = mod.jit(lambda x: x + 1).lower(1.0).compile()
        with pytest.raises(RuntimeError, match="no_execution"):
            compiled(1.0)
        jaxpr = mod.make_jaxpr(lambda x: mod.jit(lambda y: y * 2)(x))(1.0)  # tracing is fine
        assert "mul" in str(jaxpr)
    assert np.asarray(f()).tolist() == [1.0, 1.0, 1.0]
    if mod is ftrans:
        with pytest.raises(errors.FtransRuntimeError, match="jit\\(f\\)"):
            with mod.no_execution():
                f()


@pytest.mark.parametrize("mod", [jax, ftrans], ids=["jax", "ftrans"])
def test_no_tracing_like_jax(mod):
    np_ = jjnp if mod is jax else jnp

    @mod.jit
    def g(x):
        return x

    x, y = np_.arange(3), np_.arange(4)
    g(x)
    with mod.no_tracing():
        assert np.asarray(g(x)).tolist() == [0, 1, 2]  # a cache hit needs no tracing
        with pytest.raises(RuntimeError, match="no_tracing"):
            g(y)
        with pytest.raises(RuntimeError, match="no_tracing"):
            mod.make_jaxpr(lambda a: a * 2)(1.0)
    assert np.asarray(g(y)).tolist() == [0, 1, 2, 3]
    if mod is ftrans:
        with pytest.raises(errors.FtransRuntimeError, match="re-tracing function g"):
            with mod.no_tracing():
                g(np_.arange(5))


def test_rejected_compiler_option_is_a_runtime_error_like_jax():
    def f(x):
        return x + 1.0

    with pytest.raises(RuntimeError, match="No such compile option: 'invalid_key'"):
        jax.jit(f, compiler_options={"invalid_key": "invalid_value"})(1.0)
    with pytest.raises(RuntimeError, match="No such compile option: 'invalid_key'"):
        ftrans.jit(f, compiler_options={"invalid_key": "invalid_value"})(1.0)
    lowered = ftrans.jit(f).lower(1.0)
    with pytest.raises(errors.CompilerOptionError, match="invalid_key"):
        lowered.compile(compiler_options={"invalid_key": "invalid_value"})
    with pytest.raises(RuntimeError):
        jax.jit(f).lower(1.0).compile(compiler_options={"xla_embed_ir_in_executable": "invalid_value"})
    with pytest.raises(RuntimeError, match="xla_embed_ir_in_executable"):
        lowered.compile(compiler_options={"xla_embed_ir_in_executable": "invalid_value"})
    assert float(lowered.compile()(1.0)) == 2.0  # valid compiles still work afterwards


@pytest.mark.parametrize("opts, msg", [
    ({"invalid_key": "invalid_value"}, "No such compile option: 'invalid_key'"),
    ({"exec_time_compilation_effort": 0.0}, "No such"),
    ({"xla_embed_ir_in_executable": "invalid_value"}, "is not a valid bool value."),
])
def test_rejected_compiler_option_is_errors_JaxRuntimeError(opts, msg):
    """``except jax.errors.JaxRuntimeError`` (JAX's public name) catches ftrans's, from jit and AOT alike."""
    def f(x):
        return x + 1.0

    for mod in (jax, ftrans):
        with pytest.raises(mod.errors.JaxRuntimeError, match=msg):
            mod.jit(f, compiler_options=opts)(1.0)
        with pytest.raises(mod.errors.JaxRuntimeError, match=msg):
            mod.jit(f).lower(1.0).compile(compiler_options=opts)
    ok = ftrans.jit(f, compiler_options={"exec_time_optimization_effort": 0.0})
    assert float(ok(1.0)) == (float(jax.jit(f, compiler_options={"exec_time_optimization_effort": 0.0})(1.0))
                              if _JAX_HAS_FLOAT_EFFORTS else 2.0)  # (jax 0.11 refuses the name)


@pytest.mark.parametrize("fn, args, kw", [
    (lambda x, y: x.sum() + y.sum().astype(np.float32), ([1.0, 2.0], [1, 2]), {"donate_argnums": (0, 1)}),
    (lambda x, y: x.sum() + y.sum().astype(np.float32), ([1.0, 2.0], [1, 2]), {"donate_argnames": ("x", "y")}),
    (lambda x, y: x.sum() + y.sum().astype(np.float32), ([1.0, 2.0], [1, 2]), {"donate_argnums": 0}),
    (lambda x, y: (x * 2, y + 1), ([1.0, 2.0], [1.0, 3.0]), {"donate_argnums": (0, 1)}),  # both reused
    (lambda x, y: x * 2, ([1.0, 2.0], [1.0, 3.0]), {"donate_argnums": (0, 1)}),  # y is pruned, not compiled
    (lambda x, y: x.astype(np.int32), ([1.0, 2.0], [1.0, 3.0]), {"donate_argnums": 0}),  # same bytes
    (lambda x, y: (x.sum(), y), ([1.0, 2.0], [1.0, 3.0]), {"donate_argnums": (0, 1), "keep_unused": True}),
])
def test_unusable_donation_warns_like_jax(fn, args, kw):
    import warnings

    def run(mod, np_):
        a = [np_.asarray(np.asarray(v, dtype=np.float32 if isinstance(v[0], float) else np.int32)) for v in args]
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            mod.jit(fn, **kw)(*a)
        return [str(x.message) for x in w if "donated buffers" in str(x.message)]

    want, got = run(jax, jjnp), run(ftrans, jnp)
    assert len(got) == len(want)
    for g, j in zip(got, want):
        listed = j.split("usable: ")[1].split(".")[0]
        assert f"Some donated buffers were not usable: {listed}." in g


# ---------------------------------------------------------------- the AOT stages' introspection, as JAX's
def _aot_pair(fn, *args, **kwargs):
    return (jax.jit(fn).lower(*args, **kwargs), ftrans.jit(fn).lower(*args, **kwargs))


@pytest.mark.parametrize("fn", [lambda x, y=2.0: x + y, lambda x, y=2.0: x])
def test_lowered_and_compiled_in_avals_and_in_tree_like_jax(fn):
    jl, fl = _aot_pair(fn, 1.0, y=np.ones(3, np.float32))
    jc, fc = jl.compile(), fl.compile()
    for j, f in ((jl, fl), (jc, fc), (jl, fc)):
        assert f.in_tree == j.in_tree
        fa, ja = f.in_avals, j.in_avals
        assert jax.tree_util.tree_structure(fa) == jax.tree_util.tree_structure(ja)
        for a, b in zip(jax.tree_util.tree_leaves(fa), jax.tree_util.tree_leaves(ja)):
            assert (a.shape, a.dtype, a.weak_type) == (b.shape, b.dtype, b.weak_type)
    assert fl.in_avals == fc.in_avals


@pytest.mark.parametrize("fn, jfn", [(lambda x: x, None), (lambda x: x + 4, None),
                                     (lambda x: jnp.sin(x) * x, lambda x: jjnp.sin(x) * x)])
def test_lowered_hlo_compiler_ir_and_cost_analysis_like_jax(fn, jfn):
    jfn = jfn or fn
    jl, fl = jax.jit(jfn).lower(np.ones(4, np.float32)), ftrans.jit(fn).lower(np.ones(4, np.float32))
    for dialect in (None, "stablehlo", "hlo"):
        assert fl.compiler_ir(dialect) is not None
        assert type(fl.compiler_ir(dialect)) is type(jl.compiler_ir(dialect))
    hlo = fl.as_text("hlo")
    assert hlo.startswith("HloModule") and "ENTRY" in hlo
    assert isinstance(fl.as_text(dialect="stablehlo"), str)
    jcost, fcost = jl.cost_analysis(), fl.cost_analysis()
    if jcost is None:  # a PJRT C API plugin (the GPU's) estimates only compiled programs
        assert fcost is None
        jcost, fcost = jl.compile().cost_analysis(), fl.compile().cost_analysis()
    assert (fcost is None) == (jcost is None)
    if jcost is not None:
        assert fcost.get("flops", 0.0) == jcost.get("flops", 0.0)
    with pytest.raises(ValueError, match="dialect"):
        fl.as_text("mhlo")
    with pytest.raises(ValueError, match="dialect"):
        fl.compiler_ir("mhlo")
    fc = fl.compile()
    assert type(fc.runtime_executable()) is type(jl.compile().runtime_executable())
    np.testing.assert_allclose(np.asarray(fc(np.ones(4, np.float32))),
                               np.asarray(jl.compile()(np.ones(4, np.float32))), rtol=1e-6)
def test_lowered_as_text_hlo_like_jax():
    """``as_text('hlo')``: the program as HLO text (XLA converts the StableHLO), as JAX's."""
    def make(t):
        def f(c, xs):
            return t.lax.scan(lambda c, x: (c * x + 1.0, c), c, xs, unroll=2)

        return t.jit(f)

    c, xs = np.float32(1.0), np.arange(6, dtype=np.float32)
    got = make(ftrans).lower(c, xs).as_text("hlo")
    want = make(jax).lower(c, xs).as_text("hlo")
    for text in (got, want):
        assert text.startswith("HloModule ") and "while(" in text
        assert "entry_computation_layout={(f32[], f32[6]{0})->(f32[], f32[6]{0})}" in text
    assert "stablehlo." not in got
    assert ftrans.jit(jnp.sin).lower(c).as_text(dialect="hlo").count("sine(") == 1
    with pytest.raises(FtransValueError, match="'hlo'"):
        ftrans.jit(jnp.sin).lower(c).as_text(dialect="mhlo")


_DONATION_CASES = {
    "scalar_out": (lambda x: x.sum(), [(3,)]),
    "same_aval": (lambda x: x + 1, [(3,)]),
    "same_bytes_other_dtype": (lambda x: (x + 1).astype(np.int32), [(3,)]),
    "identity": (lambda x: x, [(3,)]),
    "two_in_one_out": (lambda x, y: x + y, [(3,), (3,)]),
    "unused": (lambda x, y: y * 2, [(3,), (3,)]),
    "bigger_out": (lambda x: _repeat_rows(x), [(3,)]),
    "tuple_out": (lambda x, y: (x.sum(), y * 2), [(2, 2), (4,)]),
}


def _repeat_rows(x):
    return x.reshape(1, -1).repeat(2, axis=0)


@pytest.mark.parametrize("host", [False, True])
@pytest.mark.parametrize("case", sorted(_DONATION_CASES))
def test_donated_argument_deleted_only_when_an_output_reuses_it(case, host):
    """JAX (CPU) invalidates a donated argument only when an output took its buffer; one no output can
    reuse (jit(lambda x: x.sum(), donate_argnums=0)) stays alive and usable. ftrans does the same."""
    f, shapes = _DONATION_CASES[case]
    res = {}
    for lib, np_ in ((jax, jjnp), (ftrans, jnp)):
        args = [np.arange(int(np.prod(s)), dtype=np.float32).reshape(s) for s in shapes]
        args = [np_.asarray(a) if host else lib.device_put(a) for a in args]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = lib.jit(f, donate_argnums=tuple(range(len(args))))(*args)
        res[lib.__name__] = [a.is_deleted() for a in args]
        for a, d, s in zip(args, res[lib.__name__], shapes):
            if not d:  # still usable, with its value
                np.testing.assert_array_equal(np.asarray(a), np.arange(int(np.prod(s)), dtype=np.float32)
                                              .reshape(s))
        jax.tree_util.tree_map(lambda o: np.asarray(o), out)
    assert res["ftrans"] == res["jax"]


def test_cost_analysis_is_none_where_the_runtime_has_none(monkeypatch):
    """A PJRT C API plugin (the GPU's) estimates no unoptimised module, and may estimate no executable:
    ``cost_analysis()`` answers None there, as JAX's does, instead of raising."""
    from jax._src.lib import _jax

    from ftrans.lowering import compat

    f = ftrans.jit(lambda x: jnp.sin(x) * x)
    lowered = f.lower(np.ones(4, np.float32))
    want = jax.jit(lambda x: jax.numpy.sin(x) * x).lower(np.ones(4, np.float32)).cost_analysis()
    if want is None:  # the GPU's plugin: JAX's is None too
        assert lowered.cost_analysis() is None
    else:  # the CPU client has one
        assert lowered.cost_analysis()["flops"] > 0

    def unimplemented(*args):
        raise _jax.JaxRuntimeError("UNIMPLEMENTED: PJRT C API does not support GetHloCostAnalysis.")

    monkeypatch.setattr(_jax, "hlo_module_cost_analysis", unimplemented)
    assert lowered.cost_analysis() is None

    class Plugin:
        cost_analysis = staticmethod(unimplemented)

    assert compat.executable_cost_analysis(Plugin()) is None
    assert compat.executable_cost_analysis(object()) is None

    def broken(*args):
        raise _jax.JaxRuntimeError("INTERNAL: something else")

    monkeypatch.setattr(_jax, "hlo_module_cost_analysis", broken)
    with pytest.raises(_jax.JaxRuntimeError, match="INTERNAL"):
        lowered.cost_analysis()
    got = lowered.compile().cost_analysis()
    jc = jax.jit(lambda x: jax.numpy.sin(x) * x).lower(np.ones(4, np.float32)).compile().cost_analysis()
    assert isinstance(got, (dict, list)) if jc is not None else got is None
