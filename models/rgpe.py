"""Ranking-weighted Gaussian process ensemble (RGPE) for transfer from source tasks.

Feurer, Letham and Bakshy (2018), "Scalable meta-learning for Bayesian optimization
using ranking-weighted Gaussian process ensembles" (ICML AutoML workshop; journal
version Feurer, Letham, Hutter and Bakshy 2022, "Practical transfer learning for
Bayesian optimization"). One GP per task: each source task ``k`` fitted on its own
rows, the target on the target rows. The ensemble predicts the target as

.. math::
    \\bar f(x) \\sim \\mathcal N\\Big(\\sum_k w_k μ_k(x), \\;
        \\sum_k w_k^2 σ_k^2(x)\\Big)

(Feurer et al. 2018, eq. (2)). The weight of a model is the probability that it
ranks the target observations best: the ranking loss of model ``k`` counts the
misranked pairs of target observations (eq. (3)),

.. math::
    \\mathcal L(f_k, D) = \\sum_{j=1}^{n} \\sum_{l=1}^{n}
        \\mathbb 1\\big[(f_k(x_j) < f_k(x_l)) \\oplus (y_j < y_l)\\big],

where the target's own model predicts each ``x_j`` from the other target points
(leave-one-out, eq. (4); the closed form of Rasmussen and Williams 2006, eq.
(5.12)). The loss is computed on ``S`` bootstrap resamples of the target
observations, and ``w_k`` is the fraction of resamples on which model ``k`` has the
smallest loss (ties split equally). Weight dilution prevention (§4.2): a source
model whose median loss over the resamples exceeds the 95th percentile of the
target model's losses is discarded (weight 0) before the weights are computed.

Each base GP has a Matérn-5/2 kernel and a constant mean; its hyperparameters
(lengthscales, signal and noise variance, mean) are the MAP estimate under the
default priors of :mod:`ppbo.models.gp`, found by ``num_steps`` Adam steps on the
log marginal likelihood plus log prior from the prior medians (all tasks at once,
vmapped); not a full optimisation, but enough for the small tasks BO sees. Means
are taken on the standardised scale of each task (rankings do not depend on it).

The surrogate brings its own trainer (fit with :class:`ppbo.Train`). Its samples
have one member (``s = 1``): per-task hyperparameters ``lengthscale`` (s, t, d),
``outputscale``, ``noise``, ``mean`` (s, t) and the ``weights`` (s, t), with tasks
``0..K-1`` the sources and ``K`` the target. Predictions are a function of the data
(the target GP conditions on appended target rows), so batches and pending points
work; the weights stay those of the fit.

References:
    Feurer, M., Letham, B. and Bakshy, E. (2018). Scalable meta-learning for
    Bayesian optimization using ranking-weighted Gaussian process ensembles. ICML
    2018 AutoML workshop, eqs. (2)-(4), §4.2.

    Rasmussen, C. E. and Williams, C. K. I. (2006). Gaussian Processes for Machine
    Learning. MIT Press, Algorithm 2.1 and eq. (5.12).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import optax
from jax.scipy.linalg import cho_solve, solve_triangular

from ppbo.data import Dataset
from ppbo.linalg import cholesky
from ppbo.models import gp
from ppbo.models.gaussian import gaussian_log_density, masked_covariance
from ppbo.models.gp import JITTER
from ppbo.models.kernels import Matern52
from ppbo.models.sources import check_num_sources, check_sources
from ppbo.surrogate import Surrogate

__all__ = ["surrogate", "ranking_losses", "ensemble_weights", "task_masks"]


def task_masks(data: Dataset, num_sources: int) -> jax.Array:
    """Row masks of the ``K + 1`` tasks, shape (K + 1, capacity); the target last.

    Example:
        >>> import jax, numpy as np
        >>> from ppbo.data import Dataset
        >>> jax.config.update("jax_enable_x64", True)
        >>> data = Dataset(np.zeros((3, 1)), np.zeros(3), source=[1, -1, 0])
        >>> task_masks(data, 2)[:, :3].astype(int).tolist()
        [[0, 0, 1], [1, 0, 0], [0, 1, 0]]
    """
    ids = jnp.where(data.source < 0, num_sources, data.source)
    return data.mask[None, :] & (ids[None, :] == jnp.arange(num_sources + 1)[:, None])


def ranking_losses(f: jax.Array, y: jax.Array, counts: jax.Array) -> jax.Array:
    """Misranked pairs of every model on every bootstrap resample (eq. (3)).

    Args:
        f: each model's predictions at the target points, shape (t, n).
        y: the target observations, shape (n,).
        counts: how often each target point is in each resample, shape (S, n)
            (zero for rows that are not target observations).

    Returns:
        Losses ``sum_jl c_j c_l 1[(f_j < f_l) xor (y_j < y_l)]``, shape (t, S).

    Example:
        >>> f = jnp.array([[1.0, 2.0], [2.0, 1.0]])
        >>> ranking_losses(f, jnp.array([0.0, 1.0]), jnp.ones((1, 2))).tolist()
        [[0.0], [2.0]]
    """
    discord = (f[:, :, None] < f[:, None, :]) != (y[:, None] < y[None, :])
    return jnp.einsum("sj,kjl,sl->ks", counts, discord.astype(counts.dtype), counts)


def ensemble_weights(losses: jax.Array, percentile: float = 95.0) -> jax.Array:
    """RGPE weights from bootstrap losses, with weight dilution prevention.

    Args:
        losses: ranking losses (t, S), the target model LAST.
        percentile: a source whose median loss exceeds this percentile of the
            target model's losses gets weight 0 (Feurer et al. 2018, §4.2).

    Returns:
        Weights (t,), summing to 1: the fraction of resamples on which each model
        has the smallest loss, ties split equally.

    Example:
        >>> losses = jnp.array([[0.0, 1.0], [9.0, 9.0], [1.0, 1.0]])
        >>> ensemble_weights(losses).tolist()
        [0.75, 0.0, 0.25]
    """
    target = losses[-1]
    keep = jnp.median(losses, axis=1) <= jnp.percentile(target, percentile)
    keep = keep.at[-1].set(True)
    masked = jnp.where(keep[:, None], losses, jnp.inf)
    best = masked == jnp.min(masked, axis=0, keepdims=True)
    share = best / jnp.sum(best, axis=0, keepdims=True)
    return jnp.mean(share, axis=1)


@dataclass(frozen=True, eq=False)
class _Config:
    num_sources: int
    num_bootstrap: int
    num_steps: int
    learning_rate: float


def _task_params(theta):
    return {
        "lengthscale": jnp.exp(theta["log_lengthscale"]),
        "outputscale": jnp.exp(theta["log_outputscale"]),
        "noise": jnp.exp(theta["log_noise"]),
        "mean": theta["mean"],
    }


def _covariance(p, X):
    K = p["outputscale"] * Matern52(p["lengthscale"]).matrix(X, X)
    return K + jnp.diag(jnp.full(X.shape[0], p["noise"] + JITTER))


def _log_posterior(theta, X, y, mask):
    p = _task_params(theta)
    K = masked_covariance(_covariance(p, X), mask)
    r = jnp.where(mask, y - p["mean"], 0.0)
    priors = gp.default_priors(X.shape[1])
    log_prior = (
        jnp.sum(priors["lengthscale"].log_prob(p["lengthscale"]))
        + priors["outputscale"].log_prob(p["outputscale"])
        + priors["noise"].log_prob(p["noise"])
        + priors["mean"].log_prob(p["mean"])
    )
    return gaussian_log_density(K, r, jnp.sum(mask).astype(y.dtype)) + log_prior


def _fit_task(X, y, mask, config: _Config):
    d = X.shape[1]
    theta = {
        "log_lengthscale": jnp.full(d, jnp.log(0.5 * jnp.sqrt(d))),
        "log_outputscale": jnp.zeros(()),
        "log_noise": jnp.full((), -4.0),
        "mean": jnp.zeros(()),
    }
    optimiser = optax.adam(config.learning_rate)
    grad = jax.grad(lambda th: -_log_posterior(th, X, y, mask))

    def update(carry, _):
        theta, state = carry
        updates, state = optimiser.update(grad(theta), state)
        return (optax.apply_updates(theta, updates), state), None

    (theta, _), _ = jax.lax.scan(
        update, (theta, optimiser.init(theta)), None, length=config.num_steps
    )
    return _task_params(theta)


def _factor(p, X, mask):
    L = cholesky(masked_covariance(_covariance(p, X), mask))
    return L, solve_triangular(L, jnp.eye(L.shape[0], dtype=L.dtype), lower=True)


def _task_cache(p, X, y, mask):
    L, L_inv = _factor(p, X, mask)
    r = jnp.where(mask, y - p["mean"], 0.0)
    return {"L_inv": L_inv, "alpha": cho_solve((L, True), r)}


def _task_predict(p, cache, X_data, mask, X):
    kernel = p["outputscale"] * Matern52(p["lengthscale"])
    Ks = jnp.where(mask[None, :], kernel.matrix(X, X_data), 0.0)
    V = cache["L_inv"] @ Ks.T
    return p["mean"] + Ks @ cache["alpha"], kernel, V


def _trainer(key, data: Dataset, *, config: _Config):
    masks = task_masks(data, config.num_sources)
    # tasks one at a time (lax.map, not vmap): batched factorisations inside the
    # fits' loops can deadlock jaxlib's CPU LAPACK kernels on a two-thread pool
    params = jax.lax.map(lambda m: _fit_task(data.X, data.y, m, config), masks)
    caches = jax.lax.map(
        lambda pm: _task_cache(pm[0], data.X, data.y, pm[1]), (params, masks)
    )
    target = masks[-1]
    # source models at the target points; the target model leave-one-out (R&W 5.12)
    means = jax.vmap(lambda p, c, m: _task_predict(p, c, data.X, m, data.X)[0])(
        params, caches, masks
    )
    K_inv_diag = jnp.sum(caches["L_inv"][-1] ** 2, axis=0)
    loo = data.y - caches["alpha"][-1] / K_inv_diag
    f = means.at[-1].set(loo)
    # bootstrap: n_t draws with replacement from the target rows (fixed shapes:
    # `capacity` draws, of which the first n_t are kept)
    n_t = jnp.sum(target)
    p = target / jnp.maximum(n_t, 1)

    def counts(key):
        rows = jax.random.choice(key, data.capacity, (data.capacity,), p=p)
        keep = (jnp.arange(data.capacity) < n_t).astype(data.y.dtype)
        return jnp.zeros(data.capacity, data.y.dtype).at[rows].add(keep)

    c = jax.vmap(counts)(jax.random.split(key, config.num_bootstrap))
    y = jnp.where(target, data.y, 0.0)
    weights = ensemble_weights(ranking_losses(f, y, c * target))
    samples = dict(params, weights=weights)
    return jax.tree.map(lambda a: a[None], samples)


def _prepare(params, data: Dataset, *, config: _Config):
    masks = task_masks(data, config.num_sources)
    task = {k: params[k] for k in ("lengthscale", "outputscale", "noise", "mean")}
    return jax.lax.map(
        lambda pm: _task_cache(pm[0], data.X, data.y, pm[1]), (task, masks)
    )


def _per_task(params, data, X, cache, config):
    masks = task_masks(data, config.num_sources)
    task = {k: params[k] for k in ("lengthscale", "outputscale", "noise", "mean")}

    def one(p, c, m):
        mean, kernel, V = _task_predict(p, c, data.X, m, X)
        return mean, kernel.matrix(X, X) - V.T @ V

    return jax.vmap(one)(task, cache, masks)


def _predict(params, data: Dataset, X, cache, *, config: _Config):
    masks = task_masks(data, config.num_sources)
    task = {k: params[k] for k in ("lengthscale", "outputscale", "noise", "mean")}

    def one(p, c, m):
        mean, kernel, V = _task_predict(p, c, data.X, m, X)
        return mean, jnp.maximum(kernel.diag(X) - jnp.sum(V**2, axis=0), 0.0)

    means, variances = jax.vmap(one)(task, cache, masks)
    w = params["weights"]
    return w @ means, (w**2) @ variances


def _predict_joint(params, data: Dataset, X, cache, *, config: _Config):
    means, covs = _per_task(params, data, X, cache, config)
    w = params["weights"]
    return w @ means, jnp.einsum("k,kij->ij", w**2, covs)


def _noise(params, X: jax.Array) -> jax.Array:
    return jnp.full(X.shape[0], params["noise"][-1] + JITTER, dtype=X.dtype)


def surrogate(
    num_sources: int = 1,
    num_bootstrap: int = 256,
    num_steps: int = 200,
    learning_rate: float = 0.05,
) -> Surrogate:
    """Build the RGPE surrogate (Feurer, Letham and Bakshy 2018).

    Args:
        num_sources: number of source tasks ``K`` (ids ``0..K-1``).
        num_bootstrap: ``S``, bootstrap resamples of the target observations for
            the ranking-loss weights.
        num_steps: Adam steps of each base GP's MAP fit.
        learning_rate: Adam step size (in log-hyperparameter space).

    Returns:
        A :class:`ppbo.Surrogate` with its own trainer (fit it with
        :class:`ppbo.Train`): ``predict`` gives the weighted mixture mean and the
        ``sum w^2 var`` variance of the target, ``predict_joint`` the weighted
        joint covariance, ``noise`` the target GP's noise; it conditions on
        appended target rows. No :class:`ppbo.GPParts`.

    Raises:
        ValueError: for ``num_sources``, ``num_bootstrap`` or ``num_steps`` below
            1 or a non-positive learning rate.

    Example:
        >>> import jax, numpy as np, ppbo
        >>> jax.config.update("jax_enable_x64", True)
        >>> X = np.linspace(0.0, 1.0, 8)[:, None]
        >>> data = ppbo.Dataset(X, np.sin(5 * X[:, 0]), source=[0] * 5 + [-1] * 3)
        >>> s = surrogate(num_sources=1, num_bootstrap=16, num_steps=20)
        >>> posterior = ppbo.fit(s, data, ppbo.Train(), jax.random.key(0))
        >>> posterior.samples["weights"].shape
        (1, 2)

    References:
        Feurer, Letham and Bakshy (2018), eqs. (2)-(4) and §4.2.
    """
    num_sources = check_num_sources(num_sources)
    for name, value in (("num_bootstrap", num_bootstrap), ("num_steps", num_steps)):
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Integral)
            or value < 1
        ):
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if not float(learning_rate) > 0.0:
        raise ValueError(f"learning_rate must be > 0, got {learning_rate!r}")
    config = _Config(
        num_sources=num_sources,
        num_bootstrap=int(num_bootstrap),
        num_steps=int(num_steps),
        learning_rate=float(learning_rate),
    )
    return Surrogate(
        trainer=partial(_trainer, config=config),
        predict=partial(_predict, config=config),
        prepare=partial(_prepare, config=config),
        predict_joint=partial(_predict_joint, config=config),
        name=f"rgpe(K={num_sources}, S={num_bootstrap})",
        check_data=partial(check_sources, num_sources=num_sources),
        extras={"num_sources": num_sources},
        noise=_noise,
        conditioning=True,
    )
