"""Diff-GP: a GP on the difference between the target and a source task.

The transfer model of Shilton, Gupta, Rana and Venkatesh (2017), "Regret bounds for
transfer learning in Bayesian optimisation" (AISTATS, PMLR 54:307-315), as the
survey of transfer learning for BO restates it. For source task ``k``:

1. The source GP ``f_{s,k}`` is conditioned on the rows of task ``k``: posterior
   mean ``mu_{s,k}(x)`` and latent variance ``lambda_{s,k}(x)``.
2. The difference ``g_k = f_T - f_{s,k} ~ GP(0, k_{g,k})`` is observed at the
   target rows through ``Delta y_k(x_i) = y_i - mu_{s,k}(x_i)`` with noise
   variance ``lambda_T + lambda_{s,k}(x_i)`` (target noise plus the source
   posterior variance): posterior mean ``mu_{g,k}`` and variance
   ``lambda_{g,k}`` (Rasmussen and Williams 2006, eqs. (2.25)-(2.26), zero prior
   mean).
3. Each source row ``j`` of task ``k`` is corrected to ``y_j + mu_{g,k}(x_j)``, an
   observation of the target with noise ``Lambda^g_jj = lambda_{s,k}(x_j) +
   lambda_{g,k}(x_j)`` (the diagonal ``Lambda^g`` of the survey), and the target
   GP is conditioned on the corrected source rows and the target rows, with the
   covariance ``[[K_ss + Lambda^g, K_sT], [K_Ts, K_TT + lambda_T I]]``.

``prediction="augmented"`` (default) predicts with the GP of step 3, the algorithm
of the paper. ``prediction="sum"`` (one source only) predicts
``mu_s(x) + mu_g(x)`` with variance ``lambda_s(x) + lambda_g(x)``, the
difference model's own predictive (``f_T = f_s + g`` with independent posteriors).

The paper's model has one source. With ``K > 1`` this module fits every source's
difference GP to the same target rows, so the augmented GP of step 3 counts the
target's data ``K`` times; a campaign given several sources therefore fits it to
one source per ask, chosen by the bandit, unless ``source_selection="all"``
(:func:`ppbo.campaign.transfer.default_selection`).

Hyperparameters are sites of one NumPyro model whose likelihood is the source GPs'
marginal likelihood times the difference GPs' marginal likelihoods of ``Delta y``
(with ``K`` sources each difference term is raised to the power ``1 / K``, a
geometric mean, so the target rows count once). The source GPs and the target GP
share ``lengthscale``, ``outputscale`` and the prior mean (every task is
standardised on its own).

Sites: ``lengthscale`` (d,), ``outputscale``, ``noise`` (``lambda_T``, the target
noise), ``mean``, ``mean_weights`` (d,) (linear mean) as in :mod:`ppbo.models.gp`;
``source_noise`` (K,) (each source GP's observation-noise variance, default prior
``LogNormal(-4, 1)``), ``diff_lengthscale`` (K, d) and ``diff_outputscale`` (K,)
(each difference GP's kernel; default priors the GP's lengthscale prior and
``LogNormal(0, 1.5)``, :data:`DEFAULT_PRIORS`: median 1, the variance of a
standardised task, so that an unrelated source's difference is not held small
and its corrected rows are not trusted as precise observations of the target;
with ``LogNormal(-2, 1)``, MISO's old bias prior, Diff-GP ended the benchmark's
negative-transfer family at 55x the GP's regret, ``benchmarks/README.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax.scipy.linalg import cho_solve, solve_triangular

from ppbo.data import Dataset
from ppbo.linalg import cholesky
from ppbo.models.env_gp import (
    _check_common,
    _check_priors,
    _cross,
    _noise,
    _per_source_prior,
    _predict_joint,
    _source_factor,
    _source_predict,
)
from ppbo.models.gaussian import MaskedMultivariateNormal, masked_covariance
from ppbo.models.gp import (
    DEFAULT_LENGTHSCALE_PRIOR,
    JITTER,
    build_kernel,
    default_priors,
    mean_function,
)
from ppbo.models.kernels import KERNELS, Kernel
from ppbo.models.sources import check_num_sources, check_sources
from ppbo.surrogate import Surrogate

__all__ = [
    "surrogate",
    "PREDICTIONS",
    "CORRECTIONS",
    "NEW_SITES",
    "DEFAULT_PRIORS",
    "difference_posterior",
]

#: Predictive distributions offered by :func:`surrogate`.
PREDICTIONS = ("augmented", "sum")

#: How the corrected source rows' errors enter the target GP (:func:`surrogate`).
CORRECTIONS = ("diagonal", "dense")

#: Sites this model adds to the GP's.
NEW_SITES = ("source_noise", "diff_lengthscale", "diff_outputscale")

#: Default priors that differ from the GP's (and from the shared per-source
#: defaults of :mod:`ppbo.models.env_gp`); a user's ``priors`` override them site
#: by site.
DEFAULT_PRIORS: dict[str, dist.Distribution] = {
    "diff_outputscale": dist.LogNormal(0.0, 1.5),
}


@dataclass(frozen=True, eq=False)
class _Config:
    num_sources: int
    prediction: str
    kernel: str | Callable[[jax.Array], Kernel]
    mean: str
    priors: Mapping[str, dist.Distribution]
    lengthscale_prior: str = DEFAULT_LENGTHSCALE_PRIOR
    corrections: str = "diagonal"


def _prior(config: _Config, name: str, d: int) -> dist.Distribution:
    return _per_source_prior(config, name, d, "diff")


def _base(config_kernel):
    return KERNELS[config_kernel] if isinstance(config_kernel, str) else config_kernel


def _per_source(fn, *args):
    # One source after another (lax.map), not vmapped: a vmap batches the K
    # sources' (n, n) Cholesky factorisations and triangular solves, and jaxlib's
    # CPU LAPACK kernels split a batch over the intra-op thread pool and block a
    # pool thread until the pieces finish; two such batched calls running at once
    # on a two-thread pool wait on each other forever (a Diff-GP campaign with
    # K = 5 sources of 200 rows hung in its first model-based ask). Unbatched
    # calls run inline, and the sequential loop costs nothing at K <= 10.
    return jax.lax.map(lambda a: fn(*a), args)


def _source_row_noise(params, data: Dataset) -> jax.Array:
    index = jnp.clip(data.source, 0, params["source_noise"].shape[0] - 1)
    return params["source_noise"][index] + JITTER


def _sources(config: _Config, params, data: Dataset, factor):
    kernel = build_kernel(config.kernel, params)
    mean = partial(mean_function, config.mean, params)
    L, alpha = _source_factor(
        kernel, mean, _source_row_noise(params, data), data, factor
    )
    return kernel, mean, L, alpha


def _difference_factor(config: _Config, params, data: Dataset, mu_s, var_s, factor):
    """Per source: Cholesky factor and weights of g_k's GP on Delta y_k, (K, n, n)."""
    base = _base(config.kernel)
    tmask = data.target_mask

    def one(scale, lengthscale, mu, var):
        Kg = scale * base(lengthscale).matrix(data.X, data.X)
        Kg = Kg + jnp.diag(params["noise"] + JITTER + var)
        L = factor(masked_covariance(Kg, tmask))
        r = jnp.where(tmask, data.y - mu, 0.0)
        return L, cho_solve((L, True), r)

    return _per_source(
        one, params["diff_outputscale"], params["diff_lengthscale"], mu_s, var_s
    )


def _difference_predict(
    config: _Config, params, data: Dataset, Lg, alpha_g, X, full: bool = False
):
    """Posterior mean (K, m) of every g_k at X and its variance (K, m), or with
    ``full`` its covariance (K, m, m)."""
    base = _base(config.kernel)
    tmask = data.target_mask

    def one(scale, lengthscale, L, alpha):
        kernel = scale * base(lengthscale)
        Ks = jnp.where(tmask[None, :], kernel.matrix(X, data.X), 0.0)
        V = solve_triangular(L, Ks.T, lower=True)
        if full:
            return Ks @ alpha, kernel.matrix(X, X) - V.T @ V
        return Ks @ alpha, jnp.maximum(kernel.diag(X) - jnp.sum(V**2, axis=0), 0.0)

    return _per_source(
        one, params["diff_outputscale"], params["diff_lengthscale"], Lg, alpha_g
    )


def difference_posterior(
    params: Mapping[str, jax.Array],
    data: Dataset,
    X: jax.Array,
    *,
    num_sources: int,
    kernel: str | Callable[[jax.Array], Kernel] = "matern52",
    mean: str = "constant",
) -> dict[str, jax.Array]:
    """Source and difference posteriors of one sample at ``X``, for inspection.

    Steps 1-2 of the module docstring (Shilton et al. 2017, Diff-GP).

    Args:
        params: one sample of the sites.
        data: padded observations with ``data.source``.
        X: points (m, d).
        num_sources: ``K``.
        kernel, mean: as for :func:`surrogate`.

    Returns:
        ``{"source_mean", "source_var", "diff_mean", "diff_var"}``, each (K, m).

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np
        >>> from ppbo.data import Dataset
        >>> jax.config.update("jax_enable_x64", True)
        >>> data = Dataset([[0.2], [0.6], [0.2]], [1.0, 0.0, 1.5], source=[0, 0, -1])
        >>> params = {"lengthscale": jnp.ones(1), "outputscale": 1.0,
        ...           "noise": 1e-6, "mean": 0.0, "source_noise": jnp.array([1e-6]),
        ...           "diff_lengthscale": jnp.ones((1, 1)),
        ...           "diff_outputscale": jnp.array([1.0])}
        >>> out = difference_posterior(params, data, jnp.array([[0.2]]), num_sources=1)
        >>> round(float(out["source_mean"][0, 0] + out["diff_mean"][0, 0]), 3)
        1.5
    """
    config = _Config(
        num_sources=int(num_sources),
        prediction="sum",
        kernel=kernel,
        mean=mean,
        priors={},
    )
    k, m, L, alpha = _sources(config, params, data, cholesky)
    mu_s, var_s = _source_predict(k, m, data, L, alpha, data.X, config.num_sources)
    Lg, alpha_g = _difference_factor(config, params, data, mu_s, var_s, cholesky)
    source_mean, source_var = _source_predict(
        k, m, data, L, alpha, X, config.num_sources
    )
    diff_mean, diff_var = _difference_predict(config, params, data, Lg, alpha_g, X)
    return {
        "source_mean": source_mean,
        "source_var": source_var,
        "diff_mean": diff_mean,
        "diff_var": diff_var,
    }


def _model(data: Dataset, *, config: _Config) -> None:
    d = data.X.shape[1]
    names = ["lengthscale", "outputscale", "noise"]
    if config.mean in ("constant", "linear"):
        names.append("mean")
    if config.mean == "linear":
        names.append("mean_weights")
    names += list(NEW_SITES)
    params = {name: numpyro.sample(name, _prior(config, name, d)) for name in names}
    factor = jnp.linalg.cholesky
    kernel, mean, L, alpha = _sources(config, params, data, factor)
    # the source GPs' marginal likelihood: block-diagonal over source tasks
    source = data.source
    real = data.mask & (source >= 0)
    same = (source[:, None] == source[None, :]) & real[:, None] & real[None, :]
    Ks = kernel.matrix(data.X, data.X) + jnp.diag(_source_row_noise(params, data))
    Ks = jnp.where(same, Ks, 0.0)
    numpyro.sample("y", MaskedMultivariateNormal(mean(data.X), Ks, real), obs=data.y)
    # the difference GPs' marginal likelihoods of Delta y on the target rows
    terms = _difference_terms(config, params, data, kernel, mean, L, alpha)
    numpyro.factor("difference", jnp.mean(terms))


#: The difference GPs' likelihood gathers the target rows into a block of
#: ``capacity // TARGET_BLOCK_FRACTION`` rows when they fit in it.
TARGET_BLOCK_FRACTION = 4


def _difference_terms(config: _Config, params, data: Dataset, kernel, mean, L, alpha):
    """Each difference GP's log marginal likelihood of Delta y_k, shape (K,).

    Only the target rows enter these likelihoods, and a transfer campaign has
    few target rows beside hundreds of source rows. Padded to the data's
    capacity, each of the K likelihoods would factorise a capacity-sized matrix
    that is the identity outside the target rows; instead the target rows are
    gathered (stable order, so the likelihood is the same up to a permutation)
    into a block of ``capacity // TARGET_BLOCK_FRACTION`` rows when they fit,
    and the source posteriors are evaluated at those rows only. The block size
    is static (one compilation per bucket); a ``lax.cond`` takes the
    capacity-sized block when there are more target rows.
    """
    tmask = data.target_mask
    order = jnp.argsort(~tmask, stable=True)
    base = _base(config.kernel)

    def terms(size):
        rows = order[:size]
        X, y, mask = data.X[rows], data.y[rows], tmask[rows]
        mu_s, var_s = _source_predict(
            kernel, mean, data, L, alpha, X, config.num_sources
        )

        def log_likelihood(scale, lengthscale, mu, var):
            Kg = scale * base(lengthscale).matrix(X, X)
            Kg = Kg + jnp.diag(params["noise"] + JITTER + var)
            zero = jnp.zeros_like(y)
            return MaskedMultivariateNormal(zero, Kg, mask).log_prob(y - mu)

        return _per_source(
            log_likelihood,
            params["diff_outputscale"],
            params["diff_lengthscale"],
            mu_s,
            var_s,
        )

    block = data.capacity // TARGET_BLOCK_FRACTION
    if block < 1:
        return terms(data.capacity)
    return jax.lax.cond(
        jnp.sum(tmask) <= block,
        lambda: terms(block),
        lambda: terms(data.capacity),
    )


def _prepare(params, data: Dataset, *, config: _Config) -> dict[str, jax.Array]:
    kernel, mean, L, alpha = _sources(config, params, data, cholesky)
    K = config.num_sources
    mu_s, var_s = _source_predict(kernel, mean, data, L, alpha, data.X, K)
    Lg, alpha_g = _difference_factor(config, params, data, mu_s, var_s, cholesky)
    if config.prediction == "sum":
        return {"L": L, "alpha": alpha, "Lg": Lg, "alpha_g": alpha_g}
    dense = config.corrections == "dense"
    mu_g, var_g = _difference_predict(
        config, params, data, Lg, alpha_g, data.X, full=dense
    )
    # corrected source rows (observations of the target) and their noise Lambda^g
    index = jnp.clip(data.source, 0, K - 1)
    rows = jnp.arange(data.capacity)
    is_source = data.source >= 0
    y = data.y + jnp.where(is_source, mu_g[index, rows], 0.0)
    if dense:
        # the corrections' errors mu_g,k - g_k of one source are one draw of g_k's
        # posterior: their covariance (var_g is (K, n, n) here) over that source's
        # rows, not only its diagonal
        same = (
            is_source[:, None]
            & is_source[None, :]
            & (data.source[:, None] == data.source[None, :])
        )
        block = jnp.where(
            same, var_g[index[:, None], rows[:, None], rows[None, :]], 0.0
        )
        row_noise = jnp.where(is_source, var_s[index, rows], params["noise"])
    else:
        block = 0.0
        row_noise = jnp.where(
            is_source, var_s[index, rows] + var_g[index, rows], params["noise"]
        )
    C = kernel.matrix(data.X, data.X) + block + jnp.diag(row_noise + JITTER)
    Lt = cholesky(masked_covariance(C, data.mask))
    r = jnp.where(data.mask, y - mean(data.X), 0.0)
    return {"L": Lt, "alpha": cho_solve((Lt, True), r)}


def _predict(params, data: Dataset, X, cache, *, config: _Config):
    if config.prediction == "sum":
        kernel = build_kernel(config.kernel, params)
        mean = partial(mean_function, config.mean, params)
        mu_s, var_s = _source_predict(
            kernel, mean, data, cache["L"], cache["alpha"], X, config.num_sources
        )
        mu_g, var_g = _difference_predict(
            config, params, data, cache["Lg"], cache["alpha_g"], X
        )
        return mu_s[0] + mu_g[0], var_s[0] + var_g[0]
    kernel, mean, V = _cross(config, params, data, X, cache)
    return mean, jnp.maximum(kernel.diag(X) - jnp.sum(V**2, axis=0), 0.0)


def surrogate(
    num_sources: int = 1,
    prediction: str = "augmented",
    kernel: str | Callable[[jax.Array], Kernel] = "matern52",
    mean: str = "constant",
    priors: Mapping[str, dist.Distribution] | None = None,
    lengthscale_prior: str = DEFAULT_LENGTHSCALE_PRIOR,
    corrections: str = "diagonal",
) -> Surrogate:
    """Build the Diff-GP transfer surrogate (Shilton et al. 2017).

    Args:
        num_sources: number of source tasks ``K``; rows carry ``data.source`` in
            ``{-1, 0, ..., K-1}`` (-1: target). Each source gets its own source
            GP, difference GP and corrected rows.
        prediction: ``"augmented"`` (the target GP on the corrected source rows and
            the target rows, step 3 of the module docstring) or ``"sum"``
            (``mu_s + mu_g`` with variance ``lambda_s + lambda_g``; one source
            only).
        kernel: the kernel family of every GP, a name in
            :data:`ppbo.models.kernels.KERNELS` or ``lengthscale -> Kernel``.
        mean: ``"zero"``, ``"constant"`` or ``"linear"``: the prior mean of the
            source and target GPs (the difference GPs have zero mean).
        priors: site name -> NumPyro distribution replacing a default prior
            (:data:`DEFAULT_PRIORS`, then the GP's); scalar priors are broadcast
            to the site's shape.
        lengthscale_prior: a name in :data:`ppbo.models.gp.LENGTHSCALE_PRIORS`.
        corrections: the error covariance of the corrected source rows in the
            augmented target GP. ``"diagonal"`` (default) is the survey's
            ``Lambda^g = diag(lambda_s + lambda_g)``: every corrected row an
            independent observation. ``"dense"`` keeps ``diag(lambda_s)`` and
            replaces ``diag(lambda_g)`` by the difference GP's posterior covariance
            over each source's rows, ``Sigma_{g,k}(X_k, X_k)`` (block diagonal
            over sources): the corrections ``mu_{g,k}(x_j)`` of one source err
            together, as one draw of ``g_k``'s posterior, so its many rows do not
            count as independent evidence where ``g_k`` is uncertain.

    Returns:
        A :class:`ppbo.Surrogate` whose ``predict`` gives the TARGET latent mean
        and variance (m,) at ``X`` (m, d) and ``noise`` the target observation
        noise; with ``prediction="augmented"`` also ``predict_joint``. It declares
        conditioning (appended target rows change ``Delta y`` and so every
        correction) but no :class:`ppbo.GPParts` (source rows carry per-row noise
        ``Lambda^g``), so Thompson sampling and PES refuse it; EI, log-EI, PI, UCB
        and MES work (KG too with ``"augmented"``). ``extras`` holds
        ``"difference_posterior"`` (``(params, data, X) -> dict``, see
        :func:`difference_posterior`).

    Raises:
        ValueError: for ``num_sources < 1``, an unknown prediction, kernel, mean or
            prior site, ``prediction="sum"`` with ``num_sources > 1``; at fit time
            (via ``check_data``) for data without source ids or with ids ``>= K``.

    Example:
        >>> import jax, numpy as np, ppbo
        >>> jax.config.update("jax_enable_x64", True)
        >>> X = np.random.default_rng(0).random((6, 1))
        >>> data = ppbo.Dataset(X, np.sin(6 * X[:, 0]), source=[0, 0, 0, 0, -1, -1])
        >>> s = surrogate(num_sources=1)
        >>> s.name
        'diff_gp(matern52, K=1, augmented)'
        >>> params = {"lengthscale": np.array([0.3]), "outputscale": 1.0,
        ...           "noise": 1e-4, "mean": 0.0, "source_noise": np.array([1e-4]),
        ...           "diff_lengthscale": np.array([[0.5]]),
        ...           "diff_outputscale": np.array([0.1])}
        >>> posterior = ppbo.fit(s, data, ppbo.Fixed(params), jax.random.key(0))
        >>> posterior.predict(np.array([[0.5]]))[0].shape
        (1, 1)

    References:
        Shilton, Gupta, Rana and Venkatesh (2017), "Regret bounds for transfer
        learning in Bayesian optimisation" (Diff-GP); Rasmussen and Williams
        (2006), eqs. (2.25)-(2.26) and Algorithm 2.1.
    """
    num_sources = check_num_sources(num_sources)
    if prediction not in PREDICTIONS:
        raise ValueError(f"prediction must be one of {PREDICTIONS}, got {prediction!r}")
    if prediction == "sum" and num_sources != 1:
        raise ValueError(
            f'prediction="sum" needs num_sources=1, got num_sources={num_sources}'
        )
    if corrections not in CORRECTIONS:
        raise ValueError(
            f"corrections must be one of {CORRECTIONS}, got {corrections!r}"
        )
    _check_common(kernel, mean)
    known = set(default_priors(1, lengthscale_prior)) | set(NEW_SITES)
    priors = {**DEFAULT_PRIORS, **_check_priors(priors, known)}
    config = _Config(
        num_sources=num_sources,
        prediction=prediction,
        kernel=kernel,
        mean=mean,
        priors=priors,
        lengthscale_prior=lengthscale_prior,
        corrections=corrections,
    )
    kernel_name = (
        kernel if isinstance(kernel, str) else getattr(kernel, "__name__", "custom")
    )
    return Surrogate(
        model=partial(_model, config=config),
        predict=partial(_predict, config=config),
        prepare=partial(_prepare, config=config),
        predict_joint=(
            partial(_predict_joint, config=config)
            if prediction == "augmented"
            else None
        ),
        name=f"diff_gp({kernel_name}, K={num_sources}, {prediction}"
        + (", dense corrections)" if corrections == "dense" else ")"),
        check_data=partial(check_sources, num_sources=num_sources),
        extras={
            "kernel": partial(build_kernel, kernel),
            "mean": partial(mean_function, mean),
            "difference_posterior": partial(
                difference_posterior, num_sources=num_sources, kernel=kernel, mean=mean
            ),
            "kernel_name": kernel_name,
            "num_sources": num_sources,
        },
        noise=_noise,
    )
