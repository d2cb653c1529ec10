"""Transforms of the IR: ``jit`` here now; autodiff, batching and control flow join it."""
