"""StableHLO lowering rules, one module per family of primitives.

Importing this package registers every rule in ``ftrans.lowering.lower.lowering_rules``.
"""

from ftrans.lowering.rules import elementwise  # noqa: F401
from ftrans.lowering.rules import indexing  # noqa: F401
from ftrans.lowering.rules import structural  # noqa: F401
from ftrans.lowering.rules import windowed  # noqa: F401
