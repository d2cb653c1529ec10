"""Behaviours JAX's own ``api_test.py`` checks, next to JAX: the wording of broadcasting, escaped-tracer,
invalid-dtype, dot and Mesh errors, concretization errors naming the arguments a value depends on,
``checkpoint``'s non-array arguments, and the root logger seeing ``explain_cache_misses`` /
``log_compiles`` reports at WARNING.  (``jit`` of a callable that cannot be weakly referenced runs in
ftrans, where JAX raises: a documented difference, tests/test_differences.py.)"""

from __future__ import annotations

import logging

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax


@pytest.mark.parametrize("lib", ["jax", "ftrans"])
def test_binop_mismatch_message_starts_as_jax(lib):
    jnp, grad = (jjnp, jax.grad) if lib == "jax" else (fjnp, ftrans.grad)
    want = "add got incompatible shapes for broadcasting: (3,), (4,)."
    with pytest.raises(TypeError) as ei:
        jnp.zeros(3) + jnp.zeros(4)
    assert str(ei.value).startswith(want)
    with pytest.raises(TypeError) as ei:
        grad(lambda x, y: (x + y).sum())(np.zeros(3), np.zeros(4))
    assert str(ei.value).startswith(want)


def test_escaped_tracer_says_on_which_line_it_was_created():
    count = 1

    @ftrans.jit
    def f():
        nonlocal count
        count = fjnp.add(count, 1)

    f()  # leaks a tracer

    def body(c, x):
        fjnp.add(count, 1)
        return None, None

    @ftrans.jit
    def g():
        flax.scan(body, None, None, length=2)

    with pytest.raises(ftrans.errors.UnexpectedTracerError, match=r"was created on line .*test_api_test_parity"):
        g()


@pytest.mark.parametrize("args", [(1,), (1.0, None), (True,), ((1, 2.0),), ([1.5], {"a": 2})])
def test_checkpoint_takes_python_scalars_none_and_pytrees_as_jax(args):
    def fun(x, y=None):
        if isinstance(x, list):
            return x[0] * y["a"]
        return x * 2 if y is None else x * y

    want = jax.checkpoint(fun)(*args)
    got = ftrans.checkpoint(fun)(*args)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want))
    assert np.asarray(got).dtype == np.asarray(want).dtype
    gw = jax.grad(lambda x: jax.checkpoint(lambda a, n: a ** n)(x, 3))(2.0)
    gf = ftrans.grad(lambda x: ftrans.checkpoint(lambda a, n: a ** n)(x, 3))(2.0)
    assert float(gf) == float(gw) == 12.0


@pytest.mark.parametrize("lib", [jax, ftrans], ids=["jax", "ftrans"])
def test_checkpoint_refuses_a_string_argument_as_jax(lib):
    with pytest.raises(TypeError):
        lib.checkpoint(lambda x, s: x)(1.0, "s")


class _RootCapture(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def root_warnings():
    h = _RootCapture()
    root = logging.getLogger()
    old = root.level
    root.addHandler(h)
    root.setLevel(logging.WARNING)
    yield h.messages
    root.removeHandler(h)
    root.setLevel(old)


def test_cache_miss_explanation_and_compile_log_reach_the_root_logger(root_warnings):
    @ftrans.jit
    def f(x):
        return x

    with ftrans.explain_cache_misses(True):
        f(fjnp.float32(1.0))
        f(fjnp.float32(1.0))  # a hit: no report
    reports = [m for m in root_warnings if "TRACING CACHE MISS" in m]
    assert len(reports) == 1 and "never seen function" in reports[0]

    @ftrans.jit
    def add(x):
        return x * 2

    root_warnings.clear()
    with ftrans.log_compiles(True):
        add(fjnp.arange(8))
        ftrans.clear_caches()
        add(fjnp.arange(8))
    assert sum("Finished tracing add for jit" in m for m in root_warnings) == 2


def _f_many(x, y, *a, k=1):
    if x + y[0] + a[1] + k > 0:
        return 1
    return 0


_CONST = np.ones(3)


def _const_user(jnp):
    def f(x):
        return int(jnp.sum(jnp.asarray(_CONST)))

    return f


@pytest.mark.parametrize("lib", [jax, ftrans], ids=["jax", "ftrans"])
def test_concretization_error_names_the_jit_arguments_it_depends_on(lib):
    jnp = jjnp if lib is jax else fjnp
    with pytest.raises(TypeError, match=r"tracing the function <lambda> at .*test_api_test_parity.py:\d+ for jit\. "
                       r"This concrete value was not available in Python because it depends on the value of the "
                       r"argument x\."):
        lib.jit(lambda x: jnp.zeros(shape=(2, x)))(1)
    with pytest.raises(TypeError, match=r"tracing the function _f_many at .* for jit\. This concrete value was not "
                       r"available in Python because it depends on the values of the arguments x, y\[0\], a\[1\], "
                       r"and k\."):
        lib.jit(_f_many)(1.0, (2.0, 3.0), 4, 5, k=3)
    with pytest.raises(TypeError, match=r"depends on the values of the arguments x and y\.") as ei:
        lib.jit(lambda x, y, z: float(x * y))(1.0, 2.0, 3.0)
    assert "argument z" not in str(ei.value)


@pytest.mark.parametrize("lib", [jax, ftrans], ids=["jax", "ftrans"])
def test_concretization_error_names_the_operations_on_constants(lib):
    with pytest.raises(TypeError, match=r"(?s)This value became a tracer due to (JAX )?operations on these lines:"
                       r"\n\n  operation a:f32\[\] = reduce_sum\[axes=\(0,\).*\n    from line .*"
                       r"test_api_test_parity.py:\d+"):
        lib.jit(_const_user(jjnp if lib is jax else fjnp))(1.0)


@pytest.mark.parametrize("lib", [jax, ftrans], ids=["jax", "ftrans"])
def test_concretization_error_under_vmap_names_the_calling_line(lib):
    jnp = jjnp if lib is jax else fjnp

    @lib.vmap
    def g(x):
        return jnp.zeros(shape=(2, x))

    with pytest.raises(TypeError, match=r"This (Batch|Vmap)Tracer with object id \d+ was created on line:\n  "
                       r".*test_api_test_parity.py:\d+"):
        g(jnp.ones((1,)))  # the line named


@pytest.mark.parametrize("lib", ["jax", "ftrans"])
def test_invalid_dtype_dot_mismatch_and_mesh_rank_errors_read_as_jax(lib):
    mod, jnp, lax = (jax, jjnp, jax.lax) if lib == "jax" else (ftrans, fjnp, flax)
    with pytest.raises(TypeError, match=r"Error interpreting argument to .* as a JAX value. The problematic value is "
                       r"of type .* and was passed to add at position 1."):
        lax.add(jnp.array(7), np.array("hello"))
    with pytest.raises(TypeError, match=r"dot_general requires contracting dimensions to have the same shape, got "
                       r"\(3L?,\) and \(4L?,\)."):
        mod.grad(lambda x, y: jnp.dot(x, y))(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="ndim of its first argument"):
        mod.sharding.Mesh(mod.devices(), ("x", "y"))


@pytest.mark.parametrize("lib", [jax, ftrans], ids=["jax", "ftrans"])
@pytest.mark.parametrize("api", ["make_jaxpr", "eval_shape"])
def test_make_jaxpr_and_eval_shape_concretization_errors_name_the_argument(lib, api):
    jnp = jjnp if lib is jax else fjnp

    def f(x, n):
        return jnp.zeros(n) + x

    with pytest.raises(TypeError, match=r"tracing the function f at .*test_api_test_parity.py:\d+ for "
                       r"(jit|make_jaxpr|eval_shape)\. This concrete value was not available in Python because it "
                       r"depends on the value of the argument n\."):
        if api == "make_jaxpr":
            lib.make_jaxpr(f)(1.0, 3)
        else:
            lib.eval_shape(f, 1.0, 3)
