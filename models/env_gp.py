"""Env-GP: source observations as noisy observations of the target function.

The envelope transfer model of Joy, Rana, Gupta and Venkatesh (2019), "Flexible
transfer learning framework for Bayesian optimisation with convergence guarantee"
(Expert Systems with Applications 115, 656-672; "Env-GP" in Shilton et al. 2017).
Source and target share one covariance function ``k``; a row of source task ``k``
is an observation of the TARGET function with an extra noise variance
``sigma_{s,k}^2`` (the width of the envelope), so that all rows are modelled as

.. math::
    y_i = \\mu + f(x_i) + \\varepsilon_i, \\quad
    \\varepsilon_i \\sim \\mathcal N\\big(0, \\sigma_n^2
        + [s_i \\ge 0]\\, \\sigma_{s, s_i}^2\\big), \\quad
    f \\sim \\mathcal{GP}(0, \\sigma_f^2 k_\\ell),

which is the joint covariance of Joy et al. (2019) (the block matrix
``[[K_ss + (sigma_n^2 + sigma_s^2) I, K_sT], [K_Ts, K_TT + sigma_n^2 I]]``), with one
block of extra noise per source task. The source noise has the inverse-gamma prior
``sigma_s^2 ~ InverseGamma(tau_0, upsilon_0)`` (Joy et al. 2019) and two
variants are offered:

``variant="mode"`` (the paper's per-iteration update of the prior): with the
``t`` target observations ``y_i`` and the source GP's posterior means
``mu_{s,k}(x_i)`` at them,

.. math::
    \\tau_t = \\tau_0 + \\frac t2, \\qquad
    \\upsilon_t = \\upsilon_0
        + \\frac12 \\sum_{i=1}^t \\big(y_i - \\mu_{s,k}(x_i)\\big)^2,
    \\qquad \\sigma_{s,k}^2 = \\frac{\\upsilon_t}{\\tau_t + 1},

the mode of the conjugate inverse-gamma posterior of the squared residuals. It is a
pure function of the data and of the current hyperparameters (the source GP of task
``k`` is the GP with the same ``lengthscale``, ``outputscale``, ``noise`` and
``mean`` conditioned on the rows of task ``k`` only), recomputed inside the model
and in ``prepare``: no hidden state, so a resumed campaign gives the same value.
Rows appended by conditioning (pending points at their predicted means) are target
rows and count in ``t``, as a real observation would.

``variant="bayes"``: the source noise is sampled, not set to a mode. With
``likelihood="joint"`` (or ``"conditional"``), ``sigma_{s,k}^2`` is the sampled site
``source_noise`` with the inverse-gamma prior, fitted by NUTS, slice sampling or MAP
with the other sites from the joint marginal likelihood above (or from
``p(y_T | y_S)``). With ``likelihood="target"`` (the default) the model is the cut
posterior
(Plummer 2015, "Cuts in Bayesian graphical models", Statistics and Computing 25,
37-43) of the paper's two pieces: the kernel's sites ``theta`` from the target rows'
own marginal likelihood, and each source noise from the full conditional that the
paper's update defines, ``sigma_{s,k}^2 | theta ~ InverseGamma(tau_t,
upsilon_{t,k}(theta))``. It is sampled exactly through the site ``source_gamma``
(K,) ``~ Gamma(tau_t, 1)`` and ``sigma_{s,k}^2 = upsilon_{t,k}(theta) / g_k`` (if
``g ~ Gamma(tau, 1)`` then ``upsilon / g ~ InverseGamma(tau, upsilon)``), so NUTS
draws ``(theta, sigma_s^2)`` from ``p(theta | y_T) p(sigma_s^2 | theta, y_T, y_S)``,
whose conditional mode is the mode variant's value.

Sites: ``lengthscale`` (d,), ``outputscale``, ``noise`` (the target noise
``sigma_n^2``, default prior ``LogNormal(log 1e-4, 2.5)``, :data:`DEFAULT_PRIORS`),
``mean`` (constant and linear means), ``mean_weights`` (d,) (linear mean), as in
:mod:`ppbo.models.gp`, and for ``variant="bayes"`` ``source_noise``
(K,), the extra noise variance of each source task (with ``likelihood="target"``
the sampled site is ``source_gamma`` (K,), mapped to it as above, and
``source_noise`` a deterministic site, in MCMC samples and ArviZ but not in a MAP
fit's; ``extras["source_noise"]`` gives the variances of any variant and fit).
Inputs are in the unit cube; outputs are standardised per task (the data contract
of ``ppbo.transfer``).

This module also holds the helpers the other transfer GPs share:
:func:`source_posterior` (per-source GP posteriors from
one block-diagonal Cholesky factor).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
from ppbo.models.gaussian import MaskedMultivariateNormal, masked_covariance
from ppbo.models.gp import (
    DEFAULT_LENGTHSCALE_PRIOR,
    JITTER,
    MEANS,
    build_kernel,
    default_priors,
    mean_function,
)
from ppbo.models.kernels import KERNELS, Kernel
from ppbo.models.sources import (
    TARGET_NOISE_PRIOR,
    check_num_sources,
    check_sources,
    condition_on_sources,
)
from ppbo.surrogate import Surrogate

__all__ = [
    "surrogate",
    "VARIANTS",
    "LIKELIHOODS",
    "source_posterior",
    "inverse_gamma_update",
    "mode_source_noise",
    "DEFAULT_PRIORS",
]

#: Ways of setting the source noise accepted by :func:`surrogate`.
VARIANTS = ("mode", "bayes")

#: Likelihoods the sites can be fitted by (:func:`surrogate`'s ``likelihood``).
LIKELIHOODS = ("target", "conditional", "joint")

#: Default priors that differ from the GP's; a user's ``priors`` override them site
#: by site. The target's noise variance has the transfer GPs' shared
#: :data:`ppbo.models.sources.TARGET_NOISE_PRIOR`: the envelopes hold source rows
#: near the target's optimum as observations with a small noise, and the target's
#: own rows must be allowed to outweigh them there.
DEFAULT_PRIORS: dict[str, dist.Distribution] = {
    "noise": TARGET_NOISE_PRIOR,
}

_VECTOR_SITES = ("lengthscale", "mean_weights")


def source_posterior(
    kernel: Kernel,
    mean: Callable[[jax.Array], jax.Array],
    row_noise: jax.Array,
    data: Dataset,
    X: jax.Array,
    num_sources: int,
    factor: Callable[[jax.Array], jax.Array] = jnp.linalg.cholesky,
) -> tuple[jax.Array, jax.Array]:
    """Posterior mean and variance at ``X`` of each source task's own GP.

    The GP of source ``k`` is conditioned on the rows with ``data.source == k``
    only (Rasmussen and Williams 2006, eqs. (2.25)-(2.26)). The covariance of all
    source rows with zero covariance between different sources is block-diagonal,
    so one Cholesky factor of it gives every source's posterior.

    Args:
        kernel: the latent kernel of every source GP.
        mean: prior mean ``mean(X) -> (m,)``.
        row_noise: observation-noise variance of each row (n,).
        data: padded observations with ``data.source`` (n,).
        X: points (m, d).
        num_sources: number of source tasks ``K``.
        factor: Cholesky routine (``jnp.linalg.cholesky`` is differentiable;
            :func:`ppbo.linalg.cholesky` adds escalating jitter).

    Returns:
        ``(mean, var)``, each of shape (K, m).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from ppbo.data import Dataset
        >>> from ppbo.models.kernels import SquaredExponential as RBF
        >>> jax.config.update("jax_enable_x64", True)
        >>> data = Dataset([[0.2], [0.8], [0.5]], [1.0, -1.0, 0.0], source=[0, 1, -1])
        >>> mean, var = source_posterior(
        ...     RBF(jnp.ones(1)), lambda X: jnp.zeros(X.shape[0]),
        ...     jnp.full(data.capacity, 1e-6), data, jnp.array([[0.2]]), 2)
        >>> round(float(mean[0, 0]), 4), mean.shape
        (1.0, (2, 1))
    """
    L, alpha = _source_factor(kernel, mean, row_noise, data, factor)
    return _source_predict(kernel, mean, data, L, alpha, X, num_sources)


def _source_system(kernel, mean, row_noise, data: Dataset):
    # block-diagonal covariance of the source rows (no covariance across sources;
    # target and padded rows are identity rows) and the source rows' residuals
    source = data.source
    real = data.mask & (source >= 0)
    same = (source[:, None] == source[None, :]) & real[:, None] & real[None, :]
    K = kernel.matrix(data.X, data.X) + jnp.diag(row_noise)
    K = jnp.where(same, K, jnp.eye(K.shape[0], dtype=K.dtype))
    return K, jnp.where(real, data.y - mean(data.X), 0.0)


def _source_factor(kernel, mean, row_noise, data: Dataset, factor):
    K, r = _source_system(kernel, mean, row_noise, data)
    L = factor(K)
    return L, cho_solve((L, True), r)


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def _spd_solve(factor, K, r):
    # K^{-1} r for a symmetric positive-definite K, differentiated implicitly:
    # d(K^{-1} r) = K^{-1} (dr - dK K^{-1} r), so the cotangent g of the solution
    # gives w = K^{-1} g, r_bar = w and K_bar = -sym(w a^T) (a = K^{-1} r): one
    # more solve with the forward factor instead of differentiating the
    # Cholesky factorisation (whose reverse mode costs several n^3 solves).
    L = factor(K)
    return cho_solve((L, True), r)


def _spd_solve_fwd(factor, K, r):
    L = factor(K)
    a = cho_solve((L, True), r)
    return a, (L, a)


def _spd_solve_bwd(factor, residuals, g):
    L, a = residuals
    w = cho_solve((L, True), g)
    outer = jnp.outer(w, a)
    return -0.5 * (outer + outer.T), w


_spd_solve.defvjp(_spd_solve_fwd, _spd_solve_bwd)


def _source_predict(kernel, mean, data: Dataset, L, alpha, X, num_sources):
    # The factor L of the block-diagonal covariance is zero between rows of
    # different sources (L_ij = 0 unless i and j share a source, by induction on
    # the Cholesky recursion; target and padded rows are identity rows), and so
    # is its inverse. Hence L^{-1} applied to the cross-covariance with every
    # source's columns equals, on the rows of source k, L^{-1} applied to source
    # k's columns alone: ONE triangular solve serves all K sources, and each
    # source's mean and variance are sums over its own rows (one-hot matmuls).
    source = data.source
    real = data.mask & (source >= 0)
    onehot = (real[:, None] & (source[:, None] == jnp.arange(num_sources))).astype(
        alpha.dtype
    )
    cross = jnp.where(real[None, :], kernel.matrix(X, data.X), 0.0)
    means = mean(X)[None, :] + (cross @ (onehot * alpha[:, None])).T
    V = solve_triangular(L, cross.T, lower=True)
    variances = kernel.diag(X)[None, :] - onehot.T @ V**2
    return means, jnp.maximum(variances, 0.0)


def _source_mean(kernel, mean, data: Dataset, alpha, X, num_sources):
    # the means of _source_predict without the variances (no triangular solve)
    source = data.source
    real = data.mask & (source >= 0)
    onehot = (real[:, None] & (source[:, None] == jnp.arange(num_sources))).astype(
        alpha.dtype
    )
    cross = jnp.where(real[None, :], kernel.matrix(X, data.X), 0.0)
    return mean(X)[None, :] + (cross @ (onehot * alpha[:, None])).T


def inverse_gamma_update(
    residuals: jax.Array, mask: jax.Array, tau0: float, upsilon0: float
) -> tuple[jax.Array, jax.Array]:
    """Conjugate update of ``InverseGamma(tau_0, upsilon_0)`` by squared residuals.

    Joy et al. (2019): ``tau_t = tau_0 + t / 2`` and
    ``upsilon_t = upsilon_0 + sum_i r_i^2 / 2`` over the ``t`` entries where
    ``mask`` is True.

    Args:
        residuals: ``y_i - mu_s(x_i)``, shape (..., n).
        mask: which entries count, shape (n,).
        tau0, upsilon0: prior shape and rate.

    Returns:
        ``(tau_t, upsilon_t)``, each of shape ``residuals.shape[:-1]``.

    Example:
        >>> import jax.numpy as jnp
        >>> tau, ups = inverse_gamma_update(
        ...     jnp.array([1.0, 2.0, 9.0]), jnp.array([True, True, False]), 1.0, 0.5)
        >>> float(tau), float(ups)
        (2.0, 3.0)
    """
    t = jnp.sum(mask).astype(residuals.dtype)
    tau = tau0 + 0.5 * t + jnp.zeros(residuals.shape[:-1], residuals.dtype)
    upsilon = upsilon0 + 0.5 * jnp.sum(jnp.where(mask, residuals**2, 0.0), axis=-1)
    return tau, upsilon


@dataclass(frozen=True, eq=False)
class _Config:
    num_sources: int
    variant: str
    kernel: str | Callable[[jax.Array], Kernel]
    mean: str
    priors: Mapping[str, dist.Distribution]
    tau0: float
    upsilon0: float
    lengthscale_prior: str = DEFAULT_LENGTHSCALE_PRIOR
    likelihood: str = "target"


def _prior(config: _Config, name: str, d: int) -> dist.Distribution:
    if name == "source_noise":
        prior = config.priors.get(name) or dist.InverseGamma(
            config.tau0, config.upsilon0
        )
        if prior.event_shape == ():
            prior = prior.expand([config.num_sources]).to_event(1)
        return prior
    prior = config.priors.get(name) or default_priors(d, config.lengthscale_prior)[name]
    if name in _VECTOR_SITES and prior.event_shape == ():
        prior = prior.expand([d]).to_event(1)
    return prior


def _per_source_prior(config, name: str, d: int, prefix: str) -> dist.Distribution:
    # Diff-GP and MISO: the target GP's sites, source_noise (K,) and a GP per source
    # with sites f"{prefix}_lengthscale" (K, d) and f"{prefix}_outputscale" (K,)
    gp_priors = default_priors(d, config.lengthscale_prior)
    defaults = {
        "source_noise": gp_priors["noise"],
        f"{prefix}_lengthscale": gp_priors["lengthscale"],
        f"{prefix}_outputscale": dist.LogNormal(-2.0, 1.0),
    }
    prior = config.priors.get(name) or defaults.get(name) or gp_priors[name]
    K = config.num_sources
    shape = {
        "lengthscale": (d,),
        "mean_weights": (d,),
        "source_noise": (K,),
        f"{prefix}_outputscale": (K,),
        f"{prefix}_lengthscale": (K, d),
    }.get(name, ())
    if len(shape) > len(prior.event_shape):
        prior = prior.expand(list(shape)).to_event(len(shape))
    return prior


def _target_sites(config: _Config, d: int) -> dict[str, jax.Array]:
    names = ["lengthscale", "outputscale", "noise"]
    if config.mean in ("constant", "linear"):
        names.append("mean")
    if config.mean == "linear":
        names.append("mean_weights")
    return {name: numpyro.sample(name, _prior(config, name, d)) for name in names}


def mode_source_noise(
    params: Mapping[str, jax.Array],
    data: Dataset,
    *,
    num_sources: int,
    tau0: float,
    upsilon0: float,
    kernel: str | Callable[[jax.Array], Kernel] = "matern52",
    mean: str = "constant",
    factor: Callable[[jax.Array], jax.Array] = jnp.linalg.cholesky,
) -> jax.Array:
    """The posterior-mode source noise ``upsilon_t / (tau_t + 1)`` of each source.

    Joy et al. (2019)'s update and the mode of the inverse gamma: the
    residuals are the target observations minus source ``k``'s GP posterior mean
    (same hyperparameters, conditioned on source ``k``'s rows) at the target
    inputs.

    Args:
        params: one sample of the target GP's sites.
        data: padded observations with ``data.source``.
        num_sources: ``K``.
        tau0, upsilon0: the inverse-gamma prior's shape and rate.
        kernel, mean: as for :func:`surrogate`.
        factor: Cholesky routine.

    Returns:
        ``sigma_s^2`` of each source, shape (K,).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from ppbo.data import Dataset
        >>> jax.config.update("jax_enable_x64", True)
        >>> data = Dataset([[0.2], [0.2]], [1.0, 0.0], source=[0, -1])
        >>> params = {"lengthscale": jnp.ones(1), "outputscale": 1.0,
        ...           "noise": 1e-6, "mean": 0.0}
        >>> s2 = mode_source_noise(params, data, num_sources=1, tau0=1.0,
        ...                        upsilon0=0.5)
        >>> round(float(s2[0]), 4)  # (0.5 + 1 / 2) / (1 + 1 / 2 + 1)
        0.4
    """
    tau, upsilon = _source_noise_posterior(
        params, data, num_sources, tau0, upsilon0, kernel, mean, factor
    )
    return upsilon / (tau + 1.0)


def _source_noise_posterior(
    params, data: Dataset, num_sources, tau0, upsilon0, kernel, mean, factor
):
    # (tau_t, upsilon_t) of each source: its GP's means at the target inputs (same
    # hyperparameters, its own rows only) and the conjugate update by the residuals
    k = build_kernel(kernel, params)
    noise = jnp.full(data.capacity, params["noise"] + JITTER, dtype=data.X.dtype)
    m = partial(mean_function, mean, params)
    alpha = _spd_solve(factor, *_source_system(k, m, noise, data))
    mu = _source_mean(k, m, data, alpha, data.X, num_sources)
    return inverse_gamma_update(data.y - mu, data.target_mask, tau0, upsilon0)


def _inverse_gamma_prior(config: _Config) -> tuple[float, float]:
    # (tau_0, upsilon_0): the arguments, or a user's InverseGamma prior's
    prior = config.priors.get("source_noise")
    if prior is None:
        return config.tau0, config.upsilon0
    return prior.concentration, prior.rate


def _cut_shape(config: _Config, data: Dataset) -> jax.Array:
    # tau_t = tau_0 + t / 2: the shape of every source's conditional posterior
    t = jnp.sum(data.target_mask).astype(data.y.dtype)
    return _inverse_gamma_prior(config)[0] + 0.5 * t


def _source_noise(config: _Config, params, data: Dataset, factor) -> jax.Array:
    if config.variant == "bayes" and config.likelihood != "target":
        return params["source_noise"]
    tau0, upsilon0 = _inverse_gamma_prior(config)
    tau, upsilon = _source_noise_posterior(
        params,
        data,
        config.num_sources,
        tau0,
        upsilon0,
        config.kernel,
        config.mean,
        factor,
    )
    if config.variant == "bayes":
        # the cut posterior: sigma_s^2 = upsilon_t / g with g ~ Gamma(tau_t, 1) is
        # InverseGamma(tau_t, upsilon_t) given the kernel's sites
        return upsilon / params["source_gamma"]
    return upsilon / (tau + 1.0)  # the mode of Joy et al. (2019)'s update


def _row_noise(params, data: Dataset, source_noise: jax.Array) -> jax.Array:
    index = jnp.clip(data.source, 0, source_noise.shape[0] - 1)
    extra = jnp.where(data.source >= 0, source_noise[index], 0.0)
    return params["noise"] + JITTER + extra


def _covariance(config: _Config, params, data: Dataset, factor) -> jax.Array:
    row_noise = _row_noise(params, data, _source_noise(config, params, data, factor))
    K = build_kernel(config.kernel, params).matrix(data.X, data.X)
    return K + jnp.diag(row_noise)


def _model(data: Dataset, *, config: _Config) -> None:
    d = data.X.shape[1]
    params = _target_sites(config, d)
    if config.variant == "bayes" and config.likelihood == "target":
        # the cut posterior: the kernel's sites from the target rows alone, and
        # g = upsilon_t / sigma_s^2 (K,) from its exact conditional Gamma(tau_t, 1)
        shape = _cut_shape(config, data)
        gamma = dist.Gamma(shape, 1.0).expand([config.num_sources]).to_event(1)
        params["source_gamma"] = numpyro.sample("source_gamma", gamma)
        # the variances themselves, for the samples and ArviZ (not in the density)
        numpyro.deterministic(
            "source_noise", _source_noise(config, params, data, jnp.linalg.cholesky)
        )
    elif config.variant == "bayes":
        params["source_noise"] = numpyro.sample(
            "source_noise", _prior(config, "source_noise", d)
        )
    if config.likelihood == "target":
        # the target rows' own marginal likelihood: no source noise enters it, and
        # it is computed on the target rows alone (data.target_rows: a buffer of
        # target_capacity rows, not the sources' hundreds)
        X, y, mask = data.target_rows()
        target = build_kernel(config.kernel, params).matrix(X, X)
        target = target + jnp.diag(_noise(params, X))
        loc = mean_function(config.mean, params, X)
        numpyro.sample("y", MaskedMultivariateNormal(loc, target, mask), obs=y)
        return
    loc = mean_function(config.mean, params, data.X)
    K = _covariance(config, params, data, jnp.linalg.cholesky)
    numpyro.sample("y", MaskedMultivariateNormal(loc, K, data.mask), obs=data.y)
    if config.likelihood == "conditional":
        condition_on_sources(loc, K, data)


def _prepare(params, data: Dataset, *, config: _Config) -> dict[str, jax.Array]:
    K = masked_covariance(_covariance(config, params, data, cholesky), data.mask)
    L = cholesky(K)
    r = jnp.where(data.mask, data.y - mean_function(config.mean, params, data.X), 0.0)
    return {"L": L, "alpha": cho_solve((L, True), r)}


# The target's predictive from the rows' factor in ``cache`` (``L``, ``alpha``): the
# cross-covariance of a target point with every row is the target kernel (Env-GP,
# MISO and the augmented Diff-GP share it).
def _cross(config: _Config, params, data: Dataset, X, cache):
    kernel = build_kernel(config.kernel, params)
    Ks = jnp.where(data.mask[None, :], kernel.matrix(X, data.X), 0.0)
    mean = mean_function(config.mean, params, X) + Ks @ cache["alpha"]
    V = solve_triangular(cache["L"], Ks.T, lower=True)
    return kernel, mean, V


def _predict(params, data: Dataset, X, cache, *, config: _Config):
    kernel, mean, V = _cross(config, params, data, X, cache)
    return mean, jnp.maximum(kernel.diag(X) - jnp.sum(V**2, axis=0), 0.0)


def _predict_joint(params, data: Dataset, X, cache, *, config: _Config):
    kernel, mean, V = _cross(config, params, data, X, cache)
    return mean, kernel.matrix(X, X) - V.T @ V


def _noise(params, X: jax.Array) -> jax.Array:
    # the TARGET observation noise; source rows add source_noise in the likelihood
    return jnp.full(X.shape[0], params["noise"] + JITTER, dtype=X.dtype)


def _check_common(kernel, mean) -> None:
    if isinstance(kernel, str) and kernel not in KERNELS:
        raise ValueError(
            f"kernel must be one of {sorted(KERNELS)} or a callable, got {kernel!r}"
        )
    if not isinstance(kernel, str) and not callable(kernel):
        raise ValueError(f"kernel must be a name or a callable, got {kernel!r}")
    if mean not in MEANS:
        raise ValueError(f"mean must be one of {MEANS}, got {mean!r}")


def _check_priors(priors, known) -> dict:
    priors = dict(priors or {})
    for name, prior in priors.items():
        if name not in known:
            raise ValueError(
                f"priors has unknown site {name!r}; known sites: {sorted(known)}"
            )
        if not isinstance(prior, dist.Distribution):
            raise ValueError(
                f"priors[{name!r}] must be a numpyro Distribution, got {prior!r}"
            )
    return priors


def _positive(name: str, value) -> float:
    number = float(value)
    if not np.isfinite(number) or number <= 0.0:
        raise ValueError(f"{name} must be a finite number > 0, got {name}={value!r}")
    return number


def surrogate(
    num_sources: int = 1,
    variant: str = "mode",
    kernel: str | Callable[[jax.Array], Kernel] = "matern52",
    mean: str = "constant",
    tau0: float = 2.0,
    upsilon0: float = 0.3,
    priors: Mapping[str, dist.Distribution] | None = None,
    lengthscale_prior: str = DEFAULT_LENGTHSCALE_PRIOR,
    likelihood: str | None = None,
) -> Surrogate:
    """Build the Env-GP transfer surrogate (Joy et al. 2019).

    Args:
        num_sources: number of source tasks ``K``; rows carry ``data.source`` in
            ``{-1, 0, ..., K-1}`` (-1: target).
        variant: ``"mode"`` (the source noise is the inverse-gamma posterior mode,
            recomputed from the data, as Joy et al. 2019 update it) or
            ``"bayes"`` (the source noise sampled: by default from the cut
            posterior of the module docstring, site ``source_gamma`` (K,); with
            ``likelihood="joint"`` or ``"conditional"`` the site
            ``source_noise`` (K,) with the inverse-gamma prior, fitted like any
            site).
        kernel: the shared latent kernel, a name in
            :data:`ppbo.models.kernels.KERNELS` or ``lengthscale -> Kernel``.
        mean: ``"zero"``, ``"constant"`` or ``"linear"`` (shared by all rows;
            each task is standardised on its own).
        tau0, upsilon0: shape and rate of the ``InverseGamma(tau_0, upsilon_0)``
            prior of each source's noise variance (prior mode
            ``upsilon_0 / (tau_0 + 1) = 0.1`` by default, in standardised units).
        priors: site name -> NumPyro distribution replacing a default prior
            (:data:`DEFAULT_PRIORS`, then the GP's; ``source_noise`` only with
            ``variant="bayes"``).
        lengthscale_prior: a name in :data:`ppbo.models.gp.LENGTHSCALE_PRIORS`.
        likelihood: what the sites are fitted to (the predictive always
            conditions on every row). ``"target"`` (the default): the
            target rows' own marginal likelihood, so the sources shape the
            prediction but not the kernel; ``"joint"``: ``p(y_S, y_T)``;
            ``"conditional"``: ``p(y_T | y_S)``, the joint
            likelihood divided by the sources' evidence, which judges
            ``source_noise`` by how well the sources predict the target. With
            many source rows the joint fit bends the shared kernel to the
            sources (on unrelated sources a lengthscale of 0.015 and a target
            that EI cannot optimise; ``benchmarks/README.md``). With
            ``"target"`` the bayes variant samples the cut posterior of the
            module docstring (site ``source_gamma``; ``priors["source_noise"]``,
            if given, must then be a scalar ``InverseGamma``).

    Returns:
        A :class:`ppbo.Surrogate` whose ``predict(params, data, X, cache)`` gives
        the TARGET latent mean and variance (m,) at ``X`` (m, d) conditioned on all
        rows, ``predict_joint`` the joint covariance (m, m), and ``noise`` the
        target observation noise. It declares conditioning (predictions are a
        function of the data) but no :class:`ppbo.GPParts`: its source rows carry
        an extra noise that ``noise(params, X)`` cannot express, so random-feature
        paths (Thompson sampling, PES) refuse it; EI, log-EI, PI, UCB, KG and MES
        work. ``extras["source_noise"]`` is ``(params, data) -> (K,)``, the source
        noise variances of one sample.

    Raises:
        ValueError: for ``num_sources < 1``, an unknown variant, kernel, mean or
            prior site, non-positive ``tau0``/``upsilon0``; at fit time (via
            ``check_data``) for data without source ids or with ids ``>= K``.

    Example:
        >>> import jax, numpy as np, ppbo
        >>> jax.config.update("jax_enable_x64", True)
        >>> X = np.random.default_rng(0).random((6, 1))
        >>> data = ppbo.Dataset(X, np.sin(6 * X[:, 0]), source=[0, 0, 0, 0, -1, -1])
        >>> s = surrogate(num_sources=1, variant="mode")
        >>> s.name
        'env_gp(matern52, K=1, mode)'
        >>> params = {"lengthscale": np.array([0.3]), "outputscale": 1.0,
        ...           "noise": 1e-4, "mean": 0.0}
        >>> posterior = ppbo.fit(s, data, ppbo.Fixed(params), jax.random.key(0))
        >>> posterior.predict(np.array([[0.5]]))[0].shape
        (1, 1)

    References:
        Joy, Rana, Gupta and Venkatesh (2019), "Flexible transfer learning
        framework for Bayesian optimisation with convergence guarantee" (the
        envelope covariance and the inverse-gamma source-noise update and its
        mode, restated in the module docstring); Shilton, Gupta, Rana and
        Venkatesh (2017), "Regret bounds for transfer learning in Bayesian
        optimisation" (Env-GP); Rasmussen and Williams (2006), Algorithm 2.1.
    """
    num_sources = check_num_sources(num_sources)
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if likelihood is None:
        likelihood = "target"
    if likelihood not in LIKELIHOODS:
        raise ValueError(
            f"likelihood must be one of {LIKELIHOODS}, got likelihood={likelihood!r}"
        )
    _check_common(kernel, mean)
    known = set(default_priors(1, lengthscale_prior))
    if variant == "bayes":
        known.add("source_noise")
    priors = {**DEFAULT_PRIORS, **_check_priors(priors, known)}
    if variant == "bayes" and likelihood == "target" and "source_noise" in priors:
        prior = priors["source_noise"]
        if not isinstance(prior, dist.InverseGamma) or prior.batch_shape != ():
            raise ValueError(
                "priors['source_noise'] must be a scalar numpyro InverseGamma with "
                "variant='bayes', likelihood='target' (its conjugate update by the "
                f"target's residuals defines the posterior), got {prior!r}"
            )
    config = _Config(
        num_sources=num_sources,
        variant=variant,
        kernel=kernel,
        mean=mean,
        priors=priors,
        tau0=_positive("tau0", tau0),
        upsilon0=_positive("upsilon0", upsilon0),
        lengthscale_prior=lengthscale_prior,
        likelihood=likelihood,
    )
    kernel_name = (
        kernel if isinstance(kernel, str) else getattr(kernel, "__name__", "custom")
    )

    def source_noise(params, data):
        return _source_noise(config, params, data, cholesky)

    return Surrogate(
        model=partial(_model, config=config),
        predict=partial(_predict, config=config),
        prepare=partial(_prepare, config=config),
        predict_joint=partial(_predict_joint, config=config),
        name=f"env_gp({kernel_name}, K={num_sources}, {variant})",
        check_data=partial(check_sources, num_sources=num_sources),
        extras={
            "kernel": partial(build_kernel, kernel),
            "mean": partial(mean_function, mean),
            "source_noise": source_noise,
            "kernel_name": kernel_name,
            "num_sources": num_sources,
        },
        noise=_noise,
    )
