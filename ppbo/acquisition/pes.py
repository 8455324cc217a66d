"""Predictive entropy search (PES): information about the global maximiser x*.

PES (Hernández-Lobato, Hoffman and Ghahramani 2014) chooses the point whose noisy
observation ``y`` tells most about where the maximum is. Swapping the roles of
``y`` and ``x*`` in the mutual information (§2, eq. (2)),

.. math:: \\alpha(x) = H[p(y \\mid D, x)]
    - E_{x^* \\sim p(x^* \\mid D)} H[p(y \\mid D, x, x^*)],

and approximating both predictive distributions by Gaussians gives, with one
sampled maximiser :math:`x^*_i` per hyperparameter sample :math:`\\theta_i`
(§2.3, the marginalisation over hyperparameters),

.. math:: \\alpha(x) = \\frac1M \\sum_{i=1}^M \\Big[
    \\tfrac12 \\log\\big(v_n^{(i)}(x) + \\sigma_i^2\\big)
    - \\tfrac12 \\log\\big(v_n^{(i)}(x \\mid x^*_i) + \\sigma_i^2\\big) \\Big].

``pes``'s ``fn`` returns one term of the sum (one hyperparameter sample);
:func:`~ppbo.acquisition.evaluate` averages them. :math:`\\sigma_i^2` is the
surrogate's per-point observation-noise variance at ``x`` (its declared ``noise``,
:attr:`~ppbo.Capability.NOISE`) and :math:`v_n^{(i)}(x)` the latent predictive
variance; the kernel, mean, lengthscales and signal variance come from its
:class:`~ppbo.GPParts`.

How :math:`v_n(x \\mid x^*)` is computed (§2.2 and Appendix B):

1. **Sampling x*** (§2.1, Appendix A): one random-Fourier-feature posterior
   sample path per hyperparameter sample (``num_features`` = 1000 features, as in
   the paper) is maximised over the unit cube by a dense scrambled Sobol search
   (``num_candidates`` points plus the observed inputs) refined by projected
   gradient ascent from the ``num_restarts`` best points
   (:func:`~ppbo.acquisition.rff.sample_maxima`).
2. **Conditioning on x* being the maximiser** (§2.2), approximated by
   C1: x* is a local maximum -- the gradient at x* is zero and the off-diagonal
   (upper-triangular) Hessian entries are zero, both taken as noiseless
   observations, and the Hessian diagonal is negative, factors
   :math:`\\mathbb I([\\nabla^2 f(x^*)]_{jj} \\le 0)`;
   C2: :math:`f(x^*)` exceeds the best observation :math:`y_{max}`, the soft
   factor :math:`\\Phi((f(x^*) - y_{max}) / \\sigma)`;
   C3: :math:`f(x) < f(x^*)`.
   The data and the Gaussian conditions of C1 fix the Gaussian prior of
   :math:`z = (f(x^*), \\operatorname{diag} \\nabla^2 f(x^*))`; the d + 1
   non-Gaussian factors of C1 and C2 are replaced by Gaussian sites with
   expectation propagation (Appendix B; parallel updates damped by
   ``ep_damping``, decaying by 0.99 per sweep as in the authors' code, at most
   ``ep_iterations`` sweeps, stopping when marginal means and variances change
   less than ``ep_tolerance``; sites whose cavity is not proper keep their old
   value). This happens once per hyperparameter sample and x* in ``prepare``:
   the augmented system of ``n + 1 + d + d(d+1)/2`` values (observations,
   gradient, Hessian entries and f(x*)) is factorised once and cached.
3. **Prediction** (Appendix B): the covariances of ``f(x)`` with the augmented
   values are derivatives of the kernel (JAX autodiff, see
   :mod:`ppbo.acquisition._derivatives`), so a candidate costs a few
   matrix-vector products with the cached factors. C3 is one moment-matching
   step on the bivariate Gaussian of :math:`(f(x), f(x^*))`: with mean
   :math:`(m_x, m_*)`, covariance :math:`((v_x, c), (c, v_*))`,
   :math:`s = v_x + v_* - 2c`, :math:`\\alpha = (m_* - m_x)/\\sqrt s` and
   :math:`\\beta = \\varphi(\\alpha) / \\Phi(\\alpha)`,

   .. math:: v_n(x \\mid x^*) = v_x - \\beta(\\beta + \\alpha) (v_x - c)^2 / s.

Derivatives are taken in coordinates scaled by the lengthscales (``x / l``), which
leaves the conditions unchanged and keeps the augmented covariance well scaled.
The kernel must have twice-differentiable sample paths: squared-exponential or
Matérn-5/2 (Matérn-1/2 and 3/2 raise ``ValueError``); any mean of
``models/gp.py`` works (its derivatives at x* are taken by autodiff).

PES-NB (§4, no Bayesian treatment of the hyperparameters) is ``pes`` on
:func:`pes_nb_posterior`, a one-sample posterior at the posterior mean of the
hyperparameters.

Options: ``key`` (required), ``x_star`` (s, d) to skip the sampling (the key is
then unused), ``num_features=1000``, ``num_candidates=1024``, ``num_restarts=4``,
``num_steps=100``, ``learning_rate=0.02``, ``ep_iterations=200``,
``ep_damping=0.5``, ``ep_tolerance=1e-8``. Padded rows of the data are ignored.
``ppbo.optimize_acquisition`` handles pending points and batches by conditioning
the posterior on them (Kriging believer) before ``prepare``, so x* and the EP are
computed for the fantasised data.

Example:
    >>> from ppbo.acquisition import evaluate
    >>> from ppbo.acquisition.pes import pes
    >>> X = jnp.array([[0.2, 0.3], [0.7, 0.9]])
    >>> values = evaluate(pes, posterior, X, key=key, x_star=jnp.array([[0.5, 0.5]]))
    >>> values.shape, bool(jnp.all(values >= 0))
    ((2,), True)

References:
    Hernández-Lobato, Hoffman and Ghahramani (2014), "Predictive entropy search for
    efficient global optimization of black-box functions", NeurIPS, §2, eq. (2),
    §2.1-2.3, §4, Appendices A and B.
    Minka (2001), "Expectation propagation for approximate Bayesian inference".
    Rasmussen and Williams (2006), "Gaussian Processes for Machine Learning",
    §3.6 (EP for GPs) and §9.4 (derivative observations).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import solve_triangular
from jax.scipy.special import log_ndtr
from scipy.stats import qmc

from ppbo.acquisition._derivatives import (
    cross_covariance,
    derivative_covariance,
    functionals,
    kernel_function,
)
from ppbo.acquisition.base import Acquisition, Sample
from ppbo.acquisition.rff import sample_maxima
from ppbo.linalg import cholesky
from ppbo.surrogate import Capability, Posterior, Surrogate

__all__ = [
    "pes",
    "check_surrogate",
    "PESState",
    "EPResult",
    "sample_maximizers",
    "condition_on_maximizers",
    "predictive_variances",
    "pes_nb_posterior",
    "expectation_propagation",
    "probit_moments",
    "step_moments",
    "variance_below_maximum",
]

#: What PES needs from a surrogate: a GP with twice-differentiable sample paths
#: (gradients and Hessians at x*) and the per-point observation noise.
REQUIRES = (Capability.GP, Capability.GP_DERIVATIVES, Capability.NOISE)
_LOG_2PI = math.log(2.0 * math.pi)
_FAR = -5.0  # below this alpha, hazard terms come from a continued fraction
_CF_TERMS = 40
_EP_DECAY = 0.99  # damping decays by this factor per sweep (the authors' code)
_MIN_S = 1e-12  # floor of var(f(x) - f(x*)) relative to the signal variance


# -- one-dimensional moment matching ---------------------------------------------


def _hazard_terms(alpha):
    """``r = phi(alpha) / Phi(alpha)``, ``r + alpha`` and ``1 - r (r + alpha)``.

    The last two cancel for alpha << 0, and ``log_ndtr`` loses relative accuracy
    there; below ``alpha = -5`` all three come from Laplace's continued fraction
    of the Mills ratio, ``Phi(-x) / phi(x) = 1 / (x + c_1)`` with
    ``c_k = k / (x + c_{k+1})`` (x = -alpha), which gives ``r = x + c_1``,
    ``r + alpha = c_1`` and ``1 - r (r + alpha) = (x + 2 c_2 - c_3) /
    ((x + c_3) (x + c_2)^2)`` without cancellation (40 terms: converged to
    rounding for x >= 5). Returns ``(r, r + alpha, 1 - r (r + alpha), log Phi)``.
    """
    log_cdf = log_ndtr(alpha)
    r = jnp.exp(-0.5 * alpha**2 - 0.5 * _LOG_2PI - log_cdf)
    far = alpha < _FAR
    x = jnp.where(far, -alpha, -_FAR)
    tail = jnp.zeros_like(x)
    terms = {}
    for k in range(_CF_TERMS, 0, -1):
        tail = k / (x + tail)
        terms[k] = tail
    c1, c2, c3 = terms[1], terms[2], terms[3]
    rest = (x + 2.0 * c2 - c3) / ((x + c3) * (x + c2) ** 2)
    return (
        jnp.where(far, x + c1, r),
        jnp.where(far, c1, r + alpha),
        jnp.where(far, rest, 1.0 - r * (r + alpha)),
        log_cdf,
    )


def probit_moments(
    mean: Any, var: Any, threshold: Any, noise: Any
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Moments of ``N(f | mean, var) Phi((f - threshold) / sqrt(noise))``.

    The tilted distribution of PES's condition C2 (f(x*) above the best
    observation, softened by the observation noise).

    Args:
        mean, var: the Gaussian (cavity) mean and variance (broadcastable).
        threshold: ``y_max``.
        noise: noise variance softening the step.

    Returns:
        ``(log_z, mean, var)``: log normaliser, mean and variance of the
        normalised product.

    Example:
        >>> log_z, m, v = probit_moments(0.0, 1.0, 0.0, 1.0)
        >>> round(float(jnp.exp(log_z)), 6), bool(m > 0), bool(v < 1)
        (0.5, True, True)
    """
    mean, var = jnp.asarray(mean), jnp.asarray(var)
    s2 = var + noise
    s = jnp.sqrt(s2)
    alpha = (mean - threshold) / s
    r, _, rest, log_cdf = _hazard_terms(alpha)
    # var - var^2 r (r + alpha) / s2, written without cancellation
    return log_cdf, mean + var * r / s, var * (noise + var * rest) / s2


def step_moments(mean: Any, var: Any) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Moments of ``N(h | mean, var) 1[h <= 0]``.

    The tilted distribution of PES's condition C1 for a Hessian diagonal entry.

    Args:
        mean, var: the Gaussian (cavity) mean and variance (broadcastable).

    Returns:
        ``(log_z, mean, var)`` of the normalised truncated Gaussian.

    Example:
        >>> log_z, m, v = step_moments(0.0, 1.0)
        >>> round(float(m), 6), round(float(v), 6)  # half-normal: -sqrt(2/pi), 1-2/pi
        (-0.797885, 0.36338)
    """
    mean, var = jnp.asarray(mean), jnp.asarray(var)
    s = jnp.sqrt(var)
    alpha = -mean / s
    r, _, rest, log_cdf = _hazard_terms(alpha)
    return log_cdf, mean - s * r, var * rest


def _site_update(m_cav, v_cav, y_max, noise):
    """Natural parameters of the new sites from cavities (d+1,): exact updates.

    With ``beta = r (r + alpha) / s^2`` (``s^2`` the cavity variance plus the
    step's noise), the site precision is ``beta / (1 - beta v_cav)`` and the site
    mean ``m_cav +- s / (r + alpha)`` (Appendix B); written without differences of
    precisions, which cancel when a factor is nearly inactive. The precisions are
    non-negative (the factors are log-concave).
    """
    soft = jnp.concatenate([jnp.atleast_1d(noise), jnp.zeros_like(v_cav[1:])])
    s = jnp.sqrt(v_cav + soft)
    sign = jnp.concatenate([jnp.ones(1, v_cav.dtype), -jnp.ones_like(v_cav[1:])])
    threshold = jnp.concatenate([jnp.atleast_1d(y_max), jnp.zeros_like(v_cav[1:])])
    alpha = sign * (m_cav - threshold) / s
    _, r_plus, rest, _ = _hazard_terms(alpha)
    tau = (1.0 - rest) / (soft + v_cav * rest)
    site_mean = m_cav + sign * s / r_plus
    return tau, tau * site_mean


class EPResult(NamedTuple):
    """Expectation propagation on ``z = (f(x*), diag hess f(x*))``.

    Attributes:
        mean: posterior mean of z, shape (d+1,).
        cov: posterior covariance, shape (d+1, d+1).
        site_precision: Gaussian site precisions, shape (d+1,).
        site_shift: site precision times site mean, shape (d+1,).
        iterations: sweeps done.
        converged: whether the last sweep changed means and variances by less
            than the tolerance.
    """

    mean: jax.Array
    cov: jax.Array
    site_precision: jax.Array
    site_shift: jax.Array
    iterations: jax.Array
    converged: jax.Array


def _ep_marginals(m0, V0, tau, nu):
    # posterior of N(m0, V0) x sites, with S = diag(sqrt(tau)) and
    # B = I + S V0 S (eigenvalues >= 1), never inverting V0 (Rasmussen and
    # Williams 2006, Algorithm 3.5)
    S = jnp.sqrt(tau)
    eye = jnp.eye(m0.shape[0], dtype=m0.dtype)
    L_B = jnp.linalg.cholesky(eye + S[:, None] * V0 * S[None, :])
    C = solve_triangular(L_B, S[:, None] * V0, lower=True)
    V = V0 - C.T @ C
    u = m0 + V0 @ nu
    mean = u - V0 @ (S * jax.scipy.linalg.cho_solve((L_B, True), S * u))
    return mean, V


def expectation_propagation(
    mean: Any,
    cov: Any,
    y_max: Any,
    noise: Any,
    *,
    iterations: int = 200,
    damping: float = 0.5,
    tolerance: float = 1e-8,
) -> EPResult:
    """Gaussian approximation of ``N(z | mean, cov)`` times PES's factors C1, C2.

    The factors are ``Phi((z_0 - y_max) / sqrt(noise))`` (C2) and
    ``1[z_j <= 0]`` for ``j >= 1`` (C1, Hessian diagonal), with
    ``z = (f(x*), diag hess f(x*))`` (Hernández-Lobato et al. 2014, Appendix B).
    Parallel EP: each sweep computes all cavities from the current marginals,
    matches moments (:func:`probit_moments`, :func:`step_moments`), and moves the
    sites' natural parameters a fraction ``damping`` (times 0.99 per sweep) of
    the way to the new ones. Jit- and vmap-compatible.

    Args:
        mean: prior mean of z, shape (d+1,).
        cov: prior covariance of z, shape (d+1, d+1), positive semi-definite.
        y_max: the best observation.
        noise: noise variance of C2's soft step.
        iterations: maximum number of sweeps (static).
        damping: initial step fraction in (0, 1].
        tolerance: stop when no marginal mean or variance changes more.

    Returns:
        :class:`EPResult`.

    Example:
        >>> result = expectation_propagation(jnp.zeros(2), jnp.eye(2), 0.0, 1e-2)
        >>> bool(result.converged), bool(result.mean[0] > 0), bool(result.mean[1] < 0)
        (True, True, True)
    """
    m0 = jnp.asarray(mean)
    V0 = jnp.asarray(cov)
    V0 = 0.5 * (V0 + V0.T)
    dtype = m0.dtype
    zeros = jnp.zeros_like(m0)
    inf = jnp.asarray(jnp.inf, dtype)

    def cond(state):
        i, _, _, _, _, change = state
        return (i < iterations) & (change >= tolerance)

    def body(state):
        i, tau, nu, m, V, _ = state
        v = jnp.diag(V)
        tau_cav = 1.0 / v - tau
        valid = (tau_cav > 0) & jnp.isfinite(tau_cav)
        v_cav = jnp.where(valid, 1.0 / jnp.where(valid, tau_cav, 1.0), 1.0)
        m_cav = v_cav * (m / v - nu)
        tau_new, nu_new = _site_update(m_cav, v_cav, y_max, noise)
        ok = valid & jnp.isfinite(tau_new) & jnp.isfinite(nu_new)
        step = damping * _EP_DECAY ** i.astype(dtype)
        tau = jnp.where(ok, tau + step * (tau_new - tau), tau)
        nu = jnp.where(ok, nu + step * (nu_new - nu), nu)
        m_new, V_new = _ep_marginals(m0, V0, tau, nu)
        change = jnp.maximum(
            jnp.max(jnp.abs(m_new - m)), jnp.max(jnp.abs(jnp.diag(V_new) - v))
        )
        return i + 1, tau, nu, m_new, V_new, change

    state = (jnp.asarray(0), zeros, zeros, m0, V0, inf)
    i, tau, nu, m, V, change = lax.while_loop(cond, body, state)
    return EPResult(m, V, tau, nu, i, change < tolerance)


# -- the augmented Gaussian system -----------------------------------------------


class PESState(NamedTuple):
    """What ``prepare`` caches per hyperparameter sample (leading axis s in aux).

    The augmented values are ``h = (y, grad f(x*), offdiag hess f(x*), f(x*),
    diag hess f(x*))`` (derivatives in lengthscale-scaled coordinates), of size
    ``N = n + 1 + d + d(d+1)/2``; the last ``d + 1`` form ``z``.

    Attributes:
        x_star: the sampled maximiser, shape (d,).
        inv_factor: inverse lower Cholesky factor of the prior covariance of h
            (noise on y), shape (N, N).
        weights: ``inv_factor @ (E[h] - prior mean)``, with E[z] from EP, (N,).
        site_factor: ``G`` with ``G^T G = (I + L_z^T T L_z)^-1``, where ``L_z`` is
            the z block of the Cholesky factor and ``T`` the EP site precisions;
            it maps the z part of ``inv_factor @ k_h(x)`` to the EP correction,
            shape (d+1, d+1).
        star: ``G @ L_z[0]``, shape (d+1,): ``|star|^2`` is var f(x*).
        ep: the :class:`EPResult` (posterior of z given data, C1 and C2).
    """

    x_star: jax.Array
    inv_factor: jax.Array
    weights: jax.Array
    site_factor: jax.Array
    star: jax.Array
    ep: EPResult


def check_surrogate(surrogate: Surrogate) -> None:
    """Raise unless PES can use ``surrogate``.

    PES needs the capabilities in :data:`REQUIRES`: :class:`~ppbo.GPParts` whose
    kernel has smoothness above 2 (Matérn-5/2 or squared-exponential), and the
    per-point noise.

    Raises:
        MissingCapabilityError: naming the first missing capability.

    Example:
        >>> from ppbo.models import gp
        >>> check_surrogate(gp.surrogate(kernel="rbf"))
        >>> check_surrogate(gp.surrogate(kernel="matern32"))
        Traceback (most recent call last):
        ...
        ppbo.surrogate.MissingCapabilityError: ... capability 'gp_derivatives' ...
    """
    surrogate.require(*REQUIRES, by="acquisition 'pes'")


def _check_surrogate(posterior: Posterior) -> None:
    check_surrogate(posterior.surrogate)


def _indices(d: int) -> tuple[np.ndarray, int]:
    """Positions in ``functionals`` order of (grad, offdiag hess, f, diag hess)."""
    grad = list(range(1, d + 1))
    off = [1 + d + i * d + j for i in range(d) for j in range(i + 1, d)]
    diag = [1 + d + i * d + i for i in range(d)]
    hard = grad + off
    return np.asarray(hard + [0] + diag), len(hard)


class _Pieces(NamedTuple):
    k: Any  # kernel of two points in scaled coordinates
    mean: Any  # prior mean of a scaled point
    scale: jax.Array  # lengthscales


def _pieces(params, surrogate) -> _Pieces:
    gp = surrogate.gp.evaluate(params)
    lengthscale = gp.lengthscale
    k = kernel_function(gp.kernel, jnp.ones_like(lengthscale), gp.outputscale)

    def mean(u):
        return gp.mean((u * lengthscale)[None])[0]

    return _Pieces(k, mean, lengthscale)


def _condition_one(params, data, surrogate, x_star, iterations, damping, tolerance):
    pieces = _pieces(params, surrogate)
    d = data.X.shape[1]
    index, num_hard = _indices(d)
    n = data.X.shape[0]
    U = data.X / pieces.scale
    u_star = x_star / pieces.scale

    # prior covariance of h = (y, hard functionals, z)
    K_yy = jax.vmap(lambda a: jax.vmap(lambda b: pieces.k(a, b))(U))(U)
    # per-point observation noise of the data; C2's soft step uses the noise of an
    # observation at x*
    K_yy = K_yy + jnp.diag(surrogate.noise_one(params, data.X))
    noise_star = surrogate.noise_one(params, x_star[None])[0]
    K_yf = jax.vmap(lambda a: cross_covariance(pieces.k, a, u_star))(U)[:, index]
    K_ff = derivative_covariance(pieces.k, u_star, u_star)[index][:, index]
    K = jnp.block([[K_yy, K_yf], [K_yf.T, K_ff]])
    # padded rows and columns become those of the identity (zero residual below)
    mask = jnp.concatenate([data.mask, jnp.ones(len(index), bool)])
    both = mask[:, None] & mask[None, :]
    K = jnp.where(both, 0.5 * (K + K.T), jnp.eye(K.shape[0], dtype=K.dtype))
    L = cholesky(K)
    eye = jnp.eye(L.shape[0], dtype=L.dtype)
    L_inv = solve_triangular(L, eye, lower=True)

    # residuals of the observations and of the noiseless conditions grad = 0 and
    # offdiag hess = 0; prior mean of z
    mean_f = functionals(pieces.mean, u_star)[index]
    r_y = jnp.where(data.mask, data.y - jax.vmap(pieces.mean)(U), 0.0)
    c = n + num_hard
    r_c = jnp.concatenate([r_y, -mean_f[:num_hard]])
    mean_z = mean_f[num_hard:]

    # the Gaussian prior of z given the data and the conditions, from the blocks of
    # the one factorisation
    L_z = L[c:, c:]
    m0 = mean_z + L[c:, :c] @ (L_inv[:c, :c] @ r_c)
    y_max = jnp.max(jnp.where(data.target_mask, data.y, -jnp.inf))
    ep = expectation_propagation(
        m0,
        L_z @ L_z.T,
        y_max,
        noise_star,
        iterations=iterations,
        damping=damping,
        tolerance=tolerance,
    )

    A = L_z.T @ (ep.site_precision[:, None] * L_z)
    L_A = jnp.linalg.cholesky(jnp.eye(d + 1, dtype=A.dtype) + 0.5 * (A + A.T))
    G = solve_triangular(L_A, jnp.eye(d + 1, dtype=A.dtype), lower=True)
    weights = L_inv @ jnp.concatenate([r_c, ep.mean - mean_z])
    return PESState(x_star, L_inv, weights, G, G @ L_z[0], ep)


@partial(jax.jit, static_argnames=("iterations",))
def _condition(posterior, x_star, iterations, damping, tolerance):
    def one(params, x_star):
        return _condition_one(
            params,
            posterior.data,
            posterior.surrogate,
            x_star,
            iterations,
            damping,
            tolerance,
        )

    return jax.vmap(one)(posterior.samples, x_star)


def condition_on_maximizers(
    posterior: Posterior,
    x_star: Any,
    *,
    ep_iterations: int = 200,
    ep_damping: float = 0.5,
    ep_tolerance: float = 1e-8,
) -> PESState:
    """Condition every hyperparameter sample on its maximiser (C1, C2 with EP).

    Builds and factorises the augmented Gaussian system (observations, gradient and
    Hessian at x*, f(x*)) and runs :func:`expectation_propagation` on
    ``(f(x*), diag hess f(x*))`` (Hernández-Lobato et al. 2014, §2.2, Appendix B).

    Args:
        posterior: a GP posterior (squared-exponential or Matérn-5/2 kernel) with
            s samples.
        x_star: one maximiser per sample, shape (s, d).
        ep_iterations: maximum EP sweeps.
        ep_damping: initial EP damping in (0, 1].
        ep_tolerance: EP convergence tolerance.

    Returns:
        :class:`PESState` with a leading sample axis s.

    Raises:
        ValueError: for a kernel that is not twice differentiable, a surrogate that
            is not a single-task GP, or ``x_star`` of the wrong shape.

    Example:
        >>> state = condition_on_maximizers(posterior, jnp.array([[0.5, 0.5]]))
        >>> state.ep.mean.shape, bool(state.ep.converged[0])
        ((1, 3), True)
    """
    _check_surrogate(posterior)
    s, d = posterior.num_samples, posterior.data.dim
    x_star = jnp.asarray(x_star, dtype=posterior.data.X.dtype)
    if x_star.shape != (s, d):
        raise ValueError(
            f"x_star must have shape (s, d) = ({s}, {d}), got shape {x_star.shape}"
        )
    if not 0.0 < float(ep_damping) <= 1.0:
        raise ValueError(f"ep_damping must be in (0, 1], got {ep_damping}")
    if int(ep_iterations) < 1:
        raise ValueError(f"ep_iterations must be >= 1, got {ep_iterations}")
    return _condition(
        posterior, x_star, int(ep_iterations), float(ep_damping), float(ep_tolerance)
    )


def _sobol(key: jax.Array, d: int, num: int) -> np.ndarray:
    seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
    points = qmc.Sobol(d, scramble=True, seed=seed).random_base2(
        max(0, math.ceil(math.log2(max(num, 1))))
    )
    return np.asarray(points[:num], dtype=np.float64)


def sample_maximizers(
    key: jax.Array,
    posterior: Posterior,
    *,
    num_features: int = 1000,
    num_candidates: int = 1024,
    num_restarts: int = 4,
    num_steps: int = 100,
    learning_rate: float = 0.02,
) -> jax.Array:
    """Sample one global maximiser x* per hyperparameter sample.

    Maximises one random-Fourier-feature posterior sample path per sample
    (Hernández-Lobato et al. 2014, §2.1 and Appendix A) over a scrambled Sobol set
    of ``num_candidates`` points (shared by the samples) plus the observed inputs,
    refined by projected gradient ascent from the best ``num_restarts``
    (:func:`~ppbo.acquisition.rff.sample_maxima`).

    Args:
        key: JAX PRNG key.
        posterior: a GP posterior with s samples.
        num_features: random features per path (1000 in the paper).
        num_candidates: Sobol points of the dense search.
        num_restarts, num_steps, learning_rate: the local refinement.

    Returns:
        Maximisers, shape (s, d), in the unit cube.

    Example:
        >>> x_star = sample_maximizers(key, posterior, num_features=128,
        ...                            num_candidates=64, num_steps=10)
        >>> x_star.shape
        (1, 2)
    """
    k_sobol, k_paths = jax.random.split(key)
    candidates = _sobol(k_sobol, posterior.data.dim, int(num_candidates))
    X_star, _ = sample_maxima(
        k_paths,
        posterior,
        1,
        num_features=int(num_features),
        candidates=jnp.asarray(candidates),
        num_candidates=0,
        num_restarts=int(num_restarts),
        num_steps=int(num_steps),
        learning_rate=learning_rate,
    )
    return X_star[:, 0]


def _prepare(
    key: jax.Array,
    posterior: Posterior,
    *,
    x_star: Any = None,
    num_features: int = 1000,
    num_candidates: int = 1024,
    num_restarts: int = 4,
    num_steps: int = 100,
    learning_rate: float = 0.02,
    ep_iterations: int = 200,
    ep_damping: float = 0.5,
    ep_tolerance: float = 1e-8,
) -> PESState:
    _check_surrogate(posterior)
    if x_star is None:
        x_star = sample_maximizers(
            key,
            posterior,
            num_features=num_features,
            num_candidates=num_candidates,
            num_restarts=num_restarts,
            num_steps=num_steps,
            learning_rate=learning_rate,
        )
    return condition_on_maximizers(
        posterior,
        x_star,
        ep_iterations=ep_iterations,
        ep_damping=ep_damping,
        ep_tolerance=ep_tolerance,
    )


# -- prediction --------------------------------------------------------------------


def _variances_one(params, data, surrogate, state: PESState, X):
    """``v_n(x)`` and ``v_n(x | x*)`` (before and after C1-C3) at X (m, d)."""
    pieces = _pieces(params, surrogate)
    d = X.shape[1]
    index, num_hard = _indices(d)
    n = data.X.shape[0]
    c = n + num_hard
    U = data.X / pieces.scale
    u_star = state.x_star / pieces.scale
    prior_var = pieces.k(u_star, u_star)

    def one(x):
        u = x / pieces.scale
        k_y = jnp.where(data.mask, jax.vmap(lambda b: pieces.k(u, b))(U), 0.0)
        k_h = jnp.concatenate([k_y, cross_covariance(pieces.k, u, u_star)[index]])
        v = state.inv_factor @ k_h
        var = prior_var - jnp.sum(v[:n] ** 2)
        g = state.site_factor @ v[c:]
        # given the data and C1, C2 (EP): the z block is integrated over q(z)
        var_z = prior_var - jnp.sum(v**2) + jnp.sum(g**2)
        mean_x = pieces.mean(u) + v @ state.weights
        cov = g @ state.star
        return var, var_z, mean_x, cov

    var, var_z, mean_x, cov = jax.vmap(one)(X)
    var = jnp.maximum(var, 0.0)
    var_z = jnp.clip(var_z, 0.0, var)
    var_given = variance_below_maximum(
        mean_x,
        var_z,
        state.ep.mean[0],
        jnp.sum(state.star**2),
        cov,
        min_var=_MIN_S * prior_var,
    )
    return var, var_given


def variance_below_maximum(
    mean: Any,
    var: Any,
    mean_star: Any,
    var_star: Any,
    cov: Any,
    *,
    min_var: Any = 1e-300,
) -> jax.Array:
    """Variance of f(x) under a bivariate Gaussian truncated to f(x) < f(x*).

    PES's condition C3 (Hernández-Lobato et al. 2014, §2.2 and Appendix B): one
    moment-matching step on the Gaussian of ``(f(x), f(x*))``, with
    ``s = var + var_star - 2 cov``, ``alpha = (mean_star - mean) / sqrt(s)`` and
    ``beta = phi(alpha) / Phi(alpha)``,
    ``var - beta (beta + alpha) (var - cov)^2 / s``: the exact variance of the
    truncated distribution. Where ``s <= min_var`` (f(x) and f(x*) coincide) the
    condition holds surely and ``var`` is returned; the result lies in
    ``[0, var]``. Differentiable, broadcastable.

    Args:
        mean, var: mean and variance of f(x).
        mean_star, var_star: mean and variance of f(x*).
        cov: their covariance.
        min_var: smallest ``s`` treated as positive.

    Returns:
        The variance of f(x) given f(x) < f(x*).

    Example:
        >>> # independent standard normals: Var[f | f < g] = 1 - 1 / pi
        >>> round(float(variance_below_maximum(0.0, 1.0, 0.0, 1.0, 0.0)), 6)
        0.68169
    """
    mean, var = jnp.asarray(mean), jnp.asarray(var)
    s = var + var_star - 2.0 * cov
    big = s > min_var
    s_safe = jnp.where(big, s, 1.0)
    alpha = jnp.where(big, (mean_star - mean) / jnp.sqrt(s_safe), 0.0)
    _, _, rest, _ = _hazard_terms(alpha)
    # (var - cov)^2 / s <= var by Cauchy-Schwarz; the minimum guards rounding
    reduction = jnp.minimum((var - cov) ** 2 / s_safe, var)
    return jnp.maximum(var - jnp.where(big, (1.0 - rest) * reduction, 0.0), 0.0)


@jax.jit
def _variances(posterior, state, X):
    def one(params, state):
        return _variances_one(params, posterior.data, posterior.surrogate, state, X)

    return jax.vmap(one)(posterior.samples, state)


def predictive_variances(
    posterior: Posterior, state: PESState, X: Any
) -> tuple[jax.Array, jax.Array]:
    """Latent variances ``v_n(x)`` and ``v_n(x | x*)`` for every sample.

    Args:
        posterior: the posterior ``state`` was computed for.
        state: from :func:`condition_on_maximizers` (leading axis s).
        X: candidates, shape (m, d).

    Returns:
        ``(var, var_given_max)``, each of shape (s, m).

    Example:
        >>> state = condition_on_maximizers(posterior, jnp.array([[0.5, 0.5]]))
        >>> var, given = predictive_variances(posterior, state, jnp.ones((3, 2)))
        >>> bool(jnp.all(given <= var))
        True
    """
    X = jnp.asarray(X, dtype=posterior.data.X.dtype)
    return _variances(posterior, state, X)


def _predictive_entropy_search(sample: Sample, X: jax.Array, **_: Any) -> jax.Array:
    var, var_given = _variances_one(
        sample.params, sample.data, sample.surrogate, sample.aux, X
    )
    noise = sample.noise(X)
    return 0.5 * (jnp.log(var + noise) - jnp.log(var_given + noise))


#: Predictive entropy search (Hernández-Lobato et al. 2014); options above.
pes = Acquisition(
    "pes",
    _predictive_entropy_search,
    prepare=_prepare,
    stochastic=True,
    num_samples=16,
    requires=REQUIRES,
)


# -- PES-NB --------------------------------------------------------------------


def pes_nb_posterior(posterior: Posterior) -> Posterior:
    """One-sample posterior at the posterior mean of the hyperparameters (PES-NB).

    The mean is taken in the constrained space (the arithmetic mean of each site's
    samples, e.g. of the lengthscales themselves, not of their logarithms); the
    cached factors are recomputed. The result is the posterior that
    ``ppbo.fit(surrogate, data, ppbo.Fixed(mean), key)`` returns (method
    ``"Fixed"``), so it shares compiled code with fixed-hyperparameter posteriors.
    PES-NB of Hernández-Lobato et al. (2014, §4) is ``pes`` on this posterior.

    Args:
        posterior: any posterior.

    Returns:
        A posterior with one sample, the same data and surrogate.

    Raises:
        CholeskyError: if the kernel matrix at the mean is not factorable.

    Example:
        >>> pes_nb_posterior(posterior).num_samples
        1
    """
    from ppbo.inference._mcmc import prepare_cache

    samples = {
        name: jnp.mean(value, axis=0, keepdims=True)
        for name, value in posterior.samples.items()
    }
    cache = prepare_cache(posterior.surrogate, samples, posterior.data)
    return Posterior(
        posterior.surrogate,
        samples,
        posterior.data,
        cache=cache,
        num_chains=1,
        method="Fixed",
    )
