"""Bayesian linear regression against dense closed forms.

References: the weight posterior from dense numpy linear algebra (Bishop 2006,
eqs. 3.53-3.54); the evidence as the Gaussian density of y under the marginal
covariance ``Phi Phi^T / alpha + I / beta`` (scipy.stats), which shares no code
with eq. 3.86; the type-II maximum from scipy's bounded L-BFGS-B; the
slice-sampled precisions against their posterior on a dense grid (that evidence
times the prior, written out in numpy), with tolerances from the Monte Carlo
error at the chains' effective sample size.
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


def _log_prior(log_alpha, log_beta):
    # written out from the docstring's formula: top-hat on log alpha, the
    # horseshoe approximation log(1 + 3 s^2 / v^2) on v = 1 / beta with the
    # Jacobian |dv / dlog beta| = v, inside the box
    s2 = blr.NOISE_HORSESHOE_SCALE**2
    value = np.log(np.log1p(3.0 * s2 * np.exp(2.0 * log_beta))) - log_beta
    inside = (
        (blr.LOG_ALPHA_BOUNDS[0] <= log_alpha)
        & (log_alpha <= blr.LOG_ALPHA_BOUNDS[1])
        & (blr.LOG_BETA_BOUNDS[0] <= log_beta)
        & (log_beta <= blr.LOG_BETA_BOUNDS[1])
    )
    return np.where(inside, value, -np.inf)


def _grid_posterior(Phi, y, size=301):
    """Posterior of (log alpha, log beta) on a dense grid over the prior's box:
    the Gaussian density of y under Phi Phi^T / alpha + I / beta, by batched
    dense determinants and solves, times the prior."""
    la = np.linspace(*blr.LOG_ALPHA_BOUNDS, size)
    lb = np.linspace(*blr.LOG_BETA_BOUNDS, size)
    n = len(y)
    G, eye = Phi @ Phi.T, np.eye(n)
    log_post = np.empty((size, size))
    for i, log_alpha in enumerate(la):
        cov = G / np.exp(log_alpha) + eye / np.exp(lb)[:, None, None]
        _, logdet = np.linalg.slogdet(cov)
        quad = np.einsum("i,bi->b", y, np.linalg.solve(cov, y[None, :, None])[..., 0])
        log_post[i] = -0.5 * (quad + logdet + n * np.log(2 * np.pi))
    log_post += _log_prior(la[:, None], lb[None, :])
    weights = np.exp(log_post - log_post.max())
    weights /= weights.sum()
    LA, LB = np.meshgrid(la, lb, indexing="ij")
    moments = {}
    for name, values in (("log_alpha", LA), ("log_beta", LB)):
        mean = np.sum(weights * values)
        moments[name] = (mean, np.sqrt(np.sum(weights * (values - mean) ** 2)))
    return moments


def test_sampled_precisions_follow_the_dense_grid_posterior(problem):
    from numpyro.diagnostics import effective_sample_size

    Phi, y, mask, n = problem
    chains, draws = 4, 500
    alpha, beta = jax.jit(
        lambda key: blr.sample_precisions(
            key,
            jnp.asarray(Phi),
            jnp.asarray(y),
            mask,
            num_warmup=100,
            num_samples=draws,
            thinning=1,
            num_chains=chains,
        )
    )(jax.random.key(7))
    reference = _grid_posterior(Phi[:n], y[:n])
    for name, values in (("log_alpha", np.log(alpha)), ("log_beta", np.log(beta))):
        per_chain = np.asarray(values).reshape(chains, draws)
        ess = float(effective_sample_size(per_chain))
        mean, sd = reference[name]
        assert ess > 200, (name, ess)  # the chains mix
        # Monte Carlo standard errors of the mean and (Gaussian approximation)
        # of the standard deviation; 4.5 of them (the grid's own error is
        # orders of magnitude smaller at this resolution)
        assert abs(per_chain.mean() - mean) < 4.5 * sd / np.sqrt(ess), name
        assert abs(per_chain.std() - sd) < 4.5 * sd / np.sqrt(2.0 * ess), name


def test_sample_precisions_refuses_bad_counts(problem):
    Phi, y, mask, _ = problem
    with pytest.raises(ValueError, match="num_samples must be >= 1, got 0"):
        blr.sample_precisions(jax.random.key(0), Phi, y, mask, num_samples=0)


def test_log_precision_prior_is_the_tophat_and_horseshoe_density():
    rng = np.random.default_rng(0)
    log_alpha = rng.uniform(-12.0, 12.0, 200)
    log_beta = rng.uniform(-6.0, 16.0, 200)
    ours = jax.vmap(blr.log_precision_prior)(log_alpha, log_beta)
    np.testing.assert_allclose(ours, _log_prior(log_alpha, log_beta), rtol=1e-12)
    assert np.isneginf(ours).any() and np.isfinite(ours).any()
