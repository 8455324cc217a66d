"""Random-Fourier-feature sample paths of GP posteriors, and their maximisers.

By Bochner's theorem a stationary kernel is the Fourier transform of a spectral
density, :math:`\\sigma_f^2 k(x - x') = \\sigma_f^2\\, E_{\\omega \\sim p}
[\\cos(\\omega^\\top (x - x'))]`, so with ``M`` frequencies
:math:`\\omega_j \\sim p(\\omega)` and phases :math:`b_j \\sim U(0, 2\\pi)` the
features

.. math:: \\phi(x) = \\sqrt{2 \\sigma_f^2 / M}\\, \\cos(W x + b)

give :math:`E[\\phi(x)^\\top \\phi(x')] = \\sigma_f^2 k(x - x')` (Rahimi and Recht
2007). With ARD lengthscales ``l`` the kernel is a function of ``(x - x') / l``, so
:math:`\\omega = z / l` for ``z`` drawn from the unit-lengthscale density:

- squared-exponential :math:`e^{-r^2/2}`: ``z ~ N(0, I)``;
- Matérn-nu: the density is proportional to
  :math:`(2\\nu + |z|^2)^{-(\\nu + d/2)}` (Rasmussen and Williams 2006, eq. (4.15)),
  a multivariate Student-t with :math:`2\\nu` degrees of freedom, sampled as
  :math:`z = u \\sqrt{2\\nu / c}` with ``u ~ N(0, I)`` and
  :math:`c \\sim \\chi^2_{2\\nu}` (the scale mixture
  :math:`u \\mid c \\sim N(0, (2\\nu / c) I)` is the Student-t; here
  :math:`2\\nu \\in \\{1, 3, 5\\}`, so ``c`` is a sum of squared normals).

A GP with prior mean ``m`` is approximated by the Bayesian linear model
:math:`f(x) = m(x) + \\phi(x)^\\top \\theta`, :math:`\\theta \\sim N(0, I)`; a
posterior sample path draws :math:`\\theta` from

.. math:: N\\big(A^{-1}\\Phi^\\top r / \\sigma_n^2,\\; A^{-1}\\big), \\quad
    A = \\Phi^\\top \\Phi / \\sigma_n^2 + I, \\quad r = y - m(X)

(Hernández-Lobato, Hoffman and Ghahramani 2014, Appendix A), using only the rows of
the padded dataset where ``mask`` is True. When the capacity ``n`` is at most ``M``
the same distribution is drawn in O(n^2 M) by Matheron's rule (Wilson et al. 2020,
eq. (9)): :math:`\\theta = \\theta_0 + \\Phi^\\top (\\Phi\\Phi^\\top +
\\sigma_n^2 I)^{-1} (r - \\Phi\\theta_0 - \\varepsilon)` with
:math:`\\theta_0 \\sim N(0, I)`, :math:`\\varepsilon \\sim N(0, \\sigma_n^2 I)`;
otherwise ``A`` is factorised directly (O(M^3)). Every path gets its own features.

The kernel, its smoothness (hence its spectral density), the prior mean, the
lengthscales and the signal variance come from the surrogate's declared
:class:`~ppbo.GPParts` (:attr:`~ppbo.Capability.GP`), and the observation noise from
its per-point ``noise`` (:attr:`~ppbo.Capability.NOISE`): with a noise variance
:math:`\\sigma_i^2` per observation, :math:`\\sigma_n^{-2}\\Phi^\top\\Phi` above
becomes :math:`\\Phi^\top \\Sigma^{-1} \\Phi` and :math:`\\sigma_n^2 I` becomes
:math:`\\Sigma = \\mathrm{diag}(\\sigma_i^2)`, so that the paths match the posterior
that ``predict`` reports, for heteroscedastic models too.

References:
    Rahimi and Recht (2007), "Random features for large-scale kernel machines".
    Hernández-Lobato, Hoffman and Ghahramani (2014), "Predictive entropy search for
    efficient global optimization of black-box functions", Appendix A.
    Wilson, Borovitskiy, Terenin, Mostowsky and Deisenroth (2020), "Efficiently
    sampling functions from Gaussian process posteriors".
    Rasmussen and Williams (2006), "Gaussian Processes for Machine Learning", §4.2.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.linalg import cho_solve, solve_triangular
from jax.scipy.special import ndtr

from ppbo.acquisition.base import Sample
from ppbo.surrogate import Posterior, StationaryKernel

__all__ = [
    "Features",
    "Paths",
    "spectral_smoothness",
    "sample_features",
    "evaluate_features",
    "sample_paths",
    "sample_posterior_paths",
    "evaluate_paths",
    "maximize_paths",
    "sample_maxima",
]

_LR_DECAY = 1e-3  # the ascent's step size decays geometrically to lr * _LR_DECAY


def spectral_smoothness(kernel: StationaryKernel) -> float:
    """The Matérn smoothness ``nu`` of a kernel whose spectral density is sampled here.

    Gaussian (``nu = inf``) and Matérn-nu with ``2 nu`` in {1, 3, 5}, whose
    Student-t mixing variable is a sum of ``2 nu`` squared normals.

    Raises:
        ValueError: for other smoothness values.

    Example:
        >>> from ppbo.models.kernels import Matern52, SquaredExponential
        >>> spectral_smoothness(Matern52), spectral_smoothness(SquaredExponential)
        (2.5, inf)
    """
    nu = float(kernel.smoothness)
    if not (math.isinf(nu) or (2 * nu in (1.0, 3.0, 5.0))):
        raise ValueError(
            "random Fourier features are drawn here for the squared-exponential and "
            f"Matérn-1/2, 3/2 and 5/2 kernels; got smoothness nu={nu}"
        )
    return nu


class Features(NamedTuple):
    """Random Fourier features ``phi(x) = scale * cos(W x + b)``.

    Attributes:
        W: frequencies, shape (M, d).
        b: phases in [0, 2 pi), shape (M,).
        scale: ``sqrt(2 outputscale / M)``, shape ().
    """

    W: jax.Array
    b: jax.Array
    scale: jax.Array


def sample_features(
    key: jax.Array,
    kernel: StationaryKernel,
    lengthscale: Any,
    outputscale: Any,
    num_features: int,
) -> Features:
    """Draw ``num_features`` random Fourier features of ``outputscale * k_l``.

    Args:
        key: JAX PRNG key.
        kernel: the unit-variance kernel (e.g. ``ppbo.models.kernels.Matern52``),
            by its smoothness (see :func:`spectral_smoothness`).
        lengthscale: ARD lengthscales, shape (d,).
        outputscale: signal variance sigma_f^2, scalar.
        num_features: M.

    Returns:
        :class:`Features` whose inner products approximate the kernel.

    Raises:
        ValueError: for a kernel without a spectral density here.

    Example:
        >>> from ppbo.models.kernels import Matern52, SquaredExponential
        >>> features = sample_features(key, Matern52, jnp.ones(2), 1.0, 64)
        >>> evaluate_features(features, jnp.zeros((3, 2))).shape
        (3, 64)
    """
    nu = spectral_smoothness(kernel)
    lengthscale = jnp.asarray(lengthscale)
    e = jax.random.normal(
        key, (num_features, _normals_per_feature(nu, lengthscale)), lengthscale.dtype
    )
    return _features_from_normals(e, nu, lengthscale, outputscale)


def _normals_per_feature(nu: float, lengthscale: jax.Array) -> int:
    # d for z, 2 nu for the chi-square (Matérn), one for the phase
    dof = round(2 * nu) if math.isfinite(nu) else 0
    return lengthscale.shape[-1] + dof + 1


def _features_from_normals(e, nu, lengthscale, outputscale) -> Features:
    # One normal draw serves z, the chi-square and the phase (b = 2 pi Phi(e) is
    # uniform): every random call costs compilation time, so there is one.
    # Student-t: 2 nu is 1, 3 or 5, so chi2_{2nu} is a sum of squared normals.
    d = lengthscale.shape[-1]
    num_features = e.shape[0]
    z = e[:, :d]
    if math.isfinite(nu):
        z = z * jnp.sqrt(round(2 * nu) / jnp.sum(e[:, d:-1] ** 2, -1))[:, None]
    b = 2.0 * math.pi * ndtr(e[:, -1])
    scale = jnp.sqrt(2.0 * jnp.asarray(outputscale, e.dtype) / num_features)
    return Features(z / lengthscale, b, scale)


def evaluate_features(features: Features, X: jax.Array) -> jax.Array:
    """Feature matrix ``phi(X)``, shape (m, M), for points ``X`` (m, d).

    Example:
        >>> from ppbo.models.kernels import SquaredExponential
        >>> features = sample_features(key, SquaredExponential, jnp.ones(1), 2.0, 1000)
        >>> phi = evaluate_features(features, jnp.zeros((1, 1)))
        >>> bool(abs(phi @ phi.T - 2.0) < 0.3)
        True
    """
    return features.scale * jnp.cos(X @ features.W.T + features.b)


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["features", "theta", "params"],
    meta_fields=["mean_fn"],
)
@dataclass(frozen=True)
class Paths:
    """Posterior sample paths ``f_p(x) = m(x) + phi_p(x)^T theta_p``.

    A pytree. Built by :func:`sample_paths` for P paths of one hyperparameter
    sample; :func:`sample_posterior_paths` adds a leading sample axis s to every
    leaf (index it with ``jax.tree.map(lambda a: a[i], paths)``).

    Attributes:
        features: each path's :class:`Features` (leading axis P).
        theta: feature weights, shape (P, M).
        params: the hyperparameter sample (for the prior mean).
        mean_fn: the prior mean ``(params, X) -> (m,)`` (static).
    """

    features: Features
    theta: jax.Array
    params: Mapping[str, jax.Array]
    mean_fn: Callable[..., jax.Array]


def _path_values(
    features: Features, theta: jax.Array, params, mean_fn, X: jax.Array
) -> jax.Array:
    return mean_fn(params, X) + evaluate_features(features, X) @ theta


def _theta_function_space(e, Phi, r, noise, mask):
    # Matheron's rule in the n-dimensional dual: an exact draw of the same
    # Gaussian as _theta_weight_space. Padded rows of Phi, r and eps are zero (and
    # their noise is 1), so the padded block decouples and contributes nothing. The
    # eigenvalues of Phi Phi^T + diag(noise) are at least min(noise) > 0 (the
    # models' noise includes their jitter), so no jitter loop is needed.
    n, M = Phi.shape
    theta0 = e[:M]
    eps = jnp.where(mask, jnp.sqrt(noise) * e[M:], 0.0)
    L = jnp.linalg.cholesky(Phi @ Phi.T + jnp.diag(noise))
    v = cho_solve((L, True), r - Phi @ theta0 - eps)
    return theta0 + Phi.T @ v


def _theta_weight_space(e, Phi, r, noise, mask):
    del mask  # padded rows of Phi and r are already zero
    M = Phi.shape[1]
    # A >= I, so its Cholesky factorisation cannot fail.
    Phi_scaled = Phi / noise[:, None]
    L = jnp.linalg.cholesky(Phi.T @ Phi_scaled + jnp.eye(M, dtype=Phi.dtype))
    mean = cho_solve((L, True), Phi_scaled.T @ r)
    return mean + solve_triangular(L.T, e[:M], lower=False)


def sample_paths(
    key: jax.Array, sample: Sample, num_paths: int, num_features: int = 1000
) -> Paths:
    """Draw posterior sample paths of one hyperparameter sample of a GP.

    Each path has its own features. Padded rows of ``sample.data`` are ignored.
    Works inside ``jit``/``vmap`` (``num_paths`` and ``num_features`` are static).

    Args:
        key: JAX PRNG key.
        sample: one posterior sample (see :class:`~ppbo.acquisition.Sample`) of a
            surrogate that declares :class:`~ppbo.GPParts` and ``noise``.
        num_paths: P.
        num_features: M (1000 in the PES authors' code).

    Returns:
        :class:`Paths` with P paths.

    Raises:
        MissingCapabilityError: for surrogates that declare no
            :class:`~ppbo.GPParts` or no ``noise`` (multi-task GPs, linear or
            composite kernels, models that are not GPs).
        ValueError: for a kernel smoothness without a spectral density here.

    Example:
        >>> from ppbo.acquisition.base import Sample
        >>> one = jax.tree.map(lambda a: a[0], (posterior.samples, posterior.cache))
        >>> sample = Sample(*one, posterior.data, posterior.surrogate)
        >>> paths = sample_paths(key, sample, num_paths=3, num_features=128)
        >>> evaluate_paths(paths, jnp.full((5, 2), 0.5)).shape
        (3, 5)
    """
    gp = sample.gp()
    params = dict(sample.params)
    data = sample.data
    noise = jnp.where(data.mask, sample.noise(data.X), 1.0)
    r = jnp.where(data.mask, data.y - gp.mean(data.X), 0.0)
    draw_theta = (
        _theta_function_space
        if data.X.shape[0] <= num_features
        else _theta_weight_space
    )

    nu = spectral_smoothness(gp.kernel)
    lengthscale = gp.lengthscale
    dtype = data.X.dtype
    n = data.X.shape[0]
    k_features, k_theta = jax.random.split(key)
    # all paths' normals in two calls (theta uses M + n of them: Matheron's rule)
    e_features = jax.random.normal(
        k_features,
        (num_paths, num_features, _normals_per_feature(nu, lengthscale)),
        dtype,
    )
    e_theta = jax.random.normal(k_theta, (num_paths, num_features + n), dtype)

    def one(e_features, e_theta):
        features = _features_from_normals(e_features, nu, lengthscale, gp.outputscale)
        Phi = jnp.where(data.mask[:, None], evaluate_features(features, data.X), 0.0)
        return features, draw_theta(e_theta, Phi, r, noise, data.mask)

    features, theta = jax.vmap(one)(e_features, e_theta)
    mean_fn = sample.surrogate.gp.mean
    return Paths(features=features, theta=theta, params=params, mean_fn=mean_fn)


@partial(jax.jit, static_argnames=("num_paths", "num_features"))
def sample_posterior_paths(
    key: jax.Array, posterior: Posterior, num_paths: int, num_features: int = 1000
) -> Paths:
    """Draw ``num_paths`` sample paths for every hyperparameter sample.

    Args:
        key: JAX PRNG key.
        posterior: a GP posterior (see :func:`sample_paths`).
        num_paths: P paths per hyperparameter sample.
        num_features: M.

    Returns:
        :class:`Paths` whose leaves have a leading sample axis s (theta: (s, P, M)).

    Example:
        >>> paths = sample_posterior_paths(key, posterior, 2, 128)
        >>> paths.theta.shape
        (1, 2, 128)
    """

    def one(key, params, cache):
        sample = Sample(params, cache, posterior.data, posterior.surrogate)
        return sample_paths(key, sample, num_paths, num_features)

    keys = jax.random.split(key, posterior.num_samples)
    return jax.vmap(one)(keys, posterior.samples, posterior.cache)


def evaluate_paths(paths: Paths, X: jax.Array) -> jax.Array:
    """Values of P sample paths (no sample axis) at ``X`` (m, d), shape (P, m).

    Memory is O(P m M); use ``jax.vmap`` over a leading sample axis.

    Example:
        >>> paths = sample_posterior_paths(key, posterior, 4, 128)
        >>> first = jax.tree.map(lambda a: a[0], paths)
        >>> evaluate_paths(first, jnp.zeros((3, 2))).shape
        (4, 3)
    """
    X = jnp.asarray(X)
    W, b, scale = paths.features
    cos = jnp.cos(jnp.einsum("md,pkd->pmk", X, W) + b[:, None, :])
    values = jnp.einsum("pmk,pk->pm", cos, paths.theta) * scale[:, None]
    return paths.mean_fn(paths.params, X) + values


def _ascend(fn, X0, num_steps: int, learning_rate):
    """Projected Adam ascent of ``sum(fn(X))`` in [0, 1]^d from starts ``X0``."""
    if num_steps == 0:
        return X0
    grad = jax.grad(lambda X: jnp.sum(fn(X)))
    b1, b2 = 0.9, 0.999
    t = jnp.arange(1, num_steps + 1, dtype=X0.dtype)
    rates = learning_rate * _LR_DECAY ** ((t - 1) / max(num_steps - 1, 1))

    def step(state, inputs):
        X, m, v = state
        t, rate = inputs
        g = grad(X)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        update = (m / (1 - b1**t)) / (jnp.sqrt(v / (1 - b2**t)) + 1e-12)
        return (jnp.clip(X + rate * update, 0.0, 1.0), m, v), None

    zeros = jnp.zeros_like(X0)
    (X, _, _), _ = lax.scan(step, (X0, zeros, zeros), (t, rates))
    return X


@partial(jax.jit, static_argnames=("num_candidates", "num_restarts", "num_steps"))
def maximize_paths(
    key: jax.Array,
    paths: Paths,
    *,
    candidates: jax.Array | None = None,
    num_candidates: int = 1024,
    num_restarts: int = 4,
    num_steps: int = 100,
    learning_rate: float = 0.02,
) -> tuple[jax.Array, jax.Array]:
    """Maximiser and maximum of each of P sample paths (no sample axis) in [0,1]^d.

    Each path is evaluated at ``num_candidates`` uniform random points (fresh per
    path) plus the given ``candidates`` (a Sobol set, the observed inputs, ...);
    the best ``num_restarts`` are refined by projected Adam ascent with a step
    size decaying geometrically from ``learning_rate`` to ``learning_rate / 1000``
    over ``num_steps`` steps; the best point found is returned, so the result is
    never worse than the best candidate. Paths are processed one at a time
    (``lax.map``) so that memory stays O(num_candidates M). All counts are static;
    jit-compatible.

    Args:
        key: JAX PRNG key.
        paths: P paths from :func:`sample_paths`.
        candidates: extra candidates shared by all paths, shape (c, d).
        num_candidates: random uniform candidates per path.
        num_restarts: candidates refined by gradient ascent.
        num_steps: ascent steps (0 disables refinement).
        learning_rate: initial step size, in unit-cube units.

    Returns:
        ``(X_star, f_star)`` of shapes (P, d) and (P,).

    Raises:
        ValueError: if there are fewer candidates than restarts.

    Example:
        >>> paths = sample_posterior_paths(key, posterior, 2, 128)
        >>> first = jax.tree.map(lambda a: a[0], paths)
        >>> X_star, f_star = maximize_paths(key, first, num_candidates=256)
        >>> X_star.shape, f_star.shape
        ((2, 2), (2,))
    """
    W = paths.features.W
    num_paths, d = W.shape[0], W.shape[-1]
    extra = (
        jnp.zeros((0, d), W.dtype)
        if candidates is None
        else jnp.asarray(candidates, W.dtype)
    )
    if extra.ndim != 2 or extra.shape[1] != d:
        raise ValueError(f"candidates must have shape (c, {d}), got {extra.shape}")
    if num_candidates + extra.shape[0] < max(num_restarts, 1):
        raise ValueError(
            f"need at least num_restarts={num_restarts} candidates, got "
            f"num_candidates={num_candidates} plus {extra.shape[0]} given"
        )

    def one(inputs):
        random, features, theta = inputs

        def fn(X):
            return _path_values(features, theta, paths.params, paths.mean_fn, X)

        C = jnp.concatenate([random, extra])
        values = fn(C)
        if num_restarts == 0:
            i = jnp.argmax(values)
            return C[i], values[i]
        top, index = lax.top_k(values, num_restarts)
        X = _ascend(fn, C[index], num_steps, learning_rate)
        X_all = jnp.concatenate([C[index[:1]], X])
        v_all = jnp.concatenate([top[:1], fn(X)])
        i = jnp.argmax(v_all)
        return X_all[i], v_all[i]

    random = jax.random.uniform(key, (num_paths, num_candidates, d), W.dtype)
    return lax.map(one, (random, paths.features, paths.theta))


@partial(
    jax.jit,
    static_argnames=(
        "num_paths",
        "num_features",
        "num_candidates",
        "num_restarts",
        "num_steps",
    ),
)
def sample_maxima(
    key: jax.Array,
    posterior: Posterior,
    num_paths: int,
    *,
    num_features: int = 1000,
    candidates: jax.Array | None = None,
    num_candidates: int = 1024,
    num_restarts: int = 4,
    num_steps: int = 100,
    learning_rate: float = 0.02,
) -> tuple[jax.Array, jax.Array]:
    """Sample global maximisers x* and maxima f* for every hyperparameter sample.

    Draws ``num_paths`` RFF sample paths per hyperparameter sample
    (:func:`sample_paths`) and maximises each (:func:`maximize_paths`), with the
    observed inputs added to the candidates, as in the PES authors' code
    (Hernández-Lobato et al. 2014, Appendix A). Samples are processed one at a
    time (``lax.map``) to bound memory.

    Args:
        key: JAX PRNG key.
        posterior: a GP posterior with s hyperparameter samples.
        num_paths: P maxima per hyperparameter sample.
        num_features: M per path.
        candidates: extra candidates (c, d), e.g. a Sobol set.
        num_candidates, num_restarts, num_steps, learning_rate: see
            :func:`maximize_paths`.

    Returns:
        ``(X_star, f_star)`` of shapes (s, P, d) and (s, P).

    Example:
        >>> X_star, f_star = sample_maxima(key, posterior, 2, num_features=128,
        ...                                num_candidates=128, num_steps=10)
        >>> X_star.shape, f_star.shape
        ((1, 2, 2), (1, 2))
    """
    data = posterior.data
    extra = data.X if candidates is None else jnp.concatenate([data.X, candidates])

    def one(inputs):
        key, params, cache = inputs
        k_paths, k_max = jax.random.split(key)
        sample = Sample(params, cache, data, posterior.surrogate)
        paths = sample_paths(k_paths, sample, num_paths, num_features)
        return maximize_paths(
            k_max,
            paths,
            candidates=extra,
            num_candidates=num_candidates,
            num_restarts=num_restarts,
            num_steps=num_steps,
            learning_rate=learning_rate,
        )

    keys = jax.random.split(key, posterior.num_samples)
    return lax.map(one, (keys, posterior.samples, posterior.cache))
