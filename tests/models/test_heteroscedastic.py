import jax
import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import multivariate_normal

import ppbo
from ppbo.models import heteroscedastic as het
from ppbo.models import preference_gp as pgp


def _fixed_point_bias():
    """Where the procedure settles, and how much one log-noise value scatters.

    If the fitted mean is exact and its variance small next to the noise, an
    anchor's empirical log-noise is z = log((r_true chi2_1 + r) / 2), r the
    current noise, since draws t_j ~ N(f, r) average (y - t_j)^2 / 2 to
    ((y - f)^2 + r) / 2. The log-noise GP fits E[z], so the procedure settles
    at r = c r_true with log c = E[log((chi2_1 + c) / 2)]: c = 0.656 (Jensen's
    inequality keeps it below 1). Expectations by Monte Carlo, 10^6 draws.
    """
    chi2 = np.random.default_rng(0).standard_normal(1_000_000) ** 2
    c = brentq(lambda c: np.mean(np.log((chi2 + c) / 2)) - np.log(c), 0.05, 1.0)
    return np.log(c), np.log((chi2 + c) / 2).var()


def test_recovers_a_known_noise_function():
    rng = np.random.default_rng(5)
    n = 150
    X = rng.random((n, 1))

    def log_var(x):
        return -4.0 + 3.0 * x

    # noise sd 0.14 to 0.61, large next to the error of the fitted mean of sin
    Y = np.sin(2 * np.pi * X[:, 0]) + np.exp(0.5 * log_var(X[:, 0])) * rng.normal(
        size=n
    )
    model = het.most_likely_noise(jax.random.key(0), X, Y)
    assert model.converged
    log_c, var = _fixed_point_bias()
    # Bin averages (width 0.2, about 30 anchors each) of the recovered log-noise
    # against the truth shifted by log c; tolerance: 4 standard errors of a
    # bin average of 30 independent empirical log-noise values (the GP smoother
    # averages over more, so this errs on the wide side).
    tolerance = 4 * np.sqrt(var / 30)
    grid = np.linspace(0.0, 1.0, 201)[:, None]
    recovered = np.asarray(model.log_noise(grid))
    expected = log_var(grid[:, 0]) + log_c
    edges = np.linspace(0.0, 1.0, 6)
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        inside = (grid[:, 0] >= lo) & (grid[:, 0] <= hi)
        error = recovered[inside].mean() - expected[inside].mean()
        assert abs(error) < tolerance, (lo, hi, error, tolerance)
    r = model(grid)
    assert r.shape == (201,) and np.all(r > 0)


def test_bad_anchors_name_the_field_and_value():
    X = np.random.default_rng(0).random((5, 1))
    with pytest.raises(ValueError, match=r"Y0\[2\] = nan"):
        het.most_likely_noise(jax.random.key(0), X, [0.0, 1.0, np.nan, 0.0, 1.0])
    bad = X.copy()
    bad[1, 0] = np.inf
    with pytest.raises(ValueError, match=r"X0\[1, 0\] = inf"):
        het.most_likely_noise(jax.random.key(0), bad, np.zeros(5))
    with pytest.raises(ValueError, match="Y0 shape"):
        het.most_likely_noise(jax.random.key(0), X, np.zeros(4))


def test_noise_model_feeds_the_preference_gp_anchor_noise():
    rng = np.random.default_rng(2)
    X0 = rng.random((12, 1))
    Y0 = np.sin(6 * X0[:, 0]) + (0.05 + 0.3 * X0[:, 0]) * rng.normal(size=12)
    noise = het.most_likely_noise(jax.random.key(0), X0, Y0, max_iterations=2)
    X = np.concatenate([X0, rng.random((4, 1))])
    y = np.concatenate([Y0, np.zeros(4)])
    data = ppbo.Dataset(X, y, duels=[[12, 13], [14, 15]], anchor=np.arange(16) < 12)
    surrogate = pgp.surrogate(beta=0.5, anchor_noise=noise)
    fixed = {
        "lengthscale": np.array([0.2]),
        "outputscale": 1.0,
        "mean": 0.0,
        "preference_noise": 0.1,
    }
    posterior = ppbo.fit(
        surrogate, data, pgp.Laplace(num_samples=4, params=fixed), jax.random.key(1)
    )
    grid = np.linspace(0.0, 1.0, 5)[:, None]
    np.testing.assert_allclose(posterior.noise_var(grid)[0], noise(grid), rtol=1e-12)
    # the anchors' evidence uses the noise function's variances on the diagonal
    anchors_only = ppbo.Dataset(X0, Y0, anchor=np.ones(12, bool))
    value = pgp.anchor_log_evidence(fixed, anchors_only, anchor_noise=noise)
    diff = X0 - X0.T
    cov = np.exp(-0.5 * diff**2 / 0.04) + np.diag(np.asarray(noise(X0)))
    cov += pgp.JITTER * np.eye(12)
    expected = multivariate_normal(np.zeros(12), cov).logpdf(Y0)
    np.testing.assert_allclose(value, expected, rtol=1e-10)
