"""Covariances of a GP's values, gradients and Hessians, by autodiff of the kernel.

Derivatives of a Gaussian process are jointly Gaussian with its values, with

.. math:: \\operatorname{cov}\\big(\\partial^\\alpha f(a), \\partial^\\beta f(b)\\big)
    = \\partial_a^\\alpha \\partial_b^\\beta k(a, b)

(Rasmussen and Williams 2006, §9.4; Solak et al. 2003), so every covariance that
Predictive Entropy Search needs (value, gradient and Hessian at a point, up to the
fourth derivative for Hessian-Hessian terms) is a nested JAX derivative of the
kernel, :func:`derivative_covariance` and :func:`cross_covariance`.

Only kernels whose process is twice mean-square differentiable qualify:
squared-exponential and Matérn-5/2. Their covariance is written as a profile of the
scaled squared distance ``t = |(a - b) / l|^2``. The Matérn-5/2 profile involves
``sqrt(t)``, whose derivatives are infinite at ``t = 0`` although the kernel itself
is four times differentiable there; autodiff of the plain formula gives NaN (or,
through a guarded square root, wrong finite values) at coincident points. Here the
profile and its first derivative carry their closed-form derivatives
(``jax.custom_jvp``),

.. math:: g(t) = (1 + a + a^2/3) e^{-a}, \\quad
    g'(t) = -\\tfrac56 (1 + a) e^{-a}, \\quad
    g''(t) = \\tfrac{25}{12} e^{-a}, \\qquad a = \\sqrt{5 t},

so that the fourth derivative at ``t = 0`` only involves ``g''(0)``: the terms
with ``g'''`` or ``g''''`` are multiplied by first derivatives of ``t``, which
vanish there, and stay finite in the computation.

References:
    Rasmussen and Williams (2006), "Gaussian Processes for Machine Learning",
    eq. (4.17) and §9.4.
    Solak, Murray-Smith, Leithead, Leith and Rasmussen (2003), "Derivative
    observations in Gaussian process models of dynamic systems".
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

__all__ = [
    "SMOOTH_KERNELS",
    "profile",
    "kernel_function",
    "functionals",
    "derivative_covariance",
    "cross_covariance",
]

#: Kernel names (``surrogate.extras["kernel_name"]``) whose GP has the gradients
#: and Hessians that PES conditions on; matching ignores case and underscores.
SMOOTH_KERNELS = ("matern52", "rbf", "squared_exponential")

_ROUGH = {"matern12": "1/2", "matern32": "3/2"}
_SQRT5 = math.sqrt(5.0)


def _safe_sqrt(t):
    # finite derivatives of every order at t = 0 (they are zero there); only used
    # where a vanishing derivative of t multiplies the result
    positive = t > 1e-36
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, t, 1.0)), 0.0)


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


def _squared_exponential(t):
    return jnp.exp(-0.5 * t)


def profile(kernel_name: str) -> Callable[[jax.Array], jax.Array]:
    """Unit-variance kernel as a function of the scaled squared distance ``t``.

    Args:
        kernel_name: ``"matern52"``, ``"rbf"`` or ``"squared_exponential"``
            (case and underscores ignored).

    Returns:
        ``g(t)``, safe to differentiate four times at ``t = 0``.

    Raises:
        ValueError: for Matérn-1/2 and 3/2 (not twice differentiable), linear,
            composite or unknown kernels.

    Example:
        >>> g = profile("matern52")
        >>> float(jax.grad(jax.grad(g))(0.0))  # g''(0) = 25 / 12
        2.0833333333333335
    """
    key = str(kernel_name).lower().replace("_", "")
    if key == "matern52":
        return _matern52
    if key in ("rbf", "squaredexponential"):
        return _squared_exponential
    if key in _ROUGH:
        raise ValueError(
            f"kernel {kernel_name!r} (Matérn-{_ROUGH[key]}) gives sample paths that "
            "are not twice differentiable, so a maximiser has no gradient or Hessian "
            f"to condition on; use one of {SMOOTH_KERNELS}"
        )
    raise ValueError(
        f"derivative covariances need a stationary kernel with closed-form "
        f"derivatives, one of {SMOOTH_KERNELS}; got kernel_name={kernel_name!r}"
    )


def kernel_function(
    kernel_name: str, lengthscale: jax.Array, outputscale: jax.Array
) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """``k(a, b) = outputscale * g(|(a - b) / lengthscale|^2)`` for single points.

    Equals ``models/gp.py``'s kernel for the same hyperparameters, but can be
    differentiated four times at ``a = b``.

    Args:
        kernel_name: see :func:`profile`.
        lengthscale: ARD lengthscales, shape (d,).
        outputscale: signal variance, scalar.

    Returns:
        A function of two points of shape (d,) returning a scalar.

    Example:
        >>> k = kernel_function("rbf", jnp.ones(2), 2.0)
        >>> float(k(jnp.zeros(2), jnp.zeros(2)))
        2.0
    """
    g = profile(kernel_name)
    lengthscale = jnp.asarray(lengthscale)

    def k(a, b):
        return outputscale * g(jnp.sum(((a - b) / lengthscale) ** 2))

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
        >>> k = kernel_function("rbf", jnp.ones(1), 1.0)
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
        >>> k = kernel_function("rbf", jnp.ones(1), 1.0)
        >>> derivative_covariance(k, jnp.zeros(1), jnp.zeros(1)) + 0.0  # no -0.0
        Array([[ 1.,  0., -1.],
               [ 0.,  1.,  0.],
               [-1.,  0.,  3.]], dtype=float64)
    """
    return functionals(lambda a_: cross_covariance(k, a_, b), a)
