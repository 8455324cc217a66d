"""MetaBO (Wang, Kim and Kaelbling 2018): estimators, completion, surrogate."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppbo
from ppbo.campaign.step import step
from ppbo.models import gp, metabo


def true_prior(M=6):
    x = np.linspace(0.0, 1.0, M)
    mu = np.sin(4 * x)
    k = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / 0.3**2)
    return mu, k


def slope_and_se(Ks, errors):
    """OLS slope of log RMS error on log K; its standard error by the delta method."""
    x = np.log(Ks)
    ms = np.mean(errors**2, axis=1)  # mean squared error per K over repetitions
    # se of log sqrt(ms) = se(ms) / (2 ms)
    se_log = np.std(errors**2, axis=1, ddof=1) / np.sqrt(errors.shape[1]) / (2 * ms)
    weights = (x - x.mean()) / np.sum((x - x.mean()) ** 2)
    return float(weights @ np.log(np.sqrt(ms))), float(np.sqrt(weights**2 @ se_log**2))


def test_finite_estimators_converge_like_one_over_sqrt_k():
    # mu_hat has error covariance (k + s^2 I) / K and k_hat (Wishart) error variance
    # proportional to 1 / (K - 1): the RMS errors fall like K^(-1/2) and
    # (K - 1)^(-1/2). Fit both log-log slopes; the tolerance is 4 standard errors
    # of the slope from the spread over repetitions.
    rng = np.random.default_rng(0)
    mu, k = true_prior()
    noise = 0.01
    cov = k + noise * np.eye(len(mu))
    Ks, reps = np.array([16, 64, 256, 1024]), 200
    err_mu, err_k = np.empty((len(Ks), reps)), np.empty((len(Ks), reps))
    for i, K in enumerate(Ks):
        for r in range(reps):
            Y = rng.multivariate_normal(mu, cov, size=K)
            mu_hat, k_hat = metabo.estimate_prior(Y)
            err_mu[i, r] = np.linalg.norm(mu_hat - mu)
            err_k[i, r] = np.linalg.norm(k_hat - cov)
    slope, se = slope_and_se(Ks, err_mu)
    assert abs(slope + 0.5) < 4 * se, (slope, se)
    slope, se = slope_and_se(Ks - 1, err_k)
    assert abs(slope + 0.5) < 4 * se, (slope, se)
    assert se < 0.05  # the check has power


def test_posterior_estimator_is_unbiased_for_the_noisy_posterior_covariance():
    # E[k_hat_t] = the posterior covariance of noisy observations given y_t, thanks
    # to the factor (K - 1) / (K - t - 1); the plain plug-in is biased low.
    rng = np.random.default_rng(1)
    mu, k = true_prior(5)
    cov = k + 0.01 * np.eye(5)
    K, index, reps = 8, np.array([1, 3]), 20000
    y = np.array([0.5, -0.2])
    A = cov[:, index] @ np.linalg.inv(cov[np.ix_(index, index)])
    truth = cov - A @ cov[index, :]
    draws = np.empty((reps, 5, 5))
    for r in range(reps):
        mu_hat, k_hat = metabo.estimate_prior(rng.multivariate_normal(mu, cov, K))
        draws[r] = metabo.posterior_estimate(mu_hat, k_hat, K, index, y)[1]
    mean, se = draws.mean(0), draws.std(0) / np.sqrt(reps)
    assert np.all(np.abs(mean - truth) < 4.5 * se + 1e-12)
    plug_in = mean * (K - len(index) - 1) / (K - 1)
    free = np.setdiff1d(np.arange(5), index)
    assert np.all(plug_in[free, free] < truth[free, free] - 4.5 * se[free, free])
    with pytest.raises(ValueError, match="num_sources > t \\+ 1"):
        metabo.posterior_estimate(mu, k, 3, index, y)


def test_soft_impute_recovers_a_low_rank_matrix():
    rng = np.random.default_rng(2)
    Y = rng.normal(size=(30, 2)) @ rng.normal(size=(2, 20))
    seen = rng.random(Y.shape) > 0.3
    Z = metabo.complete_matrix(np.where(seen, Y, np.nan), seen)
    np.testing.assert_array_equal(Z[seen], Y[seen])
    assert np.abs(Z - Y)[~seen].max() < 0.01 * np.abs(Y).max()
    # the completed matrix feeds the estimator
    mu_hat, _ = metabo.estimate_prior(np.where(seen, Y, np.nan), seen)
    np.testing.assert_allclose(mu_hat, Y.mean(0), atol=0.01 * np.abs(Y).max())


def test_basis_estimator_recovers_the_weight_prior():
    # f_k = phi^T w_k, w_k ~ N(u, Sigma), observed noise-free at 8 points each:
    # least squares recovers w_k, so u_hat and Sigma_hat are the sample moments.
    rng = np.random.default_rng(3)
    K, n = 400, 8
    X = jnp.asarray(rng.random((K * n, 2)))
    Phi = metabo.features(X, "polynomial", degree=2)  # D = 6
    D = Phi.shape[1]
    u = rng.normal(size=D)
    B = rng.normal(size=(D, D)) / np.sqrt(D)
    Sigma = B @ B.T
    W = rng.multivariate_normal(u, Sigma, K)
    y = jnp.sum(Phi.reshape(K, n, D) * W[:, None, :], axis=-1).reshape(-1)
    masks = jnp.repeat(jnp.eye(K, dtype=bool), n, axis=1)
    u_hat, Sigma_hat = metabo.estimate_basis_prior(Phi, y, masks, ridge=1e-12)
    se_u = np.sqrt(np.diag(Sigma) / K)
    assert np.all(np.abs(np.asarray(u_hat) - u) < 4.5 * se_u)
    se_S = np.sqrt((Sigma**2 + np.outer(np.diag(Sigma), np.diag(Sigma))) / (K - 1))
    assert np.all(np.abs(np.asarray(Sigma_hat) - Sigma) < 4.5 * se_S)


def make_data(rng):
    source = np.repeat([0, 1, 2, -1], [8, 8, 8, 4])
    X = rng.random((len(source), 2))
    shift = np.array([0.0, 0.3, -0.2, 0.1])[source]
    y = np.sin(5 * X[:, 0]) * X[:, 1] + shift
    return ppbo.Dataset(X, y, source=source)


SURROGATE = metabo.surrogate(num_sources=3, num_features=16)


def test_surrogate_predicts_the_gp_with_the_learned_prior():
    data = make_data(np.random.default_rng(4))
    params = {"noise": 0.01, "extra_variance": 0.1}
    posterior = ppbo.fit(SURROGATE, data, ppbo.Fixed(params), jax.random.key(0))
    X, y, _ = data.unpadded()
    source = data.unpadded_fields()["source"]
    phi = lambda Z: np.asarray(  # noqa: E731
        metabo.features(jnp.asarray(Z), "fourier", 16, 0.2)
    )
    W = []
    for k in range(3):
        P, t = phi(X[source == k]), y[source == k]
        G = P.T @ P
        W.append(np.linalg.solve(G + 1e-6 * np.trace(G) / 16 * np.eye(16), P.T @ t))
    W = np.array(W)
    u, S = W.mean(0), np.cov(W.T)
    Pm = S + 0.1 / 16 * np.eye(16)
    Xt, yt = X[source < 0], y[source < 0]
    Xq = np.random.default_rng(5).random((4, 2))
    Kt = phi(Xt) @ Pm @ phi(Xt).T + (0.01 + gp.JITTER) * np.eye(len(Xt))
    Kq = phi(Xq) @ Pm @ phi(Xt).T
    mean = phi(Xq) @ u + Kq @ np.linalg.solve(Kt, yt - phi(Xt) @ u)
    var = np.diag(phi(Xq) @ Pm @ phi(Xq).T - Kq @ np.linalg.solve(Kt, Kq.T))
    got_mean, got_var = posterior.predict(Xq)
    np.testing.assert_allclose(got_mean[0], mean, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got_var[0], var, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(
    "acquisition, fitted",
    [
        pytest.param("ei", "map", marks=pytest.mark.slow),
        ("log_ei", "fixed"),
    ],
)
def test_map_fit_and_campaign_step(acquisition, fitted):
    # MAP (compiling its BFGS is the slow part) with one acquisition; fixed
    # hyperparameters with the other
    inference = (
        ppbo.MAP(num_restarts=2, max_iterations=50)
        if fitted == "map"
        else ppbo.Fixed({"noise": 0.01, "extra_variance": 0.1})
    )
    data = make_data(np.random.default_rng(6))
    result = step(
        jax.random.key(0),
        SURROGATE,
        inference,
        getattr(ppbo.acquisition, acquisition),
        data,
        optimizer_options={"num_raw": 32, "num_restarts": 2, "max_iterations": 20},
    )
    assert result.X.shape == (1, 2) and np.all(np.isfinite(result.values))


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="basis"):
        metabo.surrogate(basis="wavelet")
    with pytest.raises(ValueError, match="num_features"):
        metabo.surrogate(num_features=0)
    with pytest.raises(ValueError, match="data.source is None"):
        SURROGATE.check_data(ppbo.Dataset(np.zeros((2, 1)), np.zeros(2)))


def test_registry_entry_builds_this_surrogate():
    from ppbo.campaign.registry import SURROGATES, resolve_surrogate

    assert "num_sources" in SURROGATES["metabo_gp"][1]
    surrogate, spec = resolve_surrogate({"name": "metabo_gp", "num_sources": 3})
    assert spec["name"] == "metabo_gp" and spec["num_sources"] == 3
    assert surrogate.extras["num_sources"] == 3
