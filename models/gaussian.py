"""The Gaussian marginal likelihood of GP models, masked for padded data.

:class:`MaskedMultivariateNormal` is the observation distribution of the GP models:
``y ~ N(loc, K)`` over the rows where ``mask`` is True. Padded rows get unit
variance, zero covariance and zero residual, and their constant contribution is
removed, so the log density equals the unpadded one exactly. The gradient with
respect to ``K`` uses the closed form of Rasmussen and Williams (2006), eq. (5.9):
``d log p / dK = (alpha alpha^T - K^-1) / 2`` with ``alpha = K^-1 (y - loc)``, one
Cholesky factorisation for value and gradient.

The gradient needs the whole inverse ``K^-1`` for its trace terms. XLA has no
operation for the inverse of a Cholesky factor, and two triangular solves against
the identity cost six Cholesky factorisations (``2 n^3`` flops against ``n^3 / 3``).
On a CPU, from :data:`LAPACK_MIN_SIZE` rows up, the value and gradient therefore
call LAPACK's ``dpotrf``, ``dpotrs`` and ``dpotri`` (SciPy's LAPACK, the one XLA's
own Cholesky calls) on the host: ``dpotri`` forms ``K^-1`` from the factor in
``2 n^3 / 3`` flops, so value and gradient cost three factorisations' flops, the
floor for an exact gradient. That path returns the gradient with respect to the
symmetric ``K`` folded onto its upper triangle (off-diagonal entries doubled, the
lower triangle zero): the same derivative along every symmetric direction, so the
same hyperparameter gradients, without copying ``K^-1`` onto both triangles.
Smaller matrices, and every other backend, stay in XLA, where copying ``K^-1``
back from the host and the call itself would dominate or the data would leave the
device. Measured on two cores (benchmarks/fit_speed.py), a whole log-posterior
gradient of the GP takes 2.1 ms through LAPACK against 2.6 ms in XLA at 224 rows,
1.4 against 1.2 ms at 152, and 40% of XLA's time at 512 and 1024 rows.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax.scipy.linalg import solve_triangular
from numpyro.distributions import constraints
from scipy.linalg import lapack

__all__ = [
    "MaskedMultivariateNormal",
    "masked_covariance",
    "gaussian_log_density",
    "LAPACK_MIN_SIZE",
]

#: Rows from which the value and gradient of :func:`gaussian_log_density` call
#: LAPACK's ``dpotri`` on a CPU (see the module docstring); ``None`` turns the
#: host path off. Read when a function is traced, so set it before compiling.
LAPACK_MIN_SIZE: int | None = 200


def masked_covariance(K: jax.Array, mask: jax.Array) -> jax.Array:
    """Replace padded rows and columns of ``K`` by those of the identity.

    Example:
        >>> import jax.numpy as jnp
        >>> masked_covariance(2 * jnp.ones((2, 2)), jnp.array([True, False]))
        Array([[2., 0.],
               [0., 1.]], dtype=float64)
    """
    both = mask[:, None] & mask[None, :]
    return jnp.where(both, K, jnp.eye(K.shape[-1], dtype=K.dtype))


def _log_density(K, r, num):
    L = jnp.linalg.cholesky(K)
    a = solve_triangular(L, r, lower=True)
    value = (
        -0.5 * a @ a - jnp.sum(jnp.log(jnp.diag(L))) - 0.5 * num * math.log(2 * math.pi)
    )
    return value, L


@jax.custom_vjp
def gaussian_log_density(K: jax.Array, r: jax.Array, num: jax.Array) -> jax.Array:
    """``log N(r | 0, K)`` with padded entries already neutralised, counting ``num``.

    Args:
        K: covariance (n, n), padded rows/columns set to the identity.
        r: residual (n,), zero in padded entries.
        num: number of real entries (the 2 pi constant is counted for these only).

    Returns:
        The log density (scalar); NaN if ``K`` is not positive definite.

    Example:
        >>> import jax.numpy as jnp
        >>> float(gaussian_log_density(jnp.eye(1), jnp.zeros(1), jnp.array(1.0)))
        -0.9189385332046727
    """
    return _log_density(K, r, num)[0]


def _lapack_value_and_inverse(K, r, num):
    # float64 host arrays in, (value, alpha, K^-1) out; NaN when K is not
    # positive definite, as XLA's Cholesky gives, so samplers treat it alike.
    # K is symmetric, so its transpose is the same matrix in Fortran order:
    # LAPACK factors a plain copy of it, and the transpose of dpotri's
    # Fortran-order result is C-ordered with K^-1 in its upper triangle. The
    # strictly lower triangle is left as it is (finite, not K^-1): copying the
    # upper triangle onto it costs half as much as dpotri at a thousand rows,
    # and the gradient needs only one triangle (see _bwd).
    n = K.shape[0]
    L, info = lapack.dpotrf(K.T, lower=1, clean=0)
    if info != 0:
        return np.float64(np.nan), np.full(n, np.nan), np.full((n, n), np.nan)
    alpha, _ = lapack.dpotrs(L, r, lower=1)
    log_det = 2.0 * np.sum(np.log(np.diagonal(L)))
    K_inv, _ = lapack.dpotri(L, lower=1, overwrite_c=1)
    value = -0.5 * (r @ alpha + log_det + num * math.log(2 * math.pi))
    return np.float64(value), alpha, K_inv.T


def _host_fwd(K, r, num):
    n = K.shape[-1]
    shapes = (
        jax.ShapeDtypeStruct((), K.dtype),
        jax.ShapeDtypeStruct((n,), K.dtype),
        jax.ShapeDtypeStruct((n, n), K.dtype),
    )

    def host(K, r, num):
        return _lapack_value_and_inverse(
            np.asarray(K, np.float64), np.asarray(r, np.float64), float(num)
        )

    value, alpha, K_inv = jax.pure_callback(
        host, shapes, K, r, num, vmap_method="sequential"
    )
    return value, (alpha, K_inv)


def _on_host(K) -> bool:
    return (
        LAPACK_MIN_SIZE is not None
        and K.shape[-1] >= LAPACK_MIN_SIZE
        and K.dtype == jnp.float64
        and jax.default_backend() == "cpu"
    )


def _fwd(K, r, num):
    if _on_host(K):
        return _host_fwd(K, r, num)
    L = jnp.linalg.cholesky(K)
    # One chain of two LAPACK triangular solves with the residual and the identity
    # stacked as right-hand sides, [a, L^-1] = L \ [r, I] and [alpha, K^-1] =
    # L^T \ [a, L^-1], rather than independent solves: jaxlib's batched solve
    # waits on sub-tasks in the thread pool it runs on, so two solves running at
    # once on a two-thread pool deadlock. (Two solves rather than L_inv.T @ L_inv:
    # XLA's threaded matmul is slower than the solve at these sizes.)
    eye = jnp.eye(L.shape[0], dtype=L.dtype)
    B = solve_triangular(L, jnp.concatenate([r[:, None], eye], axis=1), lower=True)
    C = solve_triangular(L.T, B, lower=False)
    a, alpha, K_inv = B[:, 0], C[:, 0], C[:, 1:]
    value = (
        -0.5 * a @ a - jnp.sum(jnp.log(jnp.diag(L))) - 0.5 * num * math.log(2 * math.pi)
    )
    return value, (alpha, K_inv)


def _upper_weights(n: int, dtype) -> jax.Array:
    # 1 above the diagonal, 1/2 on it, 0 below: the cotangent of a symmetric K
    # from one triangle of a symmetric G, sum_ab G_ab dK_ab = sum_ab W_ab G_ab dK_ab
    # with W_ab = 2 [a < b] + [a == b] for every symmetric dK; halved here.
    i = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
    j = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
    return jnp.where(i < j, 1.0, jnp.where(i == j, 0.5, 0.0)).astype(dtype)


def _bwd(residuals, g):
    alpha, K_inv = residuals
    if _on_host(K_inv):
        # K^-1 is valid in its upper triangle only: the cotangent is the
        # gradient (alpha alpha^T - K^-1) / 2 folded onto that triangle, equal to
        # it along every symmetric direction (K is a covariance). Multiplying
        # rather than selecting keeps a NaN K^-1 NaN everywhere.
        weights = _upper_weights(K_inv.shape[-1], K_inv.dtype)
        return g * weights * (jnp.outer(alpha, alpha) - K_inv), -g * alpha, None
    grad_K = 0.5 * g * (jnp.outer(alpha, alpha) - K_inv)
    return grad_K, -g * alpha, None


gaussian_log_density.defvjp(_fwd, _bwd)


class MaskedMultivariateNormal(dist.Distribution):
    """Multivariate normal over the unmasked entries of a padded vector.

    Args:
        loc: mean vector (n,).
        covariance_matrix: covariance (n, n); only unmasked entries matter.
        mask: boolean (n,); False marks padding.

    Example:
        >>> import jax.numpy as jnp
        >>> mask = jnp.array([True, False])
        >>> d = MaskedMultivariateNormal(jnp.zeros(2), jnp.eye(2), mask)
        >>> float(d.log_prob(jnp.array([0.0, 123.0])))
        -0.9189385332046727
    """

    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
    }
    support = constraints.real_vector
    reparametrized_params = ["loc", "covariance_matrix"]
    pytree_data_fields = ("loc", "covariance_matrix", "obs_mask")

    def __init__(self, loc, covariance_matrix, mask, *, validate_args=None):
        self.loc = loc
        self.obs_mask = mask
        self.covariance_matrix = masked_covariance(covariance_matrix, mask)
        super().__init__(
            batch_shape=(), event_shape=jnp.shape(loc), validate_args=validate_args
        )

    def sample(self, key, sample_shape=()):
        L = jnp.linalg.cholesky(self.covariance_matrix)
        eps = jax.random.normal(key, sample_shape + self.event_shape)
        draw = self.loc + eps @ L.T
        return jnp.where(self.obs_mask, draw, 0.0)

    def log_prob(self, value):
        r = jnp.where(self.obs_mask, value - self.loc, 0.0)
        num = jnp.sum(self.obs_mask).astype(r.dtype)
        return gaussian_log_density(self.covariance_matrix, r, num)
