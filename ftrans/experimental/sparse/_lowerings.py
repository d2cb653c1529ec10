"""JAX's ``sparse._lowerings`` names: the data dtypes its vendor sparse kernels accept.

ftrans has no vendor (cuSPARSE/hipSPARSE) kernels: every sparse operation lowers
through the gathers, scatter-adds and ``dot_general`` it is built from, for any
dtype.  The list is kept for code that parametrises over it.
"""

import numpy as np

SUPPORTED_DATA_DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
