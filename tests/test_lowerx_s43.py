"""Session 43 "lowerx": HLO passes in the executable caches, ``experimental.source_mapper``,
``debug.inspect_array_sharding`` under ``jit`` and three weak-type differences, each against jax."""

from __future__ import annotations

import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.lowering import compat, disk_cache
from ftrans.lowering import executable as X

jax = pytest.importorskip("jax")
jjnp = pytest.importorskip("jax.numpy")

# ----------------------------------------------------------------------------- HLO passes (ftrans.extend.xla)

try:
    import jax.extend.xla as jex_xla
    from jax._src.lib import hlo as _hlo
except ImportError:  # pragma: no cover - jaxlib without the pass registry
    jex_xla = _hlo = None

needs_passes = pytest.mark.skipif(jex_xla is None or compat.hlo_pass_api() is None,
                                  reason="jaxlib without XLA's HLO pass registry")


def _sin_to_cos(serialized: bytes) -> bytes | None:
    module = _hlo.HloModule.from_serialized_hlo_module_proto(serialized)
    changed = False
    for comp in module.computations():
        for inst in comp.instructions():
            if inst.opcode == _hlo.HloOpcode.kSin:
                comp.replace_instruction(inst, comp.create_unary_instruction(_hlo.HloOpcode.kCos,
                                                                             inst.operands()[0]))
                changed = True
    return module.as_serialized_hlo_module_proto() if changed else None


XS = np.array([0.0, 1.0, 2.0], np.float32)


@pytest.fixture
def passes():
    """Registered names are cleared after the test, whatever happens."""
    names: list = []
    yield names
    for api, name, stage in names:
        api.clear_hlo_module_transformation(name, stage)
    assert compat.hlo_passes() == ()


def _register(api, names, name, stage=None, **kw):
    stage = api.PipelineStage.PRE_SCHEDULER if stage is None else stage
    api.register_hlo_module_transformation(_sin_to_cos, name=name, stage=stage, **kw)
    names.append((api, name, stage))


def _clear(api, names, name, stage=None):
    stage = api.PipelineStage.PRE_SCHEDULER if stage is None else stage
    names.remove((api, name, stage))
    return api.clear_hlo_module_transformation(name, stage)


@needs_passes
@pytest.mark.parametrize("via", ["ftrans", "jax"])
def test_cleared_pass_recompiles_as_jax(passes, via):
    """Registered, the pass turns sin into cos in both; cleared (and the jit cache emptied), both compute sin
    again: ftrans compiles anew instead of reusing the executable its shared cache held."""
    import ftrans.extend.xla as fx

    api = fx if via == "ftrans" else jex_xla
    _register(api, passes, f"lowerx_s2c_{via}")

    def f(x):
        return jnp.sin(x)

    def jf(x):
        return jjnp.sin(x)

    ff, jff = ftrans.jit(f), jax.jit(jf)
    np.testing.assert_allclose(np.asarray(ff(XS)), np.asarray(jff(XS)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ff(XS)), np.cos(XS), rtol=1e-6)
    assert _clear(api, passes, f"lowerx_s2c_{via}") is True
    ff.clear_cache()
    jff.clear_cache()
    np.testing.assert_allclose(np.asarray(ff(XS)), np.asarray(jff(XS)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ff(XS)), np.sin(XS), rtol=1e-6)


@needs_passes
def test_pass_registered_after_compile_applies_to_a_new_jit(passes):
    """A program compiled before the pass was registered is not reused for another function lowering to the
    same module after it (a jitted function's own cache keeps its executables, in both)."""
    import ftrans.extend.xla as fx

    def f(x):
        return jnp.sin(x) + 0.0

    def g(x):
        return jnp.sin(x) + 0.0

    def jf(x):
        return jjnp.sin(x) + 0.0

    def jg(x):
        return jjnp.sin(x) + 0.0

    ff, jff = ftrans.jit(f), jax.jit(jf)
    np.testing.assert_allclose(np.asarray(ff(XS)), np.sin(XS), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jff(XS)), np.sin(XS), rtol=1e-6)
    _register(fx, passes, "lowerx_s2c_late")
    np.testing.assert_allclose(np.asarray(ftrans.jit(g)(XS)), np.asarray(jax.jit(jg)(XS)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ftrans.jit(g)(XS)), np.cos(XS), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ff(XS)), np.asarray(jff(XS)), rtol=1e-6)  # kept: sin in both


@needs_passes
def test_pass_for_another_platform_changes_no_key(passes):
    import ftrans.extend.xla as fx

    try:
        _register(fx, passes, "lowerx_s2c_tpu", platforms="tpu")
    except Exception as e:  # jax 0.11 refuses a platform that has no plugin here
        passes.clear()
        pytest.skip(f"this jax cannot register a pass for an absent platform: {e}")
    assert compat.hlo_passes("cpu") == ()

    def f(x):
        return jnp.sin(x) * 1.0

    np.testing.assert_allclose(np.asarray(ftrans.jit(f)(XS)), np.sin(XS), rtol=1e-6)


@needs_passes
def test_program_under_a_pass_skips_the_disk_cache(passes, tmp_path):
    """The disk cache neither returns a program compiled without the pass nor stores one compiled with it."""
    import ftrans.extend.xla as fx

    disk_cache.flush()
    old, background = ftrans.config.compilation_cache_dir, disk_cache.background_writes
    ftrans.config.update("compilation_cache_dir", str(tmp_path / "c"))
    disk_cache.background_writes = False
    try:
        def f(x):
            return jnp.sin(x) * 3.0

        ftrans.clear_caches()
        X._xla_cache.clear()
        np.testing.assert_allclose(np.asarray(ftrans.jit(f)(XS)), 3 * np.sin(XS), rtol=1e-6)
        n_files = len(list((tmp_path / "c").iterdir()))
        assert n_files == 1
        _register(fx, passes, "lowerx_s2c_disk")
        ftrans.clear_caches()
        X._xla_cache.clear()
        np.testing.assert_allclose(np.asarray(ftrans.jit(f)(XS)), 3 * np.cos(XS), rtol=1e-6)
        assert len(list((tmp_path / "c").iterdir())) == n_files
    finally:
        disk_cache.background_writes = background
        ftrans.config.update("compilation_cache_dir", old)


@needs_passes
def test_pass_api_errors_as_jax():
    import ftrans.extend.xla as fx

    with pytest.raises(TypeError, match="PipelineStage"):
        fx.register_hlo_module_transformation(_sin_to_cos, name="x", stage=0)
    with pytest.raises((TypeError, AttributeError)):  # jax 0.11 no longer checks the type itself
        jex_xla.register_hlo_module_transformation(_sin_to_cos, name="x", stage=0)
    with pytest.raises(TypeError, match="PipelineStage"):
        fx.clear_hlo_module_transformation("x", 1)
    assert fx.clear_hlo_module_transformation("lowerx_never_registered") is False
    assert jex_xla.clear_hlo_module_transformation("lowerx_never_registered") is False
    assert [s.name for s in fx.PipelineStage] == [s.name for s in jex_xla.PipelineStage]


# ----------------------------------------------------------------------------- experimental.source_mapper


def _jax_source_mapper():
    """JAX's ``jax.experimental.source_mapper`` (the oracle)."""
    from tests.backend_util import import_jax_module_without_absl

    return import_jax_module_without_absl("jax.experimental.source_mapper")


def _sm_fn(np_mod):
    def fn(x, y):
        z = np_mod.sin(x) * y
        return z + x
    return fn


def _absolute(mappings):
    """Per line, the absolute (generated col, source, line, col) of each segment."""
    out, prev = [], [0, 0, 0]
    for line in mappings:
        row, col = [], 0
        for seg in line:
            col += seg[0]
            if len(seg) >= 4:
                prev = [prev[0] + seg[1], prev[1] + seg[2], prev[2] + seg[3]]
                row.append((col, *prev))
            else:
                row.append((col,))
        out.append(row)
    return out


SM_X = np.array([1.0, 2.0, 3.0], np.float32)
SM_Y = np.array([4.0, 5.0, 6.0], np.float32)


def test_source_mapper_jaxpr_pass_as_jax():
    """Same function text, same arguments: the same printed jaxpr and the same source map."""
    from ftrans.experimental import source_mapper as fsm

    jsm = _jax_source_mapper()
    fd, = fsm.generate_sourcemaps(_sm_fn(jnp), passes=fsm.filter_passes("jaxpr"))(SM_X, SM_Y)
    jd, = jsm.generate_sourcemaps(_sm_fn(jjnp), passes=jsm.filter_passes("jaxpr"))(SM_X, SM_Y)
    assert fd.pass_name == jd.pass_name == "jaxpr"
    assert fd.generated_code == jd.generated_code
    assert list(fd.source_map.sources) == list(jd.source_map.sources) == [__file__]
    assert [list(m) for m in fd.source_map.mappings] == [list(m) for m in jd.source_map.mappings]
    assert fd.source_map.to_json() == jd.source_map.to_json()


def test_source_mapper_nested_jaxpr_segments_as_jax():
    """Equations inside a cond's branches map to their own lines, the cond's own text to the cond's."""
    from ftrans.experimental import source_mapper as fsm

    jsm = _jax_source_mapper()

    def mk(np_mod, lax_mod):
        def fn(x):
            return lax_mod.cond(x[0] > 0, lambda a: a * 2.0, lambda a: np_mod.cos(a), x)
        return fn

    fd, = fsm.generate_sourcemaps(mk(jnp, ftrans.lax), passes=fsm.filter_passes("jaxpr"))(SM_X)
    jd, = jsm.generate_sourcemaps(mk(jjnp, jax.lax), passes=jsm.filter_passes("jaxpr"))(SM_X)
    fl, jl = fd.generated_code.split("\n"), jd.generated_code.split("\n")

    def by_text(lines, mappings):  # each mapped line's text -> its absolute segments' (source line, col)
        return {lines[i].strip(): [s[2:] for s in row] for i, row in enumerate(_absolute(mappings))
                if row and i < len(lines)}

    fm, jm = by_text(fl, fd.source_map.mappings), by_text(jl, jd.source_map.mappings)
    common = set(fm) & set(jm)
    assert any("cos" in t for t in common) and any("mul" in t for t in common)
    for t in common:
        assert fm[t] == jm[t], t


@pytest.mark.parametrize("pass_name", ["hlo:stable-hlo", "hlo:original", "hlo:optimized"])
def test_source_mapper_hlo_passes_as_jax(pass_name):
    """Each op's line maps to the same user line (and, for StableHLO, column) as JAX's."""
    from ftrans.experimental import source_mapper as fsm

    jsm = _jax_source_mapper()
    fd, = fsm.generate_sourcemaps(_sm_fn(jnp), passes=fsm.filter_passes(pass_name))(SM_X, SM_Y)
    jd, = jsm.generate_sourcemaps(_sm_fn(jjnp), passes=jsm.filter_passes(pass_name))(SM_X, SM_Y)
    assert fd.pass_name == jd.pass_name == pass_name
    assert list(fd.source_map.sources) == list(jd.source_map.sources) == [__file__]
    n = len(fd.generated_code.split("\n"))
    assert len(fd.source_map.mappings) == n + 1

    def ops(d):
        lines = d.generated_code.split("\n")
        out = set()
        for i, row in enumerate(_absolute(d.source_map.mappings)):
            for seg in row:
                op = lines[i].split("=", 1)[-1].split()[0] if "=" in lines[i] else lines[i].split()[0]
                out.add((op.split("(")[0], seg[2], seg[3] if pass_name == "hlo:stable-hlo" else 0))
        return out

    fo, jo = ops(fd), ops(jd)
    assert {o for o in fo if "sin" in o[0] or "mul" in o[0]} == {o for o in jo if "sin" in o[0] or "mul" in o[0]}
    body = range(_sm_fn.__code__.co_firstlineno, _sm_fn.__code__.co_firstlineno + 5)  # (the program's return
    # maps to the line that lowered it: each library's own generate_sourcemaps call here)
    assert {line for _, line, _ in fo if line in body} == {line for _, line, _ in jo if line in body} != set()


def test_source_mapper_parsers_on_the_same_text_as_jax():
    """ftrans's MLIR and HLO parsers read JAX's own lowering text as JAX's parsers do."""
    from ftrans.experimental import source_mapper as fsm
    from ftrans.experimental.source_mapper import hlo as fhlo

    jsm = _jax_source_mapper()
    from jax.experimental.source_mapper import hlo as jhlo

    lowered = jax.jit(_sm_fn(jjnp)).lower(SM_X, SM_Y)
    text = lowered.as_text(debug_info=True)
    assert _absolute(fsm.create_mlir_sourcemap(text).mappings) == _absolute(jsm.create_mlir_sourcemap(text).mappings)
    for hlo_text in (lowered.as_text(dialect="hlo", debug_info=True), lowered.compile().as_text()):
        f, j = fhlo.parse_hlo_dump(hlo_text), jhlo.parse_hlo_dump(hlo_text)
        assert list(f.sources) == list(j.sources)
        assert [list(m) for m in f.mappings] == [list(m) for m in j.mappings]
    old = '  ROOT %a = f32[] add(%x, %y), metadata={op_name="jit(f)/add" source_file="/x/y.py" source_line=12}\n'
    assert [list(m) for m in fhlo.parse_hlo_dump(old).mappings] == [list(m) for m in jhlo.parse_hlo_dump(old).mappings]


HLO_EXAMPLE = '''HloModule m, entry_computation_layout={()->pred[]}

FileNames
1 "<embedded module>"
2 "experimental/module.py"

FunctionNames
1 "main"

FileLocations
1 {file_name_id=1 function_name_id=1 line=153 end_line=153 column=2 end_column=31}
2 {file_name_id=2 function_name_id=1 line=35 end_line=35 column=2 end_column=24}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}


ENTRY %constant_pred () -> pred[] {
  %c = pred[] constant(false), metadata={op_type="const" op_name="a" stack_frame_id=2}
  ROOT %constant = pred[] constant(true), metadata={op_type="const" op_name="opname" stack_frame_id=1}
}'''


def test_source_mapper_hlo_tables_and_errors_as_jax():
    from ftrans.experimental.source_mapper import hlo as fhlo

    _jax_source_mapper()
    from jax.experimental.source_mapper import hlo as jhlo

    lines = HLO_EXAMPLE.split("\n")
    f, j = fhlo._parse_hlo_new_format(lines), jhlo._parse_hlo_new_format(lines)
    assert list(f.sources) == list(j.sources) == ["experimental/module.py", "<embedded module>"]
    assert [list(m) for m in f.mappings] == [list(m) for m in j.mappings]
    bad = HLO_EXAMPLE.replace("stack_frame_id=1}", "stack_frame_id=9}").split("\n")
    with pytest.raises(ValueError, match="stack_frame_id=9"):
        fhlo._parse_hlo_new_format(bad)
    with pytest.raises(ValueError, match="stack_frame_id=9"):
        jhlo._parse_hlo_new_format(bad)


def test_sourcemap_json_and_vlq_as_jax():
    from jax._src import sourcemap as jsrc

    from ftrans.experimental import source_mapper as fsm
    from ftrans.experimental.source_mapper import sourcemap as fsrc

    for v in (0, 1, -1, 15, 16, -16, 31, 32, 1000, -123456, 2**31 - 1):
        assert fsrc.encode_vlq(v) == jsrc.encode_vlq(v)
        assert fsrc.decode_vlq(jsrc.encode_vlq(v)) == v
    fg, jg = fsm.MappingsGenerator(), jsrc.MappingsGenerator()
    for g in (fg, jg):
        g.new_group()
        g.new_segment(4, 0, 10, 3)
        g.new_segment(9, 1, 2, 0, 0)
        g.new_group()
        g.new_group()
        g.new_segment(2)
        g.new_segment(6, 0, 11, 7)
    assert fg.mappings() == jg.mappings()
    f = fsm.SourceMap(version=3, sources=["a.py", "b.py"], sources_content=[], names=["n"], mappings=fg.mappings())
    j = jsrc.SourceMap(version=3, sources=["a.py", "b.py"], sources_content=[], names=["n"], mappings=jg.mappings())
    assert f.to_json() == j.to_json()
    assert fsm.SourceMap.from_json(j.to_json()) == f
    with pytest.raises(RuntimeError):
        fsm.MappingsGenerator().new_segment(1)
    with pytest.raises(RuntimeError):
        jsrc.MappingsGenerator().new_segment(1)


def test_source_mapper_registry_as_jax():
    from ftrans.experimental import source_mapper as fsm

    jsm = _jax_source_mapper()
    assert [p.name for p in fsm.all_passes()] == [p.name for p in jsm.all_passes()]
    assert [p.name for p in fsm.filter_passes("hlo")] == [p.name for p in jsm.filter_passes("hlo")]
    with pytest.raises(ValueError, match="already registered"):
        fsm.register_pass(fsm.all_passes()[0])
    with pytest.raises(ValueError, match="already registered"):
        jsm.register_pass(jsm.all_passes()[0])
    # a pass of one's own runs with the built-in ones, sharing their compile step
    own = fsm.Pass(name="lowerx:count", compile_fn=fsm.filter_passes("jaxpr")[0].compile_fn,
                   generate_dump=lambda jaxpr, **_: fsm.SourceMapDump(
                       fsm.SourceMap(3, [], [], [], []), str(len(jaxpr.eqns)), "lowerx:count"))
    dumps = fsm.generate_sourcemaps(_sm_fn(jnp), passes=[fsm.filter_passes("jaxpr")[0], own])(SM_X, SM_Y)
    assert [d.pass_name for d in dumps] == ["jaxpr", "lowerx:count"] and dumps[1].generated_code == "3"


# ----------------------------------------------------------------------------- debug.inspect_array_sharding in jit


def _needs_8():
    if len(jax.devices()) < 8 or len(ftrans.devices()) < 8:
        pytest.skip("needs 8 devices (XLA_FLAGS=--xla_force_host_platform_device_count=8, as conftest sets)")


def _inspect_cases(J):
    """name -> a thunk running one program that inspects a value, with ``J`` (jax or ftrans)."""
    P, NS = J.sharding.PartitionSpec, J.sharding.NamedSharding
    mesh = J.sharding.Mesh(np.array(J.devices()[:8]).reshape(4, 2), ("x", "y"))
    x = J.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), NS(mesh, P("x", "y")))
    y = J.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), NS(mesh, P("x")))
    seen: list = []

    def cb(s):
        seen.append((type(s).__name__ if type(s).__name__ != "SingleDeviceSharding" else "one device",
                     tuple(getattr(s, "spec", None) or ()) if hasattr(s, "spec") else None, len(s.device_set),
                     tuple(getattr(getattr(s, "mesh", None), "axis_names", ()) or ())))

    ins = J.debug.inspect_array_sharding
    lax = J.lax

    def probe(v):
        ins(v, callback=cb)
        return v

    cases = {
        "argument": lambda: J.jit(lambda a: probe(a) * 1.0)(x),
        "elementwise": lambda: J.jit(lambda a: probe(a * 2.0))(x),
        "reduction": lambda: J.jit(lambda a: probe(a.sum(0)))(x),
        "transpose": lambda: J.jit(lambda a: probe(a.T))(x),
        "matmul": lambda: J.jit(lambda a, b: probe(a @ b.T))(x, y),
        "constraint": lambda: J.jit(lambda a: probe(lax.with_sharding_constraint(a * 2.0, NS(mesh, P(None, "x")))))(x),
        "in_shardings": lambda: J.jit(lambda a: probe(a * 2.0), in_shardings=NS(mesh, P(None, "y")))(
            np.ones((8, 4), np.float32)),
        "pytree": lambda: J.jit(lambda a: (ins({"a": a, "b": a.sum(1)}, callback=cb), a)[1])(x),
        "vmap": lambda: J.jit(J.vmap(lambda r: probe(r) + 1.0))(x),
        "grad": lambda: J.jit(J.grad(lambda a: (probe(a * 3.0)).sum()))(x),
        "remat": lambda: J.jit(J.grad(J.checkpoint(lambda a: J.numpy.sin(probe(a)).sum())))(x),
        "scan": lambda: J.jit(lambda a: lax.scan(lambda c, r: (probe(c) + r, None), a[0], a)[0])(x),
        "cond": lambda: J.jit(lambda a: lax.cond(True, lambda b: probe(b), lambda b: b, a))(x),
        "shard_map": lambda: J.jit(J.shard_map(lambda a: probe(a) * 2.0, mesh=mesh, in_specs=P("x", "y"),
                                               out_specs=P("x", "y")))(x),
        "pmap": lambda: J.pmap(lambda a: probe(a) + 1.0, axis_name="i")(np.arange(8.0, dtype=np.float32)),
        "eager": lambda: probe(x * 2.0),
        "make_jaxpr": lambda: J.make_jaxpr(lambda a: probe(a) * 2.0)(x),
    }
    return cases, seen


@pytest.mark.parametrize("case", ["argument", "elementwise", "reduction", "transpose", "matmul", "constraint",
                                  "in_shardings", "pytree", "vmap", "grad", "remat", "scan", "cond", "shard_map",
                                  "pmap", "eager", "make_jaxpr"])
def test_inspect_array_sharding_reports_the_partitioners_choice_as_jax(case):
    """Inside jit over a mesh, the layout XLA's partitioner chose (a NamedSharding over the program's mesh),
    reported once per compilation, as JAX's (make_jaxpr reports nothing: the equation is only staged)."""
    _needs_8()
    fcases, fseen = _inspect_cases(ftrans)
    jcases, jseen = _inspect_cases(jax)
    fcases[case]()
    jcases[case]()
    assert fseen == jseen
    if case not in ("make_jaxpr",):
        assert fseen


def test_inspect_array_sharding_on_one_device_reports_that_device():
    """A program on one device reports it (JAX states it as a replicated GSPMDSharding of it, ftrans as a
    SingleDeviceSharding: docs/differences.md), when it is lowered, once."""
    seen_f, seen_j = [], []
    ftrans.jit(lambda a: (ftrans.debug.inspect_array_sharding(a + 1, callback=seen_f.append), a)[1])(np.arange(3))
    jax.jit(lambda a: (jax.debug.inspect_array_sharding(a + 1, callback=seen_j.append), a)[1])(np.arange(3))
    assert [s.device_set for s in seen_f] == [s.device_set for s in seen_j] == [{ftrans.devices()[0]}]
    assert seen_f[0].is_fully_replicated and seen_j[0].is_fully_replicated
    low = ftrans.jit(lambda a: (ftrans.debug.inspect_array_sharding(a, callback=seen_f.append), a)[1]).lower(
        np.arange(3))
    assert len(seen_f) == 2  # at lowering, as JAX's single-device programs
    low.compile()
    assert len(seen_f) == 2


def test_inspect_array_sharding_partitioned_program_reports_at_compile_time():
    _needs_8()
    from ftrans.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(ftrans.devices()[:8]).reshape(4, 2), ("x", "y"))
    x = ftrans.device_put(np.ones((8, 4), np.float32), NamedSharding(mesh, PartitionSpec("x", "y")))
    seen = []
    low = ftrans.jit(lambda a: (ftrans.debug.inspect_array_sharding(a.T, callback=seen.append), a)[1]).lower(x)
    assert seen == []  # the layout is the partitioner's, known when XLA compiles
    assert "InspectSharding" in low.as_text()
    low.compile()
    assert [s.spec for s in seen] == [PartitionSpec("y", "x")]


def test_inspect_array_sharding_callback_error_as_jax():
    """A callback that raises fails the compilation with a JaxRuntimeError naming its error, as JAX's."""
    _needs_8()

    def bad(s):
        raise ValueError("lowerx-boom")

    errs = []
    for J in (ftrans, jax):
        P, NS = J.sharding.PartitionSpec, J.sharding.NamedSharding
        mesh = J.sharding.Mesh(np.array(J.devices()[:8]).reshape(4, 2), ("x", "y"))
        x = J.device_put(np.ones((8, 4), np.float32), NS(mesh, P("x", "y")))
        with pytest.raises(Exception) as info:
            J.jit(lambda a: (J.debug.inspect_array_sharding(a * 2.0, callback=bad), a)[1])(x)
        errs.append(info.value)
    assert all(type(e).__name__ == "JaxRuntimeError" and "lowerx-boom" in str(e) for e in errs)
    assert "bug in ftrans" not in str(errs[0])


# ----------------------------------------------------------------------------- weak types (the fuzzers' three)


def _typeof_both(fn):
    """``str(typeof)`` of every leaf of ``fn(lib, numpy_module)`` for jax and for ftrans."""
    a = fn(jax, jjnp)
    b = fn(ftrans, jnp)
    return ([str(jax.typeof(v)) for v in jax.tree_util.tree_leaves(a)],
            [str(ftrans.typeof(v)) for v in jax.tree_util.tree_leaves(b)])


@pytest.mark.parametrize("name, fn", [
    ("grad of a whole lax.slice", lambda J, n: J.grad(
        lambda x: J.lax.slice(n.broadcast_to(x, (3,)), (0,), (3,)).sum())(2.0)),
    ("vjp of a whole lax.slice", lambda J, n: J.vjp(
        lambda x: J.lax.slice(n.broadcast_to(x, (2, 3)), (0, 0), (2, 3)), 2.0)[1](n.ones((2, 3)))),
    ("grad of roll by 0", lambda J, n: J.grad(lambda x: n.roll(n.broadcast_to(x, (3,)), 0).sum())(2.0)),
    ("grad of roll by the length", lambda J, n: J.grad(lambda x: n.roll(n.broadcast_to(x, (3,)), 3).sum())(2.0)),
    ("jvp of a whole slice", lambda J, n: J.jvp(lambda x: J.lax.slice(n.broadcast_to(x, (3,)), (0,), (3,)),
                                                (2.0,), (1.0,))),
])
def test_whole_slice_cotangent_weak_type_as_jax(name, fn):
    """A traced whole-operand slice is a slice (JAX binds it; ftrans skipped it), whose transpose pads with a
    strong zero: the cotangent of a weakly typed operand is strongly typed."""
    j, f = _typeof_both(fn)
    assert f == j, name


def test_whole_slice_jaxpr_and_eager_as_jax():
    j = jax.make_jaxpr(lambda x: jax.lax.slice(x, (0,), (3,)))(np.ones(3, np.float32))
    f = ftrans.make_jaxpr(lambda x: ftrans.lax.slice(x, (0,), (3,)))(np.ones(3, np.float32))
    assert [e.primitive.name for e in f.eqns] == [e.primitive.name for e in j.eqns] == ["slice"]
    x = jnp.asarray(np.arange(3.0, dtype=np.float32))
    assert ftrans.lax.slice(x, (0,), (3,)) is x  # eagerly the operand itself (same values and type as JAX's)
    assert ftrans.typeof(ftrans.lax.slice(jnp.full((3,), 2.0), (0,), (3,))).weak_type == \
        jax.typeof(jax.lax.slice(jjnp.full((3,), 2.0), (0,), (3,))).weak_type


X16 = np.zeros((2, 2), np.float16)


def _sum_leaves(n, out):
    s = 0.0
    for leaf in jax.tree_util.tree_leaves(out):
        s = s + n.sum(leaf)
    return s


@pytest.mark.parametrize("name, fn", [
    ("value_and_grad of jacfwd over (py float, f16)", lambda J, n: J.value_and_grad(
        lambda a, b: _sum_leaves(n, J.jacfwd(lambda a, b: J.nn.silu(a), argnums=(0, 1))(a, b)),
        argnums=(0, 1))(0.7, X16)),
    ("grad of jacfwd's first block", lambda J, n: J.grad(
        lambda a, b: J.jacfwd(lambda a, b: n.sin(a), argnums=(0, 1))(a, b)[0])(0.7, X16)),
    ("grad of jacrev's first block", lambda J, n: J.grad(
        lambda a, b: J.jacrev(lambda a, b: n.sin(a) * 2.0, argnums=(0, 1))(a, b)[0])(0.7, X16)),
    ("jacfwd over (py float, f16)", lambda J, n: J.jacfwd(lambda a, b: J.nn.silu(a), argnums=(0, 1))(0.7, X16)),
    ("grad of lax.split of a weak value", lambda J, n: J.grad(
        lambda a: J.lax.split(n.broadcast_to(a, (4,)), (1, 3))[0].sum())(2.0)),
])
def test_jacfwd_mixed_argnums_weak_type_as_jax(name, fn):
    """The Jacobian's blocks are split with JAX's split primitive, whose transpose fills a missing cotangent with
    zeros as weakly typed as its piece (slices' transposes pad with a strong zero)."""
    j, f = _typeof_both(fn)
    assert f == j, name


def test_lax_split_is_one_primitive_as_jax():
    x = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    j = jax.make_jaxpr(lambda a: jax.lax.split(a, (1, 3), axis=0))(x)
    f = ftrans.make_jaxpr(lambda a: ftrans.lax.split(a, (1, 3), axis=0))(x)
    assert str(f) == str(j)
    for tr in (lambda L, g: L.jit(g), lambda L, g: L.vmap(g, in_axes=1)):
        got = tr(ftrans, lambda a: ftrans.lax.split(a, (1, 3), 0))(x)
        want = tr(jax, lambda a: jax.lax.split(a, (1, 3), 0))(x)
        for g_, w_ in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g_), np.asarray(w_))
    gf = ftrans.grad(lambda a: (ftrans.lax.split(a, (1, 3), 0)[1] ** 2).sum())(x)
    gj = jax.grad(lambda a: (jax.lax.split(a, (1, 3), 0)[1] ** 2).sum())(x)
    np.testing.assert_allclose(np.asarray(gf), np.asarray(gj))


@pytest.mark.parametrize("name, fn", [
    ("jvp of abs(x ** x)", lambda J, n: J.jvp(lambda x: n.abs(x ** x), (2.0,), (1.0,))),
    ("jvp of sin with a strong tangent", lambda J, n: J.jvp(n.sin, (2.0,), (np.float32(1.0),))),
    ("jvp of x * 2.0 with a strong tangent", lambda J, n: J.jvp(lambda x: x * 2.0, (2.0,), (np.float32(1.0),))),
    ("jvp of nn.silu with a strong tangent", lambda J, n: J.jvp(J.nn.silu, (0.7,), (np.float32(1.0),))),
    ("jvp of lax.abs with a strong tangent", lambda J, n: J.jvp(J.lax.abs, (2.0,), (np.float32(1.0),))),
    ("jvp of lax.mul with a strong tangent", lambda J, n: J.jvp(lambda x: J.lax.mul(x, 2.0), (2.0,),
                                                                (np.float32(1.0),))),
    ("jvp of x ** x", lambda J, n: J.jvp(lambda x: x ** x, (2.0,), (1.0,))),
    ("grad of jvp of sin with a strong tangent", lambda J, n: J.grad(
        lambda a: J.jvp(n.sin, (a,), (np.float32(1.0),))[1])(0.7)),
])
def test_library_function_tangent_weak_type_as_jax(name, fn):
    """JAX's jnp/nn functions are jitted: inside, a tangent is typed as its primal, so a weakly typed primal's
    strong tangent (pow's, or one passed in) comes out of them weak; lax functions keep the tangent's own
    type, as do outer differentiation levels."""
    j, f = _typeof_both(fn)
    assert f == j, name


def test_library_functions_on_an_outer_weak_tangent_inside_a_jit_as_jax():
    """A jnp function in a jitted body closing over a value an outer jvp/jacfwd differentiates (a weak
    Python-float primal): the tangent's retyping must not be staged into the body (it escaped the jit's
    trace: UnexpectedTracerError; found by tests/test_ode.py::test_errors)."""
    def run(lib, np_):
        f = lambda k: lib.jit(lambda y: np_.abs(k * y) + np_.sign(k) * np_.sin(k))(2.0)  # noqa: E731
        jac = lib.jacfwd(f)(3.0)
        p, t = lib.jvp(f, (3.0,), (1.0,))
        return [np.asarray(jac), np.asarray(p), np.asarray(t)], [lib.typeof(t).weak_type, lib.typeof(jac).weak_type]

    (fv, fw), (jv, jw) = run(ftrans, jnp), run(jax, jjnp)
    for a, b in zip(fv, jv):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert fw == jw
