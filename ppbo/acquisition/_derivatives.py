"""Covariances of a GP's values, gradients and Hessians, by autodiff of the kernel.

Derivatives of a Gaussian process are jointly Gaussian with its values, with

.. math:: \\operatorname{cov}\\big(\\partial^\\alpha f(a), \\partial^\\beta f(b)\\big)
    = \\partial_a^\\alpha \\partial_b^\\beta k(a, b)

(Rasmussen and Williams 2006, §9.4; Solak et al. 2003), so every covariance that
Predictive Entropy Search needs (value, gradient and Hessian at a point, up to the
fourth derivative for Hessian-Hessian terms) is a nested JAX derivative of the
kernel, :func:`derivative_covariance` and :func:`cross_covariance`.

Only kernels whose process is twice mean-square differentiable qualify: Matérn
smoothness ``nu > 2`` (Matérn-5/2, squared-exponential), as the kernel declares it
(:class:`ppbo.surrogate.StationaryKernel`). The covariance is the kernel's
``profile`` of the scaled squared distance ``t = |(a - b) / l|^2``, which the
kernel file writes so that it can be differentiated four times at ``t = 0``
(``ppbo.models.kernels`` gives the Matérn-5/2 profile closed-form derivatives).

References:
    Rasmussen and Williams (2006), "Gaussian Processes for Machine Learning",
    eq. (4.17) and §9.4.
    Solak, Murray-Smith, Leithead, Leith and Rasmussen (2003), "Derivative
    observations in Gaussian process models of dynamic systems".
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from ppbo.surrogate import StationaryKernel

__all__ = [
    "kernel_function",
    "functionals",
    "derivative_covariance",
    "cross_covariance",
]


def kernel_function(
    kernel: StationaryKernel, lengthscale: jax.Array, outputscale: jax.Array
) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """``k(a, b) = outputscale * profile(|(a - b) / lengthscale|^2)`` for single points.

    Equals the model's kernel for the same hyperparameters, and can be
    differentiated four times at ``a = b``.

    Args:
        kernel: the unit-variance kernel (e.g. ``ppbo.models.kernels.Matern52``),
            with smoothness above 2.
        lengthscale: ARD lengthscales, shape (d,).
        outputscale: signal variance, scalar.

    Returns:
        A function of two points of shape (d,) returning a scalar.

    Raises:
        ValueError: for a kernel whose sample paths are not twice differentiable.

    Example:
        >>> from ppbo.models.kernels import SquaredExponential
        >>> k = kernel_function(SquaredExponential, jnp.ones(2), 2.0)
        >>> float(k(jnp.zeros(2), jnp.zeros(2)))
        2.0
    """
    nu = float(kernel.smoothness)
    if not nu > 2.0:
        raise ValueError(
            f"a kernel of Matérn smoothness nu={nu} gives sample paths that are not "
            "twice differentiable, so a maximiser has no gradient or Hessian to "
            "condition on; use a kernel with nu > 2 (Matérn-5/2, squared-exponential)"
        )
    profile = kernel.profile
    lengthscale = jnp.asarray(lengthscale)

    def k(a, b):
        return outputscale * profile(jnp.sum(((a - b) / lengthscale) ** 2))

    return k


def functionals(fun: Callable[[jax.Array], jax.Array], z: jax.Array) -> jax.Array:
    """Value, gradient and Hessian of ``fun`` at ``z``, stacked along axis 0.

    Args:
        fun: a function of a point (d,) to an array of shape ``out``.
        z: the point, shape (d,).

    Returns:
        Array of shape ``(1 + d + d * d, *out)``: the value, the gradient and the
        row-major flattened Hessian.

    Example:
        >>> functionals(lambda x: jnp.sum(x**3), jnp.array([1.0, 2.0])).tolist()
        [9.0, 3.0, 12.0, 6.0, 0.0, 0.0, 12.0]
    """
    d = z.shape[-1]
    value = fun(z)
    grad = jax.jacfwd(fun)(z)
    hess = jax.jacfwd(jax.jacfwd(fun))(z)
    out = value.shape
    grad = jnp.moveaxis(grad, -1, 0)
    hess = jnp.moveaxis(hess, (-2, -1), (0, 1)).reshape((d * d,) + out)
    return jnp.concatenate([value[None], grad, hess])


def cross_covariance(
    k: Callable[[jax.Array, jax.Array], jax.Array], x: jax.Array, z: jax.Array
) -> jax.Array:
    """Covariance of ``f(x)`` with the value, gradient and Hessian of f at ``z``.

    Args:
        k: a kernel of two points, e.g. from :func:`kernel_function`.
        x: point (d,).
        z: point (d,).

    Returns:
        ``[k(x, z), d k / d z, d^2 k / d z^2 (flattened)]``, shape (1 + d + d^2,).

    Example:
        >>> from ppbo.models.kernels import SquaredExponential
        >>> k = kernel_function(SquaredExponential, jnp.ones(1), 1.0)
        >>> cross_covariance(k, jnp.zeros(1), jnp.ones(1)).round(4).tolist()
        [0.6065, -0.6065, 0.0]
    """
    return functionals(lambda b: k(x, b), z)


def derivative_covariance(
    k: Callable[[jax.Array, jax.Array], jax.Array], a: jax.Array, b: jax.Array
) -> jax.Array:
    """Covariance of ``phi(a)`` and ``phi(b)``, ``phi = (f, grad f, hess f)``.

    Args:
        k: a kernel of two points, e.g. from :func:`kernel_function`.
        a: point (d,).
        b: point (d,).

    Returns:
        Matrix of shape (1 + d + d^2, 1 + d + d^2): rows index the functionals at
        ``a``, columns those at ``b``, each ordered as in :func:`functionals`.

    Example:
        >>> from ppbo.models.kernels import SquaredExponential
        >>> k = kernel_function(SquaredExponential, jnp.ones(1), 1.0)
        >>> derivative_covariance(k, jnp.zeros(1), jnp.zeros(1)) + 0.0  # no -0.0
        Array([[ 1.,  0., -1.],
               [ 0.,  1.,  0.],
               [-1.,  0.,  3.]], dtype=float64)
    """
    return functionals(lambda a_: cross_covariance(k, a_, b), a)
