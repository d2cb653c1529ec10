"""Batched matrix products (matmul over broadcast batch axes)."""
