"""``gaussian_kde``: JAX's Gaussian kernel density estimator (a pytree, so it passes through ``jit``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import numpy as jnp
from ftrans.core.operands import check_arraylike
from ftrans.numpy._extras import _inexact_nobcast
from ftrans.scipy import linalg, special
from ftrans.tree_util import register_pytree_node_class


@register_pytree_node_class
class gaussian_kde:  # noqa: N801 - SciPy's and JAX's name
    """A Gaussian kernel density estimate of ``dataset`` (``(d, n)``: ``n`` points in ``d`` dimensions).

    ``bw_method`` is ``'scott'`` (default), ``'silverman'``, a scalar factor or
    a callable of the estimator; ``weights`` weight the points. The kernel
    covariance is the (weighted) data covariance times the factor squared.
    """

    __slots__ = ("neff", "dataset", "weights", "covariance", "inv_cov")

    def __init__(self, dataset: Any, bw_method: Any = None, weights: Any = None):
        check_arraylike("gaussian_kde", dataset)
        dataset = jnp.atleast_2d(dataset)
        if np.issubdtype(dataset.dtype, np.complexfloating):
            raise NotImplementedError("gaussian_kde does not support complex data")
        if not dataset.size > 1:
            raise ValueError("`dataset` input should have multiple elements.")
        d, n = dataset.shape
        if weights is not None:
            check_arraylike("gaussian_kde", weights)
            dataset, weights = _inexact_nobcast("gaussian_kde", dataset, weights)
            weights = jnp.atleast_1d(weights)
            weights = weights / jnp.sum(weights)
            if weights.ndim != 1:
                raise ValueError("`weights` input should be one-dimensional.")
            if len(weights) != n:
                raise ValueError(f"`weights` input should be of length n ({n}), got {len(weights)}")
        else:
            (dataset,) = _inexact_nobcast("gaussian_kde", dataset)
            weights = jnp.full(n, 1.0 / n, dtype=dataset.dtype)
        object.__setattr__(self, "dataset", dataset)
        object.__setattr__(self, "weights", weights)
        neff = 1 / jnp.sum(weights**2)
        object.__setattr__(self, "neff", neff)
        if bw_method is None or bw_method == "scott":
            factor = jnp.power(neff, -1.0 / (d + 4))
        elif bw_method == "silverman":
            factor = jnp.power(neff * (d + 2) / 4.0, -1.0 / (d + 4))
        elif jnp.isscalar(bw_method) and not isinstance(bw_method, str):
            factor = bw_method
        elif callable(bw_method):
            factor = bw_method(self)
        else:
            raise ValueError("`bw_method` should be 'scott', 'silverman', a scalar, or a callable.")
        data_cov = jnp.atleast_2d(jnp.cov(dataset, rowvar=1, bias=False, aweights=weights))
        object.__setattr__(self, "covariance", data_cov * factor**2)
        object.__setattr__(self, "inv_cov", jnp.linalg.inv(data_cov) / factor**2)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"gaussian_kde is immutable; cannot set {name}")

    def tree_flatten(self) -> tuple:
        return (self.neff, self.dataset, self.weights, self.covariance, self.inv_cov), None

    @classmethod
    def tree_unflatten(cls, aux: Any, children: Any) -> gaussian_kde:
        kde = cls.__new__(cls)
        for name, value in zip(cls.__slots__, children):
            object.__setattr__(kde, name, value)
        return kde

    @property
    def d(self) -> int:
        """The number of dimensions."""
        return self.dataset.shape[0]

    @property
    def n(self) -> int:
        """The number of data points."""
        return self.dataset.shape[1]

    def _points(self, points: Any) -> Any:
        points = jnp.asarray(points)
        if np.issubdtype(points.dtype, np.complexfloating):
            raise NotImplementedError("gaussian_kde does not support complex coordinates")
        points = jnp.atleast_2d(points)
        d, m = points.shape
        if d != self.d:
            if d == 1 and m == self.d:
                return jnp.reshape(points, (self.d, 1))
            raise ValueError(f"points have dimension {d}, dataset has dimension {self.d}")
        return points

    def _log_kernel_terms(self, points: Any) -> Any:
        """``log N(x_i | data_j, covariance)`` for every point ``i`` and datum ``j``: ``(m, n)``."""
        data, xi, prec = _inexact_nobcast("gaussian_kde", self.dataset.T, points.T, self.inv_cov)
        white = jnp.linalg.cholesky(prec)
        data_w = jnp.dot(data, white)
        xi_w = jnp.dot(xi, white)
        log_norm = jnp.sum(jnp.log(jnp.diag(white))) - 0.5 * self.d * np.log(2 * np.pi)
        sq = jnp.sum(jnp.square(data_w[None, :, :] - xi_w[:, None, :]), axis=-1)
        return log_norm - 0.5 * sq

    def evaluate(self, points: Any) -> Any:
        """The density at ``points`` (``(d, m)``, or ``(m,)`` in one dimension)."""
        check_arraylike("evaluate", points)
        terms = self._log_kernel_terms(self._points(points))
        w = self.weights.astype(terms.dtype)
        return jnp.sum(w[None, :] * jnp.exp(terms), axis=1)

    __call__ = evaluate

    def pdf(self, x: Any) -> Any:
        """The density, ``evaluate(x)``."""
        return self.evaluate(x)

    def logpdf(self, x: Any) -> Any:
        """The log-density, by ``logsumexp`` over the data points."""
        check_arraylike("logpdf", x)
        terms = self._log_kernel_terms(self._points(x))
        w = self.weights.astype(terms.dtype)
        return special.logsumexp(jnp.log(w)[None, :] + terms, axis=1)

    def _convolve(self, chol: Any, norm: Any, target: Any, weights: Any, mean: Any) -> Any:
        diff = target - mean[:, None]
        alpha = linalg.cho_solve(chol, diff)
        return norm * jnp.sum(jnp.exp(-0.5 * jnp.sum(diff * alpha, axis=0)) * weights)

    def integrate_gaussian(self, mean: Any, cov: Any) -> Any:
        """The integral of the density times the Gaussian ``N(mean, cov)``."""
        mean = jnp.atleast_1d(jnp.squeeze(mean))
        cov = jnp.atleast_2d(cov)
        if mean.shape != (self.d,):
            raise ValueError(f"mean does not have dimension {self.d}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"covariance does not have dimension {self.d}")
        chol = linalg.cho_factor(self.covariance + cov)
        norm = 1.0 / (jnp.sqrt(2 * np.pi) ** self.d * jnp.prod(jnp.diag(chol[0])))
        return self._convolve(chol, norm, self.dataset, self.weights, mean)

    def integrate_box_1d(self, low: Any, high: Any) -> Any:
        """The probability mass between scalars ``low`` and ``high`` (one-dimensional data only)."""
        if self.d != 1:
            raise ValueError("integrate_box_1d() only handles 1D pdfs")
        if np.ndim(low) != 0 or np.ndim(high) != 0:
            raise ValueError("the limits of integration in integrate_box_1d must be scalars")
        sigma = jnp.squeeze(jnp.sqrt(self.covariance))
        lo = jnp.squeeze((low - self.dataset) / sigma)
        hi = jnp.squeeze((high - self.dataset) / sigma)
        return jnp.sum(self.weights * (special.ndtr(hi) - special.ndtr(lo)))

    def integrate_kde(self, other: gaussian_kde) -> Any:
        """The integral of the product of two estimates' densities."""
        if other.d != self.d:
            raise ValueError("KDEs are not the same dimensionality")
        chol = linalg.cho_factor(self.covariance + other.covariance)
        norm = 1.0 / (jnp.sqrt(2 * np.pi) ** self.d * jnp.prod(jnp.diag(chol[0])))
        sm, lg = (self, other) if self.n < other.n else (other, self)
        from ftrans.transforms.batching import vmap

        per = vmap(lambda m: self._convolve(chol, norm, lg.dataset, lg.weights, m), in_axes=1)(sm.dataset)
        return jnp.sum(per * sm.weights)

    def resample(self, key: Any, shape: tuple = ()) -> Any:
        """Draw ``shape`` points: a datum chosen by weight plus kernel noise; ``(d, *shape)``."""
        from ftrans import random

        ind_key, eps_key = random.split(key)
        ind = random.choice(ind_key, self.n, shape=shape, p=self.weights)
        factor = jnp.linalg.cholesky(self.covariance)
        z = random.normal(eps_key, tuple(shape) + (self.d,), dtype=self.dataset.dtype)
        eps = jnp.einsum("ij,...j->...i", factor, z).T
        return self.dataset[:, ind] + eps

    def integrate_box(self, low_bounds: Any, high_bounds: Any, maxpts: Any = None) -> Any:
        """Not supported (as in JAX): use ``integrate_box_1d``."""
        raise NotImplementedError("only 1D box integrations are supported; use `integrate_box_1d`")

    def set_bandwidth(self, bw_method: Any = None) -> None:
        """Not supported (as in JAX): build a new estimator instead."""
        raise NotImplementedError("dynamically changing the bandwidth method is not supported")

