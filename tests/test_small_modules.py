"""JAX's small public modules under ftrans's names: ``tree`` (the path and broadcast helpers, ``static``),
``monitoring``, ``dlpack``, ``experimental.compilation_cache``; each checked against jax."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp


def test_tree_names_match_jax():
    assert {n for n in dir(jax.tree) if not n.startswith("_")} <= set(dir(ftrans.tree))
    t = {"a": 1, "b": [2, (3, 4)], "c": None}
    for name, args in [("map_with_path", (lambda p, v: (jax.tree_util.keystr(p), v), t)),
                       ("flatten_with_path", (t,)), ("leaves_with_path", (t,)),
                       ("broadcast", ({"a": 0, "b": 1, "c": None}, t)),
                       ("reduce_associative", (lambda x, y: x * 10 + y, [1, 2, 3, 4]))]:
        assert getattr(ftrans.tree, name)(*args) == getattr(jax.tree, name)(*args), name


def test_tree_static_field_is_part_of_the_structure():
    def mk(lib):
        @lib.tree_util.register_dataclass
        @dataclasses.dataclass
        class Op:
            x: Any
            kind: str = lib.tree.static(default="add")
        return Op

    fop, jop = mk(ftrans), mk(jax)
    fl, ft = ftrans.tree.flatten(fop(x=np.ones(2), kind="mul"))
    jl, jt = jax.tree.flatten(jop(x=np.ones(2), kind="mul"))
    assert len(fl) == len(jl) == 1 and "mul" in str(ft) and "mul" in str(jt)
    out = ftrans.jit(lambda o: o.x * 2 if o.kind == "mul" else o.x)(fop(x=fjnp.ones(2), kind="mul"))
    np.testing.assert_array_equal(np.asarray(out), [2.0, 2.0])


def test_monitoring_records_compiles_and_user_events(tmp_path):
    events, durations, scalars, spans = [], [], [], []
    cbs = [lambda e, **k: events.append((e, k)), lambda e, d, **k: durations.append((e, d)),
           lambda e, v, **k: scalars.append((e, v)), lambda e, s, t, **k: spans.append((e, t - s))]
    m = ftrans.monitoring
    m.register_event_listener(cbs[0])
    m.register_event_duration_secs_listener(cbs[1])
    m.register_scalar_listener(cbs[2])
    m.register_event_time_span_listener(cbs[3])
    before = ftrans.config.compilation_cache_dir
    try:
        ftrans.config.update("compilation_cache_dir", str(tmp_path))

        def f(x):
            return x * 3.0 + 1.0

        ftrans.jit(f)(np.ones(3, np.float32))
        assert ("/jax/compilation_cache/cache_misses", {}) in events
        assert [e for e, d in durations if e == "/jax/core/compile/backend_compile_duration" and d > 0]
        ftrans.clear_caches()
        events.clear()
        ftrans.jit(f)(np.ones(3, np.float32))  # the same program again: from the persistent cache
        assert ("/jax/compilation_cache/cache_hits", {}) in events
        m.record_event("/my/event", step=3)
        m.record_scalar("/my/loss", 0.5)
        m.record_event_time_span("/my/span", 1.0, 3.5)
        assert ("/my/event", {"step": 3}) in events and ("/my/loss", 0.5) in scalars and ("/my/span", 2.5) in spans
    finally:
        ftrans.config.update("compilation_cache_dir", before)
        m.unregister_event_listener(cbs[0])
        m.unregister_event_duration_listener(cbs[1])
        m.unregister_scalar_listener(cbs[2])
        m.unregister_event_time_span_listener(cbs[3])
    with pytest.raises(ValueError, match="not a registered"):
        m.unregister_event_listener(cbs[0])
    assert {n for n in dir(jax.monitoring) if not n.startswith("_")} <= set(dir(m))


def test_dlpack_module_matches_jax():
    for d in [np.bool_, np.int8, np.uint32, np.float16, np.float32, np.complex64, fjnp.bfloat16]:
        assert ftrans.dlpack.is_supported_dtype(d) == jax.dlpack.is_supported_dtype(d), d
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(ftrans.dlpack.from_dlpack(x)), x)
    np.testing.assert_array_equal(np.asarray(ftrans.dlpack.from_dlpack(jax.numpy.asarray(x))), x)


def test_experimental_compilation_cache_set_cache_dir(tmp_path):
    from ftrans.experimental.compilation_cache import compilation_cache as cc

    before = ftrans.config.compilation_cache_dir
    try:
        cc.set_cache_dir(tmp_path / "cc")
        assert ftrans.config.compilation_cache_dir == str(tmp_path / "cc")
        ftrans.jit(lambda x: x - 7.0)(np.ones(2, np.float32))
        from ftrans.lowering import disk_cache

        disk_cache.flush()  # entries are written on a background thread
        assert list((tmp_path / "cc").iterdir())
        cc.reset_cache()
    finally:
        ftrans.config.update("compilation_cache_dir", before)
