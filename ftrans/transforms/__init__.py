"""Transforms of the IR: jit, forward and reverse autodiff, batching; each transform's rules per primitive family
in ``ad_rules/``, ``linear_rules/`` and ``batch_rules/``."""
