"""Docstrings of the functions `_elementwise` makes with factories, by name."""

DOCS = {
    "add": """Add arguments elementwise, with NumPy broadcasting and JAX's dtype promotion.

Python scalars are weakly typed, so `x + 1.0` keeps a float16 `x` in float16. For bools, `add` is logical
or. `jnp.add` is a `ufunc`, with `reduce`, `accumulate`, `outer` and `at`.

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
    out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    where: Unused; must be None (accepted for the signature of NumPy's ufuncs).
Returns:
    The elementwise sum, in the promoted dtype of the broadcast shape.

Examples:
    >>> jnp.add(jnp.array([1, 2, 3]), 10)
    Array([11, 12, 13], dtype=int32)
    >>> jnp.add(jnp.array([[1], [2]]), jnp.array([10., 20.]))
    Array([[11., 21.],
           [12., 22.]], dtype=float32)
    >>> jnp.add.reduce(jnp.array([1, 2, 3]))
    Array(6, dtype=int32)

See also:
    `subtract`, `sum`, `ufunc`.
""",
    "arccos": """Inverse cosine, elementwise, in radians in `[0, pi]`.

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.arccos(jnp.array([1., 0., -1.]))
    Array([0.       , 1.5707964, 3.1415927], dtype=float32)

See also:
    `cos`, `arcsin`

""",
    "arcsin": """Inverse sine, elementwise, in radians in `[-pi/2, pi/2]`.

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.arcsin(jnp.array([-1., 0., 0.5, 2.]))
    Array([-1.5707964,  0.       ,  0.5235988,        nan], dtype=float32)

See also:
    `sin`, `arccos`

""",
    "arcsinh": """Inverse hyperbolic sine, elementwise.

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.arcsinh(jnp.array([0., 1., -2.]))
    Array([ 0.       ,  0.8813736, -1.4436355], dtype=float32)

See also:
    `sinh`

""",
    "arctan": """Inverse tangent, elementwise, in radians in `(-pi/2, pi/2)`.

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.arctan(jnp.array([0., 1., jnp.inf]))
    Array([0.       , 0.7853982, 1.5707964], dtype=float32)

See also:
    `tan`, `arctan2`

""",
    "arctanh": """Inverse hyperbolic tangent, elementwise (infinite at +-1, NaN outside).

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.arctanh(jnp.array([0., 0.5, 1.]))
    Array([0.        , 0.54930615,        inf], dtype=float32)

See also:
    `tanh`

""",
    "bitwise_and": """Elementwise bitwise and of integer or bool arrays.

Args:
    x1: First operand (array or scalar).
    x2: Second operand; broadcasts against `x1`.
    out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    where: Unused; must be None (accepted for the signature of NumPy's ufuncs).
Returns:
    An array of the broadcast shape in the promoted integer (or bool) dtype.

Examples:
    >>> jnp.bitwise_and(jnp.array([12, 10]), jnp.array([10, 6]))
    Array([8, 2], dtype=int32)

See also:
    `bitwise_or`, `logical_and`.
""",
    "bitwise_or": """Elementwise bitwise or of integer or bool arrays.

Args:
    x1: First operand (array or scalar).
    x2: Second operand; broadcasts against `x1`.
    out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    where: Unused; must be None (accepted for the signature of NumPy's ufuncs).
Returns:
    An array of the broadcast shape in the promoted integer (or bool) dtype.

Examples:
    >>> jnp.bitwise_or(jnp.array([12, 10]), jnp.array([10, 6]))
    Array([14, 14], dtype=int32)

See also:
    `bitwise_and`, `logical_or`.
""",
    "bitwise_xor": """Elementwise bitwise exclusive or of integer or bool arrays.

Args:
    x1: First operand (array or scalar).
    x2: Second operand; broadcasts against `x1`.
    out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    where: Unused; must be None (accepted for the signature of NumPy's ufuncs).
Returns:
    An array of the broadcast shape in the promoted integer (or bool) dtype.

Examples:
    >>> jnp.bitwise_xor(jnp.array([12, 10]), jnp.array([10, 6]))
    Array([ 6, 12], dtype=int32)

See also:
    `bitwise_and`, `logical_xor`.
""",
    "ceil": """Round up to the nearest integer, elementwise.

Integers and bools pass through unchanged; complex input is an error.

Args:
    x: First operand (array or scalar).
Returns:
    An array of `x`'s shape and dtype.

Examples:
    >>> jnp.ceil(jnp.array([-1.5, 0.2, 2.7]))
    Array([-1.,  1.,  3.], dtype=float32)

See also:
    `floor`, `trunc`, `rint`.
""",
    "cos": """Trigonometric cosine, elementwise (argument in radians).

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.cos(jnp.array([0., jnp.pi / 3, jnp.pi]))
    Array([ 1.        ,  0.49999997, -1.        ], dtype=float32)

See also:
    `sin`, `arccos`, `cosh`

""",
    "cosh": """Hyperbolic cosine, elementwise.

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.cosh(jnp.array([0., 1., -1.]))
    Array([1.       , 1.5430807, 1.5430807], dtype=float32)

See also:
    `sinh`, `arccosh`

""",
    "equal": """Test `x == y` elementwise, with broadcasting.

The operands are promoted to a common dtype first (JAX's rules).

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
Returns:
    A bool array of the broadcast shape.

Examples:
    >>> jnp.equal(jnp.array([1, 2, 3]), jnp.array([1, 0, 3]))
    Array([ True, False,  True], dtype=bool)
    >>> jnp.equal(jnp.array([1., jnp.nan]), jnp.array([1., jnp.nan]))
    Array([ True, False], dtype=bool)

See also:
    `not_equal`, `array_equal`, `isclose`.
""",
    "exp": """Exponential `e**x`, elementwise.

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.exp(jnp.array([0., 1., 2.]))
    Array([1.       , 2.7182817, 7.389056 ], dtype=float32)

See also:
    `log`, `expm1`, `exp2`

""",
    "exp2": """Base-2 exponential `2**x`, elementwise.

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.exp2(jnp.array([0, 3, -1]))
    Array([1. , 8. , 0.5], dtype=float32)

See also:
    `log2`, `exp`

""",
    "expm1": """`exp(x) - 1`, elementwise, accurate for small `x`.

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.expm1(jnp.array([0., 1e-8, 1.]))
    Array([0.0000000e+00, 9.9999999e-09, 1.7182819e+00], dtype=float32)

See also:
    `exp`, `log1p`

""",
    "floor": """Round down to the nearest integer, elementwise.

Integers and bools pass through unchanged; complex input is an error.

Args:
    x: First operand (array or scalar).
Returns:
    An array of `x`'s shape and dtype.

Examples:
    >>> jnp.floor(jnp.array([-1.5, 0.2, 2.7]))
    Array([-2.,  0.,  2.], dtype=float32)

See also:
    `ceil`, `trunc`, `rint`, `floor_divide`.
""",
    "greater": """Test `x > y` elementwise, with broadcasting.

Complex operands are ordered lexicographically (real part, then imaginary part), as in JAX.

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
Returns:
    A bool array of the broadcast shape.

Examples:
    >>> jnp.greater(jnp.array([1, 2, 3]), 2)
    Array([False, False,  True], dtype=bool)

See also:
    `greater_equal`, `less`.
""",
    "greater_equal": """Test `x >= y` elementwise, with broadcasting.

Complex operands are ordered lexicographically (real part, then imaginary part), as in JAX.

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
Returns:
    A bool array of the broadcast shape.

Examples:
    >>> jnp.greater_equal(jnp.array([1, 2, 3]), 2)
    Array([False,  True,  True], dtype=bool)

See also:
    `greater`, `less_equal`.
""",
    "less": """Test `x < y` elementwise, with broadcasting.

Complex operands are ordered lexicographically (real part, then imaginary part), as in JAX.

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
Returns:
    A bool array of the broadcast shape.

Examples:
    >>> jnp.less(jnp.array([1, 2, 3]), 2)
    Array([ True, False, False], dtype=bool)

See also:
    `less_equal`, `greater`.
""",
    "less_equal": """Test `x <= y` elementwise, with broadcasting.

Complex operands are ordered lexicographically (real part, then imaginary part), as in JAX.

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
Returns:
    A bool array of the broadcast shape.

Examples:
    >>> jnp.less_equal(jnp.array([1, 2, 3]), 2)
    Array([ True,  True, False], dtype=bool)

See also:
    `less`, `greater_equal`.
""",
    "log": """Natural logarithm, elementwise (NaN for negative input, -inf at 0).

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.log(jnp.array([1., jnp.e, 0.]))
    Array([  0.,   1., -inf], dtype=float32)

See also:
    `exp`, `log1p`, `log2`, `log10`

""",
    "log1p": """`log(1 + x)`, elementwise, accurate for small `x`.

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.log1p(jnp.array([0., 1e-8, 1.]))
    Array([0.000000e+00, 1.000000e-08, 6.931472e-01], dtype=float32)

See also:
    `expm1`, `log`

""",
    "logical_and": """Elementwise logical and of the operands' truth values.

Nonzero values count as True.

Args:
    x1: First operand (array or scalar).
    x2: Second operand; broadcasts against `x1`.
    out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    where: Unused; must be None (accepted for the signature of NumPy's ufuncs).
Returns:
    A bool array of the broadcast shape.

Examples:
    >>> jnp.logical_and(jnp.array([True, True, False]), jnp.array([True, False, False]))
    Array([ True, False, False], dtype=bool)
    >>> jnp.logical_and(jnp.array([0, 1, 2]), 1)
    Array([False,  True,  True], dtype=bool)

See also:
    `logical_or`, `bitwise_and`, `all`.
""",
    "logical_or": """Elementwise logical or of the operands' truth values.

Nonzero values count as True.

Args:
    x1: First operand (array or scalar).
    x2: Second operand; broadcasts against `x1`.
    out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    where: Unused; must be None (accepted for the signature of NumPy's ufuncs).
Returns:
    A bool array of the broadcast shape.

Examples:
    >>> jnp.logical_or(jnp.array([True, False, False]), jnp.array([True, True, False]))
    Array([ True,  True, False], dtype=bool)

See also:
    `logical_and`, `any`.
""",
    "logical_xor": """Elementwise logical exclusive or of the operands' truth values.

Nonzero values count as True.

Args:
    x1: First operand (array or scalar).
    x2: Second operand; broadcasts against `x1`.
    out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    where: Unused; must be None (accepted for the signature of NumPy's ufuncs).
Returns:
    A bool array of the broadcast shape.

Examples:
    >>> jnp.logical_xor(jnp.array([True, True, False]), jnp.array([True, False, False]))
    Array([False,  True, False], dtype=bool)

See also:
    `logical_or`, `bitwise_xor`.
""",
    "maximum": """Elementwise maximum of two arrays, with broadcasting.

NaN propagates: where either operand is NaN, so is the result. `jnp.maximum` is a `ufunc`.

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
    out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    where: Unused; must be None (accepted for the signature of NumPy's ufuncs).
Returns:
    The larger of `x` and `y` at each position, in the promoted dtype of the broadcast shape.

Examples:
    >>> jnp.maximum(jnp.array([1, 5, 3]), jnp.array([4, 2, 3]))
    Array([4, 5, 3], dtype=int32)
    >>> jnp.maximum(jnp.array([-1.0, jnp.nan]), 0.0)
    Array([ 0., nan], dtype=float32)

See also:
    `fmax` (ignores NaN), `max` (reduction), `minimum`.
""",
    "minimum": """Elementwise minimum of two arrays, with broadcasting.

NaN propagates: where either operand is NaN, so is the result. `jnp.minimum` is a `ufunc`.

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
    out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    where: Unused; must be None (accepted for the signature of NumPy's ufuncs).
Returns:
    The smaller of `x` and `y` at each position, in the promoted dtype of the broadcast shape.

Examples:
    >>> jnp.minimum(jnp.array([1, 5, 3]), jnp.array([4, 2, 3]))
    Array([1, 2, 3], dtype=int32)
    >>> jnp.minimum(jnp.array([-1.0, jnp.nan]), 0.0)
    Array([-1., nan], dtype=float32)

See also:
    `fmin` (ignores NaN), `min` (reduction), `maximum`.
""",
    "multiply": """Multiply arguments elementwise, with NumPy broadcasting and JAX's dtype promotion.

For bools, `multiply` is logical and.

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
    out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    where: Unused; must be None (accepted for the signature of NumPy's ufuncs).
Returns:
    The elementwise product, in the promoted dtype of the broadcast shape.

Examples:
    >>> jnp.multiply(jnp.array([1, 2, 3]), jnp.array([4, 5, 6]))
    Array([ 4, 10, 18], dtype=int32)
    >>> jnp.multiply(jnp.arange(3), 0.5)
    Array([0. , 0.5, 1. ], dtype=float32, weak_type=True)

See also:
    `prod`, `matmul`.
""",
    "not_equal": """Test `x != y` elementwise, with broadcasting.

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
Returns:
    A bool array of the broadcast shape.

Examples:
    >>> jnp.not_equal(jnp.array([1, 2, 3]), 2)
    Array([ True, False,  True], dtype=bool)

See also:
    `equal`.
""",
    "sin": """Trigonometric sine, elementwise (argument in radians).

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.sin(jnp.array([0., jnp.pi / 6, jnp.pi / 2]))
    Array([0. , 0.5, 1. ], dtype=float32)

See also:
    `cos`, `arcsin`, `sinh`

""",
    "sinh": """Hyperbolic sine, elementwise.

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.sinh(jnp.array([0., 1., -1.]))
    Array([ 0.       ,  1.1752012, -1.1752012], dtype=float32)

See also:
    `cosh`, `arcsinh`

""",
    "sqrt": """Non-negative square root, elementwise (NaN for negative real input).

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.sqrt(jnp.array([4, 2, 0]))
    Array([2.       , 1.4142135, 0.       ], dtype=float32)

See also:
    `cbrt`, `square`

""",
    "subtract": """Subtract arguments elementwise, with NumPy broadcasting and JAX's dtype promotion.

Bool operands are an error, as in NumPy.

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
    out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    where: Unused; must be None (accepted for the signature of NumPy's ufuncs).
Returns:
    The elementwise difference `x - y`, in the promoted dtype of the broadcast shape.

Examples:
    >>> jnp.subtract(jnp.array([5, 7, 9]), jnp.array([1, 2, 3]))
    Array([4, 5, 6], dtype=int32)
    >>> jnp.subtract(jnp.array([1.5, 2.5]), 1)
    Array([0.5, 1.5], dtype=float32)

See also:
    `add`, `negative`.
""",
    "tan": """Trigonometric tangent, elementwise (argument in radians).

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.tan(jnp.array([0., jnp.pi / 4]))
    Array([0., 1.], dtype=float32)

See also:
    `arctan`, `sin`, `cos`

""",
    "tanh": """Hyperbolic tangent, elementwise.

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.tanh(jnp.array([0., 1., -20.]))
    Array([ 0.       ,  0.7615942, -1.       ], dtype=float32)

See also:
    `arctanh`, `sinh`

""",
}
