"""Boosted hierarchical Gaussian process (BHGP) for transfer from a source task.

Tighineanu, Skubch, Baireuther, Reiss, Berkenkamp and Vinogradska (2022),
"Transfer learning with Gaussian processes for Bayesian optimization" (AISTATS),
§4 (boosted hierarchical GP). The target function is the source function plus a
residual, ``f_t = f_s + δ``, with ``f_s ~ GP(μ_s, σ_s^2 k_s)`` and
``δ ~ GP(c, σ_f^2 k_t)`` independent. Boosting fits the source GP on the source
rows and the target GP on the residuals ``y_t - μ_s^post(X_t)`` of the target rows
about the source posterior mean; the source posterior uncertainty, which plain
boosting drops, is propagated through the target GP's weights ``α`` by the extra
covariance term (the survey's ``Σ^boost``):

.. math::
    m(x_*) = μ_s^{post}(x_*) + c + α_* (y_t - μ_s^{post}(X_t) - c), \\qquad
    α_* = k^t(x_*, X_t) \\big(k^t(X_t, X_t) + σ_n^2 I\\big)^{-1},

.. math::
    k^{BHGP}(x_*, x_*') = k^t(x_*, x_*') - α_* k^t(X_t, x_*')
        + Σ^{boost}_{*,*'}, \\qquad
    Σ^{boost} = Σ^s_{**} + α_* Σ^s_{tt} α_*^\\top - α_* Σ^s_{t*} - Σ^s_{*t} α_*^\\top,

with ``k^t = σ_f^2 k_t`` and ``Σ^s`` the posterior covariance of the source GP
(conditioned on the source rows) between the target rows ``t`` and the query
points ``*``. ``Σ^{boost}`` is the covariance of ``g(x_*) - α_* g(X_t)`` for the
source posterior error ``g = f_s - μ_s^{post}``, so the predictive variance above
is the exact mean squared error of the boosted predictor under the hierarchical
model with the source posterior as the prior of ``f_s`` (tested by Monte Carlo).
The cost is two factorisations, of the source and of the target rows, instead of
one of all rows (the multi-task GP).

Several sources: the paper's BHGP has one source task. Here all source rows
(``data.source >= 0``) are pooled as ONE source task, whatever their ids (each was
standardised by the campaign on its own, so pooling assumes they share one
function up to that standardisation); ``num_sources`` only validates the ids.

Hyperparameters: the paper fits the source GP on the source rows, then the target
GP on the residuals. Here the model's density is the product of the source GP's
marginal likelihood on the source rows and the target GP's marginal likelihood of
the residuals, ``p(y_s | θ_s) N(y_t | μ_s^post(X_t) + c, K_t + σ_n^2 I)``, a proper
joint density (source marginal times boosted target conditional) that MAP and NUTS
can use; the target term also informs ``θ_s`` through ``μ_s^post``, which the
sequential fit does not (with more source than target rows the difference is
small).

Sites: target GP ``lengthscale`` (d,), ``outputscale``, ``noise``, ``mean``
(the public names of :mod:`ppbo.models.gp`); source GP ``source_lengthscale`` (d,),
``source_outputscale``, ``source_noise``, ``source_mean``, with the same default
priors as the single-task GP.

References:
    Tighineanu, P., Skubch, K., Baireuther, P., Reiss, A., Berkenkamp, F. and
    Vinogradska, J. (2022). Transfer learning with Gaussian processes for
    Bayesian optimization. AISTATS, PMLR 151, §4 (boosted hierarchical GP).

    Rasmussen, C. E. and Williams, C. K. I. (2006). Gaussian Processes for Machine
    Learning. MIT Press, Algorithm 2.1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax.scipy.linalg import cho_solve, solve_triangular

from ppbo.data import Dataset
from ppbo.linalg import cholesky
from ppbo.models import gp
from ppbo.models.gaussian import MaskedMultivariateNormal, masked_covariance
from ppbo.models.gp import JITTER
from ppbo.models.kernels import KERNELS
from ppbo.models.sources import check_num_sources, check_sources, source_masks
from ppbo.surrogate import Surrogate

__all__ = [
    "surrogate",
    "PRIOR_SITES",
]

#: Sites whose prior can be replaced through ``priors=``.
PRIOR_SITES = (
    "lengthscale",
    "outputscale",
    "noise",
    "mean",
    "source_lengthscale",
    "source_outputscale",
    "source_noise",
    "source_mean",
)


@dataclass(frozen=True, eq=False)
class _Config:
    num_sources: int
    kernel: str
    priors: Mapping[str, dist.Distribution]


def _prior(config: _Config, name: str, d: int) -> dist.Distribution:
    base = name.removeprefix("source_")
    prior = config.priors.get(name) or gp.default_priors(d)[base]
    if base == "lengthscale" and prior.event_shape == ():
        prior = prior.expand([d]).to_event(1)
    return prior


def _kernels(config: _Config, params):
    base = KERNELS[config.kernel]
    target = params["outputscale"] * base(params["lengthscale"])
    source = params["source_outputscale"] * base(params["source_lengthscale"])
    return target, source


def _factor(kernel, X, noise, mask):
    K = kernel.matrix(X, X) + jnp.diag(jnp.full(X.shape[0], noise + JITTER))
    L = cholesky(masked_covariance(K, mask))
    return L, solve_triangular(L, jnp.eye(L.shape[0], dtype=L.dtype), lower=True)


def _source_posterior(config: _Config, params, data: Dataset):
    """Source GP posterior pieces: mean at the data, alpha, inverse factor."""
    mask_s, _ = source_masks(data)
    _, k_s = _kernels(config, params)
    L, L_inv = _factor(k_s, data.X, params["source_noise"], mask_s)
    r = jnp.where(mask_s, data.y - params["source_mean"], 0.0)
    alpha = cho_solve((L, True), r)
    return k_s, mask_s, L_inv, alpha


def _source_mean(params, k_s, mask_s, alpha, data, X):
    Ks = jnp.where(mask_s[None, :], k_s.matrix(X, data.X), 0.0)
    return params["source_mean"] + Ks @ alpha, Ks


def _model(data: Dataset, *, config: _Config) -> None:
    d = data.X.shape[1]
    names = ("lengthscale", "outputscale", "noise", "mean")
    params = {}
    for name in names:
        params[name] = numpyro.sample(name, _prior(config, name, d))
    for name in names:
        name = "source_" + name
        params[name] = numpyro.sample(name, _prior(config, name, d))
    k_t, k_s = _kernels(config, params)
    mask_s, mask_t = source_masks(data)
    K_s = k_s.matrix(data.X, data.X)
    K_s = K_s + jnp.diag(jnp.full(data.capacity, params["source_noise"] + JITTER))
    loc_s = jnp.full(data.capacity, params["source_mean"])
    numpyro.sample("y_source", MaskedMultivariateNormal(loc_s, K_s, mask_s), obs=data.y)
    # boosted target term: residuals about the source posterior mean (a plain
    # Cholesky: ppbo.linalg.cholesky's jitter loop is not for differentiation)
    L_s = jnp.linalg.cholesky(masked_covariance(K_s, mask_s))
    alpha = cho_solve((L_s, True), jnp.where(mask_s, data.y - loc_s, 0.0))
    mu_s, _ = _source_mean(params, k_s, mask_s, alpha, data, data.X)
    K_t = k_t.matrix(data.X, data.X)
    K_t = K_t + jnp.diag(jnp.full(data.capacity, params["noise"] + JITTER))
    loc_t = mu_s + params["mean"]
    numpyro.sample("y", MaskedMultivariateNormal(loc_t, K_t, mask_t), obs=data.y)


def _prepare(params, data: Dataset, *, config: _Config) -> dict[str, jax.Array]:
    k_t, _ = _kernels(config, params)
    k_s, mask_s, Ls_inv, alpha_s = _source_posterior(config, params, data)
    mu_s, Ks_data = _source_mean(params, k_s, mask_s, alpha_s, data, data.X)
    _, mask_t = source_masks(data)
    L_t, Lt_inv = _factor(k_t, data.X, params["noise"], mask_t)
    r = jnp.where(mask_t, data.y - mu_s - params["mean"], 0.0)
    # source posterior covariance among the data rows (only target rows are used)
    V = Ls_inv @ Ks_data.T
    Sigma_tt = k_s.matrix(data.X, data.X) - V.T @ V
    Sigma_tt = jnp.where(mask_t[:, None] & mask_t[None, :], Sigma_tt, 0.0)
    return {
        "alpha_s": alpha_s,
        "Ls_inv": Ls_inv,
        "Lt_inv": Lt_inv,
        "alpha_t": cho_solve((L_t, True), r),
        "Sigma_tt": Sigma_tt,
    }


def _pieces(params, data: Dataset, X, cache, config: _Config):
    k_t, k_s = _kernels(config, params)
    mask_s, mask_t = source_masks(data)
    mu_s, Ks_x = _source_mean(params, k_s, mask_s, cache["alpha_s"], data, X)
    Kt_x = jnp.where(mask_t[None, :], k_t.matrix(X, data.X), 0.0)  # (m, n)
    W = cache["Lt_inv"] @ Kt_x.T  # (n, m)
    A = W.T @ cache["Lt_inv"]  # alpha_*: (m, n), zero outside target rows
    mean = mu_s + params["mean"] + Kt_x @ cache["alpha_t"]
    # source posterior cross-covariance Σ^s between the query and the data rows
    Vs = cache["Ls_inv"] @ Ks_x.T  # (n, m)
    Ks_data = jnp.where(mask_s[None, :], k_s.matrix(data.X, data.X), 0.0)
    Sigma_xt = k_s.matrix(X, data.X) - Vs.T @ (cache["Ls_inv"] @ Ks_data.T)
    Sigma_xt = jnp.where(mask_t[None, :], Sigma_xt, 0.0)
    return k_t, k_s, mean, W, A, Vs, Sigma_xt


def _predict(params, data: Dataset, X, cache, *, config: _Config):
    k_t, k_s, mean, W, A, Vs, Sigma_xt = _pieces(params, data, X, cache, config)
    var_t = k_t.diag(X) - jnp.sum(W**2, axis=0)
    sigma_xx = k_s.diag(X) - jnp.sum(Vs**2, axis=0)
    boost = (
        sigma_xx
        + jnp.sum((A @ cache["Sigma_tt"]) * A, axis=1)
        - 2.0 * jnp.sum(A * Sigma_xt, axis=1)
    )
    return mean, jnp.maximum(var_t + boost, 0.0)


def _predict_joint(params, data: Dataset, X, cache, *, config: _Config):
    k_t, k_s, mean, W, A, Vs, Sigma_xt = _pieces(params, data, X, cache, config)
    cov_t = k_t.matrix(X, X) - W.T @ W
    cross = A @ Sigma_xt.T
    boost = k_s.matrix(X, X) - Vs.T @ Vs + A @ cache["Sigma_tt"] @ A.T - cross - cross.T
    return mean, cov_t + boost


def _noise(params, X: jax.Array) -> jax.Array:
    return jnp.full(X.shape[0], params["noise"] + JITTER, dtype=X.dtype)


def surrogate(
    num_sources: int = 1,
    kernel: str = "matern52",
    priors: Mapping[str, dist.Distribution] | None = None,
) -> Surrogate:
    """Build the boosted hierarchical GP surrogate (Tighineanu et al. 2022, §4).

    Args:
        num_sources: number of source tasks ``K`` in the data (ids ``0..K-1``);
            their rows are pooled as one source task (see the module docstring).
        kernel: unit-variance kernel shared by the source and the target GP:
            ``"matern12"``, ``"matern32"``, ``"matern52"``, ``"rbf"``.
        priors: site name -> NumPyro distribution replacing a default prior (sites
            in :data:`PRIOR_SITES`); scalar lengthscale priors are broadcast.

    Returns:
        A :class:`ppbo.Surrogate` whose ``predict`` gives the BHGP mean and
        variance of the TARGET latent function, ``predict_joint`` its joint
        covariance and ``noise`` the target noise variance. It conditions on
        appended target rows. It declares no :class:`ppbo.GPParts`: the posterior
        is not a stationary GP of its sites.

    Raises:
        ValueError: for ``num_sources < 1``, an unknown kernel or prior site.

    Example:
        >>> import jax, numpy as np, ppbo
        >>> jax.config.update("jax_enable_x64", True)
        >>> X = np.linspace(0.0, 1.0, 6)[:, None]
        >>> data = ppbo.Dataset(X, np.sin(5 * X[:, 0]), source=[0, 0, 0, 0, -1, -1])
        >>> s = surrogate(num_sources=1)
        >>> params = {"lengthscale": [0.3], "outputscale": 1.0, "noise": 1e-3,
        ...           "mean": 0.0, "source_lengthscale": [0.3],
        ...           "source_outputscale": 1.0, "source_noise": 1e-3,
        ...           "source_mean": 0.0}
        >>> posterior = ppbo.fit(s, data, ppbo.Fixed(params), jax.random.key(0))
        >>> [a.shape for a in posterior.predict(np.array([[0.5]]))]
        [(1, 1), (1, 1)]

    References:
        Tighineanu et al. (2022), §4; Rasmussen and Williams (2006), Algorithm 2.1.
    """
    num_sources = check_num_sources(num_sources)
    stationary = sorted(k for k in KERNELS if k != "linear")
    if kernel not in stationary:
        raise ValueError(f"kernel must be one of {stationary}, got {kernel!r}")
    priors = dict(priors or {})
    for name, prior in priors.items():
        if name not in PRIOR_SITES:
            raise ValueError(
                f"priors has unknown site {name!r}; known sites: {sorted(PRIOR_SITES)}"
            )
        if not isinstance(prior, dist.Distribution):
            raise ValueError(
                f"priors[{name!r}] must be a numpyro Distribution, got {prior!r}"
            )
    config = _Config(num_sources=num_sources, kernel=kernel, priors=priors)
    return Surrogate(
        model=partial(_model, config=config),
        predict=partial(_predict, config=config),
        prepare=partial(_prepare, config=config),
        predict_joint=partial(_predict_joint, config=config),
        name=f"bhgp({kernel}, K={num_sources})",
        check_data=partial(check_sources, num_sources=num_sources),
        extras={"kernel_name": kernel, "num_sources": num_sources},
        noise=_noise,
    )
