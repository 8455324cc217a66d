"""Transfer GP with a nearest-neighbour task kernel over dataset meta-features.

Yogatama and Mann (2014), "Efficient transfer learning method for automatic
hyperparameter tuning" (AISTATS), §3: one GP over the observations of all tasks,
each task's outputs standardised on their own (the campaign does this), with a
squared-exponential kernel between points of the same task and a nearest-neighbour
kernel across tasks: a task only borrows strength from the ``n`` tasks nearest to
it in the space of dataset meta-features ``m^a`` (Euclidean distance). The survey's
display equation of the nearest-neighbour kernel was lost; we use a form that is
positive semi-definite by construction, which an indicator "``b`` is among the
``n`` nearest tasks of ``a``" is not (it is not even symmetric):

.. math::
    N(a) = \\{\\text{the } n \\text{ tasks nearest to } a\\} \\ni a, \\qquad
    S_{ab} = \\frac{|N(a) \\cap N(b)|}{n} = φ_a^\\top φ_b, \\quad
    φ_a = \\mathbb 1_{N(a)} / \\sqrt n,

.. math::
    T = (1 - ρ) I + ρ S, \\qquad
    k\\big((x, a), (x', b)\\big) = σ_f^2 \\, T_{ab} \\, k_{SE}(x, x'),

so that ``T_aa = 1`` (within a task: the SE kernel), two tasks correlate in
proportion to the nearest neighbours they share (tasks whose neighbourhoods are
disjoint are independent), and ``T`` is PSD as a convex combination of the identity
and a Gram matrix; the product with ``k_SE`` is PSD by the Schur product theorem.
``ρ ∈ (0, 1)`` (site ``task_weight``) is learned. Ties in distance are broken by
task index; ``n`` is capped at the number of tasks ``K + 1``.

Tasks: source ``k`` (``data.source == k``) is task ``k``, the target
(``source == -1``) is task ``K``; ``meta_features`` has ``K + 1`` rows in that
order (the campaign's convention). Without meta-features every task is a
neighbour of every other (``S = 1 1^T``).

Sites: ``lengthscale`` (d,), ``outputscale``, ``noise`` (target, default prior
``LogNormal(log 1e-4, 2.5)``, :data:`DEFAULT_PRIORS`),
``source_noise`` (shared by the source tasks), ``mean`` (shared constant mean of the
standardised outputs), ``task_weight`` (``ρ``, default prior ``Beta(2, 2)``).

References:
    Yogatama, D. and Mann, G. (2014). Efficient transfer learning method for
    automatic hyperparameter tuning. AISTATS, PMLR 33, §3.

    Rasmussen, C. E. and Williams, C. K. I. (2006). Gaussian Processes for Machine
    Learning. MIT Press, Algorithm 2.1.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
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
from ppbo.models.kernels import KERNELS
from ppbo.models.sources import (
    LIKELIHOODS,
    TARGET_NOISE_PRIOR,
    check_num_sources,
    check_sources,
    condition_on_sources,
)
from ppbo.surrogate import Surrogate

__all__ = [
    "surrogate",
    "neighbour_overlap",
    "task_kernel",
    "PRIOR_SITES",
    "DEFAULT_PRIORS",
]

#: Sites whose prior can be replaced through ``priors=``.
PRIOR_SITES = (
    "lengthscale",
    "outputscale",
    "noise",
    "source_noise",
    "mean",
    "task_weight",
)


def neighbour_overlap(meta_features: np.ndarray, num_neighbours: int) -> np.ndarray:
    """The shared-nearest-neighbour matrix ``S_ab = |N(a) ∩ N(b)| / n``, (t, t).

    Args:
        meta_features: one row of meta-features per task, shape (t, F).
        num_neighbours: ``n``, the size of each neighbourhood (a task is its own
            nearest neighbour); capped at ``t``.

    Returns:
        ``S`` (t, t), symmetric, PSD, unit diagonal.

    Raises:
        ValueError: for meta-features that are not a finite (t, F) array, or
            ``num_neighbours < 1``.

    Example:
        >>> M = np.array([[0.0], [0.1], [5.0], [5.1]])
        >>> neighbour_overlap(M, 2)  # N = {0,1}, {1,0}, {2,3}, {3,2}
        array([[1., 1., 0., 0.],
               [1., 1., 0., 0.],
               [0., 0., 1., 1.],
               [0., 0., 1., 1.]])
    """
    M = np.asarray(meta_features, dtype=np.float64)
    if M.ndim != 2 or M.shape[0] < 1 or not np.all(np.isfinite(M)):
        raise ValueError(
            f"meta_features must be a finite array of shape (tasks, features), got "
            f"shape {M.shape}"
        )
    integral = isinstance(num_neighbours, numbers.Integral)
    if not integral or isinstance(num_neighbours, bool) or num_neighbours < 1:
        raise ValueError(
            f"num_neighbours must be an integer >= 1, got {num_neighbours!r}"
        )
    t = M.shape[0]
    n = min(int(num_neighbours), t)
    dist2 = np.sum((M[:, None, :] - M[None, :, :]) ** 2, axis=-1)
    np.fill_diagonal(dist2, -1.0)  # a task is its own nearest neighbour
    order = np.argsort(dist2, axis=1, kind="stable")[:, :n]
    Phi = np.zeros((t, t))
    np.put_along_axis(Phi, order, 1.0, axis=1)
    return Phi @ Phi.T / n


def task_kernel(overlap: jax.Array, task_weight: jax.Array) -> jax.Array:
    """Task covariance ``T = (1 - ρ) I + ρ S``, (t, t).

    Example:
        >>> S = jnp.ones((2, 2))
        >>> task_kernel(S, 0.25).tolist()
        [[1.0, 0.25], [0.25, 1.0]]
    """
    overlap = jnp.asarray(overlap)
    eye = jnp.eye(overlap.shape[0], dtype=overlap.dtype)
    return (1.0 - task_weight) * eye + task_weight * overlap


@dataclass(frozen=True, eq=False)
class _Config:
    num_sources: int
    overlap: np.ndarray  # (K + 1, K + 1)
    kernel: str
    priors: Mapping[str, dist.Distribution]
    likelihood: str = "joint"


#: Default priors that differ from the GP's (a user's ``priors`` override them site
#: by site): ``task_weight ~ Beta(2, 2)`` and, for the target's noise variance, the
#: transfer GPs' shared :data:`ppbo.models.sources.TARGET_NOISE_PRIOR`. The
#: sources' ``source_noise`` keeps the GP's noise prior.
DEFAULT_PRIORS: dict[str, dist.Distribution] = {
    "task_weight": dist.Beta(2.0, 2.0),
    "noise": TARGET_NOISE_PRIOR,
}


def _default_prior(name: str, d: int) -> dist.Distribution:
    if name in DEFAULT_PRIORS:
        return DEFAULT_PRIORS[name]
    return gp.default_priors(d)["noise" if name == "source_noise" else name]


def _prior(config: _Config, name: str, d: int) -> dist.Distribution:
    prior = config.priors.get(name) or _default_prior(name, d)
    if name == "lengthscale" and prior.event_shape == ():
        prior = prior.expand([d]).to_event(1)
    return prior


def _tasks(config: _Config, data: Dataset) -> jax.Array:
    return jnp.where(data.source < 0, config.num_sources, data.source)


def _input_kernel(config: _Config, params):
    return params["outputscale"] * KERNELS[config.kernel](params["lengthscale"])


def _covariance(config: _Config, params, data: Dataset) -> jax.Array:
    T = task_kernel(config.overlap, params["task_weight"])
    tasks = _tasks(config, data)
    K = T[tasks[:, None], tasks[None, :]] * _input_kernel(config, params).matrix(
        data.X, data.X
    )
    noise = jnp.where(data.source < 0, params["noise"], params["source_noise"])
    return K + jnp.diag(noise + JITTER)


def _model(data: Dataset, *, config: _Config) -> None:
    d = data.X.shape[1]
    params = {
        name: numpyro.sample(name, _prior(config, name, d)) for name in PRIOR_SITES
    }
    K = _covariance(config, params, data)
    loc = jnp.full(data.capacity, params["mean"])
    numpyro.sample("y", MaskedMultivariateNormal(loc, K, data.mask), obs=data.y)
    if config.likelihood == "conditional":
        condition_on_sources(loc, K, data)


def _prepare(params, data: Dataset, *, config: _Config) -> dict[str, jax.Array]:
    L = cholesky(masked_covariance(_covariance(config, params, data), data.mask))
    r = jnp.where(data.mask, data.y - params["mean"], 0.0)
    return {"L": L, "alpha": cho_solve((L, True), r)}


def _cross(params, data: Dataset, X, config: _Config):
    T = task_kernel(config.overlap, params["task_weight"])
    kernel = _input_kernel(config, params)
    Ks = T[config.num_sources, _tasks(config, data)][None, :] * kernel.matrix(X, data.X)
    return kernel, jnp.where(data.mask[None, :], Ks, 0.0)


def _predict(params, data: Dataset, X, cache, *, config: _Config):
    kernel, Ks = _cross(params, data, X, config)
    mean = params["mean"] + Ks @ cache["alpha"]
    V = solve_triangular(cache["L"], Ks.T, lower=True)
    return mean, jnp.maximum(kernel.diag(X) - jnp.sum(V**2, axis=0), 0.0)


def _predict_joint(params, data: Dataset, X, cache, *, config: _Config):
    kernel, Ks = _cross(params, data, X, config)
    mean = params["mean"] + Ks @ cache["alpha"]
    V = solve_triangular(cache["L"], Ks.T, lower=True)
    return mean, kernel.matrix(X, X) - V.T @ V


def _noise(params, X: jax.Array) -> jax.Array:
    return jnp.full(X.shape[0], params["noise"] + JITTER, dtype=X.dtype)


def surrogate(
    num_sources: int = 1,
    meta_features: Sequence[Sequence[float]] | None = None,
    num_neighbours: int = 3,
    kernel: str = "rbf",
    priors: Mapping[str, dist.Distribution] | None = None,
    likelihood: str = "joint",
) -> Surrogate:
    """Build the GP with the nearest-neighbour task kernel (Yogatama and Mann 2014).

    Args:
        num_sources: number of source tasks ``K`` (ids ``0..K-1`` in
            ``data.source``).
        meta_features: ``K + 1`` rows of dataset meta-features, the sources in
            order and then the target (plain lists are accepted); None: every task
            is a neighbour of every other.
        num_neighbours: ``n``, the size of each task's neighbourhood, itself
            included; capped at ``K + 1``.
        kernel: the within-task input kernel; the paper's is ``"rbf"``
            (squared-exponential); ``"matern52"`` etc. are accepted.
        priors: site name -> NumPyro distribution (sites in :data:`PRIOR_SITES`)
            replacing a default prior (:data:`DEFAULT_PRIORS`, then the GP's).
        likelihood: what the sites are fitted to (the predictive always
            conditions on every row): ``"joint"`` (default), ``p(y_S, y_T)``,
            the paper's marginal likelihood of all tasks; ``"conditional"``,
            ``p(y_T | y_S)`` (:func:`ppbo.models.sources.condition_on_sources`),
            which judges the shared lengthscale and ``task_weight`` by how well
            the target is predicted. Measured on the transfer benchmark, the
            conditional fit was 2.1x the GP's regret on unrelated sources (the
            joint 2.6x) but 4.6x worse than the joint fit on translated
            Hartmann-3 tasks after 10 evaluations (``benchmarks/README.md``).

    Returns:
        A :class:`ppbo.Surrogate` predicting the TARGET task's latent mean and
        variance, with ``predict_joint``, the target ``noise`` and conditioning on
        appended target rows; no :class:`ppbo.GPParts`. ``extras["overlap"]`` is
        the matrix ``S`` (see :func:`neighbour_overlap`).

    Raises:
        ValueError: for ``num_sources < 1``, meta-features without ``K + 1`` rows
            or not finite, ``num_neighbours < 1``, an unknown kernel or prior site.

    Example:
        >>> s = surrogate(num_sources=2, meta_features=[[0.0], [3.0], [0.2]],
        ...               num_neighbours=2)
        >>> s.extras["overlap"].tolist()  # N = {0, 2}, {1, 2}, {2, 0}
        [[1.0, 0.5, 1.0], [0.5, 1.0, 0.5], [1.0, 0.5, 1.0]]

    References:
        Yogatama and Mann (2014), §3; Rasmussen and Williams (2006), Algorithm 2.1.
    """
    num_sources = check_num_sources(num_sources)
    t = num_sources + 1
    if meta_features is None:
        overlap = np.ones((t, t))
        neighbour_overlap(np.zeros((t, 1)), num_neighbours)  # validates n
    else:
        M = np.asarray(meta_features, dtype=np.float64)
        if M.ndim != 2 or M.shape[0] != t:
            raise ValueError(
                f"meta_features must have num_sources + 1 = {t} rows (the sources, "
                f"then the target), got shape {M.shape}"
            )
        overlap = neighbour_overlap(M, num_neighbours)
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
    if likelihood not in LIKELIHOODS:
        raise ValueError(
            f"likelihood must be one of {LIKELIHOODS}, got likelihood={likelihood!r}"
        )
    config = _Config(
        num_sources=num_sources,
        overlap=overlap,
        kernel=kernel,
        priors=priors,
        likelihood=likelihood,
    )
    return Surrogate(
        model=partial(_model, config=config),
        predict=partial(_predict, config=config),
        prepare=partial(_prepare, config=config),
        predict_joint=partial(_predict_joint, config=config),
        name=f"nn_task_gp({kernel}, K={num_sources}, n={min(num_neighbours, t)})",
        check_data=partial(check_sources, num_sources=num_sources),
        extras={
            "overlap": overlap,
            "task_kernel": partial(task_kernel, overlap),
            "kernel_name": kernel,
            "num_sources": num_sources,
        },
        noise=_noise,
    )
