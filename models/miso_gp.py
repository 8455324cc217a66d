"""MISO-style bias model: each source task is the target plus an independent bias.

The multi-information-source model of Poloczek, Wang and Frazier (2017),
"Multi-information source optimization" (NeurIPS; arXiv 2016), statistical
model: information
source ``i`` observes ``f_i(x) = f_T(x) + delta_i(x)`` where ``f_T`` is the target
and the biases ``delta_i ~ GP(0, k_i)`` are independent of ``f_T`` and of each
other, so that

.. math::
    \\operatorname{cov}\\big(f_{s_i}(x_i), f_{s_j}(x_j)\\big)
        = k_T(x_i, x_j) + [s_i = s_j \\ge 0]\\, k_{s_i}(x_i, x_j),

with the target (source id -1) unbiased. Rows are observed with noise:
``noise`` on target rows and ``source_noise[k]`` on the rows of source ``k``. With
``k_T = outputscale * k_ℓ`` and ``k_i = bias_outputscale[i] * k_{bias_lengthscale[i]}``
(the same kernel family), the target's posterior is the GP posterior with
cross-covariance ``k_T(x, x_j)`` to every row (Rasmussen and Williams 2006,
Algorithm 2.1).

Sites: ``lengthscale`` (d,), ``outputscale``, ``noise``, ``mean``,
``mean_weights`` (d,) (linear mean) as in :mod:`ppbo.models.gp`, plus
``source_noise`` (K,) (observation-noise variance of each source),
``bias_lengthscale`` (K, d) and ``bias_outputscale`` (K,) (each bias GP's own
lengthscales and signal variance). Default priors (:data:`DEFAULT_PRIORS` over
the GP's): ``bias_outputscale ~ LogNormal(0, 1.5)`` (median 1, the variance of a
standardised task: a source may be as far from the target as the target is from
its mean, and the data decide), ``noise ~ LogNormal(log 1e-4, 2.5)`` on the
target rows, ``source_noise`` and ``bias_lengthscale`` the GP's noise and
lengthscale priors. The mean is shared by all rows (each task is standardised on
its own).

Why these defaults (``benchmarks/README.md``, the transfer section): fitted to
the joint density of all rows with the GP's noise prior and a bias prior of
median 0.14, five unrelated sources of 20-50 rows each make the shared ``f_T``
follow the sources, and the target's own rows, a sixth of the data, are cheaper
to call noise (target noise 0.3-1.5 of the standardised outputs); the search
then stalls. The conditional density ``p(y_T | y_S)`` (``likelihood``) stops the
sources' own evidence from shaping the kernel, the wider bias prior lets an
unrelated source get a bias as large as the target itself, and the narrower,
lower noise prior stops the target rows being written off as noise: with all
three the fit on the unrelated sources keeps the target's lengthscale (0.13 in
the unit cube) and gives the sources bias variances of 2-8.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax.scipy.linalg import cho_solve

from ppbo.data import Dataset
from ppbo.linalg import cholesky
from ppbo.models.env_gp import (
    _check_common,
    _check_priors,
    _noise,
    _per_source_prior,
    _predict,
    _predict_joint,
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
from ppbo.models.sources import (
    LIKELIHOODS,
    TARGET_NOISE_PRIOR,
    check_num_sources,
    check_sources,
    condition_on_sources,
)
from ppbo.surrogate import Surrogate

__all__ = ["surrogate", "data_covariance", "NEW_SITES", "DEFAULT_PRIORS"]

#: Sites this model adds to the GP's.
NEW_SITES = ("source_noise", "bias_lengthscale", "bias_outputscale")

#: Default priors that differ from the GP's (and from Diff-GP's bias prior); a
#: user's ``priors`` override them site by site.
DEFAULT_PRIORS: dict[str, dist.Distribution] = {
    "bias_outputscale": dist.LogNormal(0.0, 1.5),
    "noise": TARGET_NOISE_PRIOR,
}


@dataclass(frozen=True, eq=False)
class _Config:
    num_sources: int
    kernel: str | Callable[[jax.Array], Kernel]
    mean: str
    priors: Mapping[str, dist.Distribution]
    lengthscale_prior: str = DEFAULT_LENGTHSCALE_PRIOR
    likelihood: str = "conditional"


def _prior(config: _Config, name: str, d: int) -> dist.Distribution:
    return _per_source_prior(config, name, d, "bias")


def _base(config_kernel):
    return KERNELS[config_kernel] if isinstance(config_kernel, str) else config_kernel


def data_covariance(
    params: Mapping[str, jax.Array],
    X: jax.Array,
    source: jax.Array,
    kernel: str | Callable[[jax.Array], Kernel] = "matern52",
) -> jax.Array:
    """Covariance of the rows' observations: target kernel + same-source bias + noise.

    The covariance of Poloczek et al. (2017)'s statistical model, with
    per-source observation noise.

    Args:
        params: one sample of the sites.
        X: inputs (n, d).
        source: source ids (n,), -1 for the target.
        kernel: the kernel family (name or ``lengthscale -> Kernel``).

    Returns:
        The (n, n) covariance.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> jax.config.update("jax_enable_x64", True)
        >>> params = {"lengthscale": jnp.ones(1), "outputscale": 1.0,
        ...           "noise": 0.0, "source_noise": jnp.zeros(1),
        ...           "bias_lengthscale": jnp.ones((1, 1)),
        ...           "bias_outputscale": jnp.array([0.5])}
        >>> K = data_covariance(params, jnp.zeros((2, 1)), jnp.array([0, -1]), "rbf")
        >>> [round(v, 4) for v in K.ravel().tolist()]
        [1.5, 1.0, 1.0, 1.0]
    """
    base = _base(kernel)
    K_target = build_kernel(kernel, params).matrix(X, X)
    num_sources = params["bias_outputscale"].shape[0]

    def bias(scale, lengthscale):
        return scale * base(lengthscale).matrix(X, X)

    K_bias = jax.vmap(bias)(params["bias_outputscale"], params["bias_lengthscale"])
    index = jnp.clip(source, 0, num_sources - 1)
    rows = jnp.arange(X.shape[0])
    same = (source[:, None] == source[None, :]) & (source[:, None] >= 0)
    K = K_target + jnp.where(same, K_bias[index[:, None], rows[:, None], rows], 0.0)
    row_noise = jnp.where(source >= 0, params["source_noise"][index], params["noise"])
    return K + jnp.diag(row_noise + JITTER)


def _model(data: Dataset, *, config: _Config) -> None:
    d = data.X.shape[1]
    names = ["lengthscale", "outputscale", "noise"]
    if config.mean in ("constant", "linear"):
        names.append("mean")
    if config.mean == "linear":
        names.append("mean_weights")
    names += list(NEW_SITES)
    params = {name: numpyro.sample(name, _prior(config, name, d)) for name in names}
    K = data_covariance(params, data.X, data.source, config.kernel)
    loc = mean_function(config.mean, params, data.X)
    numpyro.sample("y", MaskedMultivariateNormal(loc, K, data.mask), obs=data.y)
    if config.likelihood == "conditional":
        condition_on_sources(loc, K, data)


def _prepare(params, data: Dataset, *, config: _Config) -> dict[str, jax.Array]:
    K = data_covariance(params, data.X, data.source, config.kernel)
    L = cholesky(masked_covariance(K, data.mask))
    r = jnp.where(data.mask, data.y - mean_function(config.mean, params, data.X), 0.0)
    return {"L": L, "alpha": cho_solve((L, True), r)}


def surrogate(
    num_sources: int = 1,
    kernel: str | Callable[[jax.Array], Kernel] = "matern52",
    mean: str = "constant",
    priors: Mapping[str, dist.Distribution] | None = None,
    lengthscale_prior: str = DEFAULT_LENGTHSCALE_PRIOR,
    likelihood: str = "conditional",
) -> Surrogate:
    """Build the MISO-style bias surrogate (Poloczek et al. 2017).

    Args:
        num_sources: number of source tasks ``K``; rows carry ``data.source`` in
            ``{-1, 0, ..., K-1}`` (-1: target).
        kernel: the kernel family of the target and of every bias GP, a name in
            :data:`ppbo.models.kernels.KERNELS` or ``lengthscale -> Kernel``.
        mean: ``"zero"``, ``"constant"`` or ``"linear"``, shared by all rows.
        priors: site name -> NumPyro distribution replacing a default prior
            (:data:`DEFAULT_PRIORS`, then the GP's); scalar priors are broadcast
            to the site's shape.
        lengthscale_prior: a name in :data:`ppbo.models.gp.LENGTHSCALE_PRIORS`
            (also the default prior of ``bias_lengthscale``).
        likelihood: what the sites are fitted to (the predictive always
            conditions on every row): ``"conditional"`` (default),
            ``p(y_T | y_S)`` (the joint divided by the sources' own evidence),
            which judges the shared kernel and the biases by how well the sources
            predict the target rather than by how well the shared ``f_T``
            explains the many source rows; or ``"joint"``, ``p(y_S, y_T)``, the
            model's marginal likelihood of all rows (Poloczek et al.'s fit).

    Returns:
        A :class:`ppbo.Surrogate` whose ``predict`` gives the TARGET latent mean
        and variance (m,) at ``X`` (m, d), ``predict_joint`` the joint covariance
        and ``noise`` the target observation noise. It declares conditioning but
        no :class:`ppbo.GPParts` (source rows carry their own noise and bias, which
        random-feature paths of the target kernel alone do not describe), so
        Thompson sampling and PES refuse it; EI, log-EI, PI, UCB, KG and MES work.
        ``extras["data_covariance"]`` is ``(params, X, source) -> (n, n)``.

    Raises:
        ValueError: for ``num_sources < 1``, an unknown kernel, mean or prior site;
            at fit time (via ``check_data``) for data without source ids or with
            ids ``>= K``.

    Example:
        >>> import jax, numpy as np, ppbo
        >>> jax.config.update("jax_enable_x64", True)
        >>> X = np.random.default_rng(0).random((6, 1))
        >>> data = ppbo.Dataset(X, np.sin(6 * X[:, 0]), source=[0, 0, 0, 0, -1, -1])
        >>> s = surrogate(num_sources=1)
        >>> s.name
        'miso_gp(matern52, K=1)'
        >>> params = {"lengthscale": np.array([0.3]), "outputscale": 1.0,
        ...           "noise": 1e-4, "mean": 0.0, "source_noise": np.array([1e-4]),
        ...           "bias_lengthscale": np.array([[0.5]]),
        ...           "bias_outputscale": np.array([0.1])}
        >>> posterior = ppbo.fit(s, data, ppbo.Fixed(params), jax.random.key(0))
        >>> posterior.predict(np.array([[0.5]]))[0].shape
        (1, 1)

    References:
        Poloczek, Wang and Frazier (2017), "Multi-information source
        optimization" (the statistical model: independent bias GPs);
        Rasmussen and Williams (2006),
        Algorithm 2.1.
    """
    num_sources = check_num_sources(num_sources)
    _check_common(kernel, mean)
    if likelihood not in LIKELIHOODS:
        raise ValueError(
            f"likelihood must be one of {LIKELIHOODS}, got likelihood={likelihood!r}"
        )
    known = set(default_priors(1, lengthscale_prior)) | set(NEW_SITES)
    priors = {**DEFAULT_PRIORS, **_check_priors(priors, known)}
    config = _Config(
        num_sources=num_sources,
        kernel=kernel,
        mean=mean,
        priors=priors,
        lengthscale_prior=lengthscale_prior,
        likelihood=likelihood,
    )
    kernel_name = (
        kernel if isinstance(kernel, str) else getattr(kernel, "__name__", "custom")
    )
    return Surrogate(
        model=partial(_model, config=config),
        predict=partial(_predict, config=config),
        prepare=partial(_prepare, config=config),
        predict_joint=partial(_predict_joint, config=config),
        name=f"miso_gp({kernel_name}, K={num_sources})",
        check_data=partial(check_sources, num_sources=num_sources),
        extras={
            "kernel": partial(build_kernel, kernel),
            "mean": partial(mean_function, mean),
            "data_covariance": partial(data_covariance, kernel=kernel),
            "kernel_name": kernel_name,
            "num_sources": num_sources,
        },
        noise=_noise,
    )
