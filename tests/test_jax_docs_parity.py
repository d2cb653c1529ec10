"""Behaviour that JAX's own documentation shows, checked against jax itself (the oracle)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp


def _seen(mod, np_mod, transform, staged):
    seen = []

    def f(x):
        seen.append(repr(x))
        return x

    g = transform(mod, f)
    if staged:  # traced only (no compile): what a jitted function prints is the same
        g = mod.jit(g).trace
    g(np.ones((3, 2), np.float32))
    return seen


def test_tracer_reprs_match_jax():
    cases = [
        (lambda m, f: f, True),
        (lambda m, f: (lambda x: f(x.sum())), True),
        (lambda m, f: (lambda x: f(m.numpy.float32(2) * 3.0 + f(2.0 * x[0, 0]))), True),  # weak: ~float32
        (lambda m, f: m.vmap(f), False),
        (lambda m, f: m.vmap(f), True),
        (lambda m, f: (lambda x: m.jvp(f, (x,), (x,))), False),
        (lambda m, f: (lambda x: m.vmap(m.grad(f))(np.ones(3, np.float32))), False),
        (lambda m, f: (lambda x: m.grad(f)(1.0)), False),
    ]
    for case, staged in cases:
        assert _seen(ftrans, fnp, case, staged) == _seen(jax, jnp, case, staged)


def test_tracer_repr_in_fstring_and_str():
    out = []
    ftrans.jit(lambda x: out.append((str(x), f"{x}")) or x)(np.ones(2, np.int32))
    assert out == [("JitTracer(int32[2])", "JitTracer(int32[2])")]


def test_num_cpu_devices_option_like_jax():
    # The backends are running in a test session: both refuse a change, and the value stays.
    ftrans.devices()
    jax.devices()
    n = jax.config.jax_num_cpu_devices
    with pytest.raises(RuntimeError):
        jax.config.update("jax_num_cpu_devices", n + 3)
    with pytest.raises(RuntimeError, match="before the first operation"):
        ftrans.config.update("jax_num_cpu_devices", ftrans.config.num_cpu_devices + 3)
    assert ftrans.config.num_cpu_devices in (-1, n)
    ftrans.config.update("jax_num_cpu_devices", ftrans.config.num_cpu_devices)  # the same value: accepted


def test_str_of_a_type_like_jax():
    for mk in [lambda m: m.numpy.ones((2, 3)), lambda m: 1.0, lambda m: m.numpy.arange(4, dtype=m.numpy.int8)]:
        assert str(ftrans.typeof(mk(ftrans))) == str(jax.typeof(mk(jax)))
        assert repr(ftrans.typeof(mk(ftrans))) == repr(jax.typeof(mk(jax)))


def test_partition_spec_repr_like_jax():
    from jax.sharding import PartitionSpec as JP

    from ftrans.sharding import PartitionSpec as FP

    for args in [(), ("x",), (None,), (("x", "y"),), ("x", None)]:
        assert repr(FP(*args)) == repr(JP(*args)) == str(FP(*args))
    assert repr(FP(FP.UNCONSTRAINED)) == repr(JP(JP.UNCONSTRAINED))


def _residual_lines(mod, np_mod, capsys):
    def chain(funs):
        def f(x):
            for fun in funs:
                x = fun(x)
            return x
        return f

    def g(w, x):
        return np_mod.sin(np_mod.dot(w, x))

    mod.ad_checkpoint.print_saved_residuals(chain([np_mod.sin] * 2), 3.0)
    mod.ad_checkpoint.print_saved_residuals(g, np_mod.ones((2, 2)), np_mod.ones(2))
    return capsys.readouterr().out.splitlines()


def test_print_saved_residuals_names_places_like_jax(capsys):
    # file:line:column (qualified function name), as in JAX's gradient-checkpointing guide
    import jax.ad_checkpoint  # noqa: F401

    import ftrans.ad_checkpoint  # noqa: F401

    assert _residual_lines(ftrans, fnp, capsys) == _residual_lines(jax, jnp, capsys)


def test_sharding_reprs_and_memory_kind_like_jax():
    def shardings(m):
        mesh = m.make_mesh((1,), ("a",))
        return [m.sharding.SingleDeviceSharding(m.devices()[0]), m.numpy.ones(3).sharding,
                m.NamedSharding(mesh, m.P("a")), m.NamedSharding(mesh, m.P("a")).update(spec=m.P())]

    for f, j in zip(shardings(ftrans), shardings(jax)):
        assert repr(f) == repr(j)
        assert f.memory_kind == j.memory_kind == "device"


def _dumped(mod, np_mod, out):
    mod.config.update("jax_dump_ir_to", str(out))
    mod.config.update("jax_dump_ir_modes", "stablehlo,jaxpr,eqn_count_pprof")
    try:
        def f(x):
            return np_mod.sin(x) * 2

        mod.jit(f)(np.ones(2, np.float32))
    finally:
        mod.config.update("jax_dump_ir_to", "")
        mod.config.update("jax_dump_ir_modes", "stablehlo")
    # (JAX also dumps the one-op programs of any eager operation it compiles meanwhile)
    return sorted(p.name for p in out.iterdir() if "_f." in p.name or "_f_" in p.name), out


def test_dump_ir_to_writes_jax_files(tmp_path):
    import gzip
    import re

    jnames, jout = _dumped(jax, jnp, tmp_path / "jax")
    fnames, fout = _dumped(ftrans, fnp, tmp_path / "ftrans")
    number = re.compile(r"\d+")
    assert [number.sub("N", n) for n in fnames] == [number.sub("N", n) for n in jnames]
    prof = gzip.decompress(next(fout.glob("*.eqn_count_pprof")).read_bytes())
    for s in (b"primitive", b"sin", b"mul", b"equations", b"count"):  # the pprof string table
        assert s in prof
    assert "stablehlo.sine" in next(fout.glob("*.mlir")).read_text()
    with pytest.raises(ValueError, match="unknown mode"):
        ftrans.config.update("jax_dump_ir_modes", "stablehlo,nope")


def test_ref_format_and_buffer_pointer_like_jax():
    for mod, np_mod in [(ftrans, fnp), (jax, jnp)]:
        r = mod.new_ref(np_mod.arange(3.0))
        assert isinstance(r.unsafe_buffer_pointer(), int)
        assert r.format.sharding == r.sharding
    assert repr(ftrans.new_ref(fnp.arange(3.0)).format) == repr(jax.new_ref(jnp.arange(3.0)).format)


def test_persistent_cache_enable_xla_caches_is_accepted_like_jax():
    # the persistent compilation cache guide's configuration lines
    name = "jax_persistent_cache_enable_xla_caches"
    assert ftrans.config.read(name) == jax.config.jax_persistent_cache_enable_xla_caches
    before = ftrans.config.read(name)
    try:
        ftrans.config.update(name, "none")
        assert ftrans.config.read(name) == "none"
    finally:
        ftrans.config.update(name, before)
