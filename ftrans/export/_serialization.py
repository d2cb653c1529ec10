"""ftrans's serialization of an ``Exported`` (``serialize``/``deserialize``) and the pytree-node registries.

The bytes are ftrans's own versioned format, not JAX's flatbuffer: a magic prefix
(``FTRANS-EXPORT``), a little-endian format version, then a UTF-8 JSON document holding the
function name, platforms, calling-convention version, disabled safety checks, the abstract
values (shape, dtype name), the input and output pytree structures, the shardings of a
partitioned program's arguments and results (mesh axes and partition spec), the StableHLO module
text and, for ``vjp_order > 0``, the serialized VJP (itself serialized with one order
less). A reader refuses a newer format version and JAX's bytes with an error saying so.

Pytree structures are written node by node: ``None``, tuples, lists, dicts with string
keys, ``collections.OrderedDict`` with string keys (registered here, as JAX registers it),
and the types registered with ``register_pytree_node_serialization`` /
``register_namedtuple_serialization`` (their auxiliary data through the registered
functions); anything else is a ``ValueError`` naming the type.
"""

from __future__ import annotations

import base64
import collections
import json
import struct
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from ftrans.core import pytrees as tree_util
from ftrans.core.avals import ShapedArray
from ftrans.core.shape_poly import DimExpr, SymbolicScope, is_poly_shape, parse_dim
from ftrans.errors import FtransValueError
from ftrans.lowering import compat

__all__ = ["serialize", "deserialize", "register_pytree_node_serialization", "register_namedtuple_serialization",
           "FORMAT_VERSION"]

T = TypeVar("T")
MAGIC = b"FTRANS-EXPORT\x00"
FORMAT_VERSION = 2  # 2: the shardings of a partitioned program (a program without any is still written as 1)

# type -> (serialized name, serialize_auxdata); serialized name -> (type, deserialize_auxdata, from_children)
_serialization_registry: dict[type, tuple[str, Callable]] = {}
_deserialization_registry: dict[str, tuple[type, Callable, Callable | None]] = {}


def register_pytree_node_serialization(nodetype: type[T], *, serialized_name: str,
                                       serialize_auxdata: Callable[[Any], bytes],
                                       deserialize_auxdata: Callable[[bytes], Any],
                                       from_children: Callable[[Any, Sequence[Any]], Any] | None = None) -> type[T]:
    """Let pytrees holding ``nodetype`` nodes be serialized: ``serialize_auxdata``/``deserialize_auxdata``
    write and read back the node's auxiliary data; ``from_children(aux, children)`` rebuilds a node (by
    default the unflatten function ``nodetype`` was registered with in ``tree_util``). Returns ``nodetype``."""
    if nodetype in _serialization_registry:
        raise FtransValueError(f"Duplicate serialization registration for type `{nodetype}`. Previous "
                               f"registration was with serialized_name `{_serialization_registry[nodetype][0]}`.")
    if serialized_name in _deserialization_registry:
        raise FtransValueError(f"Duplicate serialization registration for serialized_name `{serialized_name}`. "
                               f"Previous registration was for type `{_deserialization_registry[serialized_name][0]}`.")
    if from_children is None and not compat.pytree_node_registered(nodetype):
        raise FtransValueError(f"If `from_children` is not present, you must call first "
                               f"`tree_util.register_pytree_node` for `{nodetype}`")
    _serialization_registry[nodetype] = (serialized_name, serialize_auxdata)
    _deserialization_registry[serialized_name] = (nodetype, deserialize_auxdata, from_children)
    return nodetype


def _is_namedtuple(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, tuple) and hasattr(t, "_fields")


def register_namedtuple_serialization(nodetype: type[T], *, serialized_name: str) -> type[T]:
    """Let pytrees holding the ``collections.namedtuple`` type ``nodetype`` be serialized (its field names are
    stored, and must match on deserialization). Returns ``nodetype``."""
    if not _is_namedtuple(nodetype):
        raise FtransValueError("Use `ftrans.export.register_pytree_node_serialization` for types other than "
                               "`collections.namedtuple`.")

    def from_children(aux: Any, children: Sequence[Any]) -> Any:
        return nodetype(**dict(zip(aux, children)))

    return register_pytree_node_serialization(
        nodetype, serialized_name=serialized_name,
        serialize_auxdata=lambda aux: json.dumps(list(nodetype._fields)).encode("utf-8"),
        deserialize_auxdata=lambda b: json.loads(b.decode("utf-8")), from_children=from_children)


def _ordereddict_keys(keys: Any) -> bytes:
    if not all(isinstance(k, str) for k in keys):
        raise NotImplementedError("Serialization of collections.OrderedDict is supported only when the keys are "
                                  f"strings. Found keys: {keys}.")
    return json.dumps(list(keys)).encode("utf-8")


register_pytree_node_serialization(collections.OrderedDict, serialized_name="collections.OrderedDict",
                                   serialize_auxdata=_ordereddict_keys,
                                   deserialize_auxdata=lambda b: tuple(json.loads(b.decode("utf-8"))))


# ---------------------------------------------------------------- pytree structures

def _tree_to_json(t: Any) -> Any:
    data = t.node_data()
    if data is None:
        return "*"  # a leaf
    kind, aux = data
    children = [_tree_to_json(c) for c in t.children()]
    if kind is type(None):
        return None
    if kind is tuple:
        return {"t": "tuple", "c": children}
    if kind is list:
        return {"t": "list", "c": children}
    if kind is dict:
        for k in aux:
            if not isinstance(k, str):
                raise TypeError(f"Serialization is supported only for dictionaries with string keys. Found key {k!r} "
                                f"of type {type(k).__name__}.")
        return {"t": "dict", "k": list(aux), "c": children}
    if kind is tree_util.key_node_type():  # a typed key array (its data the one child): the implementation's name
        return {"t": "key", "impl": aux.name, "c": children}
    reg = _serialization_registry.get(kind)
    if reg is None:
        raise FtransValueError(
            f"Cannot serialize PyTreeDef containing an unregistered type `{kind}`. Use "
            "`export.register_pytree_node_serialization` or `export.register_namedtuple_serialization`.")
    name, ser = reg
    return {"t": "custom", "n": name, "a": base64.b64encode(bytes(ser(aux))).decode("ascii"), "c": children}


def _tree_from_json(j: Any, leaves: Sequence[Any]) -> Any:
    """The PyTreeDef written by ``_tree_to_json``, rebuilt as a pytree whose leaves are ``leaves`` (the abstract
    values, so a node whose unflatten looks at its children's shapes sees the right ones), then flattened."""
    it = iter(leaves)
    tree = _example(j, it)
    return tree_util.tree_structure(tree)


def _example(j: Any, leaves: Any) -> Any:
    """An object of the structure ``j`` with the next ``leaves`` as its leaves."""
    if j == "*":
        return next(leaves)
    if j is None:
        return None
    kind, children = j["t"], [_example(c, leaves) for c in j["c"]]
    if kind == "tuple":
        return tuple(children)
    if kind == "list":
        return children
    if kind == "dict":
        return dict(zip(j["k"], children))
    if kind == "key":
        from ftrans.random._prng import prngs

        impl = prngs.get(j["impl"])
        if impl is None:
            raise FtransValueError(f"Cannot deserialize a typed PRNG key of the unknown implementation {j['impl']!r} "
                                   f"(ftrans knows {', '.join(map(repr, prngs))})")
        return tree_util.key_node(impl, children[0])
    name = j["n"]
    if name not in _deserialization_registry:
        raise FtransValueError(f"Cannot deserialize a PyTreeDef containing an unregistered type `{name}`. Use "
                               "`export.register_pytree_node_serialization` or "
                               "`export.register_namedtuple_serialization`.")
    nodetype, deser, from_children = _deserialization_registry[name]
    aux = deser(base64.b64decode(j["a"]))
    if from_children is not None:
        return from_children(aux, children)
    # the unflatten function the type was registered with, on these children
    node = tree_util.PyTreeDef.from_node_data_and_children(
        tree_util.default_registry, (nodetype, aux), [tree_util.tree_structure(c) for c in children])
    return tree_util.tree_unflatten(node, [leaf for c in children for leaf in tree_util.tree_leaves(c)])


# ---------------------------------------------------------------- Exported

def _aval_to_json(a: ShapedArray) -> list:
    # a symbolic dimension is stored as its expression's text (``"2*b + 1"``)
    return [[d if isinstance(d, int) else str(d) for d in a.shape], np.dtype(a.dtype).name, bool(a.weak_type)]


def _aval_from_json(j: list, scope: Any = None) -> ShapedArray:
    shape = tuple(d if isinstance(d, int) else parse_dim(d, scope) for d in j[0])
    return ShapedArray(shape, np.dtype(j[1]), bool(j[2]) if len(j) > 2 else False)


def _constraints_of(exp: Any) -> list:
    """The symbolic constraints of the scope of an Exported's symbolic dimensions."""
    for a in exp.in_avals:
        for d in a.shape:
            if isinstance(d, DimExpr):
                return list(d.scope.constraints_str)
    return []


def _sharding_to_json(s: Any) -> Any:
    if s is None:
        return None
    spec = [list(e) if isinstance(e, tuple) else e for e in s.spec]
    dev = getattr(s.mesh, "abstract_device", None)
    out = {"axes": list(s.mesh.axis_names), "sizes": list(s.mesh.axis_sizes),
           "types": [t.name for t in s.mesh.axis_types], "spec": spec, "sym": s.symbol,
           "device": None if dev is None else [dev.device_kind, dev.num_cores, dev.platform]}
    for k in ("unreduced", "reduced"):  # (as JAX's serialization: a PartitionSpec's sets are kept)
        if getattr(s.spec, k, None):
            out[k] = sorted(getattr(s.spec, k), key=str)
    return out


def _sharding_from_json(j: Any) -> Any:
    if j is None:
        return None
    from ftrans.core.sharding import AbstractDevice, AbstractMesh, AxisType, PartitionSpec
    from ftrans.export._export import ExportedSharding

    dev = j.get("device")
    mesh = AbstractMesh(tuple(j["sizes"]), tuple(j["axes"]), tuple(AxisType[t] for t in j["types"]),
                        abstract_device=None if dev is None else AbstractDevice(*dev))
    spec = PartitionSpec(*(tuple(e) if isinstance(e, list) else e for e in j["spec"]),
                         unreduced=frozenset(j.get("unreduced", ())), reduced=frozenset(j.get("reduced", ())))
    return ExportedSharding(mesh, spec, j["sym"])


def _to_json(exp: Any, vjp_order: int) -> dict:
    doc = {
        "fun_name": exp.fun_name,
        "platforms": list(exp.platforms),
        "calling_convention_version": exp.calling_convention_version,
        "nr_devices": exp.nr_devices,
        "disabled_safety_checks": [str(c) for c in exp.disabled_safety_checks],
        "in_tree": _tree_to_json(exp._in_tree),
        "out_tree": _tree_to_json(exp._out_tree),
        "symbolic_constraints": _constraints_of(exp),
        "in_avals": [_aval_to_json(a) for a in exp._in_avals],
        "out_avals": [_aval_to_json(a) for a in exp._out_avals],
        "module": exp.mlir_module(),
        "uses_global_constants": exp._indexed,
        "calls_polymorphic": exp._poly and not any(is_poly_shape(a.shape) for a in exp._in_avals),
        "in_shardings": [_sharding_to_json(x) for x in exp.in_shardings_hlo],
        "out_shardings": [_sharding_to_json(x) for x in exp.out_shardings_hlo],
    }
    if vjp_order > 0:
        if not exp.has_vjp():
            raise FtransValueError(f"serialize(vjp_order={vjp_order}): the exported function '{exp.fun_name}' has no "
                                   "VJP (it was deserialized with fewer orders)")
        doc["vjp"] = _to_json(exp.vjp(), vjp_order - 1)
    return doc


def serialize(exp: Any, vjp_order: int = 0) -> bytearray:
    """The bytes of ``exp`` (ftrans's format; see the module docstring), with ``vjp_order`` orders of VJPs."""
    if vjp_order < 0:
        raise FtransValueError(f"serialize: vjp_order must be >= 0, got {vjp_order}")
    tree = _to_json(exp, int(vjp_order))
    version = FORMAT_VERSION if _partitioned(tree) else 1  # a reader of format 1 reads it whole
    doc = json.dumps(tree, separators=(",", ":")).encode("utf-8")
    return bytearray(MAGIC + struct.pack("<I", version) + doc)


def _partitioned(doc: dict) -> bool:
    """Whether the document (or one of its VJPs) holds shardings, which a reader of format 1 would drop."""
    if any(x is not None for x in doc["in_shardings"] + doc["out_shardings"]):
        return True
    return "vjp" in doc and _partitioned(doc["vjp"])


def _from_json(doc: dict) -> Any:
    from ftrans.export._export import DisabledSafetyCheck, Exported

    vjp_doc = doc.get("vjp")
    get_vjp = None
    if vjp_doc is not None:
        get_vjp = lambda _exp: _from_json(vjp_doc)  # noqa: E731
    scope = SymbolicScope(doc.get("symbolic_constraints", ()))  # one scope for the symbolic dimensions
    in_avals = tuple(_aval_from_json(a, scope) for a in doc["in_avals"])
    out_avals = tuple(_aval_from_json(a, scope) for a in doc["out_avals"])
    return Exported(fun_name=doc["fun_name"], in_tree=_tree_from_json(doc["in_tree"], in_avals), in_avals=in_avals,
                    out_tree=_tree_from_json(doc["out_tree"], out_avals), out_avals=out_avals,
                    platforms=tuple(doc["platforms"]), module_text=doc["module"],
                    disabled_safety_checks=tuple(DisabledSafetyCheck._parse(s) for s in doc["disabled_safety_checks"]),
                    calling_convention_version=doc["calling_convention_version"], nr_devices=doc["nr_devices"],
                    get_vjp=get_vjp, uses_global_constants=doc.get("uses_global_constants", False),
                    calls_polymorphic=doc.get("calls_polymorphic", False),
                    in_shardings_hlo=[_sharding_from_json(x) for x in doc.get("in_shardings", [None] * len(in_avals))],
                    out_shardings_hlo=[_sharding_from_json(x)
                                       for x in doc.get("out_shardings", [None] * len(out_avals))])


def deserialize(blob: bytes | bytearray) -> Any:
    """The ``Exported`` that ``Exported.serialize`` wrote."""
    blob = bytes(blob)
    if not blob.startswith(MAGIC):
        raise FtransValueError("deserialize: these bytes are not an ftrans serialization of an Exported (ftrans "
                               "reads only its own format; JAX's flatbuffer serializations are not readable here)")
    (version,) = struct.unpack_from("<I", blob, len(MAGIC))
    if version > FORMAT_VERSION:
        raise FtransValueError(f"deserialize: the bytes use serialization format {version}, newer than the "
                               f"{FORMAT_VERSION} this ftrans reads; upgrade ftrans")
    return _from_json(json.loads(blob[len(MAGIC) + 4:].decode("utf-8")))
