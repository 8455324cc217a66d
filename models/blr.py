"""Bayesian linear regression on fixed features, with its marginal likelihood.

The last layer of DNGO (:mod:`ppbo.models.dngo`) and ABLR (:mod:`ppbo.models.ablr`):
weights ``w`` of features ``phi(x)`` (k,) with prior ``w ~ N(0, alpha^-1 I)`` and
observations ``y = Phi w + eps``, ``eps ~ N(0, beta^-1 I)``. Bishop (2006), §3.3 and
§3.5: the posterior of the weights is ``N(m_N, S_N)`` with

.. math::
    A = \\alpha I + \\beta \\Phi^T \\Phi, \\quad S_N = A^{-1}, \\quad
    m_N = \\beta A^{-1} \\Phi^T y \\qquad \\text{(eqs. 3.53-3.54, 3.81)}

the latent predictive at ``x`` is ``N(phi(x)^T m_N, phi(x)^T S_N phi(x))`` (eq. 3.59
less the noise term ``1 / beta``), and the log marginal likelihood is

.. math::
    \\log p(y \\mid \\alpha, \\beta) = \\frac k2 \\log\\alpha + \\frac N2 \\log\\beta
    - E(m_N) - \\frac12 \\log|A| - \\frac N2 \\log 2\\pi, \\quad
    E(m_N) = \\frac\\beta2 \\lVert y - \\Phi m_N\\rVert^2
    + \\frac\\alpha2 m_N^T m_N \\qquad \\text{(eqs. 3.79, 3.86)}

Padded rows (``mask`` False) are removed by zeroing their features and targets and
counting only ``N = sum(mask)`` observations, so every result equals the unpadded
one. :func:`log_marginal_likelihood` is differentiable in the features (ABLR
trains its network through it); :func:`maximize_evidence` sets ``alpha`` and
``beta`` by type-II maximum likelihood through the eigenvalues of ``Phi^T Phi``
(Bishop 2006, eq. 3.87), as DNGO does for its last layer (Snoek et al. 2015, §3);
:func:`sample_precisions` instead integrates them out by slice sampling their
posterior, evidence times :func:`log_precision_prior`, as Snoek et al. (2015, §3)
do.

References:
    Bishop, C. M. (2006). Pattern Recognition and Machine Learning, §3.3, §3.5.
    Snoek, J. et al. (2015). Scalable Bayesian Optimization Using Deep Neural
    Networks. ICML.
    Neal, R. M. (2003). Slice sampling. The Annals of Statistics 31(3).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

__all__ = [
    "WeightPosterior",
    "weight_posterior",
    "predict",
    "log_marginal_likelihood",
    "maximize_evidence",
    "log_precision_prior",
    "sample_precisions",
    "NOISE_HORSESHOE_SCALE",
    "LOG_ALPHA_BOUNDS",
    "LOG_BETA_BOUNDS",
]

#: Box for ``log alpha`` in :func:`maximize_evidence` (weight precision).
LOG_ALPHA_BOUNDS = (-10.0, 10.0)
#: Box for ``log beta`` in :func:`maximize_evidence`: the noise variance ``1 / beta``
#: of standardised outputs stays in ``[1e-6, e^4]``, as the GP's noise keeps a
#: jitter of 1e-6 (features that interpolate the data would send beta to infinity).
LOG_BETA_BOUNDS = (-4.0, 6.0 * math.log(10.0))
#: Scale of the horseshoe prior on the noise variance ``1 / beta`` in
#: :func:`log_precision_prior` (Snoek, Larochelle and Adams 2012 put this prior,
#: scale 0.1, on a GP's noise of standardised outputs).
NOISE_HORSESHOE_SCALE = 0.1


class WeightPosterior(NamedTuple):
    """The Gaussian posterior ``N(m_N, A^-1)`` of the weights.

    Attributes:
        mean: ``m_N``, shape (k,).
        chol_inv: ``L^-1`` with ``A = L L^T`` (lower), shape (k, k), so that
            ``S_N = chol_inv^T chol_inv``.
    """

    mean: jax.Array
    chol_inv: jax.Array


def _masked(Phi: jax.Array, y: jax.Array, mask: jax.Array):
    Phi = jnp.where(mask[:, None], Phi, 0.0)
    y = jnp.where(mask, y, 0.0)
    return Phi, y, jnp.sum(mask).astype(Phi.dtype)


def _spectrum(Phi: jax.Array, y: jax.Array, mask: jax.Array):
    # What the evidence needs of the masked data, once: the eigenvalues of
    # Phi^T Phi, the projection of Phi^T y on its eigenvectors, y^T y, the number
    # of rows and of features.
    Phi, y, n = _masked(Phi, y, mask)
    eig, U = jnp.linalg.eigh(Phi.T @ Phi)
    return jnp.maximum(eig, 0.0), U.T @ (Phi.T @ y), y @ y, n, Phi.shape[1]


def _factor(Phi, y, alpha, beta):
    k = Phi.shape[1]
    A = alpha * jnp.eye(k, dtype=Phi.dtype) + beta * (Phi.T @ Phi)
    L = jnp.linalg.cholesky(A)
    a = solve_triangular(L, beta * (Phi.T @ y), lower=True)
    mean = solve_triangular(L.T, a, lower=False)
    return L, mean


def weight_posterior(
    Phi: jax.Array,
    y: jax.Array,
    mask: jax.Array,
    alpha: jax.Array | float,
    beta: jax.Array | float,
) -> WeightPosterior:
    """Posterior of the weights given the precisions (Bishop 2006, eqs. 3.53-3.54).

    Args:
        Phi: features of the observations, shape (n, k).
        y: targets, shape (n,).
        mask: bool (n,); False rows are ignored.
        alpha: prior precision of the weights, scalar > 0.
        beta: noise precision, scalar > 0.

    Returns:
        A :class:`WeightPosterior`.

    Example:
        >>> import jax.numpy as jnp
        >>> Phi = jnp.ones((2, 1)); mask = jnp.array([True, False])
        >>> post = weight_posterior(Phi, jnp.array([2.0, 9.0]), mask, 1.0, 1.0)
        >>> round(float(post.mean[0]), 12), round(float(post.chol_inv[0, 0]) ** 2, 12)
        (1.0, 0.5)
    """
    Phi, y, _ = _masked(Phi, y, mask)
    L, mean = _factor(Phi, y, alpha, beta)
    eye = jnp.eye(L.shape[0], dtype=L.dtype)
    return WeightPosterior(mean=mean, chol_inv=solve_triangular(L, eye, lower=True))


def predict(posterior: WeightPosterior, Phi: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Latent predictive mean and variance at features ``Phi`` (m, k).

    ``phi^T m_N`` and ``phi^T S_N phi`` (Bishop 2006, eq. 3.59 without the noise
    variance ``1 / beta``).

    Example:
        >>> import jax.numpy as jnp
        >>> post = WeightPosterior(jnp.array([1.0]), jnp.array([[0.5]]))
        >>> [a.tolist() for a in predict(post, jnp.array([[2.0]]))]
        [[2.0], [1.0]]
    """
    V = Phi @ posterior.chol_inv.T
    return Phi @ posterior.mean, jnp.sum(V**2, axis=1)


def log_marginal_likelihood(
    Phi: jax.Array,
    y: jax.Array,
    mask: jax.Array,
    alpha: jax.Array | float,
    beta: jax.Array | float,
) -> jax.Array:
    """``log p(y | alpha, beta)`` of the masked rows (Bishop 2006, eq. 3.86).

    Differentiable in ``Phi``, ``alpha`` and ``beta`` (one Cholesky factor of
    the k x k matrix ``A``).

    Example:
        >>> import jax.numpy as jnp  # y ~ N(0, 1/alpha + 1/beta) = N(0, 2)
        >>> value = log_marginal_likelihood(
        ...     jnp.ones((1, 1)), jnp.zeros(1), jnp.array([True]), 1.0, 1.0)
        >>> round(float(value), 6) == round(-0.5 * jnp.log(4 * jnp.pi).item(), 6)
        True
    """
    Phi, y, n = _masked(Phi, y, mask)
    k = Phi.shape[1]
    L, mean = _factor(Phi, y, alpha, beta)
    energy = 0.5 * beta * jnp.sum((y - Phi @ mean) ** 2) + 0.5 * alpha * mean @ mean
    return (
        0.5 * k * jnp.log(alpha)
        + 0.5 * n * jnp.log(beta)
        - energy
        - jnp.sum(jnp.log(jnp.diag(L)))
        - 0.5 * n * math.log(2.0 * math.pi)
    )


def _spectral_evidence(eig, b, yy, n, k, log_alpha, log_beta):
    # eq. 3.86 in the eigenbasis of Phi^T Phi = U diag(eig) U^T, b = U^T Phi^T y:
    # A has eigenvalues alpha + beta eig and m_N = U (beta b / (alpha + beta eig)).
    alpha, beta = jnp.exp(log_alpha), jnp.exp(log_beta)
    lam = alpha + beta * eig
    m = beta * b / lam
    residual = yy - 2.0 * m @ b + jnp.sum(eig * m**2)
    energy = 0.5 * beta * residual + 0.5 * alpha * m @ m
    return (
        0.5 * k * log_alpha
        + 0.5 * n * log_beta
        - energy
        - 0.5 * jnp.sum(jnp.log(lam))
        - 0.5 * n * math.log(2.0 * math.pi)
    )


def maximize_evidence(
    Phi: jax.Array,
    y: jax.Array,
    mask: jax.Array,
    *,
    grid: int = 48,
    iterations: int = 50,
) -> tuple[jax.Array, jax.Array]:
    """Type-II maximum-likelihood precisions ``(alpha, beta)`` in the boxes above.

    The evidence (eq. 3.86) is evaluated in closed form from the eigenvalues of
    ``Phi^T Phi`` (eq. 3.87) on a ``grid x grid`` log-spaced grid over
    :data:`LOG_ALPHA_BOUNDS` x :data:`LOG_BETA_BOUNDS`; from the best grid point
    the re-estimation equations ``gamma = sum beta l / (alpha + beta l)``,
    ``alpha = gamma / m_N^T m_N``, ``1 / beta = |y - Phi m_N|^2 / (N - gamma)``
    (eqs. 3.91-3.95; MacKay 1992) run ``iterations`` times, clipped to the box;
    the better of the two points is returned. Fixed work, so it compiles once.

    Args:
        Phi: features (n, k); y: targets (n,); mask: bool (n,).
        grid: grid points per axis.
        iterations: fixed-point iterations after the grid search.

    Returns:
        ``(alpha, beta)``, scalars.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jnp.linspace(0, 1, 40)
        >>> Phi = jnp.stack([jnp.ones_like(x), x], 1)
        >>> noise = 0.1 * jax.random.normal(jax.random.key(0), (40,))
        >>> alpha, beta = maximize_evidence(Phi, 1.0 + 2.0 * x + noise, x < 2)
        >>> bool(30.0 < beta < 300.0)  # the true noise precision is 100
        True
    """
    eig, b, yy, n, k = _spectrum(Phi, y, mask)
    evidence = jax.vmap(lambda la, lb: _spectral_evidence(eig, b, yy, n, k, la, lb))
    la_grid = jnp.linspace(*LOG_ALPHA_BOUNDS, grid)
    lb_grid = jnp.linspace(*LOG_BETA_BOUNDS, grid)
    LA, LB = (a.ravel() for a in jnp.meshgrid(la_grid, lb_grid, indexing="ij"))
    values = evidence(LA, LB)
    best = jnp.argmax(values)
    start = (LA[best], LB[best])

    def step(_, state):
        log_alpha, log_beta = state
        alpha, beta = jnp.exp(log_alpha), jnp.exp(log_beta)
        lam = alpha + beta * eig
        m = beta * b / lam
        gamma = jnp.sum(beta * eig / lam)
        residual = jnp.maximum(yy - 2.0 * m @ b + jnp.sum(eig * m**2), 0.0)
        log_alpha = jnp.log(jnp.maximum(gamma, 1e-300)) - jnp.log(m @ m + 1e-300)
        log_beta = jnp.log(jnp.maximum(n - gamma, 1e-300)) - jnp.log(residual + 1e-300)
        return (
            jnp.clip(log_alpha, *LOG_ALPHA_BOUNDS),
            jnp.clip(log_beta, *LOG_BETA_BOUNDS),
        )

    refined = jax.lax.fori_loop(0, iterations, step, start)
    better = evidence(refined[0][None], refined[1][None])[0] > values[best]
    log_alpha = jnp.where(better, refined[0], start[0])
    log_beta = jnp.where(better, refined[1], start[1])
    return jnp.exp(log_alpha), jnp.exp(log_beta)


def log_precision_prior(log_alpha: jax.Array, log_beta: jax.Array) -> jax.Array:
    """Log prior density of ``(log alpha, log beta)``, up to a constant.

    Snoek et al. (2015, §3) integrate the last layer's precisions out by slice
    sampling but print no prior; ppbo uses a top-hat prior on ``log alpha`` over
    :data:`LOG_ALPHA_BOUNDS` and, for the noise variance ``v = 1 / beta``, the
    horseshoe prior of scale ``s =`` :data:`NOISE_HORSESHOE_SCALE` that Snoek,
    Larochelle and Adams (2012) place on a GP's noise, restricted to
    :data:`LOG_BETA_BOUNDS`. The horseshoe density has no closed form; its
    approximation ``p(v) ∝ log(1 + 3 s^2 / v^2)`` lies between the bounds of
    Carvalho, Polson and Scott (2010, Theorem 1). With the Jacobian of
    ``v = e^{-log beta}``:

    .. math::
        \\log p(\\log\\alpha, \\log\\beta) = \\log\\log(1 + 3 s^2 \\beta^2)
        - \\log\\beta + \\text{const} \\quad \\text{inside the box,}
        \\; -\\infty \\text{ outside.}

    Args:
        log_alpha: log weight precision, scalar.
        log_beta: log noise precision, scalar.

    Returns:
        The log density (scalar); ``-inf`` outside the box.

    References:
        Snoek, J. et al. (2015). Scalable Bayesian Optimization Using Deep Neural
        Networks. ICML, §3.
        Snoek, J., Larochelle, H. and Adams, R. P. (2012). Practical Bayesian
        Optimization of Machine Learning Algorithms. NeurIPS.
        Carvalho, C. M., Polson, N. G. and Scott, J. G. (2010). The horseshoe
        estimator for sparse signals. Biometrika 97(2), Theorem 1.

    Example:
        >>> import jax.numpy as jnp
        >>> bool(jnp.isneginf(log_precision_prior(jnp.array(11.0), jnp.array(0.0))))
        True
        >>> float(log_precision_prior(jnp.array(0.0), jnp.array(0.0)))  # log log 1.03
        -3.52...
    """
    scale2 = NOISE_HORSESHOE_SCALE**2
    value = jnp.log(jnp.log1p(3.0 * scale2 * jnp.exp(2.0 * log_beta))) - log_beta
    inside = (
        (log_alpha >= LOG_ALPHA_BOUNDS[0])
        & (log_alpha <= LOG_ALPHA_BOUNDS[1])
        & (log_beta >= LOG_BETA_BOUNDS[0])
        & (log_beta <= LOG_BETA_BOUNDS[1])
    )
    return jnp.where(inside, value, -jnp.inf)


def sample_precisions(
    key: jax.Array,
    Phi: jax.Array,
    y: jax.Array,
    mask: jax.Array,
    *,
    num_warmup: int = 100,
    num_samples: int = 16,
    thinning: int = 10,
    num_chains: int = 1,
) -> tuple[jax.Array, jax.Array]:
    """Slice-sample ``(alpha, beta)`` from evidence times prior (Snoek et al. 2015).

    The posterior ``p(log alpha, log beta | y) ∝ p(y | alpha, beta) p(log alpha,
    log beta)`` (eq. 3.86 times :func:`log_precision_prior`) is sampled with
    ppbo's univariate slice sampler (:class:`ppbo.inference.slice.SliceKernel`,
    Neal 2003, stepping out and shrinkage, widths adapted in warm-up). Each
    evaluation costs O(k) after one eigendecomposition of ``Phi^T Phi`` (eq. 3.87),
    so the chains are cheap next to the network. Chains start at the type-II
    maximum (:func:`maximize_evidence`), in the posterior's bulk. Fixed work under
    ``lax.scan`` and ``vmap`` over chains, so it compiles once per shape.

    Args:
        key: PRNG key.
        Phi: features (n, k); y: targets (n,); mask: bool (n,).
        num_warmup: sweeps per chain that adapt the bracket widths (discarded).
        num_samples: kept draws per chain.
        thinning: sweeps per kept draw after warm-up.
        num_chains: independent chains (vmapped).

    Returns:
        ``(alpha, beta)``, each of shape (num_chains * num_samples,), chain-major.

    Raises:
        ValueError: for a non-positive count.

    References:
        Snoek, J. et al. (2015). Scalable Bayesian Optimization Using Deep Neural
        Networks. ICML, §3.
        Bishop, C. M. (2006). Pattern Recognition and Machine Learning, eq. 3.86.
        Neal, R. M. (2003). Slice sampling. The Annals of Statistics 31(3).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jnp.linspace(0, 1, 40)
        >>> Phi = jnp.stack([jnp.ones_like(x), x], 1)
        >>> noise = 0.1 * jax.random.normal(jax.random.key(0), (40,))
        >>> alpha, beta = sample_precisions(
        ...     jax.random.key(1), Phi, 1.0 + 2.0 * x + noise, x < 2, num_samples=8)
        >>> alpha.shape, bool(jnp.all((20.0 < beta) & (beta < 500.0)))
        ((8,), True)
    """
    from ppbo.inference.slice import SliceKernel

    for name, value in (
        ("num_warmup", num_warmup),
        ("num_samples", num_samples),
        ("thinning", thinning),
        ("num_chains", num_chains),
    ):
        if int(value) < 1:
            raise ValueError(f"{name} must be >= 1, got {value!r}")
    alpha0, beta0 = maximize_evidence(Phi, y, mask)
    eig, b, yy, n, k = _spectrum(Phi, y, mask)

    def potential(z):
        log_alpha, log_beta = z[0], z[1]
        log_post = _spectral_evidence(
            eig, b, yy, n, k, log_alpha, log_beta
        ) + log_precision_prior(log_alpha, log_beta)
        return -log_post

    start = jnp.stack([jnp.log(alpha0), jnp.log(beta0)])
    kernel = SliceKernel(potential_fn=potential, width=1.0)

    def chain(key):
        state = kernel.init(key, int(num_warmup), init_params=start)

        def sweep(state, _):
            state = kernel.sample(state, (), None)
            return state, state.z

        state, _ = jax.lax.scan(sweep, state, None, int(num_warmup))
        _, draws = jax.lax.scan(sweep, state, None, int(num_samples) * int(thinning))
        return draws[int(thinning) - 1 :: int(thinning)]

    draws = jax.vmap(chain)(jax.random.split(key, int(num_chains))).reshape(-1, 2)
    return jnp.exp(draws[:, 0]), jnp.exp(draws[:, 1])
