"""Env-GP's fast paths against dense NumPy references.

The mode variant's log likelihood is differentiated implicitly through the source
GPs' solve (a custom reverse rule), and every source's posterior comes from one
triangular solve of the block-diagonal factor. References: the log likelihood
written out with dense NumPy solves (sources' GP means, the inverse-gamma mode,
the Gaussian log density), differentiated by central finite differences, and the
per-source GP posteriors by dense solves on each source's rows alone, with the
sources' rows interleaved (not contiguous) so that the block structure is not
given by the layout.
"""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from numpyro.infer.util import log_density  # noqa: E402

import ppbo  # noqa: E402
from ppbo.models import env_gp  # noqa: E402
from ppbo.models.gp import JITTER, build_kernel  # noqa: E402

TAU0, UPSILON0 = 2.0, 0.3


def _matern52(A, B, lengthscale, outputscale):
    r = np.sqrt((((A[:, None, :] - B[None, :, :]) / lengthscale) ** 2).sum(-1))
    s = np.sqrt(5.0) * r
    return outputscale * (1.0 + s + s**2 / 3.0) * np.exp(-s)


def _data():
    rng = np.random.default_rng(4)
    source = np.array([0, 1, 2, 0, 1, -1, 2, 0, 1, 2, -1, 0, 1, -1, 2, 0])
    X = rng.uniform(size=(len(source), 2))
    y = np.sin(4.0 * X[:, 0]) - X[:, 1] + 0.3 * (source + 1) * X[:, 0]
    return ppbo.Dataset(X, y, source=source, capacity=24), X, y, source


def _dense_log_likelihood(theta, X, y, source):
    """log N(y | mean, K + diag(noise + sigma_s^2[source])) by dense solves."""
    lengthscale, outputscale = np.exp(theta[:2]), np.exp(theta[2])
    noise, mean = np.exp(theta[3]), theta[4]
    target = source < 0
    row_noise = np.full(len(y), noise + JITTER)
    for k in range(3):
        rows = source == k
        K = _matern52(X[rows], X[rows], lengthscale, outputscale)
        K += (noise + JITTER) * np.eye(rows.sum())
        cross = _matern52(X[target], X[rows], lengthscale, outputscale)
        mu = mean + cross @ np.linalg.solve(K, y[rows] - mean)
        tau = TAU0 + target.sum() / 2
        upsilon = UPSILON0 + 0.5 * np.sum((y[target] - mu) ** 2)
        row_noise[rows] += upsilon / (tau + 1.0)
    C = _matern52(X, X, lengthscale, outputscale) + np.diag(row_noise)
    r = y - mean
    _, logdet = np.linalg.slogdet(C)
    return -0.5 * (r @ np.linalg.solve(C, r) + logdet + len(y) * np.log(2 * np.pi))


def test_mode_likelihood_gradient_matches_finite_differences():
    data, X, y, source = _data()
    # the joint fit: the source noise (a function of the sites) enters the likelihood
    model = env_gp.surrogate(
        3, "mode", tau0=TAU0, upsilon0=UPSILON0, likelihood="joint"
    ).model
    theta = np.array([np.log(0.4), np.log(0.7), np.log(1.3), np.log(2e-2), 0.15])

    def log_likelihood(theta):
        params = {
            "lengthscale": jnp.exp(theta[:2]),
            "outputscale": jnp.exp(theta[2]),
            "noise": jnp.exp(theta[3]),
            "mean": theta[4],
        }
        _, trace = log_density(model, (data,), {}, params)
        return trace["y"]["fn"].log_prob(trace["y"]["value"])

    value, grad = jax.value_and_grad(log_likelihood)(jnp.asarray(theta))
    np.testing.assert_allclose(
        value, _dense_log_likelihood(theta, X, y, source), rtol=1e-10
    )
    # central differences: truncation error O(h^2 f''') ~ 1e-8 relative
    h = 1e-5
    reference = [
        (
            _dense_log_likelihood(theta + h * e, X, y, source)
            - _dense_log_likelihood(theta - h * e, X, y, source)
        )
        / (2 * h)
        for e in np.eye(len(theta))
    ]
    np.testing.assert_allclose(grad, reference, rtol=1e-6, atol=1e-6)


def test_source_posterior_matches_per_source_dense_gps():
    data, X, y, source = _data()
    lengthscale, outputscale, noise = np.array([0.3, 0.5]), 0.9, 1e-2
    X_test = np.random.default_rng(5).uniform(size=(7, 2))
    mean, var = env_gp.source_posterior(
        build_kernel(
            "matern52",
            {"lengthscale": jnp.asarray(lengthscale), "outputscale": outputscale},
        ),
        lambda Z: jnp.full(Z.shape[0], 0.2),
        jnp.full(data.capacity, noise),
        data,
        jnp.asarray(X_test),
        3,
    )
    for k in range(3):
        rows = source == k
        K = _matern52(X[rows], X[rows], lengthscale, outputscale)
        K += noise * np.eye(rows.sum())
        cross = _matern52(X_test, X[rows], lengthscale, outputscale)
        mu = 0.2 + cross @ np.linalg.solve(K, y[rows] - 0.2)
        prior = np.full(len(X_test), outputscale)
        v = prior - np.einsum("ij,ji->i", cross, np.linalg.solve(K, cross.T))
        np.testing.assert_allclose(mean[k], mu, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(var[k], v, rtol=1e-8, atol=1e-10)
