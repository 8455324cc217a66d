"""Max-value entropy search (MES): information about the maximum value y*.

MES (Wang and Jegelka 2017) measures how much evaluating ``x`` tells about the
maximum value :math:`y^* = \\max_x f(x)`,
:math:`I(\\{x, y\\}; y^*) = H[p(y \\mid D, x)] - E_{y^*}H[p(y \\mid D, x, y^*)]`.
Approximating :math:`p(y \\mid D, x, y^*)` by the predictive Gaussian truncated to
:math:`y < y^*` gives, with ``K`` samples of y* (eq. (6)),

.. math::
    \\alpha(x) = \\frac1K \\sum_{k=1}^K \\left[
        \\frac{\\gamma_k(x)\\, \\varphi(\\gamma_k(x))}{2\\, \\Phi(\\gamma_k(x))}
        - \\log \\Phi(\\gamma_k(x)) \\right], \\qquad
    \\gamma_k(x) = \\frac{y^*_k - \\mu(x)}{\\sigma(x)},

with the latent predictive mean and standard deviation of one hyperparameter
sample; :func:`~ppbo.acquisition.base.evaluate` averages over samples. It is
computed with ``log_ndtr`` (``phi / Phi = exp(log phi - log Phi)``), so it stays
finite and accurate for very negative ``gamma``; ``gamma`` is clipped to
``[-1e6, 1e6]`` and the variance floored at ``min_var``.

Observations are noisy, ``y = f + eps``, and what is learnt is the information in
``y`` (Takeno et al. 2020, §3, for one fidelity): given :math:`f < y^*`, ``y`` has
the extended skew-normal density
:math:`N(y; \\mu, v)\\, \\Phi(a + b z) / \\Phi(\\gamma)` with
:math:`v = \\sigma^2 + \\tau^2`, ``z`` the standardised ``y``,
:math:`a = \\gamma \\sqrt{v} / \\tau` and :math:`b = -\\sigma / \\tau`, so
that

.. math::
    \\alpha(x) = \\frac1K \\sum_k \\left[
        \\frac{\\sigma^2 \\gamma_k \\varphi(\\gamma_k)}{2 v\\, \\Phi(\\gamma_k)}
        - \\log \\Phi(\\gamma_k) + E[\\log \\Phi(a_k + b z)] \\right],

whose last term, one smooth integral, is computed by Gaussian quadrature (it
vanishes, and eq. (6) is recovered, as :math:`\\tau^2 \\to 0`). The noise
variance :math:`\\tau^2(x)` is the surrogate's per-point ``noise`` (heteroscedastic
models included); ``observed="latent"``, or a surrogate that declares no noise,
gives eq. (6), the information in ``f(x)`` itself.

The y* samples are drawn by ``prepare``, K per hyperparameter sample, once per
``evaluate``/``per_sample`` call or once per :func:`~ppbo.acquisition.bind` (so
they stay fixed while ``ppbo.optimize_acquisition`` maximises the acquisition),
either

- ``method="paths"`` (MES-R, the default): maxima of RFF posterior sample paths
  (:func:`~ppbo.acquisition.rff.sample_maxima`), or
- ``method="gumbel"`` (MES-G, §3.1): the CDF
  :math:`\\Pr[y^* < y] \\approx \\prod_{x \\in G} \\Phi((y - \\mu(x)) / \\sigma(x))`
  on a grid ``G`` (random points plus the observed inputs) is fitted by a Gumbel
  distribution matching its quartiles (found by bisection), which is sampled.

As in the authors' code, y* is forced above the best observed value ``y_max``:
samples below ``y_max + epsilon`` are set to ``y_max + epsilon`` (MES-G sets all of
them there when :math:`\\Pr[y^* < y_{max}] \\ge 1/4`).

Options: ``key`` (required), ``observed="noisy"`` (or ``"latent"``),
``method="paths"``, ``num_max_samples=10`` (K),
``epsilon=0.1`` (model-space units; outputs are standardised), ``min_var=1e-18``;
for ``"paths"``: ``num_features=1000``, ``num_candidates=1024``,
``num_restarts=4``, ``num_steps=100``; for ``"gumbel"``: ``num_grid=10000`` random
grid points or a ``grid`` (g, d). ``max_values`` (s, K) skips the sampling and uses
the given values as they are (e.g. drawn once with :func:`sample_max_values` and
shared between calls; the key is still required by the contract and is then
unused).

Example:
    >>> from ppbo.acquisition import evaluate
    >>> from ppbo.acquisition.mes import mes, sample_max_values
    >>> y_star = sample_max_values(key, posterior, method="gumbel", num_grid=256)
    >>> y_star.shape
    (1, 10)
    >>> X = jnp.array([[0.2, 0.3], [0.7, 0.9]])
    >>> values = evaluate(mes, posterior, X, key=key, max_values=y_star)
    >>> values.shape, bool(jnp.all(values > 0))
    ((2,), True)

References:
    Wang and Jegelka (2017), "Max-value entropy search for efficient Bayesian
    optimization", eq. (6) and §3.1.
    Takeno, Fukuoka, Tsukada, Koyama, Shiga, Takeuchi and Karasuyama (2020),
    "Multi-fidelity Bayesian optimization with max-value entropy search and its
    parallelization", §3 (noisy observations).
    Hernández-Lobato, Hoffman and Ghahramani (2014), "Predictive entropy search for
    efficient global optimization of black-box functions", Appendix A (sample
    paths).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr
from jax.scipy.stats import norm

from ppbo.acquisition.base import Acquisition, Sample
from ppbo.acquisition.rff import sample_maxima
from ppbo.surrogate import Capability, Posterior

__all__ = ["mes", "sample_max_values", "METHODS"]

#: Ways of sampling y*.
METHODS = ("paths", "gumbel")

_GAMMA_MAX = 1e6
_OBSERVED = ("noisy", "latent")
# noisy observations: gamma is clipped below at -_GAMMA_MIN (Phi(gamma) stays
# representable), and h(x) = Phi(x) log Phi(x) is integrated over
# [min(c, 0) - _WINDOW, _WINDOW]: h(12) ~ -2e-33, and the weighted integrand
# (a Gaussian of sd <= 1 about c) is below exp(-72) of its peak under the window
_GAMMA_MIN = 30.0
_WINDOW = 12.0
_LEGENDRE = tuple(np.polynomial.legendre.leggauss(64))
_HERMITE = (
    np.polynomial.hermite_e.hermegauss(40)[0],
    np.polynomial.hermite_e.hermegauss(40)[1] / math.sqrt(2.0 * math.pi),
)
_BISECTION_STEPS = 64
_QUARTILES = (0.25, 0.5, 0.75)


def _best_observed(posterior: Posterior) -> jax.Array:
    data = posterior.data
    return jnp.max(jnp.where(data.target_mask, data.y, -jnp.inf))


@partial(
    jax.jit,
    static_argnames=(
        "num_max_samples",
        "num_features",
        "num_candidates",
        "num_restarts",
        "num_steps",
    ),
)
def _paths_max_values(
    key,
    posterior,
    epsilon,
    num_max_samples,
    num_features,
    num_candidates,
    num_restarts,
    num_steps,
):
    _, f_star = sample_maxima(
        key,
        posterior,
        num_max_samples,
        num_features=num_features,
        num_candidates=num_candidates,
        num_restarts=num_restarts,
        num_steps=num_steps,
    )
    return jnp.maximum(f_star, _best_observed(posterior) + epsilon)


def _gumbel_one(key, sample: Sample, grid, grid_mask, best, epsilon, K, min_var):
    mean, var = sample.predict(grid)
    sd = jnp.sqrt(jnp.maximum(var, min_var))

    def log_cdf(y):
        terms = log_ndtr((y - mean) / sd)
        return jnp.sum(jnp.where(grid_mask, terms, 0.0))

    # F(lo) <= Phi(-8) and F(hi) >= Phi(8)^g: the quartiles lie in between.
    lo = jnp.max(jnp.where(grid_mask, mean - 8.0 * sd, -jnp.inf))
    hi = jnp.max(jnp.where(grid_mask, mean + 8.0 * sd, -jnp.inf))
    targets = jnp.log(jnp.asarray(_QUARTILES, dtype=mean.dtype))

    def bisect(_, bounds):
        lower, upper = bounds
        mid = 0.5 * (lower + upper)
        below = jax.vmap(log_cdf)(mid) < targets
        return jnp.where(below, mid, lower), jnp.where(below, upper, mid)

    lower, upper = jax.lax.fori_loop(
        0,
        _BISECTION_STEPS,
        bisect,
        (jnp.full(3, lo), jnp.full(3, hi)),
    )
    q1, median, q3 = 0.5 * (lower + upper)
    # Gumbel quantiles a - b log(-log q), matched at q = 1/4, 1/2, 3/4 (§3.1)
    beta = (q3 - q1) / (math.log(math.log(4.0)) - math.log(math.log(4.0 / 3.0)))
    alpha = median + beta * math.log(math.log(2.0))
    u = jax.random.uniform(key, (K,), mean.dtype, minval=1e-300, maxval=1.0)
    samples = alpha - beta * jnp.log(-jnp.log(u))
    floor = best + epsilon
    return jnp.where(
        log_cdf(best) >= math.log(0.25),
        jnp.full(K, floor),
        jnp.maximum(samples, floor),
    )


@partial(jax.jit, static_argnames=("num_max_samples",))
def _gumbel_max_values(key, posterior, grid, epsilon, min_var, num_max_samples):
    data = posterior.data
    grid = jnp.concatenate([grid, data.X])
    grid_mask = jnp.concatenate(
        [jnp.ones(grid.shape[0] - data.capacity, bool), data.mask]
    )
    best = _best_observed(posterior)

    def one(key, params, cache):
        sample = Sample(params, cache, data, posterior.surrogate)
        return _gumbel_one(
            key, sample, grid, grid_mask, best, epsilon, num_max_samples, min_var
        )

    keys = jax.random.split(key, posterior.num_samples)
    return jax.vmap(one)(keys, posterior.samples, posterior.cache)


def sample_max_values(
    key: jax.Array,
    posterior: Posterior,
    *,
    method: str = "paths",
    num_max_samples: int = 10,
    epsilon: float = 0.1,
    num_features: int = 1000,
    num_candidates: int = 1024,
    num_restarts: int = 4,
    num_steps: int = 100,
    num_grid: int = 10_000,
    grid: Any = None,
    min_var: float = 1e-18,
) -> jax.Array:
    """Sample K maximum values y* for every hyperparameter sample.

    Args:
        key: JAX PRNG key.
        posterior: a posterior with s samples (``"paths"`` needs a GP, see
            :func:`~ppbo.acquisition.rff.sample_paths`; ``"gumbel"`` works for any
            surrogate).
        method: ``"paths"`` (maxima of RFF sample paths) or ``"gumbel"``.
        num_max_samples: K.
        epsilon: y* is at least the best observed value plus ``epsilon``.
        num_features, num_candidates, num_restarts, num_steps: the RFF paths and
            their maximisation (``"paths"``).
        num_grid: random uniform grid points (``"gumbel"``, without ``grid``).
        grid: the grid (g, d) for ``"gumbel"``; the observed inputs are added.
        min_var: variance floor (``"gumbel"``).

    Returns:
        y* samples, shape (s, K).

    Raises:
        ValueError: for an unknown method or a grid of the wrong shape.
        MissingCapabilityError: for ``"paths"`` on a surrogate without
            :class:`~ppbo.GPParts` or ``noise``.
        TypeError: for an unknown option.

    Example:
        >>> y_star = sample_max_values(key, posterior, num_max_samples=3,
        ...                            num_features=128, num_candidates=128,
        ...                            num_steps=10)
        >>> y_star.shape
        (1, 3)
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "paths":
        posterior.surrogate.require(
            Capability.GP,
            Capability.NOISE,
            by="mes with method='paths' (use method='gumbel' for other surrogates)",
        )
        return _paths_max_values(
            key,
            posterior,
            epsilon,
            int(num_max_samples),
            int(num_features),
            int(num_candidates),
            int(num_restarts),
            int(num_steps),
        )
    d = posterior.data.dim
    if grid is None:
        key, k_grid = jax.random.split(key)
        grid = jax.random.uniform(k_grid, (int(num_grid), d), posterior.data.X.dtype)
    grid = jnp.asarray(grid)
    if grid.ndim != 2 or grid.shape[1] != d:
        raise ValueError(f"grid must have shape (g, {d}), got shape {grid.shape}")
    return _gumbel_max_values(
        key, posterior, grid, epsilon, min_var, int(num_max_samples)
    )


def _prepare(
    key,
    posterior: Posterior,
    *,
    max_values: Any = None,
    observed: str = "noisy",
    **options: Any,
):
    if observed not in _OBSERVED:
        raise ValueError(f"observed must be one of {_OBSERVED}, got {observed!r}")
    if max_values is None:
        return sample_max_values(key, posterior, **options)
    max_values = jnp.asarray(max_values)
    if max_values.ndim != 2 or max_values.shape[0] != posterior.num_samples:
        raise ValueError(
            f"max_values must have shape (s, K) = ({posterior.num_samples}, K), got "
            f"shape {max_values.shape}"
        )
    return max_values


def _information_gain(mean, var, max_values, min_var):
    sd = jnp.sqrt(jnp.maximum(var, min_var))
    gamma = (max_values[None, :] - mean[:, None]) / sd[:, None]
    gamma = jnp.clip(gamma, -_GAMMA_MAX, _GAMMA_MAX)
    log_cdf = log_ndtr(gamma)
    ratio = jnp.exp(norm.logpdf(gamma) - log_cdf)
    return jnp.mean(0.5 * gamma * ratio - log_cdf, axis=-1)


def _noisy_information_gain(mean, var, noise, max_values, min_var):
    # I({x, y}; y*) for y = f + eps, eps ~ N(0, noise): y given f < y* has the
    # density N(y; mu, v) Phi(a + b z) / Phi(gamma), v = var + noise, z the
    # standardised y, a = gamma sqrt(v) / tau, b = -sigma / tau (an extended
    # skew-normal), so that with lambda = phi(gamma) / Phi(gamma)
    #   I = sigma^2 gamma lambda / (2 v) - log Phi(gamma) + E[log Phi(a + b z)],
    # which tends to eq. (6) as noise -> 0. E[log Phi(a + b z)] =
    # E_{N(0,1)}[h(a + b z)] / Phi(gamma) with h(x) = Phi(x) log Phi(x) is one
    # smooth integral: over x = a + b z (Gauss-Legendre) when |b| >= 1 and over z
    # (Gauss-Hermite) when |b| < 1, each where its integrand is wide.
    sd = jnp.sqrt(jnp.maximum(var, min_var))[:, None]
    tau = jnp.sqrt(jnp.maximum(noise, min_var))[:, None]
    root_v = jnp.sqrt(sd**2 + tau**2)
    gamma = jnp.clip(
        (max_values[None, :] - mean[:, None]) / sd, -_GAMMA_MIN, _GAMMA_MAX
    )
    log_cdf = log_ndtr(gamma)
    ratio = jnp.exp(norm.logpdf(gamma) - log_cdf)
    a, b = gamma * root_v / tau, -sd / tau

    def h(x):
        log_phi = log_ndtr(x)
        return jnp.exp(log_phi) * log_phi

    # the weight N(x; a, b^2) times Phi(x) peaks near gamma tau / sqrt(v), sd <= 1
    nodes, weights = _LEGENDRE
    lo = jnp.minimum(gamma * tau / root_v, 0.0)[..., None] - _WINDOW
    x = lo + 0.5 * (_WINDOW - lo) * (nodes + 1.0)
    z = (x - a[..., None]) / b[..., None]
    weight = jnp.exp(norm.logpdf(z) - log_cdf[..., None]) / jnp.abs(b[..., None])
    over_x = jnp.sum(0.5 * (_WINDOW - lo) * weights * weight * h(x), axis=-1)
    nodes, weights = _HERMITE
    over_z = jnp.sum(
        weights * jnp.exp(-log_cdf[..., None]) * h(a[..., None] + b[..., None] * nodes),
        axis=-1,
    )
    expected = jnp.where(jnp.abs(b) >= 1.0, over_x, over_z)
    gain = 0.5 * sd**2 * gamma * ratio / root_v**2 - log_cdf + expected
    return jnp.mean(gain, axis=-1)


def _max_value_entropy_search(
    sample: Sample,
    X: jax.Array,
    *,
    min_var: Any = 1e-18,
    observed: str = "noisy",
    **_: Any,
) -> jax.Array:
    mean, var = sample.predict(X)
    if observed == "noisy" and Capability.NOISE in sample.surrogate.capabilities:
        noise = sample.noise(X)
        return _noisy_information_gain(mean, var, noise, sample.aux, min_var)
    return _information_gain(mean, var, sample.aux, min_var)


#: Max-value entropy search (Wang and Jegelka 2017, eq. (6)); options above.
mes = Acquisition("mes", _max_value_entropy_search, prepare=_prepare, stochastic=True)
