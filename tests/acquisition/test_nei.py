"""Noisy EI (Letham et al. 2019) against dense conditioning and brute-force Monte Carlo.

References: the Gaussian conditional of f(x) on draws of f(X_n), computed with dense
NumPy from the joint predictive covariance; a Monte Carlo estimate of
E[max(f(x) - max f(X_n), 0)] from joint draws of (f(X_n), f(x)), with the tolerance
from its standard error; and the limit of vanishing noise, where the draws of f(X_n)
collapse on the posterior mean and NEI becomes EI with the best posterior mean.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import kstest, norm

import ppbo
from ppbo.acquisition import log_ei, log_nei
from ppbo.acquisition.base import bind, evaluate
from ppbo.acquisition.nei import sobol_normals
from ppbo.models import gp

CANDIDATES = np.array([[0.1, 0.9], [0.5, 0.5], [0.95, 0.05], [0.3, 0.2]])


def _posterior(noise, n=7, lengthscale=(0.3, 0.4)):
    X = np.random.default_rng(1).random((n, 2))
    y = np.sin(3 * X[:, 0]) + X[:, 1]
    data = ppbo.Dataset(X, y)
    params = {"lengthscale": list(lengthscale), "outputscale": 1.0, "noise": noise}
    params["mean"] = 0.0
    return ppbo.fit(gp.surrogate(), data, ppbo.Fixed(params), jax.random.key(0))


def _joint(posterior, X):
    data = posterior.data
    n = data.n
    X_all = np.concatenate([np.asarray(data.X)[:n], X])
    mean, cov = posterior.surrogate.predict_joint_one(
        jax.tree.map(lambda v: v[0], posterior.samples),
        data,
        jnp.asarray(X_all),
        jax.tree.map(lambda v: v[0], posterior.cache),
    )
    return np.asarray(mean), np.asarray(cov), n


def test_equals_the_average_of_closed_form_ei_under_dense_conditioning():
    posterior = _posterior(noise=0.05)
    key = jax.random.key(3)
    bound = bind(log_nei, posterior, key=key, num_draws=64)
    L_inv, Z, best = (np.asarray(a[0]) for a in bound.aux)
    values = np.asarray(bound.reduced(CANDIDATES))
    mean, cov, n = _joint(posterior, CANDIDATES)
    # the draws at the observed inputs, rebuilt densely
    S = cov[:n, :n] + 1e-6 * np.mean(np.diag(cov[:n, :n])) * np.eye(n)
    draws = mean[:n] + Z[:, :n] @ np.linalg.cholesky(S).T
    np.testing.assert_allclose(best, draws.max(axis=1), rtol=1e-8, atol=1e-10)
    for i in range(len(CANDIDATES)):
        j = n + i
        # Gaussian conditional of f(x) given f(X_n) = draw, dense solve
        w = np.linalg.solve(S, cov[:n, j])
        m = mean[j] + (draws - mean[:n]) @ w
        s = np.sqrt(cov[j, j] - cov[:n, j] @ w)
        z = (m - best) / s
        expected = np.mean(s * (z * norm.cdf(z) + norm.pdf(z)))
        np.testing.assert_allclose(np.exp(values[i]), expected, rtol=1e-6)


def test_matches_brute_force_monte_carlo_over_the_joint_predictive():
    posterior = _posterior(noise=0.1)
    key = jax.random.key(0)
    values = np.exp(
        np.asarray(evaluate(log_nei, posterior, CANDIDATES, key=key, num_draws=4096))
    )
    mean, cov, n = _joint(posterior, CANDIDATES)
    rng = np.random.default_rng(0)
    for i in range(len(CANDIDATES)):
        idx = list(range(n)) + [n + i]
        C = cov[np.ix_(idx, idx)] + 1e-10 * np.eye(n + 1)
        f = rng.multivariate_normal(mean[idx], C, size=400_000)
        improvement = np.maximum(f[:, -1] - f[:, :n].max(axis=1), 0.0)
        mc, se = improvement.mean(), improvement.std() / np.sqrt(len(improvement))
        # the acquisition's own 4096 draws add Monte Carlo error of about the
        # same size as its spread over f_n; 5 combined standard errors
        spread = 5 * np.hypot(se, improvement.std() / np.sqrt(4096))
        assert abs(values[i] - mc) < spread, (i, values[i], mc, spread)


def test_vanishing_noise_gives_log_ei_with_the_best_posterior_mean():
    posterior = _posterior(noise=1e-10)
    nei = evaluate(log_nei, posterior, CANDIDATES, key=jax.random.key(0))
    ei = evaluate(log_ei, posterior, CANDIDATES)
    np.testing.assert_allclose(np.asarray(nei), np.asarray(ei), atol=1e-3)


def test_padding_rows_are_excluded_and_gradients_are_finite():
    posterior = _posterior(noise=0.05, n=5)  # capacity above 5: padded rows
    assert posterior.data.capacity > posterior.data.n
    bound = bind(log_nei, posterior, key=jax.random.key(0))
    values, grad = bound.value_and_grad(jnp.asarray(CANDIDATES))
    assert np.all(np.isfinite(np.asarray(values)))
    assert np.all(np.isfinite(np.asarray(grad)))
    # the incumbents are maxima over the five observed rows only
    mean, cov, n = _joint(posterior, CANDIDATES)
    best = np.asarray(bound.aux[2][0])
    assert np.all(best < mean[:n].max() + 6 * np.sqrt(np.diag(cov[:n, :n]).max()))


def test_bad_num_draws_is_refused():
    with pytest.raises(ValueError, match="num_draws"):
        bind(log_nei, _posterior(noise=0.05), key=jax.random.key(0), num_draws=0)


def test_campaign_runs_with_log_nei():
    opt = ppbo.Optimizer(
        {"x": ppbo.Real(0.0, 1.0), "y": ppbo.Real(0.0, 1.0)},
        acquisition="log_nei",
        n_initial=4,
        seed=0,
    )
    for _ in range(6):
        trial = opt.ask()
        x, y = trial.params["x"], trial.params["y"]
        opt.tell(trial, (x - 0.3) ** 2 + (y - 0.6) ** 2)
    assert opt.config["acquisition"]["name"] == "log_nei"


def test_log_jei_equals_brute_force_monte_carlo_of_the_joint_improvement():
    # E[max(f(x) - f(x+), 0)] from joint draws of (f(x+), f(x)), x+ the observed
    # input with the largest posterior mean; tolerance four standard errors
    from ppbo.acquisition import log_jei

    posterior = _posterior(noise=0.05)
    mean, cov, n = _joint(posterior, CANDIDATES)
    best = int(np.argmax(mean[:n]))
    values = np.exp(np.asarray(evaluate(log_jei, posterior, CANDIDATES)))
    rng = np.random.default_rng(0)
    for i in range(len(CANDIDATES)):
        idx = [best, n + i]
        draws = rng.multivariate_normal(mean[idx], cov[np.ix_(idx, idx)], 200_000)
        gain = np.maximum(draws[:, 1] - draws[:, 0], 0.0)
        se = gain.std() / np.sqrt(len(gain))
        assert abs(values[i] - gain.mean()) < 4 * se + 1e-12


def test_log_jei_vanishes_at_the_incumbent_where_log_ei_does_not():
    # the difference f(x+) - f(x+) has no variance: no gain in re-evaluating x+,
    # while EI against the fixed value mu(x+) keeps sigma(x+) h(0)
    from ppbo.acquisition import log_jei

    posterior = _posterior(noise=0.05)
    mean, cov, n = _joint(posterior, CANDIDATES)
    x_best = np.asarray(posterior.data.X)[int(np.argmax(mean[:n]))][None, :]
    jei = float(evaluate(log_jei, posterior, x_best)[0])
    ei = float(evaluate(log_ei, posterior, x_best)[0])
    sigma = np.sqrt(cov[int(np.argmax(mean[:n])), int(np.argmax(mean[:n]))])
    np.testing.assert_allclose(ei, np.log(sigma * norm.pdf(0.0)), rtol=1e-6)
    assert jei < ei - 10.0


def test_sobol_normals_are_standard_normal_and_reproducible():
    key = jax.random.key(5)
    Z = sobol_normals(key, 1024, 6)
    np.testing.assert_array_equal(Z, sobol_normals(key, 1024, 6))
    assert not np.allclose(Z, sobol_normals(jax.random.key(6), 1024, 6))
    # every column is a standard normal sample (Kolmogorov-Smirnov at 1%) and the
    # columns are uncorrelated: |r| below 4 of iid draws' standard errors
    for column in Z.T:
        assert kstest(column, "norm").pvalue > 0.01
    r = np.corrcoef(Z.T)[np.triu_indices(6, 1)]
    assert np.all(np.abs(r) < 4 / np.sqrt(1024))


def test_quasi_random_draws_shrink_the_error_below_independent_draws():
    """The spread of log NEI over keys with 512 scrambled Sobol draws is below that
    of 512 independent draws, whose standard error is known in closed form."""
    posterior = _posterior(noise=0.05)
    x = CANDIDATES[:1]
    mean, cov, n = _joint(posterior, x)
    rng = np.random.default_rng(2)
    # per-draw closed-form EI under dense conditioning, from independent draws
    S = cov[:n, :n] + 1e-6 * np.mean(np.diag(cov[:n, :n])) * np.eye(n)
    draws = mean[:n] + rng.standard_normal((200_000, n)) @ np.linalg.cholesky(S).T
    w = np.linalg.solve(S, cov[:n, n])
    m = mean[n] + (draws - mean[:n]) @ w
    s = np.sqrt(cov[n, n] - cov[:n, n] @ w)
    z = (m - draws.max(axis=1)) / s
    ei = s * (z * norm.cdf(z) + norm.pdf(z))
    iid_log_se = ei.std() / np.sqrt(512) / ei.mean()  # delta method for log
    values = [
        float(evaluate(log_nei, posterior, x, key=jax.random.key(k), num_draws=512)[0])
        for k in range(12)
    ]
    assert abs(np.mean(values) - np.log(ei.mean())) < 4 * iid_log_se / np.sqrt(12)
    assert np.std(values, ddof=1) < 0.5 * iid_log_se
