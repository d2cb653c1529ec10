"""Whether the suite runs its thorough sweeps, and the spread of cases the quick run keeps.

CI runs the quick ``ci`` hypothesis profile and must finish well inside half an
hour on two cores.  A sweep whose cases all take one code path (the same rule
over more shapes, one distribution over more parameter values) keeps a spread
of them there; ``HYPOTHESIS_PROFILE=full`` or ``FTRANS_EXHAUSTIVE_TESTS=1``
runs every case.  A sweep over distinct functions or rules keeps them all.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

THOROUGH = os.environ.get("FTRANS_EXHAUSTIVE_TESTS") == "1" or os.environ.get("HYPOTHESIS_PROFILE") == "full"


def spread(cases: Sequence[T], keep: int) -> list[T]:
    """All of ``cases`` when thorough; else ``keep`` of them spread evenly, the first and last included."""
    cases = list(cases)
    if THOROUGH or keep >= len(cases):
        return cases
    if keep <= 1:
        return cases[:1]
    step = (len(cases) - 1) / (keep - 1)
    return [cases[round(i * step)] for i in range(keep)]
