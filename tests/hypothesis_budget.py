"""How many examples a property test with its own count draws under the loaded hypothesis profile.

A test that fixes ``max_examples`` in ``@settings`` overrides the profile, so the
thorough ``full`` profile (``HYPOTHESIS_PROFILE=full``) would not draw more for
it. Such tests call ``examples(n)`` instead: ``n`` under the quick ``ci``
profile, and at least a third of the profile's own count under larger ones.
"""

from __future__ import annotations

from hypothesis import settings


def examples(n: int, slow: bool = False) -> int:
    """``n`` under the ``ci`` profile; under a larger profile at least a third of its count (a tenth for a
    ``slow`` test, whose every example compiles programs)."""
    most = settings.default.max_examples
    if most <= 8:  # the ci profile
        return min(most, n) if slow else n
    return max(n, most // (10 if slow else 3))
