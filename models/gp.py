"""Single-task Gaussian-process surrogate with priors on every hyperparameter.

Generative model (inputs in the unit cube, standardised outputs):

.. math::
    \\ell \\sim p(\\ell), \\; \\sigma_f^2 \\sim p(\\sigma_f^2), \\;
    \\sigma_n^2 \\sim p(\\sigma_n^2), \\; \\mu \\sim p(\\mu), \\;
    y \\mid X \\sim \\mathcal N\\big(m(X), \\sigma_f^2 k_\\ell(X, X)
        + \\sigma_n^2 I\\big)

Sites (public names shared across ppbo's models): ``lengthscale`` (d,),
``outputscale`` (signal variance sigma_f^2), ``noise`` (noise variance sigma_n^2),
``mean`` (constant and linear means) and ``mean_weights`` (d,) (linear mean). The
predictive equations are Rasmussen and Williams (2006), "Gaussian Processes for
Machine Learning", Algorithm 2.1.

Default priors: ``lengthscale ~ LogNormal(log(sqrt(d) / 2), 1)`` (``"light"`` in
:data:`LENGTHSCALE_PRIORS`), ``outputscale ~ LogNormal(0, 0.05)``, ``noise ~
LogNormal(-4, 1)``, ``mean ~ Normal(0, 1)``, ``mean_weights ~ Normal(0, 1)``.

The lengthscale prior scales with the dimension as Hvarfner, Hellsten and Nardi
(2024), "Vanilla Bayesian optimization performs great in high dimensions", propose,
but with a light tail. Their ``LogNormal(sqrt(2) + log(d) / 2, sqrt(3))``
(``"dimension_scaled"``, the default before) has its mode near 0.5 at d = 6 but its
median near 10: MAP sits near the mode, while NUTS draws many lengthscales of
10-80, switches inputs the data have not yet shown to matter off, and log-EI then
drives those inputs to the faces of the cube. The light prior keeps the mode
(0.45 at d = 6) and puts its median at sqrt(d) / 2 (1.22 at d = 6). Measured with
:mod:`benchmarks/regret.py` (noise variance 1e-3, 30 evaluations, median best
observed regret): with MAP, 20 seeds, it was better on Hartmann-6 (0.16 vs 0.28),
Ackley-5 (9.3 vs 13.3), the GP samples (0.082 vs 0.14), Hartmann-3 and Levy-4
(slightly), level on Branin (0.0063 vs 0.0065), every median inside the other's
90% bootstrap band; with NUTS, 20 seeds, better on Hartmann-6 (0.28 vs 0.45), level
on the GP samples (0.21 vs 0.17, bands overlapping) (benchmarks/README.md,
"Lengthscale prior"). The old
prior is ``lengthscale_prior="dimension_scaled"``.

``lengthscale_prior="saas"`` is the hierarchical sparse axis-aligned subspace prior
of Eriksson and Jankowiak (2021) (:data:`SAAS`), for problems where a few of many
inputs matter; with NUTS on Branin and Hartmann-6, where every input matters, it
was worse than the light prior (0.0149 vs 0.0112 and 0.348 vs 0.319 after 30
evaluations, 20 seeds; benchmarks/README.md).

Outputs are standardised, so the signal variance is held near 1, as BoTorch's
default GP holds it at exactly 1: with ``LogNormal(0, 1)`` a large fitted signal
variance made far-away points look promising and the campaign kept exploring
instead of refining (benchmarks/README.md, ablations). The site stays, so a wider
prior is one ``priors={"outputscale": ...}`` away.
"""

from __future__ import annotations

import math
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
from ppbo.models.gaussian import MaskedMultivariateNormal, masked_covariance
from ppbo.models.kernels import KERNELS, Kernel, Stationary
from ppbo.models.sources import TARGET_NOISE_PRIOR
from ppbo.surrogate import GPParts, Surrogate

__all__ = [
    "surrogate",
    "default_priors",
    "DEFAULT_LENGTHSCALE_PRIOR",
    "LENGTHSCALE_PRIORS",
    "NOISE_PRIORS",
    "SAAS",
    "saas_lengthscale",
    "JITTER",
    "MEANS",
    "build_kernel",
    "mean_function",
    "noise_variance",
]

#: Added to the noise variance on the diagonal so the likelihood stays factorable.
JITTER = 1e-6

#: Mean functions accepted by :func:`surrogate`.
MEANS = ("zero", "constant", "linear")

_VECTOR_SITES = ("lengthscale", "mean_weights")


def _dimension_scaled(d: int) -> dist.Distribution:
    # Hvarfner, Hellsten and Nardi (2024): mode exp(sqrt(2) - 3) * sqrt(d), about
    # 0.5 at d = 6, but median exp(sqrt(2)) * sqrt(d), about 10 at d = 6
    return dist.LogNormal(math.sqrt(2.0) + 0.5 * math.log(d), math.sqrt(3.0))


def _light(d: int) -> dist.Distribution:
    # median sqrt(d) / 2 (1.22 at d = 6), mode sqrt(d) / (2 e) (0.45 at d = 6);
    # 95% of the mass within a factor e^2 (7.1) of the median
    return dist.LogNormal(math.log(0.5 * math.sqrt(d)), 1.0)


def _tight(d: int) -> dist.Distribution:
    # the light prior's mode sqrt(d) / (2 e) (0.45 at d = 6) with half its log-scale:
    # 95% of the mass within a factor e (2.7) of the median 0.58 at d = 6, so no
    # lengthscale far below the data's spacing
    return dist.LogNormal(math.log(0.5 * math.sqrt(d)) - 1.0 + 0.25, 0.5)


#: Named lengthscale priors (``surrogate(lengthscale_prior=...)``), each a function
#: of the number of inputs ``d`` giving the prior of one lengthscale:
#: ``"dimension_scaled"`` is ``LogNormal(sqrt(2) + log(d) / 2, sqrt(3))``,
#: ``"light"`` is ``LogNormal(log(sqrt(d) / 2), 1)`` (same mode region, light tail)
#: and ``"tight"`` is ``LogNormal(log(sqrt(d) / 2) - 3 / 4, 1 / 2)`` (the light
#: prior's mode, half its log-scale).
LENGTHSCALE_PRIORS: dict[str, Callable[[int], dist.Distribution]] = {
    "dimension_scaled": _dimension_scaled,
    "light": _light,
    "tight": _tight,
}

#: The lengthscale prior used when none is named (the module docstring says why).
DEFAULT_LENGTHSCALE_PRIOR = "light"

#: Named priors of the noise variance (standardised output units), the
#: :func:`surrogate` option ``noise_prior``. ``"default"``: LogNormal(-4, 1),
#: median 0.018, as BoTorch's default GP; chosen by the regret benchmark, whose
#: observations are noisy. ``"low"``: LogNormal(log 1e-4, 2.5), the target noise
#: prior of the transfer GPs (:data:`ppbo.models.sources.TARGET_NOISE_PRIOR`), for
#: objectives known to be deterministic or nearly so. There the default's median
#: is far above the truth, and log-EI keeps proposing near-repeats of an observed
#: input for an improvement the size of that fitted noise; with ``"low"`` the
#: warm-started GP of the transfer benchmark leaves a local minimum that traps it
#: under the default (``benchmarks/README.md``, "A noise prior for deterministic
#: objectives"). It is worse where observations ARE noisy (Hartmann-3 with noise
#: variance 1e-3, the regret benchmark), so it is not the default.
NOISE_PRIORS: dict[str, dist.Distribution] = {
    "default": dist.LogNormal(-4.0, 1.0),
    "low": TARGET_NOISE_PRIOR,
}

#: The hierarchical sparse axis-aligned subspace (SAAS) lengthscale prior of Eriksson
#: and Jankowiak (2021), "High-dimensional Bayesian optimization with sparse
#: axis-aligned subspaces", UAI, §4 (eqs. 4-5): a global shrinkage
#: ``tau ~ HalfCauchy(0.1)`` (site ``lengthscale_shrinkage``) and inverse squared
#: lengthscales ``rho_i | tau ~ HalfCauchy(tau)``, so that ``lengthscale_i =
#: rho_i ** -1/2``. Most of its mass switches inputs off (long lengthscales) until
#: the data show that they matter. It is meant for NUTS (the paper's inference);
#: only :func:`surrogate` takes it (``lengthscale_prior="saas"``), not the models
#: that build on :func:`default_priors`.
SAAS = "saas"

#: Scale of the SAAS global shrinkage's half-Cauchy prior (the paper's alpha).
SAAS_SHRINKAGE_SCALE = 0.1


def saas_lengthscale(shrinkage: jax.Array, d: int) -> dist.Distribution:
    """The SAAS prior of ``d`` lengthscales given the global shrinkage ``tau``.

    ``rho_i ~ HalfCauchy(tau)`` independently and ``lengthscale_i = rho_i ** -1/2``
    (Eriksson and Jankowiak 2021, eq. 5), as a distribution over the lengthscales
    (event shape ``(d,)``) so that the site stays ``lengthscale``.

    Example:
        >>> import jax
        >>> prior = saas_lengthscale(0.1, 3)
        >>> prior.event_shape
        (3,)
        >>> bool(prior.sample(jax.random.PRNGKey(0)).min() > 0)
        True
    """
    rho = dist.HalfCauchy(jnp.ones(d))
    transforms = [
        dist.transforms.AffineTransform(0.0, shrinkage),
        dist.transforms.PowerTransform(-0.5),
    ]
    return dist.TransformedDistribution(rho, transforms).to_event(1)


def default_priors(
    d: int, lengthscale_prior: str = DEFAULT_LENGTHSCALE_PRIOR
) -> dict[str, dist.Distribution]:
    """Default hyperparameter priors for ``d`` inputs in the unit cube.

    Args:
        d: number of inputs.
        lengthscale_prior: a name in :data:`LENGTHSCALE_PRIORS`.

    Raises:
        ValueError: for an unknown lengthscale prior name.

    Example:
        >>> sorted(default_priors(2))
        ['lengthscale', 'mean', 'mean_weights', 'noise', 'outputscale']
        >>> float(default_priors(4, "light")["lengthscale"].loc)  # median sqrt(4) / 2
        0.0
    """
    if lengthscale_prior not in LENGTHSCALE_PRIORS:
        raise ValueError(
            f"lengthscale_prior must be one of {sorted(LENGTHSCALE_PRIORS)}, "
            f"got {lengthscale_prior!r}"
        )
    return {
        "lengthscale": LENGTHSCALE_PRIORS[lengthscale_prior](d),
        "outputscale": dist.LogNormal(0.0, 0.05),
        "noise": NOISE_PRIORS["default"],
        "mean": dist.Normal(0.0, 1.0),
        "mean_weights": dist.Normal(0.0, 1.0),
    }


@dataclass(frozen=True, eq=False)
class _Config:
    kernel: str | Callable[[jax.Array], Kernel]
    mean: str
    priors: Mapping[str, dist.Distribution]
    lengthscale_prior: str = DEFAULT_LENGTHSCALE_PRIOR


def _prior(config: _Config, name: str, d: int) -> dist.Distribution:
    # the SAAS lengthscale is sampled in _model; its other sites are the default's
    named = config.lengthscale_prior
    if named == SAAS:
        named = DEFAULT_LENGTHSCALE_PRIOR
    prior = config.priors.get(name) or default_priors(d, named)[name]
    if name in _VECTOR_SITES and prior.event_shape == ():
        prior = prior.expand([d]).to_event(1)
    return prior


def build_kernel(config_kernel, params: Mapping[str, jax.Array]) -> Kernel:
    """``outputscale * base(lengthscale)`` for a kernel name or builder.

    Example:
        >>> import jax.numpy as jnp
        >>> k = build_kernel("rbf", {"lengthscale": jnp.ones(1), "outputscale": 2.0})
        >>> float(k.evaluate(jnp.zeros(1), jnp.zeros(1)))
        2.0
    """
    base = KERNELS[config_kernel] if isinstance(config_kernel, str) else config_kernel
    return params["outputscale"] * base(params["lengthscale"])


def mean_function(
    kind: str, params: Mapping[str, jax.Array], X: jax.Array
) -> jax.Array:
    """Prior mean at ``X`` (m, d) for a mean ``kind`` in :data:`MEANS`.

    Example:
        >>> import jax.numpy as jnp
        >>> mean_function("constant", {"mean": 0.5}, jnp.zeros((2, 1)))
        Array([0.5, 0.5], dtype=float64)
    """
    if kind == "zero":
        return jnp.zeros(X.shape[0], dtype=X.dtype)
    if kind == "constant":
        return jnp.full(X.shape[0], params["mean"], dtype=X.dtype)
    return params["mean"] + X @ params["mean_weights"]


def noise_variance(params: Mapping[str, jax.Array], X: jax.Array) -> jax.Array:
    """Observation-noise variance at ``X`` (m, d): ``noise + JITTER`` everywhere.

    The one definition the likelihood, ``prepare`` and the surrogate's declared
    ``noise`` capability share.

    Example:
        >>> import jax.numpy as jnp
        >>> noise_variance({"noise": jnp.asarray(0.1)}, jnp.zeros((2, 1))).shape
        (2,)
    """
    return jnp.full(X.shape[0], params["noise"] + JITTER, dtype=X.dtype)


def _lengthscale(params):
    return params["lengthscale"]


def _outputscale(params):
    return params["outputscale"]


def _model(data: Dataset, *, config: _Config) -> None:
    d = data.X.shape[1]
    params = {}
    if config.lengthscale_prior == SAAS and "lengthscale" not in config.priors:
        shrinkage = numpyro.sample(
            "lengthscale_shrinkage",
            config.priors.get("lengthscale_shrinkage")
            or dist.HalfCauchy(SAAS_SHRINKAGE_SCALE),
        )
        params["lengthscale"] = numpyro.sample(
            "lengthscale", saas_lengthscale(shrinkage, d)
        )
    for name in ("lengthscale", "outputscale", "noise"):
        if name not in params:
            params[name] = numpyro.sample(name, _prior(config, name, d))
    if config.mean in ("constant", "linear"):
        params["mean"] = numpyro.sample("mean", _prior(config, "mean", d))
    if config.mean == "linear":
        params["mean_weights"] = numpyro.sample(
            "mean_weights", _prior(config, "mean_weights", d)
        )
    K = build_kernel(config.kernel, params).matrix(data.X, data.X)
    K = K + jnp.diag(noise_variance(params, data.X))
    loc = mean_function(config.mean, params, data.X)
    numpyro.sample("y", MaskedMultivariateNormal(loc, K, data.mask), obs=data.y)


def _prepare(params, data: Dataset, *, config: _Config) -> dict[str, jax.Array]:
    K = build_kernel(config.kernel, params).matrix(data.X, data.X)
    K = K + jnp.diag(noise_variance(params, data.X))
    K = masked_covariance(K, data.mask)
    L = cholesky(K)
    r = jnp.where(data.mask, data.y - mean_function(config.mean, params, data.X), 0.0)
    # The explicit inverse factor turns every later variance into a matrix product:
    # acquisitions evaluate hundreds of samples x candidates, where batched small
    # triangular solves cost several times more than one batched GEMM.
    eye = jnp.eye(L.shape[0], dtype=L.dtype)
    L_inv = solve_triangular(L, eye, lower=True)
    return {"L": L, "L_inv": L_inv, "alpha": cho_solve((L, True), r)}


def _cross(params, data, X, config):
    kernel = build_kernel(config.kernel, params)
    Ks = jnp.where(data.mask[None, :], kernel.matrix(X, data.X), 0.0)
    return kernel, Ks


def _predict(params, data: Dataset, X, cache, *, config: _Config):
    kernel, Ks = _cross(params, data, X, config)
    mean = mean_function(config.mean, params, X) + Ks @ cache["alpha"]
    V = cache["L_inv"] @ Ks.T
    var = kernel.diag(X) - jnp.sum(V**2, axis=0)
    return mean, jnp.maximum(var, 0.0)


def _predict_joint(params, data: Dataset, X, cache, *, config: _Config):
    kernel, Ks = _cross(params, data, X, config)
    mean = mean_function(config.mean, params, X) + Ks @ cache["alpha"]
    V = cache["L_inv"] @ Ks.T
    return mean, kernel.matrix(X, X) - V.T @ V


def surrogate(
    kernel: str | Callable[[jax.Array], Kernel] = "matern52",
    mean: str = "constant",
    priors: Mapping[str, dist.Distribution] | None = None,
    lengthscale_prior: str = DEFAULT_LENGTHSCALE_PRIOR,
    noise_prior: str = "default",
) -> Surrogate:
    """Build the single-task GP surrogate.

    Args:
        kernel: one of ``"matern12"``, ``"matern32"``, ``"matern52"``, ``"rbf"``
            (squared-exponential), ``"linear"``, or a function ``lengthscale ->
            Kernel`` for sums and products, e.g.
            ``lambda l: Matern52(l) + Linear(l)``. The result is multiplied by
            ``outputscale``.
        mean: ``"zero"``, ``"constant"`` or ``"linear"``.
        priors: site name -> NumPyro distribution replacing a default prior; scalar
            priors for ``lengthscale`` and ``mean_weights`` are broadcast to (d,).
        lengthscale_prior: the name of the lengthscale prior in
            :data:`LENGTHSCALE_PRIORS` (it depends on the number of inputs, known
            only from the data), or ``"saas"`` for the hierarchical SAAS prior
            (:data:`SAAS`; its extra site ``lengthscale_shrinkage`` takes a prior
            in ``priors`` too); ``priors["lengthscale"]``, when given, wins.
        noise_prior: the name of the noise-variance prior in
            :data:`NOISE_PRIORS` (``"low"`` for deterministic objectives);
            ``priors["noise"]``, when given, wins.

    Returns:
        A :class:`ppbo.Surrogate` whose ``predict`` gives the latent (noise-free)
        mean and variance, with ``prepare`` caching the Cholesky factor and
        ``predict_joint`` the joint covariance. It declares the per-point
        ``noise`` (:func:`noise_variance`) and, for a stationary kernel given by
        name (not ``"linear"`` or a callable), :class:`ppbo.GPParts` with the
        kernel class of :mod:`ppbo.models.kernels`. ``extras`` holds ``"kernel"``
        (``params -> Kernel``), ``"mean"`` (``(params, X) -> mean``) and
        ``"kernel_name"``, for users.

    Raises:
        ValueError: for an unknown kernel, mean, prior site, lengthscale prior or
            noise prior.

    Example:
        >>> import numpyro.distributions as dist
        >>> s = surrogate(kernel="rbf", priors={"noise": dist.LogNormal(-6.0, 1.0)})
        >>> s.name
        'gp(rbf, constant)'
        >>> import numpy as np, numpyro, ppbo
        >>> low = numpyro.handlers.seed(surrogate(noise_prior="low").model, 0)
        >>> data = ppbo.Dataset(np.zeros((2, 1)), np.zeros(2))
        >>> float(numpyro.handlers.trace(low).get_trace(data)["noise"]["fn"].scale)
        2.5
    """
    if isinstance(kernel, str) and kernel not in KERNELS:
        raise ValueError(
            f"kernel must be one of {sorted(KERNELS)} or a callable, got {kernel!r}"
        )
    if not isinstance(kernel, str) and not callable(kernel):
        raise ValueError(f"kernel must be a name or a callable, got {kernel!r}")
    if mean not in MEANS:
        raise ValueError(f"mean must be one of {MEANS}, got {mean!r}")
    priors = dict(priors or {})
    if lengthscale_prior != SAAS and lengthscale_prior not in LENGTHSCALE_PRIORS:
        raise ValueError(
            "lengthscale_prior must be one of "
            f"{sorted([*LENGTHSCALE_PRIORS, SAAS])}, got {lengthscale_prior!r}"
        )
    if noise_prior not in NOISE_PRIORS:
        raise ValueError(
            f"noise_prior must be one of {sorted(NOISE_PRIORS)}, got {noise_prior!r}"
        )
    if noise_prior != "default":
        priors.setdefault("noise", NOISE_PRIORS[noise_prior])
    known = set(default_priors(1))
    if lengthscale_prior == SAAS:
        known.add("lengthscale_shrinkage")
    for name, prior in priors.items():
        if name not in known:
            raise ValueError(
                f"priors has unknown site {name!r}; known sites: {sorted(known)}"
            )
        if not isinstance(prior, dist.Distribution):
            raise ValueError(
                f"priors[{name!r}] must be a numpyro Distribution, got {prior!r}"
            )
    config = _Config(
        kernel=kernel, mean=mean, priors=priors, lengthscale_prior=lengthscale_prior
    )
    kernel_name = (
        kernel if isinstance(kernel, str) else getattr(kernel, "__name__", "custom")
    )
    base = KERNELS.get(kernel) if isinstance(kernel, str) else None
    parts = None
    if base is not None and issubclass(base, Stationary):
        parts = GPParts(
            kernel=base,
            mean=partial(mean_function, mean),
            lengthscale=_lengthscale,
            outputscale=_outputscale,
        )
    return Surrogate(
        model=partial(_model, config=config),
        predict=partial(_predict, config=config),
        prepare=partial(_prepare, config=config),
        predict_joint=partial(_predict_joint, config=config),
        name=f"gp({kernel_name}, {mean})",
        extras={
            "kernel": partial(build_kernel, kernel),
            "mean": partial(mean_function, mean),
            "kernel_name": kernel_name,
        },
        noise=noise_variance,
        gp=parts,
    )
