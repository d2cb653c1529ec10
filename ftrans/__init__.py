"""ftrans: composable function transformations for numerical Python (JAX's API)."""


from ftrans import dtypes, errors, lax, numpy, tree, tree_util  # noqa: E402
from ftrans.core.array import Array
from ftrans.core.avals import ShapeDtypeStruct
from ftrans.core.config import config
from ftrans.core.jaxpr_api import eval_jaxpr, eval_shape, make_jaxpr

__version__ = "0.1.0"

__all__ = [
    "Array", "ShapeDtypeStruct", "config", "dtypes", "errors", "eval_jaxpr", "eval_shape",
    "lax", "make_jaxpr", "numpy", "tree", "tree_util",
]
