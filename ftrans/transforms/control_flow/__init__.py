"""Control flow as higher-order primitives: ``cond``/``switch``, ``while_loop``/``fori_loop``, ``scan``/``map``.

``primitives.py`` defines the three primitives (and the operand layouts every
rule relies on); each transform's rules live in their own module here.
Importing the package registers all of them.
"""

from ftrans.transforms.control_flow import lowering as _lowering  # noqa: F401
from ftrans.transforms.control_flow.api import cond, fori_loop, map, scan, switch, while_loop  # noqa: A004
from ftrans.transforms.control_flow.primitives import cond_p, scan_p, while_p

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map", "cond_p", "while_p", "scan_p"]

for _name in ("jvp", "reverse", "batching"):
    try:
        __import__(f"ftrans.transforms.control_flow.{_name}")
    except ModuleNotFoundError as _e:  # a rule module not written yet
        if _e.name != f"ftrans.transforms.control_flow.{_name}":
            raise
