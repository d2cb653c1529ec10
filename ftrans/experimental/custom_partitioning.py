"""JAX's ``jax.experimental.custom_partitioning``: a function with user-written partitioning rules.

In JAX, ``custom_partitioning(fn)`` plus ``fn.def_partition(partition=..., infer_sharding_from_operands=...,
sharding_rule=...)`` lets XLA's partitioner call back into Python to choose shardings and to build the
per-device program.  ftrans accepts the same declarations but runs ``fn`` *unpartitioned*: the call is traced
inline, and XLA's SPMD partitioner (Shardy) splits it as it splits any other code.  The values are the same;
the partitioning rules are recorded (``fn.partition``, ``fn.sharding_rule``, ...) but not called, so the
communication XLA chooses may differ from what the rules would give (``docs/differences.md``).

``SdyShardingRule``, ``CompoundFactor``, ``ArrayMapping`` and ``BATCHING`` describe Shardy sharding rules, as
in JAX; a rule may also be given as its string form (``"i j, j k -> i k"``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ftrans.core.config import config
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["custom_partitioning", "SdyShardingRule", "CompoundFactor", "ArrayMapping", "BATCHING"]

BATCHING = "\u2026"  # the one-character ellipsis: leading batch dimensions, optionally followed by a group digit


def _is_batching(factor: str) -> bool:
    return factor[:1] == BATCHING and (len(factor) == 1 or factor[1:].isdigit())


def _check_name(factor: str) -> None:
    if not factor or not factor[0].isalpha():
        raise FtransValueError(f"Factor names have to start with a letter, but got '{factor[:1]}'")
    bad = [c for c in factor[1:] if not (c.isalnum() or c == "_")]
    if bad:
        raise FtransValueError(f"Unknown character '{bad[0]}'")


class CompoundFactor(tuple):
    """Several factors that together make up one dimension (``CompoundFactor('i', 'j')``)."""

    def __new__(cls, *factors: str) -> CompoundFactor:
        if len(factors) < 2:
            raise FtransValueError("A compound factor should contain at least two factors")
        for f in factors:
            if not isinstance(f, str):
                raise FtransValueError(f"Each element of CompoundFactor must be a str, but got {type(f)}")
            if _is_batching(f):
                raise FtransValueError("Ellipsis can't be used in a compound factor")
            _check_name(f)
        return super().__new__(cls, factors)


class ArrayMapping(tuple):
    """The factors of each dimension of one operand or result (``ArrayMapping('i', CompoundFactor('j', 'k'))``);
    ``BATCHING`` may come first, standing for any number of leading batch dimensions."""

    def __new__(cls, *dim_mappings: Any) -> ArrayMapping:
        for pos, d in enumerate(dim_mappings):
            if isinstance(d, CompoundFactor):
                continue
            if not isinstance(d, str):
                raise FtransValueError(f"Each element of ArrayMapping must be a str or CompoundFactor, but got "
                                       f"{type(d)}")
            if _is_batching(d):
                if pos:
                    raise FtransValueError("Ellipsis can only be used at the beginning of a dimension")
            else:
                _check_name(d)
        return super().__new__(cls, dim_mappings)


class SdyShardingRule:
    """A Shardy sharding rule: the factors of each operand's and result's dimensions, the kinds of the special
    factors, and the sizes of the factors that appear only inside compound factors (those must be given; a
    factor naming a whole dimension must not be)."""

    def __init__(self, operand_mappings: Sequence[Any], result_mappings: Sequence[Any], *,
                 reduction_factors: tuple = (), need_replication_factors: tuple = (),
                 permutation_factors: tuple = (), **factor_sizes: int):
        whole: dict[str, bool] = {}  # factor -> whether some dimension is exactly that factor
        for mapping in (*operand_mappings, *result_mappings):
            for dim in mapping:
                if isinstance(dim, CompoundFactor):
                    for f in dim:
                        whole.setdefault(f, False)
                else:
                    whole[dim] = True
        for f in factor_sizes:
            if f not in whole:
                raise FtransValueError(f"Factor {f} is not used in the rule, but size is provided")
        for f, is_whole in whole.items():
            if not is_whole and f not in factor_sizes:
                raise FtransValueError(f"Factor {f} is only used in compound factors; must specify its size")
            if is_whole and f in factor_sizes:
                raise FtransValueError(f"Factor {f} represents a whole dimension; do not specify its size")
        seen: set = set()
        for kind, fs in (("reduction_factors", reduction_factors),
                         ("need_replication_factors", need_replication_factors),
                         ("permutation_factors", permutation_factors)):
            if not isinstance(fs, tuple):
                raise FtransValueError(f"{kind} must be a tuple of factors")
            if len(set(fs)) != len(fs):
                raise FtransValueError(f"{kind} contains duplicated factors")
            for f in fs:
                if f not in whole:
                    raise FtransValueError(f"Factor {f} in {kind} is not used in the rule")
                if f in seen:
                    raise FtransValueError(f"Factor {f} can only be in one of the reduction, need replication, or "
                                           "permutation factor sets.")
                seen.add(f)
        self.operand_mappings = operand_mappings
        self.result_mappings = result_mappings
        self.factor_sizes = factor_sizes
        self.reduction_factors = reduction_factors
        self.need_replication_factors = need_replication_factors
        self.permutation_factors = permutation_factors

    def __str__(self) -> str:
        extra = "".join(f" {kind}={fs}" for kind, fs in (("reduction_factors", self.reduction_factors),
                                                         ("need_replication_factors", self.need_replication_factors),
                                                         ("permutation_factors", self.permutation_factors)) if fs)
        return f"SdyShardingRule({self.operand_mappings}, {self.result_mappings}, {self.factor_sizes}{extra})"

    __repr__ = __str__


class custom_partitioning:  # noqa: N801 -- JAX's name
    """``fun`` with partitioning rules declared by ``def_partition``.  Calling it calls ``fun`` (traced inline
    under ``jit``), which XLA partitions as ordinary code; ``static_argnums`` name arguments passed as Python
    values."""

    def __init__(self, fun: Callable, static_argnums: Sequence[int] = ()):
        if not callable(fun):
            raise FtransTypeError(f"custom_partitioning: expected a function, got {fun!r}")
        self.fun = fun
        self.static_argnums = tuple(static_argnums)
        self.partition: Callable | None = None
        self.infer_sharding_from_operands: Callable | None = None
        self.propagate_user_sharding: Callable | None = None
        self.decode_shardings = True
        self.sharding_rule: Any = None
        self.factor_options: dict = {}
        functools.update_wrapper(self, fun)

    def def_partition(self, partition: Callable, infer_sharding_from_operands: Callable | None = None,
                      propagate_user_sharding: Callable | None = None, decode_shardings: bool = True,
                      sharding_rule: Any = None, *, reduction_factors: Sequence[str] = (),
                      need_replication_factors: Sequence[str] = (), permutation_factors: Sequence[str] = (),
                      **factor_sizes: int) -> Callable:
        """Record the rules (JAX's signature); returns ``partition``, as JAX does."""
        if not callable(partition):
            raise FtransTypeError(f"def_partition: partition must be a function, got {partition!r}")
        for what, f in (("infer_sharding_from_operands", infer_sharding_from_operands),
                        ("propagate_user_sharding", propagate_user_sharding)):
            if f is not None and not callable(f):
                raise FtransTypeError(f"def_partition: {what} must be a function or None, got {f!r}")
        if sharding_rule is not None and not isinstance(sharding_rule, (str, SdyShardingRule)) \
                and not callable(sharding_rule):
            raise FtransTypeError("def_partition: sharding_rule must be a string, an SdyShardingRule or a function "
                                  f"returning one, got {sharding_rule!r}")
        self.partition = partition
        self.infer_sharding_from_operands = infer_sharding_from_operands
        self.propagate_user_sharding = propagate_user_sharding
        self.decode_shardings = decode_shardings
        self.sharding_rule = sharding_rule
        self.factor_options = {"reduction_factors": tuple(reduction_factors),
                               "need_replication_factors": tuple(need_replication_factors),
                               "permutation_factors": tuple(permutation_factors), **factor_sizes}
        return partition

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:  # keywords and defaults become positions, as JAX resolves them
            sig = inspect.signature(self.fun)
        except (TypeError, ValueError):
            sig = None
        if sig is not None:
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as e:
                raise FtransTypeError(f"custom_partitioning function {getattr(self.fun, '__name__', self.fun)!r}: "
                                      f"{e}") from None
            bound.apply_defaults()
            args, kwargs = bound.args, bound.kwargs
        if kwargs:
            raise FtransTypeError(f"custom_partitioning function {getattr(self.fun, '__name__', self.fun)!r}: "
                                  f"keyword-only arguments {sorted(kwargs)} are not supported (as in JAX)")
        if self.sharding_rule is None and (self.propagate_user_sharding is not None
                                           or self.infer_sharding_from_operands is not None):
            if config.use_shardy_partitioner:  # as JAX: Shardy reads sharding_rule, not the callbacks
                raise NotImplementedError("Shardy is used, but sharding propagation callbacks instead of "
                                          "sharding_rule are provided. Need to provide sharding_rule to "
                                          "migrate to Shardy.")
        for i in self.static_argnums:
            if not -len(args) <= i < len(args):
                raise FtransValueError(f"custom_partitioning: static_argnums {self.static_argnums} is out of range "
                                       f"for {len(args)} arguments")
        return self.fun(*args)
