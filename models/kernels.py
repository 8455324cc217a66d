"""Covariance kernels for the GP models: Matérn 1/2, 3/2, 5/2, squared-exponential,
linear, and their sums, products and scalings.

A kernel is an immutable pytree with ``evaluate(x1, x2)`` for two single points (d,);
``matrix(X1, X2)`` evaluates all pairs, with fast closed forms for the stationary
kernels, and ``k1 + k2``, ``k1 * k2`` and ``c * k`` compose. Stationary kernels here
have unit variance; the GP models multiply by ``outputscale``. Formulas follow
Rasmussen and Williams (2006), "Gaussian Processes for Machine Learning", §4.2,
eqs. (4.9), (4.14), (4.16) and (4.17).

Everything the acquisitions need to know about a stationary kernel is declared here,
once, on its class (the :class:`ppbo.surrogate.StationaryKernel` protocol):
``smoothness`` (the Matérn ``nu``, ``inf`` for the squared-exponential), which fixes
the spectral density that random Fourier features sample and whether sample paths
have the derivatives Predictive Entropy Search conditions on (``nu > 2``), and
``profile(t)``, the kernel as a function of the scaled squared distance. The
Matérn-5/2 profile carries closed-form derivatives (``jax.custom_jvp``),

.. math:: g(t) = (1 + a + a^2/3) e^{-a}, \\quad
    g'(t) = -\\tfrac56 (1 + a) e^{-a}, \\quad
    g''(t) = \\tfrac{25}{12} e^{-a}, \\qquad a = \\sqrt{5 t},

so that it can be differentiated four times at ``t = 0``, where autodiff of the
plain formula gives NaN: the terms with the third or fourth derivative of ``g``
are multiplied by first derivatives of ``t``, which vanish there.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

__all__ = [
    "Kernel",
    "Stationary",
    "Matern12",
    "Matern32",
    "Matern52",
    "SquaredExponential",
    "Linear",
    "Sum",
    "Product",
    "Scaled",
    "KERNELS",
    "scaled_sq_dist",
]


def _pytree(cls):
    """Register a frozen dataclass whose fields are all array leaves."""
    names = tuple(f.name for f in dataclasses.fields(cls))
    jax.tree_util.register_pytree_node(
        cls,
        lambda k: (tuple(getattr(k, n) for n in names), None),
        lambda _, children: cls(*children),
    )
    return cls


def _safe_sqrt(r2: jax.Array) -> jax.Array:
    # sqrt has an infinite derivative at 0 (the diagonal); the double where keeps
    # gradients finite and zero there.
    positive = r2 > 1e-36
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, r2, 1.0)), 0.0)


def scaled_sq_dist(X1: jax.Array, X2: jax.Array, lengthscale: jax.Array) -> jax.Array:
    """Squared distances ``sum_k ((x1_k - x2_k) / l_k)^2`` for all pairs, (m1, m2).

    Uses ``|a|^2 + |b|^2 - 2 a.b``: one matrix product, about five times faster
    than forming the (m1, m2, d) differences, which dominates the cost of a GP
    likelihood gradient at BO sizes. The expansion loses relative precision for
    nearly coincident points (absolute error ~1e-16 on the scaled scale), so the
    diagonal of a Gram matrix (``X2 is X1``) is set to exactly zero.

    Example:
        >>> import jax.numpy as jnp
        >>> scaled_sq_dist(jnp.zeros((1, 2)), jnp.ones((1, 2)), jnp.ones(2))
        Array([[2.]], dtype=float64)
    """
    A = X1 / lengthscale
    B = A if X2 is X1 else X2 / lengthscale
    sq_a = jnp.sum(A**2, axis=-1)
    sq_b = sq_a if X2 is X1 else jnp.sum(B**2, axis=-1)
    r2 = jnp.maximum(sq_a[:, None] + sq_b[None, :] - 2.0 * (A @ B.T), 0.0)
    if X2 is X1:
        r2 = jnp.where(jnp.eye(r2.shape[0], dtype=bool), 0.0, r2)
    return r2


class Kernel(abc.ABC):
    """Base class: override :meth:`evaluate`; :meth:`matrix` vmaps it by default.

    Example:
        >>> import jax.numpy as jnp
        >>> k = Matern52(jnp.ones(2)) + 0.5 * Linear(jnp.ones(2))
        >>> k.matrix(jnp.zeros((3, 2)), jnp.ones((4, 2))).shape
        (3, 4)
    """

    @abc.abstractmethod
    def evaluate(self, x1: jax.Array, x2: jax.Array) -> jax.Array:
        """Covariance of two single points of shape (d,)."""

    def matrix(self, X1: jax.Array, X2: jax.Array) -> jax.Array:
        """Covariance matrix of all pairs, shape (m1, m2)."""
        return jax.vmap(lambda a: jax.vmap(lambda b: self.evaluate(a, b))(X2))(X1)

    def diag(self, X: jax.Array) -> jax.Array:
        """Variances ``k(x, x)``, shape (m,)."""
        return jax.vmap(lambda a: self.evaluate(a, a))(X)

    def __add__(self, other: Kernel) -> Kernel:
        return Sum(self, other)

    def __mul__(self, other: Any) -> Kernel:
        if isinstance(other, Kernel):
            return Product(self, other)
        return Scaled(jnp.asarray(other), self)

    __rmul__ = __mul__


_SQRT5 = math.sqrt(5.0)


@jax.custom_jvp
def _matern52(t):
    a = _SQRT5 * _safe_sqrt(t)
    return (1.0 + a + a * a / 3.0) * jnp.exp(-a)


@jax.custom_jvp
def _matern52_d1(t):
    a = _SQRT5 * _safe_sqrt(t)
    return -(5.0 / 6.0) * (1.0 + a) * jnp.exp(-a)


def _matern52_d2(t):
    return (25.0 / 12.0) * jnp.exp(-_SQRT5 * _safe_sqrt(t))


@_matern52.defjvp
def _matern52_jvp(primals, tangents):
    (t,), (dt,) = primals, tangents
    return _matern52(t), _matern52_d1(t) * dt


@_matern52_d1.defjvp
def _matern52_d1_jvp(primals, tangents):
    (t,), (dt,) = primals, tangents
    return _matern52_d1(t), _matern52_d2(t) * dt


class Stationary(Kernel):
    """A unit-variance stationary kernel ``profile(|(x - x') / lengthscale|^2)``.

    Subclasses declare ``smoothness`` (Matérn ``nu``) and the static ``profile``.
    """

    lengthscale: jax.Array
    smoothness: ClassVar[float]

    @staticmethod
    @abc.abstractmethod
    def profile(t: jax.Array) -> jax.Array:
        """Covariance as a function of the scaled squared distance ``t``."""

    def evaluate(self, x1, x2):
        r2 = jnp.sum(((x1 - x2) / self.lengthscale) ** 2)
        return self.profile(r2)

    def matrix(self, X1, X2):
        return self.profile(scaled_sq_dist(X1, X2, self.lengthscale))

    def diag(self, X):
        return jnp.ones(X.shape[0], dtype=X.dtype)


@_pytree
@dataclass(frozen=True)
class Matern12(Stationary):
    """Matérn-1/2 (exponential) kernel ``exp(-r)``; R&W eq. (4.14) with nu = 1/2."""

    lengthscale: jax.Array
    smoothness: ClassVar[float] = 0.5

    @staticmethod
    def profile(t):
        """``exp(-sqrt(t))``."""
        return jnp.exp(-_safe_sqrt(t))


@_pytree
@dataclass(frozen=True)
class Matern32(Stationary):
    """Matérn-3/2 kernel ``(1 + sqrt(3) r) exp(-sqrt(3) r)``; R&W eq. (4.17)."""

    lengthscale: jax.Array
    smoothness: ClassVar[float] = 1.5

    @staticmethod
    def profile(t):
        """``(1 + sqrt(3 t)) exp(-sqrt(3 t))``."""
        s = jnp.sqrt(3.0) * _safe_sqrt(t)
        return (1.0 + s) * jnp.exp(-s)


@_pytree
@dataclass(frozen=True)
class Matern52(Stationary):
    """Matérn-5/2 kernel ``(1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r)``; eq. (4.17)."""

    lengthscale: jax.Array
    smoothness: ClassVar[float] = 2.5

    @staticmethod
    def profile(t):
        """``(1 + a + a^2 / 3) exp(-a)``, ``a = sqrt(5 t)``, with closed-form
        derivatives (four times differentiable at ``t = 0``)."""
        return _matern52(t)


@_pytree
@dataclass(frozen=True)
class SquaredExponential(Stationary):
    """Squared-exponential kernel ``exp(-r^2 / 2)``; R&W eq. (4.9)."""

    lengthscale: jax.Array
    smoothness: ClassVar[float] = math.inf

    @staticmethod
    def profile(t):
        """``exp(-t / 2)``."""
        return jnp.exp(-0.5 * t)


@_pytree
@dataclass(frozen=True)
class Linear(Kernel):
    """Linear (dot-product) kernel ``sum_k x1_k x2_k / l_k^2``; R&W §4.2.2."""

    lengthscale: jax.Array

    def evaluate(self, x1, x2):
        return jnp.sum(x1 * x2 / self.lengthscale**2)

    def matrix(self, X1, X2):
        return (X1 / self.lengthscale) @ (X2 / self.lengthscale).T

    def diag(self, X):
        return jnp.sum((X / self.lengthscale) ** 2, -1)


@_pytree
@dataclass(frozen=True)
class Sum(Kernel):
    """Sum of two kernels."""

    left: Kernel
    right: Kernel

    def evaluate(self, x1, x2):
        return self.left.evaluate(x1, x2) + self.right.evaluate(x1, x2)

    def matrix(self, X1, X2):
        return self.left.matrix(X1, X2) + self.right.matrix(X1, X2)

    def diag(self, X):
        return self.left.diag(X) + self.right.diag(X)


@_pytree
@dataclass(frozen=True)
class Product(Kernel):
    """Elementwise product of two kernels."""

    left: Kernel
    right: Kernel

    def evaluate(self, x1, x2):
        return self.left.evaluate(x1, x2) * self.right.evaluate(x1, x2)

    def matrix(self, X1, X2):
        return self.left.matrix(X1, X2) * self.right.matrix(X1, X2)

    def diag(self, X):
        return self.left.diag(X) * self.right.diag(X)


@_pytree
@dataclass(frozen=True)
class Scaled(Kernel):
    """A kernel multiplied by a non-negative scalar."""

    scale: jax.Array
    kernel: Kernel

    def evaluate(self, x1, x2):
        return self.scale * self.kernel.evaluate(x1, x2)

    def matrix(self, X1, X2):
        return self.scale * self.kernel.matrix(X1, X2)

    def diag(self, X):
        return self.scale * self.kernel.diag(X)


#: Kernel names accepted by the model builders.
KERNELS = {
    "matern12": Matern12,
    "matern32": Matern32,
    "matern52": Matern52,
    "rbf": SquaredExponential,
    "squared_exponential": SquaredExponential,
    "linear": Linear,
}
