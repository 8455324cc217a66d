"""Max-value entropy search with noisy observations y = f + eps.

Reference: the entropy of y given f < y* computed from the density of y obtained
by numerically convolving the truncated Gaussian of f with the noise (a fine
grid), independent of the closed skew-normal form the acquisition integrates.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.integrate import trapezoid

import ppbo
from ppbo.acquisition import bind, evaluate, per_sample
from ppbo.acquisition.mes import mes


def _predict(params, data, X):
    mean = params["mu"] + params["slope"] * (X[:, 0] - 0.5)
    return mean, params["var"] * (1.0 + X[:, 1])


def _noise(params, X):
    # heteroscedastic: the noise variance grows along x1
    return params["noise"] * (1.0 + 3.0 * X[:, 1])


NOISY = ppbo.Surrogate(
    model=lambda data: None, predict=_predict, noise=_noise, name="noisy"
)


def _posterior(mu, var, noise, slope=0.0):
    samples = {
        "mu": jnp.atleast_1d(jnp.asarray(mu, dtype=jnp.float64)),
        "var": jnp.atleast_1d(jnp.asarray(var, dtype=jnp.float64)),
        "noise": jnp.atleast_1d(jnp.asarray(noise, dtype=jnp.float64)),
        "slope": jnp.atleast_1d(jnp.asarray(slope, dtype=jnp.float64)),
    }
    data = ppbo.Dataset(np.full((1, 2), 0.5), np.array([-50.0]))
    return ppbo.Posterior(NOISY, samples, data)


def _gain_by_convolution(mu, sd, tau, y_star):
    """H[N(mu, sd^2 + tau^2)] - H[y | f < y*], the density of y by convolution."""
    width = 12.0 * np.hypot(sd, tau)
    f = np.linspace(mu - 12.0 * sd, min(y_star, mu + 12.0 * sd), 6001)
    y = np.linspace(mu - width, mu + width, 6001)
    truncated = stats.norm.pdf(f, mu, sd) / stats.norm.cdf(y_star, mu, sd)
    kernel = stats.norm.pdf(y[:, None] - f[None, :], 0.0, tau)
    density = trapezoid(truncated[None, :] * kernel, f, axis=1)
    logs = np.log(np.where(density > 0, density, 1.0))
    entropy = -trapezoid(density * logs, y)
    full = 0.5 * np.log(2.0 * np.pi * np.e * (sd**2 + tau**2))
    return full - entropy


@pytest.mark.parametrize(
    ("mu", "sd", "tau"),
    [(0.0, 1.0, 0.3), (0.5, 0.4, 0.4), (-1.0, 1.0, 2.0), (0.2, 0.5, 0.05)],
)
def test_noisy_mes_equals_the_entropy_difference_by_convolution(mu, sd, tau):
    y_star = np.array([[-0.8, 0.3, 1.0, 2.5]])
    posterior = _posterior(mu, sd**2, tau**2)
    X = np.array([[0.5, 0.0]])  # mean mu, variance sd^2, noise tau^2
    value = per_sample(mes, posterior, X, key=jax.random.key(0), max_values=y_star)
    expected = np.mean([_gain_by_convolution(mu, sd, tau, y) for y in y_star[0]])
    # the grid's trapezoid error is about 1e-6 at these scales (measured)
    assert float(value[0, 0]) == pytest.approx(expected, abs=1e-5)


def test_noisy_mes_tends_to_the_noise_free_formula():
    mu, var = 0.3, 0.8
    y_star = np.array([[-1.5, 0.0, 0.7, 2.0, 6.0]])
    X = np.array([[0.5, 0.0]])
    noisy = per_sample(
        mes, _posterior(mu, var, 1e-14), X, key=jax.random.key(0), max_values=y_star
    )
    gamma = (y_star[0] - mu) / np.sqrt(var)
    closed = np.mean(
        gamma * stats.norm.pdf(gamma) / (2 * stats.norm.cdf(gamma))
        - stats.norm.logcdf(gamma)
    )
    assert float(noisy[0, 0]) == pytest.approx(closed, abs=1e-6)
    free = per_sample(
        mes,
        _posterior(mu, var, 0.5),
        X,
        key=jax.random.key(0),
        max_values=y_star,
        observed="latent",
    )
    assert float(free[0, 0]) == pytest.approx(closed, rel=1e-12)


def test_noise_lowers_the_information_and_gradients_are_finite():
    y_star = np.array([[0.0, 0.5, 1.0]])
    X = jnp.stack([jnp.linspace(0.0, 1.0, 101), jnp.linspace(0.0, 1.0, 101)], axis=1)
    posterior = _posterior(0.0, 1.0, 0.2, slope=-30.0)
    bound = bind(mes, posterior, key=jax.random.key(0), max_values=y_star)
    values, grads = bound.value_and_grad(X)
    assert np.all(np.isfinite(np.asarray(values)))
    assert np.all(np.isfinite(np.asarray(grads)))
    assert np.all(np.asarray(values) >= -1e-12)
    latent = evaluate(
        mes, posterior, X, key=jax.random.key(0), max_values=y_star, observed="latent"
    )
    assert np.all(np.asarray(values) <= np.asarray(latent) + 1e-12)


def test_noisy_mes_samples_its_max_values_and_rejects_unknown_observed():
    posterior = _posterior(0.0, 1.0, 0.2)
    X = np.array([[0.5, 0.0]])
    options = {"key": jax.random.key(0), "method": "gumbel", "num_grid": 64}
    assert np.isfinite(float(evaluate(mes, posterior, X, **options)[0]))
    with pytest.raises(ValueError, match="observed must be one of"):
        evaluate(mes, posterior, X, observed="y", **options)
