"""Most-likely heteroscedastic noise of anchor measurements (Kersting et al. 2007).

Kersting, Plagemann, Pfaff and Burgard (2007), "Most likely heteroscedastic
Gaussian process regression", §3 (the EM-like procedure of their Algorithm 1):

1. fit a homoscedastic GP ``G1`` to the anchors ``(X0, Y0)`` by type-II maximum
   likelihood;
2. estimate the empirical log-noise of every anchor from ``J`` draws ``t_j`` of
   the current GP's predictive distribution at ``x_l``,

   .. math:: z_l = \\log \\frac1J \\sum_{j=1}^J \\tfrac12 \\big(y_l - t_{l,j}\\big)^2;

3. fit a second GP ``G2`` to ``(X0, Z0)``; its mean ``g(x)`` is the log noise
   variance, ``r(x) = exp(g(x))``;
4. refit the GP on ``(X0, Y0)`` with the per-point noise ``r(x_l)`` and repeat
   from step 2 until the log-noise changes by less than ``tol`` everywhere.

Draws of the predictive of ``y`` (noise included) make ``(y_l - t_j)^2 / 2`` an
estimate of the predictive variance, as the difference of two independent draws
of the same variable. Because ``g`` fits the mean of the *log* of that estimate,
the procedure settles, by Jensen's inequality, below the true noise: with an
accurate mean, at ``r = c r_true`` where ``log c = E[log((chi2_1 + c) / 2)]``,
``c = 0.656`` (``tests/models/test_heteroscedastic.py`` derives and checks it);
Kersting et al. leave this bias uncorrected, and so does this module.

The result, :class:`NoiseModel`, is a function ``r(X) -> (m,)`` that the
preference GP takes as its anchors' per-point noise
(``ppbo.models.preference_gp.surrogate(anchor_noise=...)``). The GPs here use
the squared-exponential kernel with a constant mean; their hyperparameters
maximise the marginal likelihood (Rasmussen and Williams 2006, "Gaussian
Processes for Machine Learning", eq. (2.30)) by L-BFGS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve
from scipy.optimize import minimize

from ppbo.data import _as_float64, _check_finite
from ppbo.models.kernels import SquaredExponential

__all__ = ["NoiseModel", "most_likely_noise", "fit_gp"]

_JITTER = 1e-8


def _kernel(params: dict[str, jax.Array], X1: jax.Array, X2: jax.Array) -> jax.Array:
    return params["outputscale"] * SquaredExponential(params["lengthscale"]).matrix(
        X1, X2
    )


def _unpack(z: jax.Array, d: int, homoscedastic: bool) -> dict[str, jax.Array]:
    params = {
        "lengthscale": jnp.exp(z[:d]),
        "outputscale": jnp.exp(z[d]),
        "mean": z[d + 1],
    }
    if homoscedastic:
        params["noise"] = jnp.exp(z[d + 2])
    return params


def _noise_vector(params, noise, n):
    return jnp.full(n, params["noise"]) if noise is None else noise


@partial(jax.jit, static_argnames=("homoscedastic",))
def _negative_log_marginal(z, X, y, noise, homoscedastic: bool):
    def objective(z):
        params = _unpack(z, X.shape[1], homoscedastic)
        r = _noise_vector(params, noise, X.shape[0])
        K = _kernel(params, X, X) + jnp.diag(r + _JITTER)
        L = jnp.linalg.cholesky(K)
        resid = y - params["mean"]
        alpha = cho_solve((L, True), resid)
        value = (
            0.5 * resid @ alpha
            + jnp.sum(jnp.log(jnp.diag(L)))
            + 0.5 * X.shape[0] * math.log(2 * math.pi)
        )
        # weak log-normal hyperprior on the lengthscale, for a well-posed optimum
        # on small anchor sets (a type-II ML fit can run to 0 or infinity)
        return value + 0.5 * jnp.sum((jnp.log(params["lengthscale"]) + 1.0) ** 2)

    return jax.value_and_grad(objective)(z)


def fit_gp(
    X: Any, y: Any, noise: Any = None, init: dict[str, jax.Array] | None = None
) -> dict[str, jax.Array]:
    """Type-II maximum-likelihood squared-exponential GP hyperparameters.

    Args:
        X: inputs, shape (n, d).
        y: outputs, shape (n,).
        noise: optional fixed noise variance per point, shape (n,); None fits a
            homoscedastic ``noise``.
        init: optional hyperparameters to start from (one L-BFGS run); without
            it, the best of three starts.

    Returns:
        ``lengthscale`` (d,), ``outputscale``, ``mean`` and, without ``noise``,
        ``noise``.

    Example:
        >>> import jax, numpy as np
        >>> jax.config.update("jax_enable_x64", True)
        >>> X = np.linspace(0, 1, 20)[:, None]
        >>> y = np.sin(6 * X[:, 0]) + 0.1 * np.random.default_rng(0).normal(size=20)
        >>> round(float(fit_gp(X, y)["noise"]) ** 0.5, 1)
        0.1
    """
    X = jnp.asarray(X, dtype=jnp.float64)
    y = jnp.asarray(y, dtype=jnp.float64)
    d, homoscedastic = X.shape[1], noise is None
    noise = None if noise is None else jnp.asarray(noise, dtype=jnp.float64)
    spread = float(jnp.var(y)) + 1e-12
    starts = []
    for log_ell in (-2.0, -1.0, 0.0):
        z0 = [log_ell] * d + [math.log(spread), float(jnp.mean(y))]
        if homoscedastic:
            z0.append(math.log(0.1 * spread))
        starts.append(z0)
    if init is not None:
        z0 = list(np.log(np.asarray(init["lengthscale"])))
        z0 += [math.log(float(init["outputscale"])), float(init["mean"])]
        if homoscedastic:
            z0.append(math.log(float(init["noise"])))
        starts = [z0]
    best = None
    for z0 in starts:

        def fun(z):
            value, grad = _negative_log_marginal(
                jnp.asarray(z), X, y, noise, homoscedastic
            )
            value, grad = float(value), np.asarray(grad)
            if not (np.isfinite(value) and np.isfinite(grad).all()):
                return np.inf, np.zeros_like(grad)
            return value, grad

        result = minimize(fun, np.asarray(z0), jac=True, method="L-BFGS-B")
        if np.isfinite(result.fun) and (best is None or result.fun < best.fun):
            best = result
    if best is None:
        raise FloatingPointError("no finite marginal likelihood from any start")
    return _unpack(jnp.asarray(best.x), d, homoscedastic)


def _predict(params, X, y, noise, Xs):
    r = _noise_vector(params, noise, X.shape[0])
    L = jnp.linalg.cholesky(_kernel(params, X, X) + jnp.diag(r + _JITTER))
    Ks = _kernel(params, Xs, X)
    mean = params["mean"] + Ks @ cho_solve((L, True), y - params["mean"])
    V = jax.scipy.linalg.solve_triangular(L, Ks.T, lower=True)
    var = params["outputscale"] - jnp.sum(V**2, axis=0)
    return mean, jnp.maximum(var, 0.0)


@dataclass(frozen=True, eq=False)
class NoiseModel:
    """A log-noise GP mean as a per-point noise variance, ``r(X) = exp(g(X))``.

    Attributes:
        X: the anchors' inputs (n, d).
        z: the last empirical log-noise values (n,) that ``g`` was fitted to.
        params: the hyperparameters of ``g``.
        iterations: procedure rounds run.
        converged: whether the log-noise changed by less than ``tol`` in the
            last round.
    """

    X: jax.Array
    z: jax.Array
    params: dict[str, jax.Array]
    iterations: int
    converged: bool

    def log_noise(self, X: jax.Array) -> jax.Array:
        """The log noise variance ``g(X)``, shape (m,)."""
        return _predict(self.params, self.X, self.z, None, jnp.asarray(X))[0]

    def __call__(self, X: jax.Array) -> jax.Array:
        """The noise variance ``exp(g(X))`` at ``X`` (m, d), shape (m,)."""
        return jnp.exp(self.log_noise(X))


def most_likely_noise(
    key: jax.Array,
    X0: Any,
    Y0: Any,
    *,
    num_draws: int = 100,
    max_iterations: int = 20,
    tol: float = 0.05,
) -> NoiseModel:
    """Fit the most-likely heteroscedastic noise of anchors (Kersting et al. 2007).

    Args:
        key: JAX PRNG key for the predictive draws ``t_j``.
        X0: anchor inputs, shape (n, d), float64, finite.
        Y0: anchor measurements, shape (n,), float64, finite.
        num_draws: draws ``J`` per anchor for the empirical noise.
        max_iterations: most rounds of steps 2-4.
        tol: convergence threshold on the change of the log-noise at the anchors.

    Returns:
        A :class:`NoiseModel`.

    Raises:
        ValueError: for wrong shapes or NaN/inf anchors, naming the field and the
            value.

    Example:
        >>> import jax, numpy as np
        >>> jax.config.update("jax_enable_x64", True)
        >>> rng = np.random.default_rng(0)
        >>> X0 = rng.random((60, 1))
        >>> Y0 = np.sin(6 * X0[:, 0]) + (0.02 + 0.3 * X0[:, 0]) * rng.normal(size=60)
        >>> noise = most_likely_noise(jax.random.key(0), X0, Y0, max_iterations=3)
        >>> r = noise(np.array([[0.05], [0.95]]))
        >>> bool(r[1] > r[0])  # noisier at x = 0.95
        True
    """
    X0 = _as_float64("X0", X0)
    Y0 = _as_float64("Y0", Y0)
    if X0.ndim != 2 or Y0.shape != (X0.shape[0],):
        raise ValueError(
            f"X0 must have shape (n, d) and Y0 shape (n,), got X0 {X0.shape} and "
            f"Y0 {Y0.shape}"
        )
    if X0.shape[0] < 2:
        raise ValueError(f"most_likely_noise needs at least 2 anchors, got {len(Y0)}")
    _check_finite("X0", X0)
    _check_finite("Y0", Y0)
    X, y = jnp.asarray(X0), jnp.asarray(Y0)
    params = fit_gp(X, y)
    noise = jnp.full(len(y), params["noise"])
    log_r = jnp.log(noise)
    converged, g_params, z = False, None, None
    iterations = 0
    for iteration in range(max_iterations):
        iterations = iteration + 1
        mean, var = _predict(params, X, y, noise, X)
        eps = jax.random.normal(jax.random.fold_in(key, iteration), (num_draws, len(y)))
        t = mean + jnp.sqrt(var + noise) * eps
        z = jnp.log(jnp.mean(0.5 * (y - t) ** 2, axis=0))
        g_params = fit_gp(X, z, init=g_params)
        new_log_r = _predict(g_params, X, z, None, X)[0]
        change = float(jnp.max(jnp.abs(new_log_r - log_r)))
        log_r, noise = new_log_r, jnp.exp(new_log_r)
        params = fit_gp(X, y, noise, init=None if iteration == 0 else params)
        if change < tol:
            converged = True
            break
    return NoiseModel(
        X=X, z=z, params=g_params, iterations=iterations, converged=converged
    )
