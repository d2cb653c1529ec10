"""``ftrans.typing``, ``ftrans.stages`` and the process-index helpers, next to JAX's names."""

import typing

import jax
import numpy as np

import ftrans
import ftrans.numpy as fnp
from ftrans import stages as fstages
from ftrans import typing as ftyping


def test_typing_names_match_jax():
    assert set(n for n in dir(jax.typing) if not n.startswith("_")) <= set(dir(ftyping))
    # ArrayLike admits what jax's admits, with ftrans's Array in place of jax's
    jax_members = {a for a in typing.get_args(jax.typing.ArrayLike) if a is not jax.Array}
    ours = set(typing.get_args(ftyping.ArrayLike))
    assert jax_members <= ours and ftrans.Array in ours and jax.Array not in ours
    assert np.dtype in typing.get_args(ftyping.DTypeLike) and str in typing.get_args(ftyping.DTypeLike)


def test_stage_types_are_the_objects_jit_returns():
    assert set(n for n in dir(jax.stages) if not n.startswith("_")) - {"CompilerOptions"} <= set(dir(fstages))
    f = ftrans.jit(lambda x: x * 2)
    lowered = f.lower(fnp.ones(3))
    assert isinstance(f, fstages.Wrapped)
    assert isinstance(f.trace(fnp.ones(3)), fstages.Traced)
    assert isinstance(lowered, fstages.Lowered)
    assert isinstance(lowered.compile(), fstages.Compiled)
    assert not isinstance(lowered, fstages.Compiled)


def test_process_index_helpers_match_jax():
    assert ftrans.process_indices() == jax.process_indices() == [0]
    assert ftrans.host_ids() == ftrans.process_indices()
    assert ftrans.host_id() == ftrans.process_index() == jax.process_index()
    assert ftrans.host_count() == ftrans.process_count() == jax.process_count()
