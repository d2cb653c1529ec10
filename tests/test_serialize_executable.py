"""``ftrans.experimental.serialize_executable``: a compiled program as bytes and back, against JAX's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.experimental import serialize_executable as jser

import ftrans
import ftrans.numpy as fjnp
from ftrans.experimental import serialize_executable as fser
from ftrans.lowering import disk_cache
from ftrans.lowering import executable as X

X_IN = np.linspace(-2.0, 2.0, 8, dtype=np.float32)


def _program(api, np_):
    const = np_.arange(8.0, dtype=np.float32) + 42.0  # a closed-over array (ftrans passes it as an argument)

    @api.jit
    def f(x, scale):
        return {"a": np_.sin(x) * scale + const, "b": (x * 2.0,)}

    return f


def test_round_trip_matches_jax():
    outs = []
    for api, np_, ser in ((jax, jjnp, jser), (ftrans, fjnp, fser)):
        compiled = _program(api, np_).lower(X_IN, np.float32(3.0)).compile()
        payload, in_tree, out_tree = ser.serialize(compiled)
        assert isinstance(payload, bytes)
        assert out_tree == compiled.out_tree or str(out_tree) == str(compiled.out_tree)
        # (JAX's default is all the backend's devices, which a one-device program does not fit)
        loaded = ser.deserialize_and_load(payload, in_tree, out_tree, execution_devices=api.devices()[:1])
        res = loaded(X_IN, np.float32(3.0))
        ref = compiled(X_IN, np.float32(3.0))
        np.testing.assert_allclose(np.asarray(res["a"]), np.asarray(ref["a"]), rtol=1e-6)
        np.testing.assert_array_equal(np.asarray(res["b"][0]), np.asarray(ref["b"][0]))
        assert [a.shape for a in loaded.in_avals[0]] == [(8,), ()]
        assert [(i.shape, i.donated) for i in loaded.args_info[0]] == [((8,), False), ((), False)]
        with pytest.raises(TypeError):  # the loaded program checks its argument types as the original does
            loaded(X_IN[:4], np.float32(3.0))
        outs.append(np.asarray(res["a"]))
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6)


def test_closed_over_ref_is_refused_as_in_jax():
    for api, ser in ((jax, jser), (ftrans, fser)):
        x_ref = api.new_ref(0)

        @api.jit
        def f(x):
            x_ref[...] += x

        with pytest.raises(ValueError, match="serialize with a closed-over"):
            ser.serialize(f.lower(1).compile())


def test_execution_devices_of_another_client_are_refused():
    compiled = _program(ftrans, fjnp).lower(X_IN, np.float32(3.0)).compile()
    payload, in_tree, out_tree = fser.serialize(compiled)
    here = ftrans.default_backend()  # where the program was compiled
    loaded = fser.deserialize_and_load(payload, in_tree, out_tree, backend=here,
                                       execution_devices=ftrans.devices()[:1])
    np.testing.assert_allclose(np.asarray(loaded(X_IN, np.float32(1.0))["a"]),
                               np.asarray(compiled(X_IN, np.float32(1.0))["a"]), rtol=1e-6)

    class OtherClient:
        platform, platform_version = "other", "0"

    class OtherDevice:
        client = OtherClient()

    with pytest.raises(ValueError, match="Execution devices belong to a client other than `backend`"):
        fser.deserialize_and_load(payload, in_tree, out_tree, backend=here, execution_devices=[OtherDevice()])
    with pytest.raises(ValueError, match="not an executable"):
        fser.deserialize_and_load(b"\x80\x04N.", in_tree, out_tree)


def test_program_loaded_from_the_disk_cache_serializes(tmp_path):
    # XLA's CPU runtime cannot serialize again a program it deserialized: serialize compiles it afresh
    disk_cache.flush()
    old, background = ftrans.config.compilation_cache_dir, disk_cache.background_writes
    disk_cache.background_writes = False
    ftrans.config.update("compilation_cache_dir", str(tmp_path / "cache"))
    try:
        def compile_afresh():
            X._xla_cache.clear()
            ftrans.clear_caches()
            return _program(ftrans, fjnp).lower(X_IN, np.float32(2.0)).compile()

        first, again = [compile_afresh() for _ in range(2)]  # (one line: the locations' call stacks match)
        assert not first._exe._held.from_disk
        assert again._exe._held.from_disk
        loaded = fser.deserialize_and_load(*fser.serialize(again))
        np.testing.assert_allclose(np.asarray(loaded(X_IN, np.float32(2.0))["a"]),
                                   np.asarray(first(X_IN, np.float32(2.0))["a"]), rtol=1e-6)
    finally:
        ftrans.config.update("compilation_cache_dir", old)
        disk_cache.background_writes = background
        X._xla_cache.clear()


def test_payload_loads_in_another_process(tmp_path):
    compiled = _program(ftrans, fjnp).lower(X_IN, np.float32(3.0)).compile()
    payload, _, _ = fser.serialize(compiled)
    (tmp_path / "exe.bin").write_bytes(payload)
    script = textwrap.dedent(f"""
        import numpy as np
        import ftrans
        from ftrans.experimental.serialize_executable import deserialize_and_load
        from ftrans import tree_util
        x = np.linspace(-2.0, 2.0, 8, dtype=np.float32)
        in_tree = tree_util.tree_structure(((x, np.float32(3.0)), {{}}))
        out_tree = tree_util.tree_structure({{"a": x, "b": (x,)}})
        out = deserialize_and_load(open({str(tmp_path / "exe.bin")!r}, "rb").read(), in_tree, out_tree)(
            x, np.float32(3.0))
        print(repr(np.asarray(out["a"]).tolist()))
    """)
    # the same platforms as this process (the payload is a program for its default backend)
    platforms = "cpu" if ftrans.default_backend() == "cpu" else os.environ.get("JAX_PLATFORMS", "")
    env = {**os.environ, "JAX_PLATFORMS": platforms,
           "FTRANS_ENABLE_COMPILATION_CACHE": "0"}
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert res.returncode == 0, res.stderr[-2000:]
    got = np.array(eval(res.stdout.strip().splitlines()[-1]), np.float32)  # noqa: S307  (our own output)
    np.testing.assert_allclose(got, np.asarray(compiled(X_IN, np.float32(3.0))["a"]), rtol=1e-6)
