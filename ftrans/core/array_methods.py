"""The operators and methods shared by ``ftrans.Array`` and every ``Tracer``.

Both classes get them from one mixin so ``x + 1``, ``x @ w``, ``x[i]`` and
``x.at[i].set(v)`` mean the same thing eagerly and under any transform.  The
methods are installed from ``ftrans.numpy`` once it is imported (``install``),
binding the operator slots directly to the ``jnp`` functions: an operator
then costs one Python call, not two.
"""

from __future__ import annotations

from typing import Any


class ArrayMixin:
    __slots__ = ()

    def __setitem__(self, idx: Any, value: Any) -> None:
        from ftrans.errors import FtransTypeError

        raise FtransTypeError(
            "ftrans arrays are immutable: item assignment is not supported. "
            "Use x = x.at[idx].set(value) (or .add, .multiply, .min, .max) instead."
        )

    def __deepcopy__(self, memo: Any) -> Any:
        """``copy.deepcopy``: a copy of the array (a traced one stays in its trace, as in JAX)."""
        return self.copy()

    def __copy__(self) -> Any:
        """``copy.copy``: as ``deepcopy`` (a traced value stays in its trace; pickling one is refused)."""
        return self.copy()

    @property
    def T(self):
        return _jnp.transpose(self)

    @property
    def mT(self):
        return _jnp.swapaxes(self, -1, -2)

    @property
    def at(self):
        return _jnp._IndexUpdateHelper(self)

    @property
    def real(self):
        return _jnp.real(self)

    @property
    def imag(self):
        return _jnp.imag(self)

    def __array_namespace__(self, *, api_version: str | None = None) -> Any:
        """The array API namespace of these arrays: ``ftrans.numpy`` (as JAX's numpy module for its arrays)."""
        if api_version is not None and api_version != _jnp.__array_api_version__:
            from ftrans.errors import FtransValueError

            raise FtransValueError(f"api_version={api_version!r} is not available; available versions are: "
                                   f"{[_jnp.__array_api_version__]}")
        return _jnp

    def to_device(self, device: Any, *, stream: Any = None) -> Any:
        """Array API ``to_device``: this array on ``device`` (a copy there; committed, as ``device_put``)."""
        if stream is not None:
            from ftrans.errors import FtransValueError

            raise FtransValueError("to_device: stream is not supported (pass stream=None)")
        return _jnp.asarray(self, device=device)


_jnp: Any = None

# operator slot -> jnp function name; reflected ones swap operands.
_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "matmul": "matmul",
    "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
    "lshift": "left_shift", "rshift": "right_shift", "divmod": "divmod",
}
_COMPARE = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
            "eq": "equal", "ne": "not_equal"}
_UNARY = {"neg": "negative", "pos": "positive", "abs": "abs", "invert": "invert"}
# Methods that take the array first and forward everything else.
_METHODS = [
    "all", "any", "argmax", "argmin", "argpartition", "argsort", "astype", "byteswap", "clip",
    "choose", "compress", "conj", "conjugate", "copy", "cumprod", "cumsum", "diagonal", "dot", "flatten",
    "max", "mean", "min", "nonzero", "prod",
    "ptp", "ravel", "repeat", "reshape", "round", "searchsorted", "sort", "squeeze", "std", "sum",
    "swapaxes", "take", "trace", "transpose", "var", "view",
]


# Operand types a binary operator handles itself; for any other type it returns NotImplemented, so
# Python asks the other operand (its reflected method), as JAX's operators do.  The plain containers are
# still handled here, and rejected with the jnp function's TypeError.
_OWN_TYPES: set = {int, float, complex, bool, list, tuple, set, dict}
_accepts: Any = None  # (x) -> bool, installed with the Array / Tracer types


def _deferring(fn, reflected: bool = False):
    """``fn`` as an operator slot: NotImplemented for an operand of a type ftrans does not know (an object
    with its own reflected operator, a NamedTuple of arrays, ...)."""
    if reflected:
        def op(self, other):
            if type(other) in _OWN_TYPES or _accepts(other):
                return fn(other, self)
            return NotImplemented
    else:
        def op(self, other):
            if type(other) in _OWN_TYPES or _accepts(other):
                return fn(self, other)
            return NotImplemented
    op.__name__ = getattr(fn, "__name__", "op")
    op.__doc__ = getattr(fn, "__doc__", None)
    return op


def _forward(name: str):
    def method(self, *args, **kwargs):
        fn = getattr(_jnp, "_method_" + name, None) or getattr(_jnp, name)
        return fn(self, *args, **kwargs)

    method.__name__ = name
    return method


def install(jnp_module: Any) -> None:
    """Bind the operator slots of ArrayMixin to ``ftrans.numpy``'s functions."""
    global _jnp, _accepts
    _jnp = jnp_module
    import numpy as np

    from ftrans.core.array import Array, is_foreign_array
    from ftrans.core.trace import Tracer

    known = (Array, Tracer, np.ndarray, np.generic)
    _accepts = lambda x: isinstance(x, known) or is_foreign_array(x)  # noqa: E731
    for slot, name in _BINARY.items():
        fn = getattr(jnp_module, name)
        setattr(ArrayMixin, f"__{slot}__", _deferring(fn))
        setattr(ArrayMixin, f"__r{slot}__", _deferring(fn, reflected=True))
    for slot, name in _COMPARE.items():
        setattr(ArrayMixin, f"__{slot}__", _deferring(getattr(jnp_module, name)))
    for slot, name in _UNARY.items():
        setattr(ArrayMixin, f"__{slot}__", getattr(jnp_module, name))
    ArrayMixin.__getitem__ = jnp_module._getitem
    ArrayMixin.__round__ = jnp_module._operator_round
    ArrayMixin.__contains__ = jnp_module._operator_contains
    for name in _METHODS:
        setattr(ArrayMixin, name, _forward(name))
    _install_fast(jnp_module)


def _install_fast(jnp_module: Any) -> None:
    from ftrans.core.array import install_fast_operators
    from ftrans.core.prims import elementwise as E

    install_fast_operators({
        "__add__": (E.add_p, _deferring(jnp_module.add)),
        "__radd__": (E.add_p, _deferring(jnp_module.add, reflected=True)),
        "__rsub__": (E.sub_p, _deferring(jnp_module.subtract, reflected=True)),
        "__rmul__": (E.mul_p, _deferring(jnp_module.multiply, reflected=True)),
        "__sub__": (E.sub_p, _deferring(jnp_module.subtract)),
        "__mul__": (E.mul_p, _deferring(jnp_module.multiply)),
        "__lt__": (E.lt_p, _deferring(jnp_module.less)),
        "__le__": (E.le_p, _deferring(jnp_module.less_equal)),
        "__gt__": (E.gt_p, _deferring(jnp_module.greater)),
        "__ge__": (E.ge_p, _deferring(jnp_module.greater_equal)),
    })
