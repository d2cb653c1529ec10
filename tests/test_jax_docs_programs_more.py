"""Programs from JAX's documentation (second pass: the JEPs, the FAQ and reference pages, docstring examples of
custom_derivatives, checkify, debugging, dtypes, random, state, ...) that once behaved differently under ftrans,
each run under both libraries and compared."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest

import ftrans
from tests.backend_util import host_oracle


def _both(program):
    return program(ftrans), program(jax)


def _typed(x):
    """A value's printed form with its weak type (``repr`` of an Array shows ``weak_type=True``)."""
    return repr(x).replace("ftrans", "jax")


@pytest.mark.parametrize("primal", [1.0, np.float32(1.0), 3])
def test_linear_transpose_traces_on_weak_primals(primal):
    # custom_derivatives.linear_call's docstring: transpose(lambda x: x + x / 3., 1.)(18.) is weakly typed,
    # since the function is traced on the weak input 1.0 as JAX does
    def program(m):
        fs = [lambda x: x + x / 3, lambda x: x * 2, lambda x: x + x, lambda x: 3 * x - x]
        out = []
        for f in fs:
            for ct in (18.0, np.float32(18.0), 18):
                try:
                    out.append(_typed(m.linear_transpose(f, primal)(ct)))
                except TypeError:  # an integer cotangent for a float output, in both
                    out.append("TypeError")
        sds = m.ShapeDtypeStruct((), np.float32)
        out.append(_typed(m.linear_transpose(lambda x: 2 * x, sds)(1.0)))
        return out

    f, j = _both(program)
    assert f == j


def test_lowered_hlo_names_parameters_and_module_as_jax():
    # docs/debugging/xla_metadata.md prints .lower(1.0).as_text("hlo"): the HLO parameters are named after the
    # arguments (x.1, d__a__.1, rest_1_.1, kw__z__.1) and a lambda's module is jit__lambda, as JAX's
    def program(m):
        def f(x, *rest, **kw):
            return m.numpy.sin(x) * rest[1] + kw["z"]

        out = [m.jit(f).lower(1.0, 2.0, 3.0, z=4.0).as_text("hlo"),
               m.jit(lambda d, k: d["a"] * 2 + k).lower({"a": 1.0, "b": 2.0}, k=5.0).as_text("hlo"),
               m.jit(lambda d: d["a"] * 2, keep_unused=False).lower({"a": 1.0, "b": 2.0}).as_text("hlo"),
               m.jit(f).lower(1.0, 2.0, 3.0, z=4.0).as_text().splitlines()[1]]
        text = m.jit(f).lower(1.0, 2.0, 3.0, z=4.0).as_text(debug_info=True)
        out.append([ln for ln in text.splitlines() if "@main" in ln])
        out.append(float(m.jit(f).lower(1.0, 2.0, 3.0, z=4.0).compile()(1.0, 2.0, 3.0, z=4.0)))
        return out

    f, j = _both(program)
    assert f == j


def test_repr_of_jaxpr_variables_and_literals():
    # docs/notebooks/Writing_custom_interpreters_in_Jax.md prints jaxpr.invars and each equation's
    # invars: Var(id=...):int32[] and Literal(1.0), as JAX's (ids differ)
    import re

    def program(m):
        def bar(w, b, x):
            return m.numpy.dot(w, x) + b + m.numpy.ones(5), x

        closed = m.make_jaxpr(bar)(np.ones((5, 10), np.float32), np.ones(5, np.float32), np.ones(10, np.float32))
        j = closed.jaxpr
        lines = [repr(j.invars), repr(j.outvars)]
        lines += [f"{e.invars} {e.outvars}" for e in j.eqns if e.primitive.name in ("add", "broadcast_in_dim")]
        return [re.sub(r"id=\d+", "id=N", ln) for ln in lines]

    f, j = _both(program)
    assert f == j


def _run_both_in_subprocesses(code):
    """``code`` (which prints its results) run in a fresh process under each library (``m`` is the module)."""
    import subprocess
    import sys

    outs = []
    for mod in ("ftrans", "jax"):
        env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join(sys.path))
        env.pop("XLA_FLAGS", None)
        r = subprocess.run([sys.executable, "-c", f"import {mod} as m\n" + code], capture_output=True, text=True,
                           env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        outs.append(r.stdout)
    return outs


def test_platform_name_then_num_cpu_devices_starts_no_backend():
    # docs/the-training-cookbook: jax_platform_name, then jax_num_cpu_devices (before any operation)
    f, j = _run_both_in_subprocesses(
        "m.config.update('jax_platform_name', 'cpu')\n"
        "m.config.update('jax_num_cpu_devices', 4)\n"
        "print(len(m.devices()), m.numpy.ones(2).devices() == {m.devices()[0]})\n"
        "try:\n    m.config.update('jax_default_device', 'nonsense')\n"
        "except ValueError:\n    print('ValueError')\n")
    assert f == j == "4 True\nValueError\n"


needs8 = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")


@needs8
def test_make_array_from_process_local_data_of_a_pytree_and_a_bare_spec():
    # docs/the-training-cookbook: map(partial(make_array_from_process_local_data, P("fsdp")), batches of dicts)
    def program(m):
        mesh = m.make_mesh((8,), ("fsdp",), axis_types=(m.sharding.AxisType.Explicit,))
        batch = {"ids": np.arange(32, dtype=np.uint8).reshape(8, 4), "w": (np.ones(8), np.zeros((8, 3)))}
        with m.set_mesh(mesh):
            a = m.make_array_from_process_local_data(m.P("fsdp"), batch)
            b = m.make_array_from_process_local_data({"ids": m.P("fsdp"), "w": m.P()}, batch,
                                                     {"ids": (8, 4), "w": None})
        return [m.tree.map(lambda x: (np.asarray(x).tolist(), x.dtype.name, str(x.sharding.spec)), t) for t in (a, b)]

    f, j = _both(program)
    assert f == j


def test_jit_of_a_dict_whose_attributes_raise_key_error():
    # docs/the-training-cookbook: a dict subclass with __getattr__ = dict.__getitem__ passed to a jitted function
    def program(m):
        class dot_dict(dict):  # noqa: N801  (the cookbook's name)
            __getattr__ = dict.__getitem__

        m.tree_util.register_pytree_node(dot_dict, lambda d: (list(d.values()), list(d.keys())),
                                         lambda k, v: dot_dict(zip(k, v)))
        f = m.jit(lambda d: d.a * 2 + d.b)
        d = dot_dict(a=np.float32(1), b=np.float32(2))
        return [float(f(d)), float(f(d)), float(f(dot_dict(a=3.0, b=1.0)))]

    f, j = _both(program)
    assert f == j


@pytest.mark.parametrize("spec", ["bsd,3dkh->bs3kh", "bs3kh->3bkhs", "ab_,_c", "x1 , 1y -> x y"])
def test_einsum_labels_any_character(spec):
    # docs/the-training-cookbook: jnp.einsum("bsd,3dkh->bs3kh", ...); JAX labels axes with any character
    rng = np.random.RandomState(0)
    shapes = {"bsd,3dkh->bs3kh": [(2, 3, 4), (3, 4, 5, 6)], "bs3kh->3bkhs": [(2, 3, 4, 5, 6)],
              "ab_,_c": [(2, 3, 4), (4, 5)], "x1 , 1y -> x y": [(2, 3), (3, 4)]}[spec]
    ops = [rng.rand(*s).astype(np.float32) for s in shapes]
    f = np.asarray(ftrans.numpy.einsum(spec, *ops))
    with host_oracle():  # the eager einsum runs on the host
        j = np.asarray(jax.numpy.einsum(spec, *ops))
    np.testing.assert_allclose(f, j, rtol=1e-6)


@needs8
def test_training_cookbook_style_program():
    # docs/the-training-cookbook, condensed: explicit-sharding mesh, a pytree of params made by initializers
    # with out_sharding, a causal attention block with einsums (out_sharding=), Adam states held in refs and
    # updated inside a jitted step, and batches from make_array_from_process_local_data
    import functools

    def program(m):
        jnp = m.numpy
        P = m.P
        mesh = m.make_mesh((8,), ("fsdp",), axis_types=(m.sharding.AxisType.Explicit,))
        E, H, K, V, S, B = 16, 8, 4, 32, 8, 8

        class dot_dict(dict):  # noqa: N801
            __setattr__ = dict.__setitem__
            __getattr__ = dict.__getitem__

            def tree_flatten_with_keys(self):
                ks = tuple(sorted(self))
                return tuple((m.tree_util.DictKey(k), self[k]) for k in ks), ks

            @classmethod
            def tree_unflatten(cls, ks, vals):
                return cls(zip(ks, vals))

        m.tree_util.register_pytree_with_keys_class(dot_dict)

        def init_params():
            key = map(functools.partial(m.random.fold_in, m.random.key(3)), range(100))
            he = m.nn.initializers.he_normal(1, 1)
            return dot_dict(emb=he(next(key), (V, E), jnp.float32, P(None, None)),
                            qkv=he(next(key), (3, E, H, K), jnp.float32, P(None, "fsdp", None, None)),
                            out=he(next(key), (H, K, E), jnp.float32, P("fsdp", None, None)),
                            head=he(next(key), (E, V), jnp.float32, P("fsdp", None)))

        def apply(p, tokens):
            x = p.emb.at[tokens].get(out_sharding=P("fsdp", None, None))
            qkv = jnp.einsum("bsd,3dkh->bs3kh", x, p.qkv, out_sharding=P("fsdp", None, None, None))
            a = m.nn.dot_product_attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], is_causal=True)
            x = x + jnp.einsum("bskh,khd->bsd", a, p.out, out_sharding=P("fsdp", None, None))
            x *= m.lax.rsqrt(jnp.linalg.norm(x, axis=-1, keepdims=True) + 1e-6)
            return jnp.einsum("bsd,dl->bsl", x, p.head, out_sharding=P("fsdp", None, None))

        def adam(param, grad, st):
            st.mu[...] = 0.1 * st.mu[...] + 0.9 * grad
            st.nu[...] = 0.001 * st.nu[...] + 0.999 * grad ** 2
            st.count[...] += 1
            mu = st.mu[...] / (1 - 0.9 ** st.count[...])
            nu = st.nu[...] / (1 - 0.999 ** st.count[...])
            param[...] -= 1e-2 * mu / (jnp.sqrt(nu) + 1e-8)

        @m.jit
        def step(state, batch):
            def loss_fn(params):
                logits = apply(params, batch["obs"])
                return -(m.nn.one_hot(batch["tgt"], V) * m.nn.log_softmax(logits)).mean()

            params = m.tree.map(m.ref.get, state.params)
            loss, grad = m.value_and_grad(loss_fn)(params)
            m.tree.map(adam, state.params, grad, state.opt)
            return loss

        with m.set_mesh(mesh):
            params = m.jit(init_params)()
            opt = m.tree.map(lambda p: dot_dict(mu=jnp.zeros_like(p), nu=jnp.zeros_like(p), count=jnp.array(0)),
                             params)
            state = m.tree.map(m.ref.new_ref, dot_dict(params=params, opt=opt))
            seq = np.frombuffer(b"we are the music makers and we are the dreamers of dreams", np.uint8) % V
            data = {"obs": np.tile(seq[:S], (B, 1)), "tgt": np.tile(np.roll(seq, -1)[:S], (B, 1))}
            losses = []
            for batch in map(functools.partial(m.make_array_from_process_local_data, P("fsdp")), [data] * 3):
                losses.append(float(step(state, batch)))
            return losses, str(m.typeof(state.params.qkv)), np.asarray(state.params.head[...])

    f, j = _both(program)
    np.testing.assert_allclose(f[0], j[0], rtol=2e-5)
    assert f[1] == j[1]
    np.testing.assert_allclose(f[2], j[2], rtol=1e-4, atol=1e-6)


def _linear_call_programs(m, linear_call):
    from functools import partial

    def f(r, x):
        return x / r

    def t(r, ct):
        return ct / r

    def div_add(x, denom):
        return x + linear_call(f, t, denom, x)

    def transpose(g, example):
        return lambda y: m.linear_transpose(g, example)(y)[0]

    def custom_id(x):
        return linear_call(lambda _, x: x, lambda _, ct: 7.0, (), x)

    def scanned(x):
        return m.lax.scan(lambda c, _: (linear_call(f, t, 2.0, c), None), x, None, length=3)[0]

    pair = lambda x: linear_call(lambda r, x: {"a": x * r[0], "b": x}, lambda r, c: c["a"] * r[0] + c["b"],  # noqa: E731
                                 (2.0, 5.0), x)
    vec = np.arange(3.0, dtype=np.float32)
    out = [div_add(9.0, 3.0), transpose(partial(div_add, denom=3.0), 1.0)(18.0),
           transpose(lambda x: x + x / 3.0, 1.0)(18.0),
           custom_id(1.0), transpose(custom_id, 1.0)(1.0), transpose(transpose(custom_id, 1.0), 1.0)(1.0),
           transpose(transpose(transpose(custom_id, 1.0), 1.0), 1.0)(1.0),
           m.grad(div_add)(9.0, 3.0), m.jit(div_add)(9.0, 3.0), m.jit(m.grad(div_add))(9.0, 3.0),
           m.jvp(lambda x: div_add(x, 3.0), (9.0,), (1.0,))[1],
           m.vjp(pair, 3.0)[1]({"a": 1.0, "b": 10.0})[0], m.grad(scanned)(1.0), m.jit(m.grad(scanned))(1.0),
           m.jit(m.grad(lambda x: m.numpy.sum(linear_call(lambda r, x: x * r, lambda r, c: c * r * 10, vec, x))))(
               np.ones(3, np.float32))]
    return [(np.asarray(o).tolist(), np.asarray(o).dtype.name, getattr(o, "weak_type", None)) for o in out]


def test_linear_call_docstring_examples_and_transforms():
    # custom_derivatives.linear_call's docstring: the transpose of a linear_call is the user's transpose
    # function, whose transpose is the function again; grad, jit, jvp, vjp and scan of it
    from jax.custom_derivatives import linear_call as jlc

    from ftrans.custom_derivatives import linear_call as flc

    f = _linear_call_programs(ftrans, flc)
    j = _linear_call_programs(jax, jlc)
    assert [a[0] for a in f] == [a[0] for a in j]
    # (JAX's eager custom_id gives TypedFloats, whose dtype NumPy reads as float64)
    assert [a[1:] for a in f[:3] + f[7:]] == [a[1:] for a in j[:3] + j[7:]]


def test_linear_call_errors():
    from ftrans.custom_derivatives import linear_call

    with pytest.raises(TypeError, match="transpose output pytree structure must match"):
        ftrans.linear_transpose(lambda x: linear_call(lambda r, x: x, lambda r, c: (c, c), (), x), 1.0)(1.0)
    with pytest.raises(TypeError, match="residual arguments carry tangents"):
        ftrans.jvp(lambda d: linear_call(lambda r, x: x / r, lambda r, c: c / r, d, 1.0), (3.0,), (1.0,))
    with pytest.raises(NotImplementedError, match="Batching rule for 'linear_call'"):
        ftrans.vmap(lambda x: linear_call(lambda r, x: x, lambda r, c: c, (), x))(np.ones(3, np.float32))


@pytest.mark.parametrize("staged", [False, True])
def test_ffi_call_of_an_unregistered_target_is_a_runtime_error_not_an_ftrans_bug(staged):
    # docs/ffi.md run without building its C++ library: JAX's "No FFI handler registered" (JaxRuntimeError);
    # ftrans says the same, without calling it a bug of its own
    def program(m):
        call = m.ffi.ffi_call("docs_rms_norm_unregistered", m.ShapeDtypeStruct((3,), np.float32))
        f = m.jit(lambda x: call(x)) if staged else call
        with pytest.raises(RuntimeError) as e:
            f(np.ones(3, np.float32))
        return type(e.value).__name__, "No FFI handler registered for docs_rms_norm_unregistered" in str(e.value), \
            "bug in ftrans" in str(e.value)

    f, j = _both(program)
    assert f == ("JaxRuntimeError", True, False) and j == ("JaxRuntimeError", True, False)


def test_returning_a_ref_from_jit_says_where_it_came_from_in_jaxs_words():
    # docs/array_refs.md: "can't return refs"
    def program(m):
        r = m.new_ref(0.0)

        @m.jit
        def err1(x_ref):
            x_ref[...] = 5.0
            return x_ref

        @m.jit
        def err2(x_ref, y_ref):
            pass

        @m.jit
        def err3(y_ref):
            y_ref[...] = r[...]

        out = []
        with pytest.raises(ValueError) as e:
            err1(r)
        out.append(str(e.value).split("\n\n")[1].splitlines()[0])
        for f, a in ((err2, (r, r)), (err3, (r,))):
            with pytest.raises(ValueError) as e:
                f(*a)
            out.append(str(e.value).split(" the mutable")[0].split(", a mutable")[0].replace(__file__, "F"))
        return out

    f, j = _both(program)
    assert f == j
    assert f[0] == "The returned mutable array was passed in as the argument x_ref."


def test_debug_nans_in_jit_announces_the_deoptimized_rerun(capsys):
    # docs/debugging/index.md & flags.md: under jax_debug_nans a nan out of a jitted function prints JAX's line,
    # then the function runs again op by op and the failing operation raises FloatingPointError
    def program(m):
        with m.debug_nans(True):
            with pytest.raises(FloatingPointError):
                m.jit(lambda x: m.numpy.log(-x))(np.float32(2.0))
        return capsys.readouterr().out

    f, j = _both(program)
    line = "Invalid nan value encountered in the output of a jax.jit function. Calling the de-optimized version."
    # (JAX prints it again for the eager log, which it runs as a jitted function too)
    assert f.splitlines() == [line] and j.splitlines()[0] == line
