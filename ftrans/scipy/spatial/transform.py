"""``ftrans.scipy.spatial.transform``: ``Rotation`` and ``Slerp`` (JAX's ``scipy.spatial.transform``).

A rotation is stored as a unit quaternion in scalar-last order ``(x, y, z, w)``;
a stack of rotations has quaternions of shape ``(n, 4)``.  Both classes are
named tuples, hence pytrees, and every method works under ``jit``, ``vmap``
and ``grad``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ftrans import numpy as jnp
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.image import _promote_inexact

__all__ = ["Rotation", "Slerp"]


# ------------------------------------------------------------------ quaternion helpers ([..., 4] arrays)
def _norm(v: Any) -> Any:
    return jnp.sqrt(jnp.sum(v * v, axis=-1))


def _normalize(q: Any) -> Any:
    return q / _norm(q)[..., None]


def _mul(p: Any, q: Any) -> Any:
    """The Hamilton product ``p q`` (apply ``q`` first, then ``p``)."""
    p, q = jnp.broadcast_arrays(p, q)
    c = jnp.cross(p[..., :3], q[..., :3])
    pw, qw = p[..., 3], q[..., 3]
    vec = [pw * q[..., n] + qw * p[..., n] + c[..., n] for n in range(3)]
    w = pw * qw - p[..., 0] * q[..., 0] - p[..., 1] * q[..., 1] - p[..., 2] * q[..., 2]
    return jnp.stack(vec + [w], axis=-1)


def _to_matrix(q: Any) -> Any:
    x, y, z, w = (q[..., n] for n in range(4))
    xx, yy, zz, ww = x * x, y * y, z * z, w * w
    xy, zw, xz, yw, yz, xw = x * y, z * w, x * z, y * w, y * z, x * w
    rows = [
        [xx - yy - zz + ww, 2 * (xy - zw), 2 * (xz + yw)],
        [2 * (xy + zw), -xx + yy - zz + ww, 2 * (yz - xw)],
        [2 * (xz - yw), 2 * (yz + xw), -xx - yy + zz + ww],
    ]
    return jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)


def _from_matrix(m: Any) -> Any:
    # Shepperd's method: build the quaternion from the largest of the diagonal and the trace.
    e = lambda r, c: m[..., r, c]  # noqa: E731
    tr = e(0, 0) + e(1, 1) + e(2, 2)
    cands = []
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        comp = [None] * 4
        comp[i] = 1 - tr + 2 * e(i, i)
        comp[j] = e(j, i) + e(i, j)
        comp[k] = e(k, i) + e(i, k)
        comp[3] = e(k, j) - e(j, k)
        cands.append(jnp.stack(comp, axis=-1))
    cands.append(jnp.stack([e(2, 1) - e(1, 2), e(0, 2) - e(2, 0), e(1, 0) - e(0, 1), 1 + tr], axis=-1))
    choice = jnp.argmax(jnp.stack([e(0, 0), e(1, 1), e(2, 2), tr], axis=-1), axis=-1)
    q = cands[3]
    for i in (2, 1, 0):
        q = jnp.where((choice == i)[..., None], cands[i], q)
    return _normalize(q)


def _rotvec_to_quat(v: Any, degrees: bool) -> Any:
    v = jnp.where(degrees, jnp.deg2rad(v), v)
    angle = _norm(v)
    a2 = angle * angle
    # sin(angle / 2) / angle, by its Taylor series near 0
    small = 0.5 - a2 / 48 + a2 * a2 / 3840
    scale = jnp.where(angle <= 1e-3, small, jnp.sin(angle / 2) / angle)
    return jnp.concatenate([scale[..., None] * v, jnp.cos(angle / 2)[..., None]], axis=-1)


def _quat_to_rotvec(q: Any, degrees: bool) -> Any:
    q = jnp.where((q[..., 3] < 0)[..., None], -q, q)  # w >= 0: the angle is in [0, pi]
    angle = 2.0 * jnp.arctan2(_norm(q[..., :3]), q[..., 3])
    a2 = angle * angle
    # angle / sin(angle / 2), by its Taylor series near 0
    small = 2 + a2 / 12 + 7 * a2 * a2 / 2880
    scale = jnp.where(angle <= 1e-3, small, angle / jnp.sin(angle / 2))
    scale = jnp.where(degrees, jnp.rad2deg(scale), scale)
    return scale[..., None] * q[..., :3]


def _mrp_to_quat(p: Any) -> Any:
    s = jnp.sum(p * p, axis=-1)[..., None] + 1
    return jnp.concatenate([2 * p[..., :3], 2 - s], axis=-1) / s


def _quat_to_mrp(q: Any) -> Any:
    sign = jnp.where(q[..., 3] < 0, -1.0, 1.0)
    return sign[..., None] * q[..., :3] / (1.0 + sign * q[..., 3])[..., None]


def _canonical(q: Any) -> Any:
    # The sign with w > 0 (or, when w == 0, the first non-zero component positive).
    neg, zero = q < 0, q == 0
    flip = neg[..., 3]
    prefix = zero[..., 3]
    for n in range(3):
        flip = flip | (prefix & neg[..., n])
        prefix = prefix & zero[..., n]
    return jnp.where(flip[..., None], -q, q)


def _axis_index(c: str) -> int:
    try:
        return "xyz".index(c)
    except ValueError:
        raise FtransValueError(f"Expected axis to be from ['x', 'y', 'z'], got {c}") from None


def _parse_seq(seq: Any, max_len: int = 3, exact: bool = False) -> tuple[list[int], bool]:
    """Axis indices of an Euler sequence and whether it is intrinsic (upper case)."""
    if not isinstance(seq, str):
        raise FtransTypeError(f"Expected the axis sequence to be a string, got {type(seq).__name__}")
    if exact and len(seq) != 3:
        raise FtransValueError(f"Expected 3 axes, got {seq}.")
    if not 1 <= len(seq) <= max_len:
        raise FtransValueError("Expected axis specification to be a non-empty string of upto 3 characters, "
                               f"got {seq}")
    intrinsic = re.fullmatch(r"[XYZ]{1,3}", seq) is not None
    extrinsic = re.fullmatch(r"[xyz]{1,3}", seq) is not None
    if not (intrinsic or extrinsic):
        raise FtransValueError(f"Expected axes from `seq` to be from ['x', 'y', 'z'] or ['X', 'Y', 'Z'], got {seq}")
    if any(a == b for a, b in zip(seq, seq[1:])):
        raise FtransValueError(f"Expected consecutive axes to be different, got {seq}")
    return [_axis_index(c) for c in seq.lower()], intrinsic


def _elementary(axis: int, angle: Any) -> Any:
    half = angle / 2.0
    zero = jnp.zeros_like(angle)
    comp = [zero, zero, zero, jnp.cos(half)]
    comp[axis] = jnp.sin(half)
    return jnp.stack(comp, axis=-1)


def _euler_to_quat(angles: Any, axes: list[int], intrinsic: bool, degrees: bool) -> Any:
    angles = jnp.where(degrees, jnp.deg2rad(angles), angles)
    if angles.shape[-1] != len(axes):
        raise FtransValueError(f"Expected angles with a last axis of size {len(axes)} (one per axis of the "
                               f"sequence), got shape {tuple(angles.shape)}")
    q = _elementary(axes[0], angles[..., 0])
    for n in range(1, len(axes)):
        e = _elementary(axes[n], angles[..., n])
        q = _mul(q, e) if intrinsic else _mul(e, q)
    return q


def _quat_to_euler(q: Any, axes: list[int], extrinsic: bool, degrees: bool) -> Any:
    # Bernardes & Viollet (2022): Euler angles of any sequence straight from the quaternion.
    first, third = (0, 2) if extrinsic else (2, 0)
    i, j, k = axes if extrinsic else axes[::-1]
    symmetric = i == k
    if symmetric:
        k = 3 - i - j
    sign = (i - j) * (j - k) * (k - i) // 2
    qi, qj, qk, qw = q[..., i], q[..., j], q[..., k], q[..., 3]
    if symmetric:
        a, b, c, d = qw, qi, qj, qk * sign
    else:
        a, b, c, d = qw - qj, qi + qk * sign, qj + qw, qk * sign - qi
    middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
    eps = 1e-7
    at_zero = jnp.abs(middle) <= eps
    at_pi = jnp.abs(middle - np.pi) <= eps
    regular = ~(at_zero | at_pi)
    half_sum = jnp.arctan2(b, a)
    half_diff = jnp.arctan2(d, c)
    # Gimbal lock: the first angle takes the whole rotation, the third is zero.
    locked = jnp.where(at_zero, 2 * half_sum, 2 * half_diff * (-1 if extrinsic else 1))
    out = [locked, middle, jnp.zeros_like(middle)]
    out[first] = jnp.where(regular, half_sum - half_diff, out[first])
    out[third] = jnp.where(regular, half_sum + half_diff, out[third])
    if not symmetric:
        out[third] = out[third] * sign
        out[1] = out[1] - np.pi / 2
    angles = jnp.stack(out, axis=-1)
    angles = (angles + np.pi) % (2 * np.pi) - np.pi
    return jnp.where(degrees, jnp.rad2deg(angles), angles)


class Rotation(NamedTuple):
    """Rotations in 3 dimensions (JAX's ``scipy.spatial.transform.Rotation``).

    Build one with the ``from_*`` constructors (``from_quat``,
    ``from_matrix``, ``from_rotvec``, ``from_mrp``, ``from_euler``,
    ``identity``), convert with the ``as_*`` methods, compose with ``*``
    (``(r1 * r2).apply(v) == r1.apply(r2.apply(v))``) and rotate vectors
    with ``apply``.  ``quat`` holds scalar-last unit quaternions, shape
    ``(4,)`` for one rotation or ``(n, 4)`` for a stack.
    """

    quat: Any

    @classmethod
    def concatenate(cls, rotations: Sequence[Rotation]) -> Rotation:
        """One stack of all the given rotations."""
        return cls(jnp.concatenate([r.quat for r in rotations]))

    @classmethod
    def from_euler(cls, seq: str, angles: Any, degrees: bool = False) -> Rotation:
        """From Euler angles: ``seq`` is up to 3 of ``xyz`` (extrinsic) or ``XYZ`` (intrinsic)."""
        axes, intrinsic = _parse_seq(seq)
        (angles,) = _promote_inexact(jnp.atleast_1d(angles))
        return cls(_euler_to_quat(angles, axes, intrinsic, degrees))

    @classmethod
    def from_matrix(cls, matrix: Any) -> Rotation:
        """From rotation matrices, shape ``(..., 3, 3)``."""
        (matrix,) = _promote_inexact(matrix)
        return cls(_from_matrix(matrix))

    @classmethod
    def from_mrp(cls, mrp: Any) -> Rotation:
        """From Modified Rodrigues Parameters, shape ``(..., 3)``."""
        (mrp,) = _promote_inexact(mrp)
        return cls(_mrp_to_quat(mrp))

    @classmethod
    def from_quat(cls, quat: Any) -> Rotation:
        """From scalar-last quaternions, shape ``(..., 4)`` (normalised here)."""
        (quat,) = _promote_inexact(quat)
        return cls(_normalize(quat))

    @classmethod
    def from_rotvec(cls, rotvec: Any, degrees: bool = False) -> Rotation:
        """From rotation vectors (axis times angle), shape ``(..., 3)``."""
        (rotvec,) = _promote_inexact(rotvec)
        return cls(_rotvec_to_quat(rotvec, degrees))

    @classmethod
    def identity(cls, num: int | None = None, dtype: Any = float) -> Rotation:
        """The identity rotation (or a stack of ``num`` of them)."""
        quat = jnp.array([0.0, 0.0, 0.0, 1.0], dtype=dtype)
        if num is not None:
            quat = jnp.tile(quat, (num, 1))
        return cls(quat)

    @classmethod
    def random(cls, random_key: Any, num: int | None = None) -> Rotation:
        """Not implemented (as in JAX)."""
        raise NotImplementedError("Rotation.random is not implemented, as in JAX")

    def __getitem__(self, indexer: Any) -> Rotation:  # type: ignore[override]
        """The rotation(s) at ``indexer`` of a stack."""
        if self.single:
            raise FtransTypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[indexer])

    def __len__(self) -> int:
        """The number of rotations in a stack."""
        if self.single:
            raise FtransTypeError("Single rotation has no len().")
        return self.quat.shape[0]

    def __mul__(self, other: Rotation) -> Rotation:  # type: ignore[override]
        """The composition: ``other`` first, then ``self``."""
        return Rotation.from_quat(_mul(self.quat, other.quat))

    def apply(self, vectors: Any, inverse: bool = False) -> Any:
        """Rotate ``vectors`` (shape ``(..., 3)``), or undo the rotation with ``inverse=True``."""
        m = self.as_matrix()
        m = jnp.where(inverse, jnp.swapaxes(m, -1, -2), m)
        vectors = jnp.asarray(vectors)
        return jnp.matmul(m, vectors[..., None])[..., 0]

    def as_euler(self, seq: str, degrees: bool = False) -> Any:
        """Euler angles for a 3-axis sequence (``xyz``-style extrinsic, ``XYZ``-style intrinsic)."""
        axes, intrinsic = _parse_seq(seq, exact=True)
        return _quat_to_euler(self.quat, axes, not intrinsic, degrees)

    def as_matrix(self) -> Any:
        """Rotation matrices, shape ``(..., 3, 3)``."""
        return _to_matrix(self.quat)

    def as_mrp(self) -> Any:
        """Modified Rodrigues Parameters (the short-way ones), shape ``(..., 3)``."""
        return _quat_to_mrp(self.quat)

    def as_rotvec(self, degrees: bool = False) -> Any:
        """Rotation vectors (axis times angle in ``[0, pi]``), shape ``(..., 3)``."""
        return _quat_to_rotvec(self.quat, degrees)

    def as_quat(self, canonical: bool = False, scalar_first: bool = False) -> Any:
        """Quaternions, scalar-last unless ``scalar_first``; ``canonical`` picks the sign with ``w >= 0``."""
        q = _canonical(self.quat) if canonical else self.quat
        return jnp.roll(q, shift=1, axis=-1) if scalar_first else q

    def inv(self) -> Rotation:
        """The inverse rotation(s)."""
        return Rotation(self.quat * jnp.array([-1, -1, -1, 1], dtype=self.quat.dtype))

    def magnitude(self) -> Any:
        """The rotation angle(s), in ``[0, pi]``."""
        return 2.0 * jnp.arctan2(_norm(self.quat[..., :3]), jnp.abs(self.quat[..., 3]))

    def mean(self, weights: Any = None) -> Rotation:
        """The (weighted) mean rotation of a stack (Markley's quaternion average)."""
        q = self.quat
        w = jnp.ones(q.shape[0], dtype=q.dtype) if weights is None else jnp.asarray(weights, dtype=q.dtype)
        if w.ndim != 1:
            raise FtransValueError(f"Expected `weights` to be 1 dimensional, got shape {tuple(w.shape)}.")
        if w.shape[0] != len(self):
            raise FtransValueError("Expected `weights` to have number of values equal to number of rotations, "
                                   f"got {w.shape[0]} values and {len(self)} rotations.")
        k = jnp.dot(w[None, :] * q.T, q)
        _, v = jnp.linalg.eigh(k)
        return Rotation(v[:, -1])

    @property
    def single(self) -> bool:
        """Whether this holds one rotation rather than a stack."""
        return self.quat.ndim == 1


class Slerp(NamedTuple):
    """Spherical linear interpolation of rotations (JAX's ``scipy.spatial.transform.Slerp``).

    Build with ``Slerp.init(times, rotations)`` (increasing key times, a stack
    of at least 2 rotations) and call with the times to interpolate at.
    """

    times: Any
    timedelta: Any
    rotations: Rotation
    rotvecs: Any

    @classmethod
    def init(cls, times: Any, rotations: Rotation) -> Slerp:
        """The interpolator through ``rotations`` at the key ``times``."""
        if not isinstance(rotations, Rotation):
            raise FtransTypeError("`rotations` must be a `Rotation` instance.")
        if rotations.single or len(rotations) == 1:
            raise FtransValueError("`rotations` must be a sequence of at least 2 rotations.")
        times = jnp.asarray(times, dtype=rotations.quat.dtype)
        if times.ndim != 1:
            raise FtransValueError(f"Expected times to be specified in a 1 dimensional array, got {times.ndim} "
                                   "dimensions.")
        if times.shape[0] != len(rotations):
            raise FtransValueError("Expected number of rotations to be equal to number of timestamps given, got "
                                   f"{len(rotations)} rotations and {times.shape[0]} timestamps.")
        q = rotations.as_quat()
        start = Rotation(q[:-1])
        # The rotation carrying each key rotation to the next, as a rotation vector.
        step = (start.inv() * Rotation(q[1:])).as_rotvec()
        return cls(times=times, timedelta=jnp.diff(times), rotations=start, rotvecs=step)

    def __call__(self, times: Any) -> Rotation:
        """The interpolated rotation(s) at ``times`` (a scalar gives a single rotation)."""
        t = jnp.asarray(times, dtype=self.times.dtype)
        if t.ndim > 1:
            raise FtransValueError("`times` must be at most 1-dimensional.")
        scalar = t.ndim == 0
        t = jnp.atleast_1d(t)
        seg = jnp.maximum(jnp.searchsorted(self.times, t) - 1, 0)
        alpha = (t - self.times[seg]) / self.timedelta[seg]
        out = self.rotations[seg] * Rotation.from_rotvec(self.rotvecs[seg] * alpha[:, None])
        return out[0] if scalar else out
