"""MetaBO: a GP prior mean and kernel estimated from source tasks.

Wang, Kim and Kaelbling (2018), "Regret bounds for meta Bayesian optimization with
an unknown Gaussian process prior" (NeurIPS). The source functions and the target
are independent draws from one unknown GP; the prior is estimated from the
sources and the target posterior is computed under the estimate.

**Finite domain** (§4.1). ``K`` source tasks observed (with noise ``σ^2``) on the
same ``M`` points give a matrix ``Y`` (K, M); then

.. math::
    \\hat μ = \\tfrac1K Y^\\top \\mathbb 1_K, \\qquad
    \\hat k = \\tfrac1{K-1} (Y - \\mathbb 1_K \\hat μ^\\top)^\\top
        (Y - \\mathbb 1_K \\hat μ^\\top)

are unbiased for ``μ`` and ``k + σ^2 I``, with
``\\hat μ ~ N(μ, (k + σ^2 I) / K)`` and ``\\hat k ~ W((k + σ^2 I)/(K-1), K-1)``
(:func:`estimate_prior`); their errors fall like ``1/sqrt(K)`` (tested). Missing
entries of ``Y`` (failed evaluations) are filled by low-rank matrix completion
first; the paper cites Candès and Recht (2009); we use soft-impute (Mazumder,
Hastie and Tibshirani 2010), iterated singular-value soft-thresholding
(:func:`complete_matrix`). After ``t`` target observations ``y_t`` at the points
``x_t``, the target posterior estimator (:func:`posterior_estimate`) is

.. math::
    \\hat μ_t(x) = \\hat μ(x) + \\hat k(x, x_t) \\hat k(x_t, x_t)^{-1}
        (y_t - \\hat μ(x_t)), \\qquad
    \\hat k_t(x, x') = \\tfrac{K-1}{K-t-1} \\big(\\hat k(x, x')
        - \\hat k(x, x_t) \\hat k(x_t, x_t)^{-1} \\hat k(x_t, x')\\big),

with the factor ``(K-1)/(K-t-1)`` making ``\\hat k_t`` unbiased for the posterior
covariance of noisy observations (it needs ``K > t + 1``).

**Continuous domain** (§4.2). The functions are linear in a feature map,
``f(x) = φ(x)^\\top w`` with ``w ~ N(u, Σ)``; each source's weights are fitted by
least squares, ``\\hat w_k = (Φ_k^\\top Φ_k + λ I)^{-1} Φ_k^\\top y_k`` (``λ`` a
small ridge for sources with fewer rows than features), and
``\\hat u = mean_k \\hat w_k``, ``\\hat Σ = cov_k \\hat w_k`` (normalised by
``K - 1``); ``\\hat μ(x) = φ(x)^\\top \\hat u`` and
``\\hat k(x, x') = φ(x)^\\top \\hat Σ φ(x')`` (:func:`estimate_basis_prior`).
Feature maps (:func:`features`): random Fourier features of a squared-exponential
kernel (Rahimi and Recht 2007) with a fixed seed, or a polynomial basis.

**The surrogate** (``metabo_gp``). The campaign's source rows are at arbitrary
points, so the surrogate uses the continuous variant: ``\\hat u`` and ``\\hat Σ``
are computed from the source rows (inside the compiled model, per fit) and the
target is a GP with prior mean ``φ(x)^\\top \\hat u`` and kernel
``φ(x)^\\top (\\hat Σ + τ^2 I / D) φ(x')``, conditioned on the target rows with
noise variance ``σ^2`` (the plug-in posterior; the unbiasing factor of the finite
estimator is not applied, since BO runs past ``t = K - 2``). ``τ^2`` (site
``extra_variance``) adds a little variance in every feature direction, so that
with few sources (``K - 1 < D``, or ``K = 1``, where ``\\hat Σ`` is singular or
zero) the target can still move away from the estimated mean; with Fourier
features ``φ^\\top φ / D`` approximates the SE kernel, so this is an SE GP of
variance ``τ^2`` on top of the learned kernel. Sites: ``noise`` (``σ^2``, default
prior as the single-task GP) and ``extra_variance`` (``LogNormal(log 0.05, 1)``).
Source noise is not removed from ``\\hat Σ`` (as ``\\hat k`` above includes
``σ^2``), so the learned kernel is, if anything, too wide.

References:
    Wang, Z., Kim, B. and Kaelbling, L. P. (2018). Regret bounds for meta Bayesian
    optimization with an unknown Gaussian process prior. NeurIPS 31, §4.1 (finite
    domain) and §4.2 (continuous domain, basis functions).

    Mazumder, R., Hastie, T. and Tibshirani, R. (2010). Spectral regularization
    algorithms for learning large incomplete matrices. JMLR 11, Algorithm 1.

    Candès, E. J. and Recht, B. (2009). Exact matrix completion via convex
    optimization. Foundations of Computational Mathematics 9.

    Rahimi, A. and Recht, B. (2007). Random features for large-scale kernel
    machines. NeurIPS 20.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.linalg import cho_solve, solve_triangular

from ppbo.data import Dataset
from ppbo.linalg import cholesky
from ppbo.models import gp
from ppbo.models.gaussian import MaskedMultivariateNormal, masked_covariance
from ppbo.models.gp import JITTER
from ppbo.models.sources import check_num_sources, check_sources, source_masks
from ppbo.surrogate import Surrogate

__all__ = [
    "surrogate",
    "complete_matrix",
    "estimate_prior",
    "posterior_estimate",
    "features",
    "estimate_basis_prior",
    "BASES",
    "PRIOR_SITES",
]

#: Feature maps of the continuous variant.
BASES = ("fourier", "polynomial")

#: Sites whose prior can be replaced through ``priors=``.
PRIOR_SITES = ("noise", "extra_variance")


def complete_matrix(
    Y: np.ndarray,
    observed: np.ndarray,
    shrinkage: float | None = None,
    num_iterations: int = 200,
    tolerance: float = 1e-9,
    num_path: int = 20,
) -> np.ndarray:
    """Fill the missing entries of ``Y`` by soft-impute (low-rank completion).

    Iterates ``Z <- S_λ(P_Ω(Y) + P_Ω⊥(Z))``, where ``S_λ`` soft-thresholds the
    singular values by ``λ`` (Mazumder, Hastie and Tibshirani 2010, Algorithm 1),
    warm-started along a geometric path of ``num_path`` decreasing values of
    ``λ`` that ends at ``shrinkage``; at each, until the relative change is below
    ``tolerance``.

    Args:
        Y: the matrix (K, M); missing entries may hold anything (NaN included).
        observed: bool mask (K, M), True where ``Y`` was observed.
        shrinkage: ``λ``; default ``1e-3`` times the largest singular value of the
            zero-filled matrix (small: near-exact recovery of low-rank matrices).
        num_path: number of shrinkages on the path.
        num_iterations: iteration cap per value of ``λ``.
        tolerance: stop when ``|Z_new - Z|_F^2 / |Z|_F^2`` falls below it.

    Returns:
        ``Y`` with its observed entries kept and the missing ones completed.

    Raises:
        ValueError: for mismatched shapes or an all-missing matrix.

    Example:
        >>> Y = np.outer([1.0, 2.0, 3.0, 4.0], [1.0, -1.0, 0.5, 2.0])  # rank 1
        >>> seen = np.ones_like(Y, dtype=bool); seen[2, 1] = False
        >>> round(float(complete_matrix(Y, seen)[2, 1]), 2)  # Y[2, 1] = -3
        -2.99
    """
    Y = np.asarray(Y, dtype=np.float64)
    observed = np.asarray(observed, dtype=bool)
    if Y.ndim != 2 or observed.shape != Y.shape:
        raise ValueError(
            f"Y must be a matrix and observed a mask of the same shape, got "
            f"{Y.shape} and {observed.shape}"
        )
    if not observed.any():
        raise ValueError("observed has no True entry: nothing to complete from")
    filled = np.where(observed, Y, 0.0)
    if observed.all():
        return filled
    top = np.linalg.norm(filled, 2)
    if shrinkage is None:
        shrinkage = 1e-3 * top
    # the warm-started path of decreasing shrinkages of Algorithm 1: from near the
    # largest singular value down to `shrinkage`
    path = np.geomspace(max(0.5 * top, shrinkage), shrinkage, num_path)
    Z = np.zeros_like(filled)
    for lam in path:
        for _ in range(int(num_iterations)):
            U, s, Vt = np.linalg.svd(np.where(observed, filled, Z), full_matrices=False)
            new = (U * np.maximum(s - lam, 0.0)) @ Vt
            change = np.sum((new - Z) ** 2) / max(np.sum(Z**2), 1e-300)
            Z = new
            if change < tolerance:
                break
    return np.where(observed, filled, Z)


def estimate_prior(
    Y: np.ndarray, observed: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Unbiased estimates of the prior mean and kernel on a finite domain (§4.1).

    Args:
        Y: source observations (K, M): row ``k`` is source ``k`` at the ``M``
            points of the domain.
        observed: optional bool mask (K, M); missing entries are completed by
            :func:`complete_matrix` first.

    Returns:
        ``(mu_hat (M,), k_hat (M, M))``: ``mean_k Y`` and the sample covariance
        with ``K - 1`` normalisation (estimates of ``μ`` and ``k + σ^2 I``).

    Raises:
        ValueError: for fewer than two sources.

    Example:
        >>> mu, k = estimate_prior(np.array([[0.0, 1.0], [2.0, 1.0]]))
        >>> mu.tolist(), k.tolist()
        ([1.0, 1.0], [[2.0, 0.0], [0.0, 0.0]])
    """
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[0] < 2:
        raise ValueError(
            f"Y must have shape (K, M) with K >= 2 sources, got shape {Y.shape}"
        )
    if observed is not None:
        Y = complete_matrix(Y, observed)
    mu = Y.mean(axis=0)
    R = Y - mu
    return mu, R.T @ R / (Y.shape[0] - 1)


def posterior_estimate(
    mu_hat: np.ndarray,
    k_hat: np.ndarray,
    num_sources: int,
    index: np.ndarray,
    y: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The target posterior estimator on a finite domain (§4.1).

    Args:
        mu_hat, k_hat: :func:`estimate_prior` outputs, (M,) and (M, M).
        num_sources: ``K``, the number of sources behind the estimates.
        index: domain indices of the ``t`` target observations, (t,).
        y: the target observations, (t,).

    Returns:
        ``(mean (M,), cov (M, M))``: ``\\hat μ_t`` and ``\\hat k_t`` with the
        factor ``(K - 1) / (K - t - 1)``.

    Raises:
        ValueError: unless ``K > t + 1``.

    Example:
        >>> mu, k = np.zeros(2), np.array([[2.0, 1.0], [1.0, 2.0]])
        >>> m, c = posterior_estimate(mu, k, 10, np.array([0]), np.array([1.0]))
        >>> m.tolist(), round(float(c[1, 1]), 4)
        ([1.0, 0.5], 1.6875)
    """
    index = np.asarray(index, dtype=int)
    t = len(index)
    if not num_sources > t + 1:
        raise ValueError(
            f"the unbiased posterior estimator needs num_sources > t + 1, got "
            f"num_sources={num_sources} and t={t} target observations"
        )
    k_xt = k_hat[:, index]
    solved = np.linalg.solve(
        k_hat[np.ix_(index, index)], np.column_stack([y - mu_hat[index], k_xt.T])
    )
    mean = mu_hat + k_xt @ solved[:, 0]
    cov = (num_sources - 1) / (num_sources - t - 1) * (k_hat - k_xt @ solved[:, 1:])
    return mean, cov


def features(
    X: jax.Array,
    basis: str = "fourier",
    num_features: int = 64,
    lengthscale: float = 0.2,
    degree: int = 2,
    seed: int = 0,
) -> jax.Array:
    """The feature map ``φ(X)`` of the continuous variant, shape (m, D).

    ``"fourier"``: ``sqrt(2 / D) cos(X Ω / ℓ + b)`` with ``Ω ~ N(0, I)`` (d, D) and
    ``b ~ U(0, 2π)`` drawn from ``seed`` (random Fourier features of the SE kernel
    of lengthscale ``ℓ``, Rahimi and Recht 2007). ``"polynomial"``: every monomial
    of ``2x - 1`` of total degree ``<= degree`` (``D = C(d + degree, d)``).

    Example:
        >>> features(jnp.zeros((3, 2)), "polynomial", degree=2).shape
        (3, 6)
        >>> features(jnp.zeros((3, 2)), num_features=8).shape
        (3, 8)
    """
    d = X.shape[1]
    if basis == "fourier":
        k1, k2 = jax.random.split(jax.random.key(seed))
        omega = jax.random.normal(k1, (d, num_features), dtype=X.dtype)
        b = jax.random.uniform(k2, (num_features,), dtype=X.dtype) * 2 * math.pi
        return math.sqrt(2.0 / num_features) * jnp.cos(X @ omega / lengthscale + b)
    Z = 2.0 * X - 1.0
    columns = [jnp.ones(X.shape[0], dtype=X.dtype)]
    for p in range(1, degree + 1):
        for combo in itertools.combinations_with_replacement(range(d), p):
            columns.append(jnp.prod(Z[:, list(combo)], axis=1))
    return jnp.stack(columns, axis=1)


def estimate_basis_prior(
    Phi: jax.Array, y: jax.Array, masks: jax.Array, ridge: float = 1e-6
) -> tuple[jax.Array, jax.Array]:
    """Estimates ``(\\hat u, \\hat Σ)`` of the weight prior from source rows (§4.2).

    Args:
        Phi: features of all rows, (n, D).
        y: outputs, (n,).
        masks: rows of each source, bool (K, n).
        ridge: ``λ``, relative to the mean diagonal of ``Φ_k^T Φ_k``.

    Returns:
        ``u_hat`` (D,) and ``Sigma_hat`` (D, D) (zero for ``K = 1``).

    Example:
        >>> Phi = jnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
        >>> masks = jnp.array([[True, True, False, False], [False, False, True, True]])
        >>> y = jnp.array([1.0, 2.0, 3.0, 2.0])
        >>> u, S = estimate_basis_prior(Phi, y, masks, ridge=0.0)
        >>> [round(float(v), 6) for v in u], [round(float(v), 6) for v in S[0]]
        ([2.0, 2.0], [2.0, 0.0])
    """

    def weights(mask):
        P = jnp.where(mask[:, None], Phi, 0.0)
        G = P.T @ P
        lam = ridge * jnp.maximum(jnp.trace(G) / G.shape[0], 1e-12)
        return jnp.linalg.solve(
            G + lam * jnp.eye(G.shape[0]), P.T @ jnp.where(mask, y, 0.0)
        )

    # one source at a time: a batched solve inside the MAP fit's loop can deadlock
    # jaxlib's CPU LAPACK kernels on a two-thread pool (see test_transfer_lapack)
    W = jax.lax.map(weights, masks)
    K = W.shape[0]
    u = jnp.mean(W, axis=0)
    R = W - u
    return u, R.T @ R / max(K - 1, 1)


@dataclass(frozen=True, eq=False)
class _Config:
    num_sources: int
    basis: str
    num_features: int
    lengthscale: float
    degree: int
    seed: int
    ridge: float
    priors: Mapping[str, dist.Distribution]


def _phi(config: _Config, X):
    return features(
        X,
        config.basis,
        config.num_features,
        config.lengthscale,
        config.degree,
        config.seed,
    )


def _prior(config: _Config, name: str, d: int) -> dist.Distribution:
    if name in config.priors:
        return config.priors[name]
    if name == "noise":
        return gp.default_priors(d)["noise"]
    return dist.LogNormal(math.log(0.05), 1.0)


def _learned(config: _Config, data: Dataset, extra_variance):
    """Prior mean weights and the weight covariance ``Σ̂ + τ² I / D``."""
    Phi = _phi(config, data.X)
    ids = jnp.arange(config.num_sources)[:, None]
    masks = data.mask[None, :] & (data.source[None, :] == ids)
    u, Sigma = estimate_basis_prior(Phi, data.y, masks, config.ridge)
    D = Phi.shape[1]
    return Phi, u, Sigma + extra_variance / D * jnp.eye(D)


def _target_covariance(params, data: Dataset, Phi, P):
    _, mask_t = source_masks(data)
    K = Phi @ P @ Phi.T + jnp.diag(jnp.full(data.capacity, params["noise"] + JITTER))
    return K, mask_t


def _model(data: Dataset, *, config: _Config) -> None:
    d = data.X.shape[1]
    params = {
        name: numpyro.sample(name, _prior(config, name, d)) for name in PRIOR_SITES
    }
    Phi, u, P = _learned(config, data, params["extra_variance"])
    K, mask_t = _target_covariance(params, data, Phi, P)
    numpyro.sample("y", MaskedMultivariateNormal(Phi @ u, K, mask_t), obs=data.y)


def _prepare(params, data: Dataset, *, config: _Config):
    Phi, u, P = _learned(config, data, params["extra_variance"])
    K, mask_t = _target_covariance(params, data, Phi, P)
    L = cholesky(masked_covariance(K, mask_t))
    r = jnp.where(mask_t, data.y - Phi @ u, 0.0)
    return {"L": L, "alpha": cho_solve((L, True), r), "u": u, "P": P}


def _cross(params, data, X, cache, config):
    _, mask_t = source_masks(data)
    phi_x = _phi(config, X)
    Phi = _phi(config, data.X)
    Ks = jnp.where(mask_t[None, :], phi_x @ cache["P"] @ Phi.T, 0.0)
    mean = phi_x @ cache["u"] + Ks @ cache["alpha"]
    V = solve_triangular(cache["L"], Ks.T, lower=True)
    return phi_x, mean, V


def _predict(params, data: Dataset, X, cache, *, config: _Config):
    phi_x, mean, V = _cross(params, data, X, cache, config)
    prior = jnp.sum((phi_x @ cache["P"]) * phi_x, axis=1)
    return mean, jnp.maximum(prior - jnp.sum(V**2, axis=0), 0.0)


def _predict_joint(params, data: Dataset, X, cache, *, config: _Config):
    phi_x, mean, V = _cross(params, data, X, cache, config)
    return mean, phi_x @ cache["P"] @ phi_x.T - V.T @ V


def _noise(params, X: jax.Array) -> jax.Array:
    return jnp.full(X.shape[0], params["noise"] + JITTER, dtype=X.dtype)


def surrogate(
    num_sources: int = 2,
    basis: str = "fourier",
    num_features: int = 64,
    basis_lengthscale: float = 0.2,
    degree: int = 2,
    seed: int = 0,
    ridge: float = 1e-6,
    priors: Mapping[str, dist.Distribution] | None = None,
) -> Surrogate:
    """Build the MetaBO surrogate: a GP prior learned from the source rows (§4.2).

    Args:
        num_sources: number of source tasks ``K`` (ids ``0..K-1``); the kernel
            estimate needs ``K >= 2`` to be non-zero.
        basis: ``"fourier"`` or ``"polynomial"`` (see :func:`features`).
        num_features: ``D`` for the Fourier basis.
        basis_lengthscale: lengthscale ``ℓ`` of the Fourier basis (unit cube).
        degree: total degree of the polynomial basis.
        seed: seed of the Fourier frequencies (fixed: the basis is part of the
            model, the same at every fit).
        ridge: relative ridge of the per-source least squares.
        priors: replacements for the priors of ``noise`` and ``extra_variance``.

    Returns:
        A :class:`ppbo.Surrogate` predicting the TARGET latent mean and variance
        under the learned prior, with ``predict_joint``, the target ``noise`` and
        conditioning on appended target rows; no :class:`ppbo.GPParts` (the
        learned kernel is not stationary).

    Raises:
        ValueError: for bad option values, naming the option.

    Example:
        >>> import jax, numpy as np, ppbo
        >>> jax.config.update("jax_enable_x64", True)
        >>> X = np.random.default_rng(0).random((12, 1))
        >>> source = [0] * 5 + [1] * 5 + [-1] * 2
        >>> data = ppbo.Dataset(X, np.sin(6 * X[:, 0]), source=source)
        >>> s = surrogate(num_sources=2, num_features=16)
        >>> params = {"noise": 1e-3, "extra_variance": 0.05}
        >>> posterior = ppbo.fit(s, data, ppbo.Fixed(params), jax.random.key(0))
        >>> posterior.predict(np.array([[0.5]]))[0].shape
        (1, 1)

    References:
        Wang, Kim and Kaelbling (2018), §4.2; Rahimi and Recht (2007).
    """
    num_sources = check_num_sources(num_sources)
    if basis not in BASES:
        raise ValueError(f"basis must be one of {BASES}, got {basis!r}")
    for name, value in (("num_features", num_features), ("degree", degree)):
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Integral)
            or value < 1
        ):
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    for name, value in (("basis_lengthscale", basis_lengthscale), ("ridge", ridge)):
        if not (math.isfinite(float(value)) and float(value) > 0.0):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    priors = dict(priors or {})
    for name, prior in priors.items():
        if name not in PRIOR_SITES or not isinstance(prior, dist.Distribution):
            raise ValueError(
                f"priors[{name!r}] must be a numpyro Distribution for a site in "
                f"{PRIOR_SITES}, got {prior!r}"
            )
    config = _Config(
        num_sources=num_sources,
        basis=basis,
        num_features=int(num_features),
        lengthscale=float(basis_lengthscale),
        degree=int(degree),
        seed=int(seed),
        ridge=float(ridge),
        priors=priors,
    )
    return Surrogate(
        model=partial(_model, config=config),
        predict=partial(_predict, config=config),
        prepare=partial(_prepare, config=config),
        predict_joint=partial(_predict_joint, config=config),
        name=f"metabo_gp({basis}, K={num_sources})",
        check_data=partial(check_sources, num_sources=num_sources),
        extras={
            "features": partial(_phi, config),
            "num_sources": num_sources,
        },
        noise=_noise,
    )
