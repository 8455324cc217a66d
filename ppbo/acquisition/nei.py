"""Noisy expected improvement: EI integrated over the unknown incumbent.

With noisy observations the best value seen so far is itself uncertain. Letham,
Karrer, Ottoni and Bakshy (2019, "Constrained Bayesian optimization with noisy
experiments", §4, eq. (9)) integrate EI over the posterior of the latent values
``f_n = f(X_n)`` at the observed inputs:

.. math::
    \\mathrm{NEI}(x) = \\int \\mathrm{EI}\\big(x \\mid f_n\\big)\\,
        p(f_n \\mid \\mathcal{D})\\, df_n ,

where ``EI(x | f_n)`` is the closed-form EI of the GP conditioned on the
noiseless values ``f_n`` with incumbent ``max f_n``. They average it over
quasi-random draws of ``f_n``; this module does the same: the standard normal
draws are a scrambled Sobol sequence (Owen 1998) mapped through the normal quantile,
fixed once per evaluation (common random numbers, so the value is smooth in ``x``).
Conditioned on a draw ``f_n = mu_n + L z_j`` (``L`` the Cholesky factor of the posterior
covariance at ``X_n``), ``f(x)`` is Gaussian with

.. math::
    m_j(x) = \\mu(x) + a(x)^\\top z_j, \\qquad
    s^2(x) = \\sigma^2(x) - \\lVert a(x) \\rVert^2, \\qquad
    a(x) = L^{-1} \\Sigma_n(X_n, x),

so each draw's EI is the closed form with incumbent ``b_j = max f_n``, and the
average is taken in log space with log-EI's ``log_h`` (Ament et al. 2023, eq.
(9); their qLogNEI is the Monte Carlo counterpart over ``f(x)`` as well):

.. math:: \\log \\mathrm{NEI}(x) = \\log s(x)
    + \\operatorname{logmeanexp}_j \\log h\\big((m_j(x) - b_j) / s(x)\\big).

Only target rows enter ``f_n`` (padding and source tasks are excluded, as for
:func:`~ppbo.acquisition.base.best_observed_mean`), and the acquisition needs only
the surrogate's joint predictive covariance (``predict_joint``), so it works for
every surrogate that declares :attr:`ppbo.Capability.PREDICT_JOINT`. Averaged over
hyperparameter samples with log-mean-exp like log-EI; a campaign averages it over
at most 16 evenly spaced samples, since each evaluation holds the joint
covariance of the observed inputs and the candidates for every sample (a MAP
posterior's one sample is not repeated, as PES's is: the draws of ``f_n`` are
per evaluation, so a repeat would only multiply the work).

Options: ``key`` (required; the scrambling of the draws of ``f_n``),
``num_draws=512`` (static; BoTorch's default for qLogNEI), ``min_var`` (as for
log-EI).

The quasi-random draws matter: with 128 independent draws the Monte Carlo error
of ``log NEI`` was about 0.1 on noise-free Branin, as large as the differences
between the basins the optimiser chose among, so the draws rather than the model
picked the next point (``benchmarks/README.md``, "Noisy EI's draws").

References:
    Owen (1998), "Scrambling Sobol' and Niederreiter-Xing points", Journal of
    Complexity 14(4).
    Letham, Karrer, Ottoni and Bakshy (2019), "Constrained Bayesian optimization
    with noisy experiments", Bayesian Analysis 14(2), §4, eq. (9).
    Ament, Daulton, Eriksson, Balandat and Bakshy (2023), "Unexpected improvements
    to expected improvement for Bayesian optimization", eq. (9) and §4 (qLogNEI).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular
from jax.scipy.special import logsumexp
from scipy.special import ndtri
from scipy.stats import qmc

from ppbo.acquisition.analytic import MIN_VARIANCE, log_h
from ppbo.acquisition.base import (
    Acquisition,
    Sample,
    best_observed_input,
    prepare_incumbent_inputs,
)
from ppbo.linalg import cholesky
from ppbo.surrogate import Capability, Posterior

__all__ = ["log_nei", "log_jei", "NUM_DRAWS", "sobol_normals"]

#: Default number of draws of the latent values at the observed inputs (a power
#: of two, as a Sobol sequence is balanced at powers of two).
NUM_DRAWS = 512
# Relative jitter on the posterior covariance at the observed inputs, whose
# eigenvalues are at most the noise variance: it dominates the round-off of
# K - V^T V (about eps * outputscale * n) without changing the draws measurably.
_JITTER = 1e-6


def _observed_factor(sample: Sample) -> tuple[jax.Array, jax.Array]:
    """Posterior mean at the observed inputs and the Cholesky factor of their
    covariance, with non-target rows replaced by those of the identity."""
    data = sample.data
    mean, cov = sample.predict_joint(data.X)
    keep = data.target_mask
    both = keep[:, None] & keep[None, :]
    eye = jnp.eye(cov.shape[0], dtype=cov.dtype)
    cov = jnp.where(both, cov, 0.0)
    scale = jnp.sum(jnp.where(keep, jnp.diag(cov), 0.0)) / jnp.maximum(jnp.sum(keep), 1)
    scale = jnp.where(scale > 0, scale, 1.0)
    cov = cov + jnp.where(keep, _JITTER * scale, 1.0) * eye
    return jnp.where(keep, mean, 0.0), cholesky(cov)


def sobol_normals(key: jax.Array, num: int, dim: int) -> np.ndarray:
    """``num`` quasi-random standard normal vectors of length ``dim`` (num, dim):
    a scrambled Sobol sequence (Owen 1998; scipy's ``qmc.Sobol``) seeded by
    ``key``, mapped through the normal quantile, as BoTorch's
    ``SobolQMCNormalSampler`` draws its base samples.

    Example:
        >>> import jax
        >>> sobol_normals(jax.random.key(0), 8, 3).shape
        (8, 3)
    """
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())
    if dim > qmc.Sobol.MAXDIM:  # beyond scipy's direction numbers: plain draws
        return rng.standard_normal((num, dim))
    u = qmc.Sobol(dim, scramble=True, seed=rng).random(num)
    tiny = np.finfo(np.float64).eps
    return ndtri(np.clip(u, tiny, 1.0 - tiny))


@jax.jit
def _prepare(posterior: Posterior, Z: jax.Array):
    data = posterior.data
    n = data.X.shape[0]

    def one(params, cache, Z):
        sample = Sample(params, cache, data, posterior.surrogate)
        mean, L = _observed_factor(sample)
        L_inv = solve_triangular(L, jnp.eye(n, dtype=L.dtype), lower=True)
        draws = mean[None, :] + Z @ L.T  # f_n = mu_n + L z_j
        best = jnp.max(jnp.where(data.target_mask[None, :], draws, -jnp.inf), axis=1)
        return L_inv, Z, best

    return jax.vmap(one)(posterior.samples, posterior.cache, Z)


def _prepare_draws(key: Any, posterior: Posterior, **options: Any):
    """``prepare`` of :data:`log_nei`: per sample the inverse factor ``L^{-1}``
    (n, n), the standard normal draws ``z_j`` (J, n) and the draws' incumbents
    ``b_j = max f_n`` (J,)."""
    num_draws = int(options.get("num_draws", NUM_DRAWS))
    if num_draws < 1:
        raise ValueError(f"num_draws must be a positive integer, got {num_draws}")
    n = posterior.data.X.shape[0]
    keys = jax.random.split(key, posterior.num_samples)
    Z = np.stack([sobol_normals(k, num_draws, n) for k in keys])
    return _prepare(posterior, jnp.asarray(Z, dtype=posterior.data.X.dtype))


def _log_noisy_expected_improvement(
    sample: Sample,
    X: jax.Array,
    *,
    num_draws: int = NUM_DRAWS,
    min_var: Any = MIN_VARIANCE,
) -> jax.Array:
    """``log NEI(x)`` of Letham et al. (2019, eq. (9)) for one sample, (m,).

    Example:
        >>> import jax
        >>> from ppbo.acquisition.base import evaluate
        >>> evaluate(log_nei, posterior, np.array([[0.5, 0.5]]),
        ...          key=jax.random.key(0)).shape
        (1,)
    """
    del num_draws  # fixed by prepare
    L_inv, Z, best = sample.aux
    data = sample.data
    n = data.X.shape[0]
    mean, cov = sample.predict_joint(jnp.concatenate([data.X, X], axis=0))
    cross = jnp.where(data.target_mask[:, None], cov[:n, n:], 0.0)
    mu = mean[n:]
    var = jnp.diagonal(cov[n:, n:])
    a = L_inv @ cross  # (n, m)
    sigma = jnp.sqrt(jnp.maximum(var - jnp.sum(a**2, axis=0), min_var))
    z = (mu[None, :] + Z @ a - best[:, None]) / sigma[None, :]
    return logsumexp(log_h(z), axis=0) - math.log(best.shape[0]) + jnp.log(sigma)


#: Noisy expected improvement (Letham et al. 2019) in log space; options
#: ``key`` (required), ``num_draws=512``, ``min_var``.
log_nei = Acquisition(
    "log_nei",
    _log_noisy_expected_improvement,
    log_space=True,
    prepare=_prepare_draws,
    stochastic=True,
    num_samples=16,
    repeat_samples=False,
    requires=(Capability.PREDICT_JOINT,),
    improvement=True,
)


def _log_joint_expected_improvement(
    sample: Sample, X: jax.Array, *, min_var: Any = MIN_VARIANCE
) -> jax.Array:
    """``log E[max(f(x) - f(x+), 0)]`` over the joint posterior of ``f(x)`` and the
    incumbent's latent value ``f(x+)``, for one sample, (m,).

    ``x+`` is the observed target input with the largest posterior mean (the
    input of :func:`~ppbo.acquisition.base.best_observed_mean`). The difference
    ``f(x) - f(x+)`` is Gaussian with mean ``mu(x) - mu(x+)`` and variance
    ``sigma^2(x) + sigma^2(x+) - 2 Sigma(x, x+)``, so the expectation is EI's
    closed form with those moments (Jones et al. 1998, eq. (15)), taken in log
    space with ``log_h`` (Ament et al. 2023, eq. (9)). It is the improvement of
    noisy EI (Letham et al. 2019, eqs. (8)-(9): over the latent values at the
    observed inputs, jointly with ``f(x)``) with the incumbent restricted to
    ``x+``: at ``x = x+`` the variance of the difference vanishes and so does the
    acquisition, where EI against the fixed value ``mu(x+)`` keeps
    ``sigma(x+) h(0)`` and invites repeated evaluations of the incumbent.

    Example:
        >>> from ppbo.acquisition.base import evaluate
        >>> evaluate(log_jei, posterior, np.array([[0.5, 0.5]])).shape
        (1,)
    """
    # precomputed once per evaluation by prepare_incumbent_inputs
    x_best = best_observed_input(sample) if sample.aux is None else sample.aux
    Z = jnp.concatenate([x_best[None, :], X], axis=0)
    mean, cov = sample.predict_joint(Z)
    diff = mean[1:] - mean[0]
    var = jnp.diagonal(cov)[1:] + cov[0, 0] - 2.0 * cov[0, 1:]
    sigma = jnp.sqrt(jnp.maximum(var, min_var))
    return log_h(diff / sigma) + jnp.log(sigma)


#: Log-EI against the incumbent's latent value, jointly Gaussian with ``f(x)``
#: (noisy EI with the incumbent restricted to the best observed input); option
#: ``min_var``.
log_jei = Acquisition(
    "log_jei",
    _log_joint_expected_improvement,
    log_space=True,
    prepare=prepare_incumbent_inputs,
    requires=(Capability.PREDICT_JOINT,),
    improvement=True,
)
