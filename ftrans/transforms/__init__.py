"""Transforms of the IR: jit, forward and reverse autodiff; batching and control flow join them."""
