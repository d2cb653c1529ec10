"""``jax.ad_checkpoint``'s names: remat, its policies, value names, and residual inspection."""

from ftrans.transforms.remat import (  # noqa: F401
    checkpoint,
    checkpoint_name,
    checkpoint_policies,
    print_saved_residuals,
    remat,
    saved_residuals,
)

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "print_saved_residuals", "remat",
           "saved_residuals"]
