"""Bayesian linear regression against dense closed forms.

References: the weight posterior from dense numpy linear algebra (Bishop 2006,
eqs. 3.53-3.54); the evidence as the Gaussian density of y under the marginal
covariance ``Phi Phi^T / alpha + I / beta`` (scipy.stats), which shares no code
with eq. 3.86; the type-II maximum from scipy's bounded L-BFGS-B.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from scipy import optimize, stats

from ppbo.models import blr


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(3)
    n, pad, k = 23, 9, 5
    Phi = rng.normal(size=(n + pad, k))
    w = rng.normal(size=k)
    y = Phi @ w + 0.3 * rng.normal(size=n + pad)
    y[n:] = 1e3  # padded rows hold garbage that must not matter
    mask = np.arange(n + pad) < n
    return Phi, y, mask, n


def _dense(Phi, y, alpha, beta):
    A = alpha * np.eye(Phi.shape[1]) + beta * Phi.T @ Phi
    S = np.linalg.inv(A)
    return beta * S @ Phi.T @ y, S


def _evidence(Phi, y, alpha, beta):
    cov = Phi @ Phi.T / alpha + np.eye(len(y)) / beta
    return stats.multivariate_normal(np.zeros(len(y)), cov).logpdf(y)


@pytest.mark.parametrize("alpha, beta", [(0.5, 10.0), (3.0, 0.2)])
def test_weight_posterior_and_predictive_match_the_dense_closed_form(
    problem, alpha, beta
):
    Phi, y, mask, n = problem
    post = blr.weight_posterior(jnp.asarray(Phi), jnp.asarray(y), mask, alpha, beta)
    mean, S = _dense(Phi[:n], y[:n], alpha, beta)
    np.testing.assert_allclose(post.mean, mean, rtol=1e-10, atol=1e-12)
    S_blr = np.asarray(post.chol_inv).T @ np.asarray(post.chol_inv)
    np.testing.assert_allclose(S_blr, S, rtol=1e-10, atol=1e-12)
    Xs = np.random.default_rng(0).normal(size=(7, Phi.shape[1]))
    m, v = blr.predict(post, jnp.asarray(Xs))
    np.testing.assert_allclose(m, Xs @ mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(v, np.einsum("mi,ij,mj->m", Xs, S, Xs), rtol=1e-10)


@pytest.mark.parametrize("alpha, beta", [(0.5, 10.0), (3.0, 0.2), (1e-3, 1e3)])
def test_log_marginal_likelihood_is_the_gaussian_density_of_y(problem, alpha, beta):
    Phi, y, mask, n = problem
    value = blr.log_marginal_likelihood(
        jnp.asarray(Phi), jnp.asarray(y), mask, alpha, beta
    )
    # scipy factorises the n x n marginal covariance: its relative error is
    # about eps * cond(cov) (1e-8 for the last case), far above ours
    cov = Phi[:n] @ Phi[:n].T / alpha + np.eye(n) / beta
    rtol = 1e-12 + np.finfo(float).eps * np.linalg.cond(cov)
    np.testing.assert_allclose(value, _evidence(Phi[:n], y[:n], alpha, beta), rtol=rtol)
    spectral = blr._spectral_evidence(
        *_spectral_parts(Phi[:n], y[:n]), np.log(alpha), np.log(beta)
    )
    np.testing.assert_allclose(spectral, value, rtol=1e-9)


def _spectral_parts(Phi, y):
    eig, U = np.linalg.eigh(Phi.T @ Phi)
    return eig, U.T @ Phi.T @ y, y @ y, float(len(y)), Phi.shape[1]


def test_log_marginal_likelihood_gradients_match_finite_differences(problem):
    Phi, y, mask, _ = problem

    def f(Phi, log_alpha, log_beta):
        return blr.log_marginal_likelihood(
            Phi, jnp.asarray(y), mask, jnp.exp(log_alpha), jnp.exp(log_beta)
        )

    check_grads(f, (jnp.asarray(Phi), 0.3, 1.2), order=1, modes=["rev"])


def test_maximize_evidence_finds_the_bounded_type_ii_maximum(problem):
    Phi, y, mask, n = problem
    alpha, beta = jax.jit(blr.maximize_evidence)(jnp.asarray(Phi), jnp.asarray(y), mask)

    def negative(z):
        return -_evidence(Phi[:n], y[:n], np.exp(z[0]), np.exp(z[1]))

    bounds = [blr.LOG_ALPHA_BOUNDS, blr.LOG_BETA_BOUNDS]
    best = min(
        (
            optimize.minimize(negative, start, method="L-BFGS-B", bounds=bounds)
            for start in ([0.0, 0.0], [-3.0, 3.0], [3.0, 5.0])
        ),
        key=lambda result: result.fun,
    )
    ours = -negative(np.log([float(alpha), float(beta)]))
    # at least as good as scipy's optimum, up to its convergence tolerance
    assert ours >= -best.fun - 1e-6
    np.testing.assert_allclose(np.log([alpha, beta]), best.x, atol=1e-3)
    # the true noise standard deviation is 0.3: beta = 11 within sampling error
    assert 4.0 < float(beta) < 30.0
