"""Symbolic dimensions: sizes given by integer polynomials over dimension variables (JAX's shape polymorphism).

A :class:`DimExpr` is a polynomial with integer coefficients whose monomials are products of *atoms*: a
dimension variable (``b``) or an integer operation that is not a polynomial (``floordiv(b, 2)``,
``mod(b, 2)``). Arithmetic with integers and other expressions (``+``, ``-``, ``*``, ``//`` and ``%``) gives a
new expression, and a result without variables is a plain ``int``, so every shape rule written for integers
computes with them unchanged. Expressions are hashable and immutable, so they can be dimensions of abstract
values.

Comparisons are decided as JAX decides them: ``==`` is true exactly when the two expressions are equal for
every value of the variables (syntactically, after normalisation) and false otherwise; ``>=``, ``>``, ``<=``,
``<`` use that every variable is at least 1 and the constraints of the expression's :class:`SymbolicScope`
(bounds of variables and ``lhs >= rhs`` facts) and raise :class:`InconclusiveDimensionOperation` when the
answer depends on the values. Turning an expression into an ``int`` raises the same error.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ftrans.errors import InconclusiveDimensionOperation

__all__ = ["DimExpr", "SymbolicScope", "is_symbolic_dim", "parse_dim", "is_poly_shape", "evaluate",
           "dim_vars", "inconclusive"]

_INF = math.inf


class SymbolicScope:
    """The scope that dimension variables and their constraints belong to (JAX's ``SymbolicScope``).

    ``constraints``: strings ``"e1 >= e2"``, ``"e1 <= e2"`` or ``"e1 == e2"`` over the scope's variables."""

    def __init__(self, constraints_str: Sequence[str] = ()):
        if isinstance(constraints_str, str):
            raise ValueError("The symbolic constraints should be a sequence of strings. "
                             f"Got {constraints_str!r}")
        self.constraints_str = tuple(constraints_str)
        self._ge: list[DimExpr | int] = []  # facts ``e >= 0``
        self._eq: dict[tuple, tuple] = {}  # a monomial t -> (e, k): the constraint ``k*t == e``
        self._bounds: dict[Any, tuple[float, float]] = {}  # an atom -> (lower, upper)
        for c in self.constraints_str:
            self._add_constraint(c)

    @property
    def constraints(self) -> tuple[str, ...]:
        return self.constraints_str

    def _add_constraint(self, c: str) -> None:
        m = re.fullmatch(r"(.*?)(>=|<=|==)(.*)", c.strip())
        if m is None:
            raise ValueError(f"Constraint parsing error: must contain one of '==' or '>=' or '<=' in {c!r}")
        lhs, op, rhs = parse_dim(m.group(1), self), m.group(2), parse_dim(m.group(3), self)
        if op == "==":
            self._add_equality(c, lhs, rhs)
            return
        diff = lhs - rhs if op == ">=" else rhs - lhs  # diff >= 0
        if not isinstance(diff, DimExpr):
            if diff < 0:
                raise ValueError(f"Unsatisfiable explicit constraint: {c}")
            return
        self._ge.append(diff)
        # ``v >= k``, ``v <= k``, ``k*v >= k2``: a bound of the variable
        if len(diff._terms) <= 2 and sum(1 for mono, _ in diff._terms if mono) == 1:
            (mono, coef), = [(mono, coef) for mono, coef in diff._terms if mono]
            const = dict(diff._terms).get((), 0)
            if len(mono) == 1 and mono[0][1] == 1:
                atom = mono[0][0]
                lo, hi = self._bounds.get(atom, (-_INF, _INF))
                if coef > 0:  # coef*v + const >= 0  =>  v >= ceil(-const/coef)
                    lo = max(lo, -(const // coef))
                else:  # v <= floor(const/-coef)
                    hi = min(hi, const // -coef)
                self._bounds[atom] = (lo, hi)

    def _add_equality(self, c: str, lhs: Any, rhs: Any) -> None:
        """``lhs == rhs``: a rewrite rule ``k*t -> rhs`` for the left-hand side's one term ``k*t`` (JAX's
        normalization rules: every expression of the scope built later has ``t`` times a multiple of ``k``
        rewritten), and the two facts ``lhs - rhs >= 0``, ``rhs - lhs >= 0`` for the comparisons."""
        diff = lhs - rhs
        if not isinstance(diff, DimExpr):
            if diff != 0:
                raise ValueError(f"Unsatisfiable explicit constraint: {c}")
            return
        if not isinstance(lhs, DimExpr) or len(lhs._terms) != 1:
            raise ValueError(f"Invalid equality constraint: {c}. The left-hand-side must be of the form "
                             "`term * coefficient`.")
        (mono, k), = lhs._terms
        if mono in self._eq:
            raise NotImplementedError("Found multiple equality constraints with the same left-hand-side: "
                                      f"{_mono_str(mono)}")
        self._ge.extend((diff, -diff))
        self._eq[mono] = (rhs, k)
        if len(mono) == 1 and mono[0][1] == 1:  # what the atom is, as facts about ``rhs`` (= k * atom)
            self._ge.extend(f for f in _atom_facts(mono[0][0], rhs, k) if isinstance(f, DimExpr))
        # ``mod(e, d) == 0`` also gives ``d*floordiv(e, d) == e``
        if k == 1 and isinstance(rhs, int) and rhs == 0 and len(mono) == 1 and mono[0][1] == 1:
            atom = mono[0][0]
            if isinstance(atom, _Op) and atom.kind == "mod" and isinstance(atom.args[1], int):
                e, d = atom.args
                fd = DimExpr(((((_Op("floordiv", (e, d)), 1),), d),), self)
                if isinstance(e, DimExpr) and fd._terms[0][0] not in self._eq:
                    self._add_equality(c, fd, e)

    def __repr__(self) -> str:
        return f"SymbolicScope(constraints={list(self.constraints_str)!r})"

    def _with_fact(self, fact: Any) -> SymbolicScope:
        """This scope with one more fact ``fact >= 0`` (a case of a decision)."""
        out = object.__new__(SymbolicScope)
        out.constraints_str = self.constraints_str
        out._ge, out._eq, out._bounds = [*self._ge, fact], self._eq, self._bounds
        return out


_DEFAULT_SCOPE = SymbolicScope()


class _Op:
    """An atom that is an operation: ``floordiv(e, d)``, ``mod(e, d)``, ``max(e1, e2)``, ``min(e1, e2)``."""

    __slots__ = ("kind", "args", "_hash")

    def __init__(self, kind: str, args: tuple):
        self.kind = kind
        self.args = args
        self._hash = hash((kind, args))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Op) and self.kind == other.kind and self.args == other.args

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:  # a negative constant argument prints as JAX's does: ``max(- 1, b)``
        return f"{self.kind}({', '.join(f'- {-a}' if isinstance(a, int) and a < 0 else str(a) for a in self.args)})"

    def evaluate(self, env: dict) -> int:
        vals = [evaluate(a, env) for a in self.args]
        return _OP_EVAL[self.kind](*vals)


_OP_EVAL: dict[str, Callable[..., int]] = {"floordiv": operator.floordiv, "mod": operator.mod,
                                           "max": lambda a, b: max_dim(a, b), "min": lambda a, b: min_dim(a, b)}

Atom = "str | _Op"


def _atom_key(a: Atom) -> tuple:
    return (1, str(a)) if isinstance(a, _Op) else (0, a)


def _mono_key(mono: tuple) -> tuple:
    return (sum(p for _, p in mono), [(_atom_key(a), p) for a, p in mono])


def _mono_str(mono: tuple) -> str:
    return "*".join(str(a) if p == 1 else f"{a}^{p}" for a, p in mono)


def _mono_mul(m1: tuple, m2: tuple) -> tuple:
    powers: dict = dict(m1)
    for a, p in m2:
        powers[a] = powers.get(a, 0) + p
    return tuple(sorted(powers.items(), key=lambda ap: _atom_key(ap[0])))


def _atom_facts(atom: Any, e: Any, k: int) -> list:
    """Facts ``f >= 0`` about ``e = k * atom`` that hold by what the atom is (a variable is at least 1,
    ``min(x, y)`` at most ``x`` and ``y``, ...)."""
    if isinstance(atom, str):
        return [e - k]
    x, y = atom.args
    if atom.kind == "max":
        return [e - k * x, e - k * y]
    if atom.kind == "min":
        return [k * x - e, k * y - e]
    if isinstance(y, int) and y > 0:
        if atom.kind == "floordiv":  # x - y + 1 <= y * atom <= x
            return [k * x - y * e, y * e - k * (x - y + 1)]
        if atom.kind == "mod":
            return [e, k * (y - 1) - e]
    return []


def _rewritten(terms: dict, rules: dict) -> dict:
    """``terms`` with the first term that an equality constraint's rule ``k*t -> e`` matches rewritten: ``c*t``
    (``c`` a multiple of ``k``) becomes ``(c // k)*e``, and so does a product ``c*t*r`` of such a ``t`` (one
    atom's power) and the rest ``r`` (JAX's normalization, one rule per expression)."""
    for m, c in terms.items():
        cands = [(m, ())]
        if len(m) > 1:
            cands += [(((a, p),), tuple(ap for ap in m if ap[0] is not a)) for a, p in m]
        for t, rest in cands:
            rule = rules.get(t)
            if rule is None or c % rule[1]:
                continue
            after = DimExpr._terms_of(rule[0])
            out = dict(terms)
            del out[m]
            for am, ac in after.items():
                mm = _mono_mul(am, rest) if rest else am
                out[mm] = out.get(mm, 0) + ac * (c // rule[1])
            return {mm: cc for mm, cc in out.items() if cc != 0}
    return terms


def _make(terms: dict, scope: SymbolicScope) -> DimExpr | int:
    terms = {m: c for m, c in terms.items() if c != 0}
    if scope._eq:  # equality constraints rewrite the terms they name
        terms = _rewritten(terms, scope._eq)
    if not terms:
        return 0
    if len(terms) == 1 and () in terms:
        return terms[()]
    # larger degrees first, then later names first (JAX's order when printed: ``c + b + a``, ``2*b + a``)
    return DimExpr(tuple(sorted(terms.items(), key=lambda mc: _mono_key(mc[0]), reverse=True)), scope)


def inconclusive(msg: str) -> InconclusiveDimensionOperation:
    return InconclusiveDimensionOperation(
        f"{msg}\nThis error arises for comparison operations with shapes that are non-constant, and the result "
        "of the operation cannot be represented as a boolean value for all values of the symbolic dimensions "
        "involved. Please see https://docs.jax.dev/en/latest/export/shape_poly.html#comparison-of-symbolic-"
        "dimensions-is-partially-supported for more details.")


class DimExpr:
    """A symbolic dimension: an integer polynomial over dimension variables (see the module's docstring)."""

    __slots__ = ("_terms", "scope", "_hash")
    __array_priority__ = 1000  # NumPy arrays defer their operators to ours (``np.arange(4) + b``)

    def __init__(self, terms: tuple, scope: SymbolicScope):
        self._terms = terms  # ((monomial, coefficient), ...), monomial = ((atom, power), ...), sorted
        self.scope = scope
        self._hash = hash(terms)

    # -- construction --------------------------------------------------------
    @staticmethod
    def var(name: str, scope: SymbolicScope | None = None) -> Any:
        scope = scope or _DEFAULT_SCOPE
        if scope._eq:
            return _make({((name, 1),): 1}, scope)
        return DimExpr((((((name, 1),), 1),)), scope)

    @staticmethod
    def op(kind: str, args: tuple, scope: SymbolicScope) -> Any:
        if scope._eq:
            return _make({((_Op(kind, args), 1),): 1}, scope)
        return DimExpr(((((_Op(kind, args), 1),), 1),), scope)

    # -- printing ------------------------------------------------------------
    def __str__(self) -> str:
        out = ""
        for mono, c in self._terms:
            body = _mono_str(mono)
            if not body:
                term = str(abs(c))
            elif abs(c) == 1:
                term = body
            else:
                term = f"{abs(c)}*{body}"
            if not out:
                out = term if c > 0 else f"- {term}"
            else:
                out += f" + {term}" if c > 0 else f" - {term}"
        return out

    def __repr__(self) -> str:
        return str(self)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __copy__(self) -> DimExpr:  # immutable: a copy (even a deep one) is the expression itself, of its scope
        return self

    def __deepcopy__(self, memo: dict) -> DimExpr:
        return self

    # -- structure -----------------------------------------------------------
    def __hash__(self) -> int:
        return self._hash

    def _scope_of(self, other: Any) -> SymbolicScope:
        if isinstance(other, DimExpr) and other.scope is not self.scope:
            if other.scope is _DEFAULT_SCOPE or self.scope is _DEFAULT_SCOPE:
                return self.scope if other.scope is _DEFAULT_SCOPE else other.scope
            raise ValueError(f"Invalid mixing of symbolic scopes when computing with '{self}' and '{other}': "
                             "create every dimension variable of one program in one SymbolicScope "
                             "(symbolic_shape(..., scope=...))")
        return self.scope

    def _as_terms(self) -> dict:
        return dict(self._terms)

    @staticmethod
    def _terms_of(x: Any) -> dict | None:
        if isinstance(x, DimExpr):
            return x._as_terms()
        if isinstance(x, int) or (hasattr(x, "__index__") and not hasattr(x, "shape")):
            try:
                return {(): operator.index(x)} if operator.index(x) else {}
            except TypeError:
                return None
        if hasattr(x, "shape") and getattr(x, "shape", None) == () and getattr(x, "dtype", None) is not None \
                and getattr(x.dtype, "kind", "") in "iu" and type(x).__module__ == "numpy":
            return {(): int(x)}
        return None

    # -- arithmetic ----------------------------------------------------------
    def __add__(self, other: Any) -> Any:
        t = DimExpr._terms_of(other)
        if t is None:
            return self._as_value(operator.add, other, False)
        terms = self._as_terms()
        for m, c in t.items():
            terms[m] = terms.get(m, 0) + c
        return _make(terms, self._scope_of(other))

    def __radd__(self, other: Any) -> Any:
        if DimExpr._terms_of(other) is None:
            return self._as_value(operator.add, other, True)
        return self + other

    def _as_value(self, op: Callable, other: Any, swap: bool) -> Any:
        """``op`` of the dimension's value and a non-integer ``other`` (a float, an array): an array, as in JAX."""
        if isinstance(other, (float, complex)) or hasattr(other, "dtype"):
            v = self.__jax_array__()
            return op(other, v) if swap else op(v, other)
        return NotImplemented

    def __neg__(self) -> Any:
        return _make({m: -c for m, c in self._terms}, self.scope)

    def __pos__(self) -> DimExpr:
        return self

    def __sub__(self, other: Any) -> Any:
        t = DimExpr._terms_of(other)
        if t is None:
            return self._as_value(operator.sub, other, False)
        return self + _make({m: -c for m, c in t.items()}, self._scope_of(other))

    def __rsub__(self, other: Any) -> Any:
        t = DimExpr._terms_of(other)
        if t is None:
            return self._as_value(operator.sub, other, True)
        return (-self) + other

    def __mul__(self, other: Any) -> Any:
        t = DimExpr._terms_of(other)
        if t is None:
            return self._as_value(operator.mul, other, False)
        terms: dict = {}
        for m1, c1 in self._terms:
            for m2, c2 in t.items():
                m = _mono_mul(m1, m2)
                terms[m] = terms.get(m, 0) + c1 * c2
        return _make(terms, self._scope_of(other))

    def __rmul__(self, other: Any) -> Any:
        if DimExpr._terms_of(other) is None:
            return self._as_value(operator.mul, other, True)
        return self * other

    def __pow__(self, power: Any) -> Any:
        if isinstance(power, DimExpr):  # a symbolic power: the values', as in JAX
            return self.__jax_array__() ** power.__jax_array__()
        if DimExpr._terms_of(power) is None:
            raise ValueError(f"Symbolic dimension '{self}' cannot be raised to non-integer powers ({power!r})")
        power = operator.index(power)
        if power < 0:
            raise ValueError(f"Symbolic dimension '{self}' cannot be raised to negative powers ({power})")
        out: Any = 1
        for _ in range(power):
            out = out * self
        return out

    def _divmod(self, other: Any) -> tuple[Any, Any]:
        """``(self // other, self % other)``: exact where every term divides, else ``floordiv``/``mod`` atoms."""
        scope = self._scope_of(other)
        if isinstance(other, DimExpr):
            # exact division by an expression: self == q * other for a constant q
            for mono, c in self._terms:
                oc = dict(other._terms).get(mono)
                if oc:
                    q = c // oc
                    if q and self - q * other == 0:
                        return q, 0
                    break
            # by a monomial dividing every term
            if len(other._terms) == 1:
                (omono, oc), = other._terms
                if omono and all(c % oc == 0 and all(dict(mono).get(a, 0) >= p for a, p in omono)
                                 for mono, c in self._terms):
                    terms = {}
                    for mono, c in self._terms:
                        powers = dict(mono)
                        for a, p in omono:
                            powers[a] -= p
                        terms[tuple(sorted(((a, p) for a, p in powers.items() if p),
                                           key=lambda ap: _atom_key(ap[0])))] = c // oc
                    return _make(terms, scope), 0
            q = _exact_quotient(self._as_terms(), other)
            if q is not None:
                return _make(q, scope), 0
            return DimExpr.op("floordiv", (self, other), scope), DimExpr.op("mod", (self, other), scope)
        d = operator.index(other)
        if d == 0:
            raise InconclusiveDimensionOperation(f"Symbolic dimension '{self}' cannot be divided by 0")
        if all(c % d == 0 for _, c in self._terms):
            return _make({m: c // d for m, c in self._terms}, scope), 0
        if all(c % d == 0 for m, c in self._terms if m):  # only the constant leaves a remainder
            const = dict(self._terms).get((), 0)
            q = _make({m: c // d for m, c in self._terms if m}, scope) + const // d
            return q, const % d
        return DimExpr.op("floordiv", (self, d), scope), DimExpr.op("mod", (self, d), scope)

    def __floordiv__(self, other: Any) -> Any:
        if DimExpr._terms_of(other) is None:
            return self._as_value(operator.floordiv, other, False)
        return self._divmod(other)[0]

    def __rfloordiv__(self, other: Any) -> Any:
        t = DimExpr._terms_of(other)
        if t is None:
            return self._as_value(operator.floordiv, other, True)
        if not t:  # 0 // d and 0 % d are 0
            return 0
        return DimExpr.op("floordiv", (_make(t, self.scope), self), self.scope)

    def __mod__(self, other: Any) -> Any:
        if DimExpr._terms_of(other) is None:
            return self._as_value(operator.mod, other, False)
        return self._divmod(other)[1]

    def __rmod__(self, other: Any) -> Any:
        t = DimExpr._terms_of(other)
        if t is None:
            return self._as_value(operator.mod, other, True)
        if not t:  # 0 // d and 0 % d are 0
            return 0
        return DimExpr.op("mod", (_make(t, self.scope), self), self.scope)

    def __divmod__(self, other: Any) -> tuple[Any, Any]:
        return self._divmod(other)

    def __rdivmod__(self, other: Any) -> tuple[Any, Any]:
        return self.__rfloordiv__(other), self.__rmod__(other)

    def __truediv__(self, other: Any) -> Any:  # "/" gives a float value, as in JAX
        return self._as_value(operator.truediv, other if not isinstance(other, DimExpr) else other.__jax_array__(),
                              False) if not isinstance(other, int) else self.__jax_array__() / other

    def __rtruediv__(self, other: Any) -> Any:
        return other / self.__jax_array__()

    def __rpow__(self, other: Any) -> Any:
        return other ** self.__jax_array__()

    # -- comparisons ---------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if isinstance(other, DimExpr):  # expressions of two scopes are different (a trace cache keeps them apart)
            return self._terms == other._terms and (self.scope is other.scope or self.scope is _DEFAULT_SCOPE
                                                    or other.scope is _DEFAULT_SCOPE)
        return False if DimExpr._terms_of(other) is not None else NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def _ge0(self, diff: Any, what: str) -> bool:
        if not isinstance(diff, DimExpr):
            return diff >= 0
        decided = _decide_ge0(diff, self.scope)
        if decided is None:
            raise inconclusive(f"Symbolic dimension comparison {what} is inconclusive.")
        return decided

    def __ge__(self, other: Any) -> bool:
        if DimExpr._terms_of(other) is None:
            return NotImplemented
        return self._ge0(self - other, f"'{self}' >= '{other}'")

    def __gt__(self, other: Any) -> bool:
        if DimExpr._terms_of(other) is None:
            return NotImplemented
        return self._ge0(self - other - 1, f"'{self}' > '{other}'")

    def __le__(self, other: Any) -> bool:
        if DimExpr._terms_of(other) is None:
            return NotImplemented
        return self._ge0(other - self, f"'{self}' <= '{other}'")

    def __lt__(self, other: Any) -> bool:
        if DimExpr._terms_of(other) is None:
            return NotImplemented
        return self._ge0(other - self - 1, f"'{self}' < '{other}'")

    # -- no value ------------------------------------------------------------
    def __int__(self) -> int:
        raise InconclusiveDimensionOperation(
            f"Symbolic dimension '{self}' used in a context that requires a constant (an integer): its value "
            "is known only when the exported function is called. Compute with the dimension itself "
            "(it supports +, -, *, //, %) instead of converting it")

    def __index__(self) -> int:
        return self.__int__()

    def __bool__(self) -> bool:
        return True  # a dimension variable is >= 1, so an expression of them is not the integer 0

    def __float__(self) -> float:
        return float(self.__int__())

    def __jax_array__(self) -> Any:
        """The dimension's value as an integer scalar of the program being traced (``x * x.shape[0]``)."""
        from ftrans.core.prims.structural import dim_as_value_p

        return dim_as_value_p.bind(dim=self)

    dimension_as_value = __jax_array__  # JAX's name for it (``core.dimension_as_value`` calls it)

    # -- max/min (JAX's ``core.max_dim(d1, d2)`` calls ``d1.max(d2)``, or ``d2.rmax(d1)`` for an integer d1) --
    def max(self, other: Any) -> Any:
        return max_dim(self, other)

    def rmax(self, other: Any) -> Any:
        return max_dim(other, self)

    def min(self, other: Any) -> Any:
        return min_dim(self, other)

    def rmin(self, other: Any) -> Any:
        return min_dim(other, self)

    # -- inspection ----------------------------------------------------------
    def is_constant(self) -> bool:
        return False

    def atoms(self) -> set:
        """The atoms (variable names and operations) the expression mentions."""
        return {a for mono, _ in self._terms for a, _ in mono}

    def evaluate(self, env: dict) -> int:
        """The value for the variables' values in ``env`` (name -> int)."""
        total = 0
        for mono, c in self._terms:
            v = c
            for a, p in mono:
                v *= (env[a] if isinstance(a, str) else a.evaluate(env)) ** p
            total += v
        return total


def _exact_quotient(num: dict, den: DimExpr) -> dict | None:
    """``num / den`` when ``den`` divides the polynomial ``num`` exactly (long division by the leading term in
    the graded order of the monomials), else None."""
    atoms = sorted({a for m in [*num, *(m for m, _ in den._terms)] for a, _ in m}, key=_atom_key, reverse=True)

    def order(mc: tuple) -> tuple:  # graded lexicographic: a monomial order, as long division needs
        powers = dict(mc[0])
        return (sum(powers.values()), tuple(powers.get(a, 0) for a in atoms))

    lead_m, lead_c = max(den._terms, key=order)
    lead = dict(lead_m)
    rem = {m: c for m, c in num.items() if c}
    q: dict = {}
    for _ in range(64):
        if not rem:
            return q
        m, c = max(rem.items(), key=order)
        powers = dict(m)
        if c % lead_c or any(powers.get(a, 0) < p for a, p in lead.items()):
            return None
        qm = tuple(sorted(((a, p - lead.get(a, 0)) for a, p in powers.items() if p - lead.get(a, 0)),
                          key=lambda ap: _atom_key(ap[0])))
        qc = c // lead_c
        q[qm] = q.get(qm, 0) + qc
        for dm, dc in den._terms:
            mm = _mono_mul(qm, dm)
            rem[mm] = rem.get(mm, 0) - qc * dc
            if rem[mm] == 0:
                del rem[mm]
    return None


def _decide_ge0(e: Any, scope: SymbolicScope, depth: int = 0) -> bool | None:
    """Whether ``e >= 0`` for every value of the variables (True), for none (False), or it depends (None).
    A ``max``/``min`` atom is decided case by case: ``max(x, y)`` is ``x`` where ``x >= y`` and ``y`` where
    ``y >= x``, each case with its condition as a fact."""
    if not isinstance(e, DimExpr):
        return e >= 0
    if depth == 0 and scope._eq:
        e = _scaled_for_rules(e, scope)
        if not isinstance(e, DimExpr):
            return e >= 0
    atoms = [a for mono, _ in e._terms for a, _ in mono if isinstance(a, _Op) and a.kind in ("max", "min")]
    divs = [a for mono, _ in e._terms for a, _ in mono if isinstance(a, _Op) and a.kind == "floordiv"
            and isinstance(a.args[1], int) and a.args[1] > 0]
    atom = atoms[0] if atoms else None
    for a in divs:  # what floordiv is: x - d + 1 <= d * floordiv(x, d) <= x
        q = DimExpr(((((a, 1),), 1),), e.scope)
        x, d = a.args
        for fact in (x - d * q, d * q - x + d - 1):
            if isinstance(fact, DimExpr):
                scope = scope._with_fact(fact)
    for a in [a for mono, _ in e._terms for a, _ in mono if isinstance(a, _Op) and a.kind == "mod"
              and isinstance(a.args[1], DimExpr) and _bounds(a.args[1], scope)[0] >= 1]:
        m = DimExpr(((((a, 1),), 1),), e.scope)  # what mod by a positive d is: 0 <= mod(x, d) <= d - 1
        for fact in (m, a.args[1] - 1 - m):
            if isinstance(fact, DimExpr):
                scope = scope._with_fact(fact)
                divs = divs or [a]
    if divs and not atoms:
        lo, hi = _bounds(e, scope)
        if lo >= 0:
            return True
        if hi < 0:
            return False
    if atoms:  # what max and min are by definition: max(x, y) >= x, y >= min(x, y), ...
        for a in atoms:
            m = DimExpr(((((a, 1),), 1),), e.scope)
            for arg in a.args:
                fact = m - arg if a.kind == "max" else arg - m
                if isinstance(fact, DimExpr):
                    scope = scope._with_fact(fact)
        lo, hi = _bounds(e, scope)
        if lo >= 0:
            return True
        if hi < 0:
            return False
    if atom is None or depth > 3:
        lo, hi = _bounds(e, scope)
        return True if lo >= 0 else False if hi < 0 else None
    x, y = atom.args
    answers = set()
    for pick, other in ((x, y), (y, x)):
        fact = pick - other if atom.kind == "max" else other - pick  # the case's condition, as ``fact >= 0``
        if not isinstance(fact, DimExpr) and fact < 0:
            continue  # a case that cannot happen
        case = scope._with_fact(fact) if isinstance(fact, DimExpr) else scope
        answers.add(_decide_ge0(_replace_atom(e, atom, pick), case, depth + 1))
    return answers.pop() if len(answers) == 1 else None


def _scaled_for_rules(e: DimExpr, scope: SymbolicScope) -> Any:
    """``e`` times ``k`` (which keeps its sign) for each equality constraint ``k*t == r`` whose term ``t`` it
    has with a coefficient that ``k`` does not divide, so the constraint rewrites ``t`` (``b - a`` with ``4*a ==
    b`` is decided as ``4*b - 4*a = 3*b``)."""
    for t, (_, k) in scope._eq.items():
        if k > 1 and isinstance(e, DimExpr) and any(c % k and (m == t or (len(t) == 1 and t[0] in m))
                                                    for m, c in e._terms):
            e = e * k
    return e


def _replace_atom(e: DimExpr, atom: Any, value: Any) -> Any:
    out: Any = 0
    for mono, c in e._terms:
        term: Any = c
        for a, p in mono:
            term = term * (value if a == atom else DimExpr(((((a, 1),), 1),), e.scope)) ** p
        out = out + term
    return out


def _atom_bounds(a: Atom, scope: SymbolicScope, depth: int = 0) -> tuple[float, float]:
    lo, hi = scope._bounds.get(a, (-_INF, _INF))
    if isinstance(a, str):
        return max(lo, 1), hi
    if a.kind == "floordiv" and not isinstance(a.args[1], DimExpr) and a.args[1] > 0:
        elo, ehi = _bounds(a.args[0], scope, depth + 1)
        d = a.args[1]
        return max(lo, elo // d if elo != -_INF else -_INF), min(hi, ehi // d if ehi != _INF else _INF)
    if a.kind == "floordiv" and not isinstance(a.args[1], DimExpr) and a.args[1] < 0:  # decreasing in x
        elo, ehi = _bounds(a.args[0], scope, depth + 1)
        d = a.args[1]
        return max(lo, ehi // d if ehi != _INF else -_INF), min(hi, elo // d if elo != -_INF else _INF)
    if (a.kind == "floordiv" and isinstance(a.args[1], DimExpr) and depth < 3
            and _bounds(a.args[1], scope, depth + 1)[0] >= 1):  # x // d with d >= 1 lies in [min(x, 0), x or -1]
        elo, ehi = _bounds(a.args[0], scope, depth + 1)
        return max(lo, min(elo, 0)), min(hi, ehi if ehi >= 0 else -1)
    if a.kind == "mod" and not isinstance(a.args[1], DimExpr) and a.args[1] > 0:
        return max(lo, 0), min(hi, a.args[1] - 1)
    if a.kind in ("max", "min"):
        b1, b2 = _bounds(a.args[0], scope, depth + 1), _bounds(a.args[1], scope, depth + 1)
        f = max if a.kind == "max" else min
        return max(lo, f(b1[0], b2[0])), min(hi, f(b1[1], b2[1]))
    return lo, hi


def _mul_bounds(b1: tuple, b2: tuple) -> tuple[float, float]:
    prods = [x * y for x in b1 for y in b2 if not ((x == 0 and abs(y) == _INF) or (y == 0 and abs(x) == _INF))]
    prods = prods or [0]
    return min(prods), max(prods)


def _bounds(e: Any, scope: SymbolicScope, depth: int = 0) -> tuple[float, float]:
    """Lower and upper bounds of ``e`` over every value of its variables allowed by ``scope`` (``depth``: how
    deep in the arguments of operations; the facts are used only near the top, as a fact may mention the
    operation whose bounds are being found)."""
    if not isinstance(e, DimExpr):
        return e, e
    lo, hi = 0.0, 0.0
    for mono, c in e._terms:
        b: tuple = (1, 1)
        for a, p in mono:
            ab = _atom_bounds(a, scope, depth)
            for _ in range(p):
                b = _mul_bounds(b, ab)
        tb = _mul_bounds(b, (c, c))
        lo, hi = lo + tb[0], hi + tb[1]
    # a constraint ``f >= 0``: e = f + rest gives lo(e) >= lo(rest), and e = rest - f gives hi(e) <= hi(rest)
    for f in (scope._ge if depth < 3 else ()):
        rest = e - f
        if not isinstance(rest, DimExpr):
            lo = max(lo, rest)
        elif len(rest._terms) < len(e._terms):
            lo = max(lo, _bounds_plain(rest, scope, depth + 1)[0])
        rest = e + f
        if not isinstance(rest, DimExpr):
            hi = min(hi, rest)
        elif len(rest._terms) < len(e._terms):
            hi = min(hi, _bounds_plain(rest, scope, depth + 1)[1])
    return lo, hi


def _bounds_plain(e: DimExpr, scope: SymbolicScope, depth: int = 0) -> tuple[float, float]:
    lo, hi = 0.0, 0.0
    for mono, c in e._terms:
        b: tuple = (1, 1)
        for a, p in mono:
            for _ in range(p):
                b = _mul_bounds(b, _atom_bounds(a, scope, depth))
        tb = _mul_bounds(b, (c, c))
        lo, hi = lo + tb[0], hi + tb[1]
    return lo, hi


def is_symbolic_dim(d: Any) -> bool:
    """Whether ``d`` is a symbolic dimension (not an integer)."""
    return isinstance(d, DimExpr)


def dimension_as_value(d: Any) -> Any:
    """A dimension as a value of the program: an integer stays an integer, a symbolic dimension becomes an
    integer scalar computed from the arguments' sizes when the program runs (JAX's ``core.dimension_as_value``)."""
    if isinstance(d, DimExpr):
        return d.dimension_as_value()
    return operator.index(d)


def is_constant_dim(d: Any) -> bool:
    """Whether dimension ``d`` is known now (an integer, not a symbolic expression): JAX's ``core.is_constant_dim``."""
    return not isinstance(d, DimExpr)


def is_constant_shape(shape: Iterable) -> bool:
    """Whether every dimension of ``shape`` is known now: JAX's ``core.is_constant_shape``."""
    return not any(isinstance(d, DimExpr) for d in shape)


def is_poly_shape(shape: Iterable) -> bool:
    return any(isinstance(d, DimExpr) for d in shape)


def dim_vars(shape: Iterable) -> set:
    """The dimension variables' names that the dimensions of ``shape`` mention."""
    out: set = set()

    def walk(e: Any) -> None:
        if isinstance(e, DimExpr):
            for a in e.atoms():
                if isinstance(a, str):
                    out.add(a)
                else:
                    for x in a.args:
                        walk(x)

    for d in shape:
        walk(d)
    return out


def evaluate(d: Any, env: dict) -> int:
    """The value of a dimension (an int or a :class:`DimExpr`) for the variables' values in ``env``."""
    return d.evaluate(env) if isinstance(d, DimExpr) else int(d)


# -- parsing --------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][\w.]*)|(.))")


def parse_dim(text: str, scope: SymbolicScope) -> Any:
    """Parse one dimension expression: integers, variables, ``+ - * ^``, parentheses, ``floordiv(e, e)``,
    ``mod(e, e)``, ``max(e, e)``, ``min(e, e)``, ``non_negative(e)``."""
    toks = [m.group(0).strip() for m in _TOKEN.finditer(text) if m.group(0).strip()]
    pos = 0

    def err(what: str) -> ValueError:
        return ValueError(f"syntax error in symbolic shape {text!r}: {what}")

    def peek() -> str | None:
        return toks[pos] if pos < len(toks) else None

    def take(t: str | None = None) -> str:
        nonlocal pos
        if pos >= len(toks):
            raise err("unexpected end")
        if t is not None and toks[pos] != t:
            raise err(f"expected {t!r} at {toks[pos]!r}")
        pos += 1
        return toks[pos - 1]

    def expr() -> Any:
        v = term()
        while peek() in ("+", "-"):
            v = v + term() if take() == "+" else v - term()
        return v

    def term() -> Any:
        v = power()
        while peek() == "*":
            take()
            v = v * power()
        return v

    def power() -> Any:
        v = unary()
        if peek() == "^":
            take()
            e = unary()
            if not isinstance(e, int):
                raise err("a power must be a constant")
            v = v ** e
        return v

    def unary() -> Any:
        t = take()
        if t == "-":
            return -unary()
        if t == "(":
            v = expr()
            take(")")
            return v
        if t.isdigit():
            return int(t)
        if re.fullmatch(r"[A-Za-z_][\w.]*", t):
            if peek() == "(" and t in ("floordiv", "mod", "max", "min", "non_negative"):
                take("(")
                a = expr()
                if t == "non_negative":
                    take(")")
                    return max_dim(a, 0)
                take(",")
                b = expr()
                take(")")
                return {"floordiv": lambda: a // b, "mod": lambda: a % b, "max": lambda: max_dim(a, b),
                        "min": lambda: min_dim(a, b)}[t]()
            return DimExpr.var(t, scope)
        raise err(f"unexpected {t!r}")

    if not toks:
        raise err("empty dimension")
    v = expr()
    if pos != len(toks):
        raise err(f"unexpected {toks[pos]!r}")
    return v


def max_dim(a: Any, b: Any) -> Any:
    """The larger of two dimensions: decided now when it can be, else a ``max`` atom (JAX's ``core.max_dim``)."""
    if a.__class__ is int and b.__class__ is int:
        return a if a >= b else b
    for x, y in ((a, b), (b, a)):
        try:
            if x >= y:
                return x
        except InconclusiveDimensionOperation:
            pass
    scope = a.scope if isinstance(a, DimExpr) else b.scope
    return DimExpr.op("max", (a, b), scope)


def min_dim(a: Any, b: Any) -> Any:
    """The smaller of two dimensions (JAX's ``core.min_dim``)."""
    if a.__class__ is int and b.__class__ is int:
        return a if a <= b else b
    for x, y in ((a, b), (b, a)):
        try:
            if x <= y:
                return x
        except InconclusiveDimensionOperation:
            pass
    scope = a.scope if isinstance(a, DimExpr) else b.scope
    return DimExpr.op("min", (a, b), scope)


# -- solving dimension variables from the arguments' shapes ---------------------------------------------------

_ASSERTION_DOC = ("Please see https://docs.jax.dev/en/latest/export/shape_poly.html#shape-assertion-errors for "
                  "more details.")
_SOLVABLE_DOC = ("Please see https://docs.jax.dev/en/latest/export/shape_poly.html#dimension-variables-must-be-"
                 "solvable-from-the-input-shapes for more details.")


def _linear_in(d: DimExpr, known: dict) -> tuple[str, int, Any] | None:
    """``(v, k, rest)`` when ``d`` is ``k*v + rest`` for one unknown variable ``v`` (``k`` a nonzero integer,
    ``rest`` an expression of known variables only), else None."""
    unknown = [a for a in d.atoms() if not (isinstance(a, str) and a in known)]
    if len(unknown) != 1 or not isinstance(unknown[0], str):
        return None
    v = unknown[0]
    k, rest = 0, 0
    for mono, c in d._terms:
        powers = dict(mono)
        if v in powers:
            if powers[v] != 1 or len(powers) != 1:
                return None
            k += c
        else:
            rest = rest + _make({mono: c}, d.scope)
    return (v, k, rest) if k else None


def solve_order(specs: Sequence[tuple]) -> list[tuple[str, int, int]]:
    """The order in which the dimension variables of ``specs`` (one shape per argument) are solved:
    ``(variable, argument, axis)``, each from a dimension linear in it once the earlier ones are known (one
    whose coefficient is 1 preferred). Raises ``ValueError`` when some variable cannot be solved so."""
    known: dict = {}
    order = []
    while True:
        best = None
        for i, shape in enumerate(specs):
            for ax, d in enumerate(shape):
                if not isinstance(d, DimExpr):
                    continue
                lin = _linear_in(d, known)
                if lin is not None and (best is None or (best[3] != 1 and lin[1] == 1)):
                    best = (lin[0], i, ax, lin[1])
        if best is None:
            break
        known[best[0]] = True
        order.append(best[:3])
    missing = dim_vars(d for shape in specs for d in shape) - set(known)
    if missing:
        spec_txt = ", ".join(f"args[{i}].shape = ({', '.join(map(str, s))})" for i, s in enumerate(specs)
                             if is_poly_shape(s))
        unprocessed = ", ".join(f"'{d}' for dimension size args[{i}].shape[{ax}]" for i, s in enumerate(specs)
                                for ax, d in enumerate(s) if isinstance(d, DimExpr) and dim_vars([d]) & missing)
        raise ValueError(f"Cannot solve for values of dimension variables {missing}. We can only solve linear "
                         "uni-variate constraints. Using the following polymorphic shapes specifications: "
                         f"{spec_txt}. Unprocessed specifications: {unprocessed}. {_SOLVABLE_DOC}")
    return order


def solve_dim_vars(specs: Sequence[tuple], shapes: Sequence[tuple], arg_names: Sequence[str]) -> dict:
    """The values of the dimension variables of ``specs`` (symbolic shapes, one per argument) for arguments of
    the concrete ``shapes``; raises ``ValueError`` with JAX's message when the shapes do not match (a variable
    below 1, a size not divisible, two sizes that disagree, a constraint violated)."""
    env: dict = {}
    obtained = ""
    spec_txt = ", ".join(f"{arg_names[i]}.shape = ({', '.join(map(str, s))})" for i, s in enumerate(specs)
                         if is_poly_shape(s))

    def fail(what: str, prefix: str = "Input shapes do not match the polymorphic shapes specification. ") -> ValueError:
        return ValueError(f"{prefix}{what}. Using the "
                          f"following polymorphic shapes specifications: {spec_txt}. Obtained dimension variables: "
                          f"{obtained}. {_ASSERTION_DOC}")

    for v, i, ax in solve_order(specs):
        d = specs[i][ax]
        _, k, rest = _linear_in(d, env)
        size = shapes[i][ax]
        num = size - evaluate(rest, env)
        if num % k != 0:
            raise fail(f"Division had remainder {num % k} when computing the value of '{v}'")
        env[v] = num // k
        obtained += (f"'{v}' = {env[v]} from specification '{d}' for dimension {arg_names[i]}.shape[{ax}] "
                     f"(= {size}), ")
        try:
            positive = env[v] >= 1
        except InconclusiveDimensionOperation:  # symbolic sizes (a call while exporting): must be provable
            positive = False
        if not positive:
            raise fail(f"Expected value >= 1 for dimension variable '{v}'")
    for i, (spec, shape) in enumerate(zip(specs, shapes)):
        for ax, (d, size) in enumerate(zip(spec, shape)):
            if isinstance(d, DimExpr) and evaluate(d, env) != size:
                raise fail(f"Found inconsistency between dimension size {arg_names[i]}.shape[{ax}] (= {size}) and "
                           f"the specification '{d}' (= {evaluate(d, env)})")
    scope = next((d.scope for s in specs for d in s if isinstance(d, DimExpr)), None)
    if scope is not None and not any(is_poly_shape(s) for s in shapes):
        for (v, p), (rhs, k) in [(m[0], r) for m, r in scope._eq.items() if len(m) == 1]:
            if isinstance(v, str) and p == 1 and v not in env:  # a variable an equality rewrote away
                try:
                    env[v] = evaluate(rhs, env) // k
                except KeyError:
                    pass
        for c, (kind, f) in zip(scope.constraints_str, _constraint_facts(scope)):
            try:
                v = evaluate(f, env)
            except KeyError:  # a variable no argument's shape determines
                continue
            if v < 0 or (kind == "==" and v != 0):
                raise fail(f"Input shapes do not match the symbolic shape constraint {c}. Expected '{f}' to be "
                           f"{'equal' if kind == '==' else 'greater or equal'} to 0, but found {v}", prefix="")
    return env


def _constraint_facts(scope: SymbolicScope) -> list:
    """Each constraint as ``(kind, e)``: ``e`` must be >= 0 (kind ``>=``) or 0 (kind ``==``) (parsed without the
    scope's equality constraints, which would rewrite an equality's two sides to the same expression)."""
    out = []
    plain = SymbolicScope()
    for c in scope.constraints_str:
        m = re.fullmatch(r"(.*?)(>=|<=|==)(.*)", c.strip())
        lhs, rhs = parse_dim(m.group(1), plain), parse_dim(m.group(3), plain)
        out.append(("==", lhs - rhs) if m.group(2) == "==" else (">=", lhs - rhs if m.group(2) == ">=" else rhs - lhs))
    return out


def substitute(shape: Iterable, env: dict) -> tuple:
    """``shape`` with its symbolic dimensions evaluated for the variables' values in ``env``."""
    return tuple(evaluate(d, env) for d in shape)


def as_dim(d: Any) -> Any:
    """A dimension given by the user: a symbolic one as it is, anything else as an ``int`` (``operator.index``)."""
    return d if d.__class__ is DimExpr else operator.index(d)
