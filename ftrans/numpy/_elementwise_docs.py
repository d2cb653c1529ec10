"""Docstrings of the functions `_elementwise` makes with factories, by name."""

DOCS = {
    "absolute": """Absolute value, elementwise.

For complex input the result is the modulus, real-valued. The absolute value of the most negative signed
integer is itself (two's complement), as in NumPy.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape; `x`'s dtype for real input, the matching real dtype for complex input.

Examples:
    >>> jnp.absolute(jnp.array([-2, 0, 3]))
    Array([2, 0, 3], dtype=int32)
    >>> jnp.absolute(jnp.array([3 + 4j]))
    Array([5.], dtype=float32)

See also:
    `abs` (its alias), `fabs`, `sign`.
""",
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
    `cos`, `arcsin`.

""",
    "arccosh": """Inverse hyperbolic cosine, elementwise (NaN below 1).

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.arccosh(jnp.array([1., 2., 0.5]))
    Array([0.      , 1.316958,      nan], dtype=float32)

See also:
    `cosh`.

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
    `sin`, `arccos`.

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
    `sinh`.

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
    `tan`, `arctan2`.

""",
    "arctan2": """Angle of the point `(x2, x1)` from the positive x axis, elementwise, in `[-pi, pi]`.

Unlike `arctan(x1 / x2)` the quadrant is taken from both signs. Integers are promoted to the default float
dtype.

Args:
    x1: The y coordinates.
    x2: The x coordinates; broadcasts against `x1`.
Returns:
    The angles in radians, with an inexact dtype and the broadcast shape.

Examples:
    >>> jnp.arctan2(jnp.array([1., 1., -1.]), jnp.array([1., -1., -1.]))
    Array([ 0.7853981,  2.3561945, -2.3561945], dtype=float32)

See also:
    `arctan`, `angle`, `hypot`.
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
    `tanh`.

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
    "cbrt": """Cube root, elementwise (real, also for negative input).

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.cbrt(jnp.array([8., -27., 2.]))
    Array([ 2.       , -2.9999998,  1.2599211], dtype=float32)

See also:
    `sqrt`.

""",
    "ceil": """Round up to the nearest integer, elementwise.

Integers and bools pass through unchanged; complex input is an error.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape and dtype.

Examples:
    >>> jnp.ceil(jnp.array([-1.5, 0.2, 2.7]))
    Array([-1.,  1.,  3.], dtype=float32)

See also:
    `floor`, `trunc`, `rint`.
""",
    "clip": """Limit the values of an array to an interval.

Values below `min` become `min` and values above `max` become `max`; either bound may be None. NumPy's
older names `a`, `a_min` and `a_max` are accepted as keywords (JAX deprecates them).

Args:
    arr: Input array.
    min: Lower bound (scalar or array broadcastable to `arr`), or None.
    max: Upper bound (scalar or array broadcastable to `arr`), or None.
    a: NumPy's older name of `arr`.
    a_min: NumPy's older name of `min`.
    a_max: NumPy's older name of `max`.
Returns:
    An array of the broadcast shape with `arr`'s (promoted) dtype.

Examples:
    >>> x = jnp.arange(6)
    >>> jnp.clip(x, 1, 4)
    Array([1, 1, 2, 3, 4, 4], dtype=int32)
    >>> jnp.clip(x, max=2)
    Array([0, 1, 2, 2, 2, 2], dtype=int32)

See also:
    `minimum`, `maximum`.
""",
    "conjugate": """Complex conjugate, elementwise.

Real input is returned unchanged.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape and dtype.

Examples:
    >>> jnp.conjugate(jnp.array([1 + 2j, 3 - 4j]))
    Array([1.-2.j, 3.+4.j], dtype=complex64)

See also:
    `conj` (its alias), `real`, `imag`.
""",
    "copysign": """Magnitude of `x1` with the sign of `x2`, elementwise.

Integers are promoted to the default float dtype.

Args:
    x1: First operand (array or scalar).
    x2: Second operand; broadcasts against `x1`.
Returns:
    An array of the broadcast shape with an inexact dtype.

Examples:
    >>> jnp.copysign(jnp.array([1., 2., 3.]), jnp.array([-1., 0., -0.]))
    Array([-1.,  2., -3.], dtype=float32)

See also:
    `sign`, `signbit`, `absolute`.
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
    `sin`, `arccos`, `cosh`.

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
    `sinh`, `arccosh`.

""",
    "deg2rad": """Convert angles from degrees to radians, elementwise.

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.deg2rad(jnp.array([0., 90., 180.]))
    Array([0.       , 1.5707964, 3.1415927], dtype=float32)

See also:
    `rad2deg`, `radians`.

""",
    "divmod": """Return the floor quotient and the remainder, elementwise.

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
Returns:
    A pair `(floor_divide(x, y), remainder(x, y))` of arrays of the broadcast shape.

Examples:
    >>> q, r = jnp.divmod(jnp.array([7, -7]), 3)
    >>> q
    Array([ 2, -3], dtype=int32)
    >>> r
    Array([1, 2], dtype=int32)

See also:
    `floor_divide`, `remainder`.
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
    `log`, `expm1`, `exp2`.

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
    `log2`, `exp`.

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
    `exp`, `log1p`.

""",
    "floor": """Round down to the nearest integer, elementwise.

Integers and bools pass through unchanged; complex input is an error.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape and dtype.

Examples:
    >>> jnp.floor(jnp.array([-1.5, 0.2, 2.7]))
    Array([-2.,  0.,  2.], dtype=float32)

See also:
    `ceil`, `trunc`, `rint`, `floor_divide`.
""",
    "floor_divide": """Divide arguments elementwise and round towards minus infinity.

For integers this is Python's `//` (the quotient rounded down, also for negative operands); integer
division by zero gives an unspecified value instead of raising.

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
Returns:
    The elementwise `x // y`, in the promoted dtype.

Examples:
    >>> jnp.floor_divide(jnp.array([7, -7, 7]), jnp.array([2, 2, -2]))
    Array([ 3, -4, -4], dtype=int32)
    >>> jnp.floor_divide(jnp.array([7.5, -7.5]), 2)
    Array([ 3., -4.], dtype=float32)

See also:
    `true_divide`, `remainder`, `divmod`.
""",
    "fmax": """Elementwise maximum that ignores NaN.

Where one operand is NaN the other one is returned (NaN only if both are).

Args:
    x1: First operand (array or scalar).
    x2: Second operand; broadcasts against `x1`.
Returns:
    The elementwise maximum, in the promoted dtype of the broadcast shape.

Examples:
    >>> jnp.fmax(jnp.array([1., jnp.nan, jnp.nan]), jnp.array([2., 3., jnp.nan]))
    Array([ 2.,  3., nan], dtype=float32)

See also:
    `maximum` (propagates NaN), `nanmax`.
""",
    "fmin": """Elementwise minimum that ignores NaN.

Where one operand is NaN the other one is returned (NaN only if both are).

Args:
    x1: First operand (array or scalar).
    x2: Second operand; broadcasts against `x1`.
Returns:
    The elementwise minimum, in the promoted dtype of the broadcast shape.

Examples:
    >>> jnp.fmin(jnp.array([1., jnp.nan, jnp.nan]), jnp.array([2., 3., jnp.nan]))
    Array([ 1.,  3., nan], dtype=float32)

See also:
    `minimum` (propagates NaN), `nanmin`.
""",
    "fmod": """Remainder of division elementwise, with the sign of the dividend (C's `fmod`).

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
Returns:
    The elementwise remainder in the promoted dtype; it has the sign of `x`.

Examples:
    >>> jnp.fmod(jnp.array([7, -7, 7]), jnp.array([3, 3, -3]))
    Array([ 1, -1,  1], dtype=int32)

See also:
    `remainder` (sign of the divisor).
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
    "heaviside": """Heaviside step function, elementwise.

The result is 0 where `x1 < 0`, 1 where `x1 > 0`, and `x2` where `x1 == 0`.

Args:
    x1: Input values.
    x2: Value at `x1 == 0`; broadcasts against `x1`.
Returns:
    An array of the broadcast shape, in the promoted dtype.

Examples:
    >>> jnp.heaviside(jnp.array([-2., 0., 3.]), 0.5)
    Array([0. , 0.5, 1. ], dtype=float32)

See also:
    `sign`.
""",
    "hypot": """Hypotenuse `sqrt(x1**2 + x2**2)`, elementwise, without intermediate overflow.

Integers are promoted to the default float dtype.

Args:
    x1: First operand (array or scalar).
    x2: Second operand; broadcasts against `x1`.
Returns:
    An array of the broadcast shape with an inexact dtype.

Examples:
    >>> jnp.hypot(jnp.array([3., 5.]), jnp.array([4., 12.]))
    Array([ 5., 13.], dtype=float32)
    >>> jnp.hypot(jnp.float32(3e30), jnp.float32(4e30))
    Array(5.e+30, dtype=float32)

See also:
    `sqrt`, `linalg.norm`.
""",
    "imag": """Imaginary part of each element.

For real input the result is zeros.

Args:
    val: Input array.
Returns:
    An array of `val`'s shape with the matching real dtype.

Examples:
    >>> jnp.imag(jnp.array([1 + 2j, 3 - 4j]))
    Array([ 2., -4.], dtype=float32)
    >>> jnp.imag(jnp.array([1., 2.]))
    Array([0., 0.], dtype=float32)

See also:
    `real`, `angle`.
""",
    "invert": """Elementwise bitwise not of an integer or bool array.

For bools this is logical not; for signed integers `~x == -x - 1`.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape and dtype.

Examples:
    >>> jnp.invert(jnp.array([0, 5, -1]))
    Array([-1, -6,  0], dtype=int32)
    >>> jnp.invert(jnp.array([0, 255], dtype=jnp.uint8))
    Array([255,   0], dtype=uint8)
    >>> jnp.invert(jnp.array([True, False]))
    Array([False,  True], dtype=bool)

See also:
    `bitwise_not` and `bitwise_invert` (its aliases), `logical_not`.
""",
    "isfinite": """Test elementwise for finiteness (not infinite and not NaN).

Integers and bools are always finite.

Args:
    x: Input array or scalar.
Returns:
    A bool array of `x`'s shape.

Examples:
    >>> jnp.isfinite(jnp.array([1., jnp.inf, -jnp.inf, jnp.nan]))
    Array([ True, False, False, False], dtype=bool)

See also:
    `isinf`, `isnan`.
""",
    "isinf": """Test elementwise for positive or negative infinity.

Args:
    x: Input array or scalar.
Returns:
    A bool array of `x`'s shape.

Examples:
    >>> jnp.isinf(jnp.array([1., jnp.inf, -jnp.inf, jnp.nan]))
    Array([False,  True,  True, False], dtype=bool)

See also:
    `isposinf`, `isneginf`, `isfinite`.
""",
    "isnan": """Test elementwise for NaN.

Args:
    x: Input array or scalar.
Returns:
    A bool array of `x`'s shape.

Examples:
    >>> jnp.isnan(jnp.array([1., jnp.inf, jnp.nan]))
    Array([False, False,  True], dtype=bool)

See also:
    `isfinite`, `nan_to_num`.
""",
    "isneginf": """Test elementwise for negative infinity.

Args:
    x: Input array or scalar.
    out: Unused; must be None.
Returns:
    A bool array of `x`'s shape.

Examples:
    >>> jnp.isneginf(jnp.array([1., jnp.inf, -jnp.inf]))
    Array([False, False,  True], dtype=bool)

See also:
    `isinf`, `isposinf`.
""",
    "isposinf": """Test elementwise for positive infinity.

Args:
    x: Input array or scalar.
    out: Unused; must be None.
Returns:
    A bool array of `x`'s shape.

Examples:
    >>> jnp.isposinf(jnp.array([1., jnp.inf, -jnp.inf]))
    Array([False,  True, False], dtype=bool)

See also:
    `isinf`, `isneginf`.
""",
    "left_shift": """Shift the bits of an integer array left, elementwise.

Shifting by the bit width or more gives 0.

Args:
    x1: Integer array whose bits are shifted.
    x2: Number of bit positions to shift; broadcasts against `x1`.
Returns:
    An array of the broadcast shape in the promoted integer dtype.

Examples:
    >>> jnp.left_shift(jnp.array([1, 3, 5]), jnp.array([1, 2, 3]))
    Array([ 2, 12, 40], dtype=int32)

See also:
    `right_shift`.
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
    `exp`, `log1p`, `log2`, `log10`.

""",
    "log10": """Base-10 logarithm, elementwise.

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.log10(jnp.array([1., 100., 0.001]))
    Array([ 0.,  2., -3.], dtype=float32)

See also:
    `log`, `log2`.

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
    `expm1`, `log`.

""",
    "log2": """Base-2 logarithm, elementwise.

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.log2(jnp.array([1, 8, 1024]))
    Array([ 0.,  3., 10.], dtype=float32)

See also:
    `exp2`, `log`.

""",
    "logaddexp": """`log(exp(x1) + exp(x2))`, elementwise, computed without overflow.

Useful to add probabilities stored as logarithms. Integers are promoted to the default float dtype.

Args:
    x1: First operand (array or scalar).
    x2: Second operand; broadcasts against `x1`.
    out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    where: Unused; must be None (accepted for the signature of NumPy's ufuncs).
Returns:
    An array of the broadcast shape with an inexact dtype.

Examples:
    >>> jnp.logaddexp(jnp.array([0., 1000.]), jnp.array([0., 1000.]))
    Array([6.9314718e-01, 1.0006932e+03], dtype=float32)

See also:
    `logaddexp2`, `scipy.special.logsumexp`.
""",
    "logaddexp2": """`log2(2**x1 + 2**x2)`, elementwise, computed without overflow.

Integers are promoted to the default float dtype.

Args:
    x1: First operand (array or scalar).
    x2: Second operand; broadcasts against `x1`.
    out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    where: Unused; must be None (accepted for the signature of NumPy's ufuncs).
Returns:
    An array of the broadcast shape with an inexact dtype.

Examples:
    >>> jnp.logaddexp2(jnp.array([1., 3.]), jnp.array([1., 3.]))
    Array([2., 4.], dtype=float32)

See also:
    `logaddexp`.
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
    "logical_not": """Elementwise logical not of the input's truth value.

Nonzero values count as True.

Args:
    x: Input array or scalar.
Returns:
    A bool array of `x`'s shape.

Examples:
    >>> jnp.logical_not(jnp.array([True, False]))
    Array([False,  True], dtype=bool)
    >>> jnp.logical_not(jnp.array([0, 3]))
    Array([ True, False], dtype=bool)

See also:
    `invert`.
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
    "nan_to_num": """Replace NaN and infinities with finite numbers.

Arrays are immutable, so a new array is always returned (`copy` is ignored).

Args:
    x: Input array or scalar.
    copy: Ignored; accepted for NumPy compatibility.
    nan: Value that replaces NaN (default 0).
    posinf: Value that replaces +inf (default: the dtype's largest finite value).
    neginf: Value that replaces -inf (default: the dtype's most negative finite value).
Returns:
    An array of `x`'s shape and dtype.

Examples:
    >>> x = jnp.array([1., jnp.nan, jnp.inf, -jnp.inf])
    >>> jnp.nan_to_num(x)
    Array([ 1.0000000e+00,  0.0000000e+00,  3.4028235e+38, -3.4028235e+38], dtype=float32)
    >>> jnp.nan_to_num(x, nan=-1., posinf=9., neginf=-9.)
    Array([ 1., -1.,  9., -9.], dtype=float32)

See also:
    `isnan`, `where`.
""",
    "negative": """Numerical negative, elementwise (`-x`).

Bool input is an error, as in NumPy.

Args:
    x: Input array or scalar.
    out: Unused; must be None.
    where: Unused; must be None.
Returns:
    An array of `x`'s shape and dtype.

Examples:
    >>> jnp.negative(jnp.array([1, -2, 0]))
    Array([-1,  2,  0], dtype=int32)

See also:
    `positive`, `subtract`.
""",
    "nextafter": """The next representable floating-point value after `x1` in the direction of `x2`, elementwise.

Args:
    x1: First operand (array or scalar).
    x2: Second operand; broadcasts against `x1`.
Returns:
    An array of the broadcast shape in the promoted inexact dtype.

Examples:
    >>> jnp.nextafter(jnp.float32(1), jnp.float32(2)) - 1
    Array(1.1920929e-07, dtype=float32)
    >>> jnp.nextafter(jnp.float32(0), jnp.float32(-1))
    Array(-1.e-45, dtype=float32)

See also:
    `spacing`, `finfo`.
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
    "positive": """Numerical positive, elementwise (`+x`): the values unchanged.

The result is a new array of the same dtype (bool input included).

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape and dtype, equal to `x`.

Examples:
    >>> jnp.positive(jnp.array([1, -2]))
    Array([ 1, -2], dtype=int32)

See also:
    `negative`.
""",
    "power": """Raise `x` to the power `y`, elementwise.

JAX's special cases apply: a concrete integer exponent becomes `integer_pow` (exact, and differentiable at
x = 0); integer ** integer is binary exponentiation over six exponent bits (as JAX does: more would
overflow anyway); an inexact base with an integer exponent uses `pow` without promoting the exponent. A
concrete negative exponent of an integer base is an error (convert the base to float first).

Args:
    x: Base (array or scalar).
    y: Exponent; broadcasts against `x`.
Returns:
    The elementwise `x ** y`, in the promoted dtype of the broadcast shape.

Examples:
    >>> jnp.power(jnp.array([1, 2, 3]), 2)
    Array([1, 4, 9], dtype=int32)
    >>> jnp.power(2.0, jnp.array([-1., 0.5]))
    Array([0.5      , 1.4142135], dtype=float32)

See also:
    `float_power`, `square`, `sqrt`, `exp`.
""",
    "rad2deg": """Convert angles from radians to degrees, elementwise.

Integers and bools are promoted to the default float dtype first (float32 unless x64 is on), as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact (float or complex) dtype.

Examples:
    >>> jnp.rad2deg(jnp.array([0., jnp.pi / 2, jnp.pi]))
    Array([  0.,  90., 180.], dtype=float32)

See also:
    `deg2rad`, `degrees`.

""",
    "real": """Real part of each element.

For real input the values are returned unchanged.

Args:
    val: Input array.
Returns:
    An array of `val`'s shape with the matching real dtype.

Examples:
    >>> jnp.real(jnp.array([1 + 2j, 3 - 4j]))
    Array([1., 3.], dtype=float32)

See also:
    `imag`, `conjugate`.
""",
    "reciprocal": """Reciprocal `1 / x`, elementwise.

Integers are promoted to the default float dtype first, as in JAX (NumPy keeps them integer, so that its
`reciprocal(2)` is 0).

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact dtype.

Examples:
    >>> jnp.reciprocal(jnp.array([1., 2., 4.]))
    Array([1.  , 0.5 , 0.25], dtype=float32)
    >>> jnp.reciprocal(jnp.array([1, 2]))
    Array([1. , 0.5], dtype=float32)

See also:
    `true_divide`.
""",
    "remainder": """Remainder of division elementwise, with the sign of the divisor (Python's `%`).

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
Returns:
    The elementwise `x % y` in the promoted dtype; it has the sign of `y`.

Examples:
    >>> jnp.remainder(jnp.array([7, -7, 7]), jnp.array([3, 3, -3]))
    Array([ 1,  2, -2], dtype=int32)
    >>> jnp.remainder(jnp.array([5.5, -5.5]), 2)
    Array([1.5, 0.5], dtype=float32)

See also:
    `fmod` (sign of the dividend), `floor_divide`, `divmod`.
""",
    "right_shift": """Shift the bits of an integer array right, elementwise.

The shift is arithmetic for signed integers (the sign is kept) and logical for unsigned ones, as in NumPy.

Args:
    x1: Integer array whose bits are shifted.
    x2: Number of bit positions to shift; broadcasts against `x1`.
Returns:
    An array of the broadcast shape in the promoted integer dtype.

Examples:
    >>> jnp.right_shift(jnp.array([8, -8, 7]), jnp.array([1, 1, 2]))
    Array([ 4, -4,  1], dtype=int32)

See also:
    `left_shift`.
""",
    "rint": """Round to the nearest integer, elementwise; ties go to the even integer.

Integer and bool inputs are promoted to the default float dtype first, as in JAX.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape with an inexact dtype.

Examples:
    >>> jnp.rint(jnp.array([0.5, 1.5, 2.5, -1.7]))
    Array([ 0.,  2.,  2., -2.], dtype=float32)

See also:
    `round`, `floor`.
""",
    "round": """Round to the given number of decimals, elementwise.

Ties go to the even value (`round(2.5) == 2`), after scaling by `10**decimals`. Integer input with
negative `decimals` is not supported yet (NotImplementedError).

Args:
    a: Input array.
    decimals: Number of decimal places (may be negative).
    out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
Returns:
    An array of `a`'s shape and dtype.

Examples:
    >>> jnp.round(jnp.array([0.5, 1.5, 2.567]))
    Array([0., 2., 3.], dtype=float32)
    >>> jnp.round(jnp.array([2.567, 1234.5]), 2)
    Array([   2.57, 1234.5 ], dtype=float32)
    >>> jnp.round(jnp.array([1234.5, 1250.]), -2)
    Array([1200., 1200.], dtype=float32)

See also:
    `around` (its alias), `rint`.
""",
    "sign": """Sign of each element: -1, 0 or 1 (NaN for NaN).

For complex input the result is `x / abs(x)` (0 at 0), as in NumPy 2.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape and dtype.

Examples:
    >>> jnp.sign(jnp.array([-3., 0., 2.5, jnp.nan]))
    Array([-1.,  0.,  1., nan], dtype=float32)
    >>> jnp.sign(jnp.array([3 + 4j]))
    Array([0.6+0.8j], dtype=complex64)

See also:
    `signbit`, `copysign`, `absolute`.
""",
    "signbit": """Test whether the sign bit is set, elementwise.

Unlike `x < 0` this is True for `-0.0` (and for NaNs with the sign bit set).

Args:
    x: Input array or scalar.
Returns:
    A bool array of `x`'s shape.

Examples:
    >>> jnp.signbit(jnp.array([-1., -0., 0., 2.]))
    Array([ True,  True, False, False], dtype=bool)

See also:
    `sign`, `copysign`.
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
    `cos`, `arcsin`, `sinh`.

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
    `cosh`, `arcsinh`.

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
    `cbrt`, `square`.

""",
    "square": """Square of each element, `x * x`.

Integers stay integers (and may overflow).

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape and dtype.

Examples:
    >>> jnp.square(jnp.array([-2, 3]))
    Array([4, 9], dtype=int32)
    >>> jnp.square(jnp.array([1.5, 1j]))
    Array([ 2.25+0.j, -1.  +0.j], dtype=complex64)

See also:
    `sqrt`, `power`.
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
    `arctan`, `sin`, `cos`.

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
    `arctanh`, `sinh`.

""",
    "true_divide": """Divide arguments elementwise, in floating point.

Integer operands are promoted to the default float (float32 unless x64 is on) before dividing, as for `x /
y` on arrays.

Args:
    x: First operand (array or scalar).
    y: Second operand; broadcasts against `x`.
Returns:
    The elementwise quotient `x / y`, with an inexact dtype.

Examples:
    >>> jnp.true_divide(jnp.array([1, 2, 3]), 2)
    Array([0.5, 1. , 1.5], dtype=float32)
    >>> jnp.true_divide(jnp.array([1., -1., 0.]), 0.)
    Array([ inf, -inf,  nan], dtype=float32)

See also:
    `floor_divide`, `divmod`.
""",
    "trunc": """Round towards zero, elementwise (drop the fractional part).

Integers and bools pass through unchanged.

Args:
    x: Input array or scalar.
Returns:
    An array of `x`'s shape and dtype.

Examples:
    >>> jnp.trunc(jnp.array([-1.7, 0.2, 2.7]))
    Array([-1.,  0.,  2.], dtype=float32)

See also:
    `floor`, `ceil`, `modf`.
""",
    "where": """Select elements from `x` or `y` depending on `condition`.

With three arguments the result takes `x` where `condition` is true and `y` elsewhere (all three
broadcast). With `condition` alone it is `nonzero(condition)`, and then `size` and `fill_value` make it
usable under `jit`, as in `nonzero`.

Args:
    condition: Boolean (or truth-valued) array.
    x: Values where `condition` is true.
    y: Values where `condition` is false.
    size: Only for the one-argument form: the static number of indices to return.
    fill_value: Only for the one-argument form: the index used for padding up to `size`.
Returns:
    The selected values, of the broadcast shape and promoted dtype; or, with one argument, a tuple of
    index arrays.

Examples:
    >>> x = jnp.arange(5)
    >>> jnp.where(x > 2, x, -1)
    Array([-1, -1, -1,  3,  4], dtype=int32)
    >>> jnp.where(jnp.array([True, False]), jnp.array([1., 2.]), jnp.array([[10.], [20.]]))
    Array([[ 1., 10.],
           [ 1., 20.]], dtype=float32)
    >>> jnp.where(jnp.array([0, 3, 0, 5]))
    (Array([1, 3], dtype=int32),)

See also:
    `nonzero`, `select`, `choose`.
""",
}
