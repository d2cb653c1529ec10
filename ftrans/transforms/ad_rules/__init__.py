"""JVP rules, one module per primitive family; importing this package registers them all.

Each module only appends to ``ftrans.transforms.ad.jvp_rules``; add a new
family by appending its import below.
"""

from ftrans.transforms.ad_rules import elementwise  # noqa: F401
