"""Closed-form acquisitions of a Gaussian predictive: PI, EI, log-EI, GP-UCB, variance.

Each acquisition reads one posterior sample's latent (noise-free) predictive mean
``mu`` and standard deviation ``sigma`` at the candidates and returns one value per
candidate; :func:`ppbo.acquisition.base.evaluate` averages over the hyperparameter
samples (log-EI with log-mean-exp). With the incumbent ``best_f`` and the margin
``xi``,

.. math::
    z = \\frac{\\mu(x) - f^+ - \\xi}{\\sigma(x)}, \\qquad
    \\mathrm{PI} = \\Phi(z), \\qquad
    \\mathrm{EI} = \\sigma\\, h(z), \\quad h(z) = z\\,\\Phi(z) + \\varphi(z), \\qquad
    \\mathrm{UCB} = \\mu + \\sqrt{\\beta}\\, \\sigma, \\qquad
    \\log \\mathrm{Var} = \\log \\sigma^2 .

Options (all acquisitions take ``min_var``):

- ``pi``, ``ei``, ``log_ei``: ``best_f`` (default: the sample's largest posterior
  mean over the observed inputs, :func:`~ppbo.acquisition.base.best_observed_mean`),
  ``xi=0.0``, and ``incumbent="sample"``; ``incumbent="marginal"`` gives every
  sample the same ``best_f``, the largest mean of the mixture over the samples at
  the observed inputs, ``incumbent="observed"`` the best observed value
  (:func:`~ppbo.acquisition.base.prepare_incumbents`).
- ``ucb``: ``beta`` (a fixed value), or ``t`` (the iteration, from 1) with
  ``delta=0.1`` for the schedule of :func:`ucb_beta` (``size=`` for Theorem 1 of
  Srinivas et al., otherwise Theorem 2 with ``a``, ``b``, ``r``).
- ``variance``: none; its log is averaged with log-mean-exp, so the marginalised
  value is the log of the latent variance averaged over the samples.
- ``min_var=1e-18``: the predictive variance is floored,
  ``sigma = sqrt(max(var, min_var))``, so that ``sigma`` and its gradient stay finite
  where the variance vanishes (observed noise-free points). Outputs are
  standardised, so ``1e-18`` is far below the variance round-off of a GP; lower it
  only for problems whose values are themselves tiny.

Every value is differentiable with respect to the candidates and contains no Python
branching on traced values, so the acquisitions can be jitted, vmapped and
maximised with ``jax.grad``. Options given as Python floats or arrays are traced
(changing them does not recompile); integers and ``None`` are static.

References:
    Kushner (1964), "A new method of locating the maximum point of an arbitrary
    multipeak curve in the presence of noise" (PI).
    Jones, Schonlau and Welch (1998), "Efficient global optimization of expensive
    black-box functions", eq. (15) (EI).
    Ament, Daulton, Eriksson, Balandat and Bakshy (2023), "Unexpected improvements to
    expected improvement for Bayesian optimization", eqs. (9)-(10) (log-EI).
    Srinivas, Krause, Kakade and Seeger (2010), "Gaussian process optimization in
    the bandit setting: no regret and experimental design", Algorithm 1 and
    Theorems 1-2 (GP-UCB).
    MacKay (1992), "Information-based objective functions for active data
    selection", Neural Computation 4(4), section 4 (the largest predictive
    variance as the most informative point for a Gaussian model; ``variance``).
    Abramowitz and Stegun (1964), "Handbook of mathematical functions", 7.1.23
    (the asymptotic series of erfc used for very negative z).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from jax.scipy.special import erfcx, ndtr

from ppbo.acquisition.base import (
    Acquisition,
    Sample,
    best_observed_mean,
    effective_best_mean,
    prepare_incumbents,
)
from ppbo.surrogate import Capability

__all__ = [
    "pi", "ei", "log_ei", "log_aei", "ucb", "ucb_beta", "variance", "log_h",
    "MIN_VARIANCE",
]  # fmt: skip

#: Default floor of the predictive variance (standardised output units).
MIN_VARIANCE = 1e-18

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)  # c1 in Ament et al. (2023)
_LOG_SQRT_PI_2 = 0.5 * math.log(0.5 * math.pi)  # c2 in Ament et al. (2023)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_LN2 = math.log(2.0)
# Below this z the erfcx branch of eq. (9) loses ~eps * z^2 of relative accuracy to
# cancellation in 1 - exp(w), while five terms of the asymptotic series are exact to
# 1e-16 (next term 10395 / z^10 relative to 1 / z^2).
_Z_SERIES = -100.0
# -z^2 / 2 overflows float64 below -1.9e154; clip there so log-EI stays finite
# (about -5e299) instead of -inf for an absurd z.
_Z_MIN = -1e150


def _sigma(var: jax.Array, min_var: Any) -> jax.Array:
    return jnp.sqrt(jnp.maximum(var, min_var))


def _z(sample: Sample, X: jax.Array, best_f: Any, xi: Any, min_var: Any):
    mean, var = sample.predict(X)
    if best_f is None:
        # precomputed once per evaluation by prepare_incumbents
        best_f = best_observed_mean(sample) if sample.aux is None else sample.aux
    sigma = _sigma(var, min_var)
    return (mean - best_f - xi) / sigma, sigma


def _log1mexp(x: jax.Array) -> jax.Array:
    """``log(1 - exp(x))`` for ``x < 0`` (Mächler 2012, "Accurately computing
    log(1 - exp(-|a|))"), with both branches on safe inputs for finite gradients."""
    near = x > -_LN2
    x_near = jnp.where(near, x, -1.0)
    x_far = jnp.where(near, -1.0, x)
    return jnp.where(near, jnp.log(-jnp.expm1(x_near)), jnp.log1p(-jnp.exp(x_far)))


def log_h(z: jax.Array) -> jax.Array:
    """``log(z Phi(z) + phi(z))``, accurate and differentiable for z >= -1e150.

    Eq. (9) of Ament et al. (2023): the direct formula for ``z > -1``; for
    ``-100 <= z <= -1`` the rewrite

    .. math:: \\log h(z) = -\\tfrac{z^2}{2} - c_1
        + \\operatorname{log1mexp}\\big(\\log(\\operatorname{erfcx}(-z/\\sqrt2)\\,|z|)
        + c_2\\big)

    with ``c1 = log(2 pi) / 2`` and ``c2 = log(pi / 2) / 2``; for ``z < -100`` the
    asymptotic series ``h(z) = phi(z) / z^2 (1 - 3/z^2 + 15/z^4 - 105/z^6 +
    945/z^8 - ...)`` (Abramowitz and Stegun 7.1.23), whose leading term is the last
    branch of eq. (9) and whose truncation error is below 1e-16 there. Each branch
    is evaluated on inputs clipped into its own range, so unused branches cannot
    put NaN into the gradient. ``z`` is clipped below at -1e150, where
    ``-z^2 / 2`` would overflow.

    Args:
        z: standardised improvement, any shape.

    Returns:
        ``log h(z)``, the same shape.

    Example:
        >>> import jax.numpy as jnp
        >>> [round(float(v), 6) for v in log_h(jnp.array([0.0, -40.0]))]
        [-0.918939, -808.298568]
    """
    # Branches are selected and their inputs masked with where, not min/max/clip,
    # whose gradients split in half at ties (the branch boundaries).
    z = jnp.where(z > _Z_MIN, z, _Z_MIN)
    in_upper = z > -1.0
    in_lower = z < _Z_SERIES
    # z > -1: no cancellation in phi(z) + z Phi(z).
    z_up = jnp.where(in_upper, z, 0.0)
    upper = jnp.log(jnp.exp(-0.5 * z_up**2 - _LOG_SQRT_2PI) + z_up * ndtr(z_up))
    # -100 <= z <= -1: h = phi(z) (1 - |z| sqrt(pi/2) erfcx(-z / sqrt 2)).
    z_mid = jnp.where(in_upper | in_lower, -2.0, z)
    w = jnp.log(-z_mid) + jnp.log(erfcx(-z_mid * _INV_SQRT2)) + _LOG_SQRT_PI_2
    middle = -0.5 * z_mid**2 - _LOG_SQRT_2PI + _log1mexp(w)
    # z < -100: asymptotic series in u = 1 / z^2.
    z_low = jnp.where(in_lower, z, 2.0 * _Z_SERIES)
    u = 1.0 / z_low**2
    series = u * (-3.0 + u * (15.0 + u * (-105.0 + u * 945.0)))
    lower = -0.5 * z_low**2 - _LOG_SQRT_2PI - 2.0 * jnp.log(-z_low) + jnp.log1p(series)
    return jnp.where(in_upper, upper, jnp.where(in_lower, lower, middle))


def _probability_of_improvement(
    sample: Sample,
    X: jax.Array,
    *,
    best_f: Any = None,
    xi: Any = 0.0,
    min_var: Any = MIN_VARIANCE,
    incumbent: str = "sample",
) -> jax.Array:
    """Probability of improvement ``Phi(z)`` (Kushner 1964) for one sample, (m,).

    Example:
        >>> from ppbo.acquisition.base import evaluate
        >>> evaluate(pi, posterior, np.array([[0.5, 0.5], [0.1, 0.9]])).shape
        (2,)
    """
    z, _ = _z(sample, X, best_f, xi, min_var)
    return ndtr(z)


def _expected_improvement(
    sample: Sample,
    X: jax.Array,
    *,
    best_f: Any = None,
    xi: Any = 0.0,
    min_var: Any = MIN_VARIANCE,
    incumbent: str = "sample",
) -> jax.Array:
    """Expected improvement ``sigma h(z)`` (Jones et al. 1998, eq. (15)), (m,).

    Computed as ``exp(log_h(z) + log(sigma))``: the same value as the textbook
    formula, but never negative, accurate where ``z Phi(z)`` and ``phi(z)`` cancel
    (z below about -5) and representable whenever EI itself is (``h(z)`` alone may
    underflow when ``sigma`` is large).

    Example:
        >>> from ppbo.acquisition.base import evaluate
        >>> bool(evaluate(ei, posterior, np.array([[0.5, 0.5]]))[0] >= 0)
        True
    """
    z, sigma = _z(sample, X, best_f, xi, min_var)
    return jnp.exp(log_h(z) + jnp.log(sigma))


def _log_expected_improvement(
    sample: Sample,
    X: jax.Array,
    *,
    best_f: Any = None,
    xi: Any = 0.0,
    min_var: Any = MIN_VARIANCE,
    incumbent: str = "sample",
) -> jax.Array:
    """``log EI = log_h(z) + log sigma`` (Ament et al. 2023, eq. (9)), (m,).

    Example:
        >>> from ppbo.acquisition.base import evaluate
        >>> X = np.array([[0.5, 0.5]])
        >>> bool(jnp.allclose(evaluate(log_ei, posterior, X),
        ...                   jnp.log(evaluate(ei, posterior, X))))
        True
    """
    z, sigma = _z(sample, X, best_f, xi, min_var)
    return log_h(z) + jnp.log(sigma)


def _log_augmented_expected_improvement(
    sample: Sample,
    X: jax.Array,
    *,
    best_f: Any = None,
    xi: Any = 0.0,
    min_var: Any = MIN_VARIANCE,
    incumbent: str = "effective",
) -> jax.Array:
    """Log of augmented expected improvement (Huang et al. 2006), (m,).

    .. math:: \\mathrm{AEI}(x) = \\mathrm{EI}(x)\\,
        \\Big(1 - \\frac{\\sigma_\\varepsilon(x)}
        {\\sqrt{s^2(x) + \\sigma_\\varepsilon^2(x)}}\\Big)

    with ``s^2`` the latent predictive variance, ``sigma_eps^2`` the sample's
    observation-noise variance at ``x`` and EI taken against the effective best
    (:func:`~ppbo.acquisition.base.effective_best_mean`, by default). The
    factor is near 1 where the model is unsure of ``f(x)`` and near 0 where a new
    observation would be mostly noise: it stops the near-repeats of an observed
    input that EI on a noisy model keeps proposing for an improvement the size of
    the noise. The log of the factor is computed as ``log s^2 - log r - log(r +
    sigma_eps)`` with ``r = sqrt(s^2 + sigma_eps^2)``, exact and finite to the
    variance floor.

    Example:
        >>> from ppbo.acquisition.base import evaluate
        >>> X = np.array([[0.5, 0.5]])
        >>> bool(evaluate(log_aei, posterior, X)[0] < evaluate(log_ei, posterior, X,
        ...      incumbent="effective")[0])
        True
    """
    if best_f is None and sample.aux is None:
        best_f = effective_best_mean(sample)
    z, sigma = _z(sample, X, best_f, xi, min_var)
    noise_sd = jnp.sqrt(sample.noise(X))
    total = jnp.sqrt(sigma**2 + noise_sd**2)
    log_factor = 2.0 * jnp.log(sigma) - jnp.log(total) - jnp.log(total + noise_sd)
    return log_h(z) + jnp.log(sigma) + log_factor


def _prepare_effective(key: Any, posterior: Any, **options: Any) -> Any:
    return prepare_incumbents(key, posterior, **({"incumbent": "effective"} | options))


def ucb_beta(
    t: Any,
    *,
    delta: Any = 0.1,
    size: Any = None,
    d: int | None = None,
    a: Any = 1.0,
    b: Any = 1.0,
    r: Any = 1.0,
) -> jax.Array:
    """The GP-UCB exploration weight ``beta_t`` of Srinivas et al. (2010).

    With ``size`` (a finite domain of ``|D| = size`` points, Theorem 1):

    .. math:: \\beta_t = 2 \\log\\big(|D|\\, t^2 \\pi^2 / (6 \\delta)\\big);

    otherwise the compact domain ``[0, r]^d`` of Theorem 2 (ppbo's unit cube:
    ``r = 1``), with ``a`` and ``b`` the constants of its bound on the sample-path
    derivatives, ``P(sup |df/dx_j| > L) <= a exp(-(L / b)^2)``:

    .. math:: \\beta_t = 2 \\log\\big(2 t^2 \\pi^2 / (3 \\delta)\\big)
        + 2 d \\log\\big(t^2 d\\, b\\, r \\sqrt{\\log(4 d a / \\delta)}\\big).

    Either holds with probability at least ``1 - delta`` for all ``t >= 1``.

    Args:
        t: iteration, ``t >= 1`` (a float or array is traced, an int is static).
        delta: failure probability in (0, 1).
        size: number of points of a finite domain (Theorem 1).
        d: input dimension (Theorem 2; required without ``size``).
        a, b, r: the constants of Theorem 2.

    Returns:
        ``beta_t`` as a scalar array.

    Raises:
        ValueError: if neither ``size`` nor ``d`` is given.

    Example:
        >>> round(float(ucb_beta(1.0, delta=0.1, size=1000)), 4)
        19.4161
    """
    t = jnp.asarray(t, dtype=float)
    if size is not None:
        return 2.0 * jnp.log(size * t**2 * math.pi**2 / (6.0 * delta))
    if d is None:
        raise ValueError("ucb_beta needs size= (Theorem 1) or d= (Theorem 2)")
    return 2.0 * jnp.log(2.0 * t**2 * math.pi**2 / (3.0 * delta)) + 2.0 * d * jnp.log(
        t**2 * d * b * r * jnp.sqrt(jnp.log(4.0 * d * a / delta))
    )


def _upper_confidence_bound(
    sample: Sample,
    X: jax.Array,
    *,
    beta: Any = None,
    t: Any = None,
    delta: Any = 0.1,
    size: Any = None,
    a: Any = 1.0,
    b: Any = 1.0,
    r: Any = 1.0,
    min_var: Any = MIN_VARIANCE,
) -> jax.Array:
    """GP-UCB ``mu + sqrt(beta) sigma`` (Srinivas et al. 2010, Algorithm 1), (m,).

    ``beta`` fixes the weight; otherwise ``t`` (and ``delta``, ``size``, ``a``,
    ``b``, ``r``) give :func:`ucb_beta`'s schedule, with ``d = X.shape[1]``. Pass
    ``t`` as a float (``t=float(t)``) so that advancing it does not recompile.

    Raises:
        ValueError: if neither ``beta`` nor ``t`` is given.

    Example:
        >>> from ppbo.acquisition.base import evaluate
        >>> X = np.array([[0.5, 0.5]])
        >>> mean, var = posterior.predict(X)
        >>> bool(jnp.allclose(evaluate(ucb, posterior, X, beta=4.0),
        ...                   mean[0] + 2 * jnp.sqrt(var[0])))
        True
    """
    if beta is None:
        if t is None:
            raise ValueError(
                "ucb needs beta=... (a fixed weight) or t=... (the iteration, for "
                "the Srinivas et al. 2010 schedule)"
            )
        beta = ucb_beta(t, delta=delta, size=size, d=X.shape[1], a=a, b=b, r=r)
    mean, var = sample.predict(X)
    return mean + jnp.sqrt(beta) * _sigma(var, min_var)


def _log_variance(
    sample: Sample, X: jax.Array, *, min_var: Any = MIN_VARIANCE
) -> jax.Array:
    """Log of the latent predictive variance, ``log max(var, min_var)``, (m,).

    Maximising it samples where the model is least certain (MacKay 1992): pure
    exploration, which the campaign step falls back to when an improvement
    acquisition would all but repeat an observed input for a negligible gain.

    Example:
        >>> from ppbo.acquisition.base import evaluate
        >>> X = np.array([[0.5, 0.5]])
        >>> _, var = posterior.predict(X)
        >>> bool(jnp.allclose(evaluate(variance, posterior, X), jnp.log(var[0])))
        True
    """
    _, var = sample.predict(X)
    return jnp.log(jnp.maximum(var, min_var))


#: Probability of improvement (Kushner 1964); options ``best_f``, ``xi``.
pi = Acquisition("pi", _probability_of_improvement, prepare=prepare_incumbents)

#: Expected improvement (Jones et al. 1998); options ``best_f``, ``xi``.
ei = Acquisition(
    "ei", _expected_improvement, prepare=prepare_incumbents, improvement=True
)

#: Log expected improvement (Ament et al. 2023), averaged with log-mean-exp.
log_ei = Acquisition(
    "log_ei",
    _log_expected_improvement,
    log_space=True,
    prepare=prepare_incumbents,
    improvement=True,
)

#: Log augmented expected improvement (Huang et al. 2006), averaged with
#: log-mean-exp; options ``best_f``, ``xi``, ``incumbent`` (default
#: ``"effective"``).
log_aei = Acquisition(
    "log_aei",
    _log_augmented_expected_improvement,
    log_space=True,
    prepare=_prepare_effective,
    improvement=True,
    requires=(Capability.NOISE,),
)

#: GP-UCB (Srinivas et al. 2010); options ``beta`` or ``t``/``delta``/``size``.
ucb = Acquisition("ucb", _upper_confidence_bound)

#: Latent predictive variance (MacKay 1992), averaged over samples; pure
#: exploration, and the campaign step's fallback when an improvement acquisition
#: stalls (:data:`ppbo.campaign.step.EXPLORE_BELOW`).
variance = Acquisition("variance", _log_variance, log_space=True)
