"""BHGP (Tighineanu et al. 2022) against dense references and a flat source."""

import jax
import numpy as np
import pytest

import ppbo
from ppbo.campaign.step import step
from ppbo.models import bhgp, gp

SURROGATE = bhgp.surrogate(num_sources=2)


def matern52(A, B, ell, scale):
    r = np.sqrt(np.sum(((A[:, None, :] - B[None, :, :]) / ell) ** 2, axis=-1))
    a = np.sqrt(5.0) * r
    return scale * (1.0 + a + a**2 / 3.0) * np.exp(-a)


PARAMS = {
    "lengthscale": np.array([0.3, 0.5]),
    "outputscale": 0.7,
    "noise": 0.05,
    "mean": 0.2,
    "source_lengthscale": np.array([0.4, 0.25]),
    "source_outputscale": 1.3,
    "source_noise": 0.02,
    "source_mean": -0.1,
}


def make_data(rng, n_source=7, n_target=4):
    Xs, Xt = rng.random((n_source, 2)), rng.random((n_target, 2))
    ys = np.sin(4 * Xs[:, 0]) + Xs[:, 1]
    yt = np.sin(4 * Xt[:, 0]) + 0.5 * Xt[:, 1]
    source = np.concatenate([rng.integers(0, 2, n_source), -np.ones(n_target, int)])
    data = ppbo.Dataset(np.vstack([Xs, Xt]), np.concatenate([ys, yt]), source=source)
    return data, (Xs, ys, Xt, yt)


def dense_bhgp(p, Xs, ys, Xt, yt, Xq):
    """The survey's / paper's BHGP formulas with plain dense NumPy."""
    ks = lambda A, B: matern52(A, B, p["source_lengthscale"], p["source_outputscale"])  # noqa: E731
    kt = lambda A, B: matern52(A, B, p["lengthscale"], p["outputscale"])  # noqa: E731
    Ks = ks(Xs, Xs) + (p["source_noise"] + gp.JITTER) * np.eye(len(Xs))
    Ks_inv = np.linalg.inv(Ks)

    def mu_s(A):
        return p["source_mean"] + ks(A, Xs) @ Ks_inv @ (ys - p["source_mean"])

    def sigma_s(A, B):
        return ks(A, B) - ks(A, Xs) @ Ks_inv @ ks(Xs, B)

    Kt = kt(Xt, Xt) + (p["noise"] + gp.JITTER) * np.eye(len(Xt))
    alpha = kt(Xq, Xt) @ np.linalg.inv(Kt)
    mean = mu_s(Xq) + p["mean"] + alpha @ (yt - mu_s(Xt) - p["mean"])
    boost = (
        sigma_s(Xq, Xq)
        + alpha @ sigma_s(Xt, Xt) @ alpha.T
        - alpha @ sigma_s(Xt, Xq)
        - sigma_s(Xq, Xt) @ alpha.T
    )
    cov = kt(Xq, Xq) - alpha @ kt(Xt, Xq) + boost
    return mean, cov, (alpha, sigma_s, kt)


def test_predict_matches_dense_formulas():
    rng = np.random.default_rng(0)
    data, (Xs, ys, Xt, yt) = make_data(rng)
    Xq = rng.random((5, 2))
    posterior = ppbo.fit(SURROGATE, data, ppbo.Fixed(PARAMS), jax.random.key(0))
    mean, var = posterior.predict(Xq)
    ref_mean, ref_cov, _ = dense_bhgp(PARAMS, Xs, ys, Xt, yt, Xq)
    np.testing.assert_allclose(mean[0], ref_mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(var[0], np.diag(ref_cov), rtol=1e-7, atol=1e-10)
    first = jax.tree.map(lambda a: a[0], (posterior.samples, posterior.cache))
    joint_mean, cov = jax.jit(SURROGATE.predict_joint_one)(first[0], data, Xq, first[1])
    np.testing.assert_allclose(joint_mean, ref_mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(cov, ref_cov, rtol=1e-7, atol=1e-10)


def test_variance_is_the_mse_of_the_boosted_predictor_by_monte_carlo():
    # Under f_t = f_s + delta with f_s from the source posterior, the BHGP variance
    # is E[(f_t(x) - m(x))^2] for the boosted predictor m: simulate it.
    rng = np.random.default_rng(1)
    _, (Xs, ys, Xt, yt) = make_data(rng)
    Xq = rng.random((3, 2))
    _, cov, (alpha, sigma_s, kt) = dense_bhgp(PARAMS, Xs, ys, Xt, yt, Xq)
    Z = np.vstack([Xt, Xq])
    n, draws = len(Xt), 200_000
    G = rng.multivariate_normal(np.zeros(len(Z)), sigma_s(Z, Z), draws)
    D = rng.multivariate_normal(np.zeros(len(Z)), kt(Z, Z), draws)
    eps = rng.normal(0.0, np.sqrt(PARAMS["noise"] + gp.JITTER), (draws, n))
    error = G[:, n:] + D[:, n:] - (G[:, :n] + D[:, :n] + eps) @ alpha.T
    sq = error**2
    mse, se = sq.mean(0), sq.std(0) / np.sqrt(draws)
    assert np.all(np.abs(mse - np.diag(cov)) < 4.0 * se), (mse, np.diag(cov), se)


def test_flat_source_gives_the_target_gp():
    # A source GP with zero signal variance has posterior mean source_mean and zero
    # posterior covariance: BHGP is then the target GP on y_t - source_mean.
    rng = np.random.default_rng(2)
    data, (_, _, Xt, yt) = make_data(rng)
    params = dict(PARAMS, source_outputscale=0.0, source_mean=0.3)
    posterior = ppbo.fit(SURROGATE, data, ppbo.Fixed(params), jax.random.key(0))
    target = ppbo.Dataset(Xt, yt)
    single = {k: params[k] for k in ("lengthscale", "outputscale", "noise")}
    single["mean"] = params["mean"] + 0.3
    reference = ppbo.fit(gp.surrogate(), target, ppbo.Fixed(single), jax.random.key(0))
    Xq = rng.random((6, 2))
    for a, b in zip(posterior.predict(Xq), reference.predict(Xq), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_check_data_names_the_bad_source():
    X = np.zeros((3, 1))
    with pytest.raises(ValueError, match=r"data.source\[1\] = 2"):
        bhgp.surrogate(num_sources=2).check_data(
            ppbo.Dataset(X, np.zeros(3), source=[0, 2, -1])
        )
    with pytest.raises(ValueError, match="data.source is None"):
        SURROGATE.check_data(ppbo.Dataset(X, np.zeros(3)))
    with pytest.raises(ValueError, match="num_sources"):
        bhgp.surrogate(num_sources=0)


@pytest.mark.parametrize(
    "acquisition, fitted",
    [
        pytest.param("ei", "map", marks=pytest.mark.slow),
        ("ucb", "fixed"),
    ],
)
def test_map_fit_and_campaign_step(acquisition, fitted):
    # MAP (compiling its BFGS is the slow part) with one acquisition; fixed
    # hyperparameters with the other
    inference = (
        ppbo.MAP(num_restarts=2, max_iterations=50)
        if fitted == "map"
        else ppbo.Fixed(PARAMS)
    )
    rng = np.random.default_rng(3)
    data, _ = make_data(rng, n_source=10, n_target=4)
    result = step(
        jax.random.key(0),
        SURROGATE,
        inference,
        getattr(ppbo.acquisition, acquisition),
        data,
        q=2,
        optimizer_options={"num_raw": 32, "num_restarts": 2, "max_iterations": 20},
    )
    assert result.X.shape == (2, 2)
    assert np.all((result.X >= 0) & (result.X <= 1))
    assert np.all(np.isfinite(result.values))
    assert np.isfinite(float(result.posterior.samples["source_noise"][0]))


def test_registry_entry_builds_this_surrogate():
    from ppbo.campaign.registry import SURROGATES, resolve_surrogate

    assert "num_sources" in SURROGATES["bhgp"][1]
    surrogate, spec = resolve_surrogate({"name": "bhgp", "num_sources": 3})
    assert spec["name"] == "bhgp" and spec["num_sources"] == 3
    assert surrogate.extras["num_sources"] == 3
