"""``ftrans.interpreters.partial_eval.dce_jaxpr`` (JAX's ``jax.interpreters.partial_eval.dce_jaxpr``): the inputs
it reports read and the program it returns, next to JAX's, on the programs api_test.py's DCETest prunes."""

import jax
import numpy as np
import pytest
from jax.interpreters import partial_eval as jpe

import ftrans
from ftrans.errors import FtransValueError
from ftrans.extend import core
from ftrans.interpreters import partial_eval as pe


def _scan_carry(J):
    def f(lst):
        def body(c, _):
            return [c[0]] + [c1 + c2 for c1, c2 in zip(c[:-1], c[1:])], None
        out, _ = J.lax.scan(body, lst, None, length=len(lst))
        return out
    return J.make_jaxpr(f)([1., 2., 3., 4.]).jaxpr


def _cond(J):
    def f(x, y):
        return J.lax.cond(x > 0., lambda a, b: (a * 2., b + 1.), lambda a, b: (a, b * 3.), x, y)
    return J.make_jaxpr(f)(1., 2.).jaxpr


def _while(J):
    def f(x, y, z):
        def body(c):
            i, a, b, d = c
            return i + 1, a * 2., b + a, d * 3.
        return J.lax.while_loop(lambda c: c[0] < 3, body, (0, x, y, z))
    return J.make_jaxpr(f)(1., 2., 3.).jaxpr


def _jit_call(J):
    def f(x, y, z):
        return J.jit(lambda a, b, c: (J.numpy.sin(a), J.numpy.cos(b) * c, b + 1.))(x, y, z)
    return J.make_jaxpr(f)(1., 2., 3.).jaxpr


def _remat(J):
    def f(x, y):
        return J.checkpoint(lambda a, b: (J.numpy.sin(a), J.numpy.cos(b)))(x, y)
    return J.make_jaxpr(f)(1., 2.).jaxpr


CASES = [
    (_jit_call, [True, False, False]),
    (_jit_call, [False, True, False]),
    (_jit_call, [False, False, True]),
    (_jit_call, [True, False, True]),
    (_remat, [True, False]),
    (_remat, [False, True]),
    (_scan_carry, [True, True, True, False]),
    (_scan_carry, [False, False, True, False]),
    (_scan_carry, [True, True, False, False]),
    (_scan_carry, [True, False, False, False]),
    (_cond, [True, False]),
    (_cond, [False, True]),
    (_while, [False, True, False, False]),
    (_while, [False, False, True, False]),
    (_while, [False, False, False, True]),
]
# JAX's dce_jaxpr keeps every carry of a while_loop; ftrans's prunes those neither the used results nor the
# predicate need (as its dce pass does), so it reads a subset of what JAX's reads.
WHILE_READS = {(False, True, False, False): [True, False, False], (False, False, True, False): [True, True, False],
               (False, False, False, True): [False, False, True]}


@pytest.mark.parametrize("build,used", CASES)
def test_dce_jaxpr_reads_the_inputs_jax_reads_and_computes_the_used_outputs(build, used):
    jj, fj = build(jax), build(ftrans)
    j_dce, j_in = jpe.dce_jaxpr(jj, used)
    f_dce, f_in = pe.dce_jaxpr(fj, used)
    if build is _while:
        assert f_in == WHILE_READS[tuple(used)] and all(j or not f for f, j in zip(f_in, j_in))
    else:
        assert f_in == j_in
    assert len(f_dce.invars) == sum(f_in) and len(f_dce.outvars) == sum(used)
    core.check_jaxpr(f_dce)
    rng = np.random.RandomState(0)
    args = [np.asarray(rng.rand(), v.aval.dtype) for v in fj.invars]
    full = core.eval_jaxpr(fj, [], *args)
    outs = core.eval_jaxpr(f_dce, [], *[a for a, u in zip(args, f_in) if u])
    want = [o for o, u in zip(full, used) if u]
    for a, b in zip(outs, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def test_dce_jaxpr_instantiate_keeps_inputs():
    fj = ftrans.make_jaxpr(lambda x, y: x * 2.)(1., 2.).jaxpr
    j = jax.make_jaxpr(lambda x, y: x * 2.)(1., 2.).jaxpr
    assert pe.dce_jaxpr(fj, [True])[1] == jpe.dce_jaxpr(j, [True])[1] == [True, False]
    for inst in (True, [False, True]):
        new, used_in = pe.dce_jaxpr(fj, [True], instantiate=inst)
        assert used_in == jpe.dce_jaxpr(j, [True], instantiate=inst)[1] == [True, True]
        assert len(new.invars) == 2
    new, used_in = pe.dce_jaxpr(fj, [False])
    assert (used_in, new.eqns, new.invars, new.outvars) == ([False, False], [], [], [])


def test_dce_jaxpr_bad_lengths():
    fj = ftrans.make_jaxpr(lambda x, y: x * 2.)(1., 2.).jaxpr
    with pytest.raises(FtransValueError, match="used_outputs has 2 entries for a jaxpr with 1 outputs"):
        pe.dce_jaxpr(fj, [True, True])
    with pytest.raises(FtransValueError, match="instantiate has 1 entries for a jaxpr with 2 inputs"):
        pe.dce_jaxpr(fj, [True], instantiate=[True])
