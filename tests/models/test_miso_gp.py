"""Tests for :mod:`ppbo.models.miso_gp` against dense NumPy references.

The covariance of Poloczek et al.'s bias model is built entry by entry in NumPy
(``k_T(x, x') + [s = s' >= 0] k_s(x, x')`` plus per-row noise), the target
predictive is checked against dense GP solves, and a vanishing bias reduces the
model to the single-task GP on the pooled rows.
"""

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from _observed_density import observed_log_density  # noqa: E402
from numpyro import handlers  # noqa: E402
from scipy import stats  # noqa: E402

import ppbo  # noqa: E402
from ppbo.campaign.registry import resolve_surrogate  # noqa: E402
from ppbo.campaign.step import step  # noqa: E402
from ppbo.models import gp, miso_gp  # noqa: E402
from ppbo.models.gp import JITTER  # noqa: E402

DIM = 2
SURROGATE = miso_gp.surrogate(num_sources=2)
X_TEST = np.random.default_rng(99).uniform(size=(5, DIM))
PARAMS = {
    "lengthscale": np.array([0.3, 0.6]),
    "outputscale": 1.2,
    "noise": 1e-3,
    "mean": 0.1,
    "source_noise": np.array([5e-3, 2e-2]),
    "bias_lengthscale": np.array([[0.4, 0.2], [0.7, 0.5]]),
    "bias_outputscale": np.array([0.3, 0.05]),
}


def matern52(A, B, lengthscale):
    """Matérn-5/2 kernel matrix, R&W eq. (4.17), written out in NumPy."""
    r = np.sqrt((((A[:, None, :] - B[None, :, :]) / lengthscale) ** 2).sum(-1))
    s = np.sqrt(5.0) * r
    return (1.0 + s + s**2 / 3.0) * np.exp(-s)


def dense_covariance(X, source, params=PARAMS):
    """Entry by entry: k_T + [same source, not target] k_bias + diagonal noise."""
    n = len(X)
    K = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            value = (
                params["outputscale"]
                * matern52(X[i : i + 1], X[j : j + 1], params["lengthscale"])[0, 0]
            )
            s = source[i]
            if s >= 0 and source[j] == s:
                value += (
                    params["bias_outputscale"][s]
                    * matern52(
                        X[i : i + 1], X[j : j + 1], params["bias_lengthscale"][s]
                    )[0, 0]
                )
            if i == j:
                noise = params["noise"] if s < 0 else params["source_noise"][s]
                value += noise + JITTER
            K[i, j] = value
    return K


def make_data(capacity=16, seed=0):
    rng = np.random.default_rng(seed)
    source = np.array([1, 0, -1, 0, 1, 0, -1, 1, 0, -1, 0])
    X = rng.uniform(size=(len(source), DIM))
    y = np.sin(5.0 * X[:, 0]) + X[:, 1] + 0.2 * (source >= 0) * np.cos(3 * X[:, 1])
    return X, y, source, ppbo.Dataset(X, y, source=source, capacity=capacity)


def fixed(surrogate, params, data):
    return ppbo.fit(surrogate, data, ppbo.Fixed(params), jax.random.key(0))


def first(tree):
    return jax.tree.map(lambda a: a[0], tree)


def test_covariance_matches_dense_construction():
    X, _, source, _ = make_data()
    K = miso_gp.data_covariance(PARAMS, X, source)
    np.testing.assert_allclose(K, dense_covariance(X, source), rtol=1e-12, atol=1e-14)


def test_prediction_and_likelihood_match_dense_gp_algebra():
    X, y, source, data = make_data()
    posterior = fixed(SURROGATE, PARAMS, data)
    K = dense_covariance(X, source)
    # the target is unbiased: its cross-covariance with every row is k_T
    Ks = PARAMS["outputscale"] * matern52(X_TEST, X, PARAMS["lengthscale"])
    prior = PARAMS["outputscale"] * matern52(X_TEST, X_TEST, PARAMS["lengthscale"])
    mu = PARAMS["mean"] + Ks @ np.linalg.solve(K, y - PARAMS["mean"])
    cov = prior - Ks @ np.linalg.solve(K, Ks.T)
    mean, var = posterior.predict(X_TEST)
    np.testing.assert_allclose(mean[0], mu, rtol=0, atol=1e-8)
    np.testing.assert_allclose(var[0], np.diag(cov), rtol=0, atol=1e-8)
    sample, cache = first(posterior.samples), first(posterior.cache)
    joint_mean, joint = SURROGATE.predict_joint(sample, data, X_TEST, cache)
    np.testing.assert_allclose(joint_mean, mu, rtol=0, atol=1e-8)
    np.testing.assert_allclose(joint, cov, rtol=0, atol=1e-8)
    np.testing.assert_allclose(
        posterior.noise_var(X_TEST)[0], PARAMS["noise"] + JITTER, rtol=1e-12
    )
    model = handlers.substitute(SURROGATE.model, sample)
    site = handlers.trace(model).get_trace(data)["y"]
    expected = stats.multivariate_normal(np.full(len(y), PARAMS["mean"]), K).logpdf(y)
    np.testing.assert_allclose(site["fn"].log_prob(data.y), expected, rtol=1e-10)


@pytest.mark.parametrize("likelihood", ["conditional", "joint"])
def test_model_density_is_the_dense_joint_or_conditional(likelihood):
    """The data term is log N(y; m, K) over all rows ("joint"), or that minus the
    source rows' own marginal ("conditional": log p(y_T | y_S))."""
    X, y, source, data = make_data()
    K = dense_covariance(X, source)

    def log_pdf(rows):
        gauss = stats.multivariate_normal(
            np.full(rows.sum(), PARAMS["mean"]), K[rows][:, rows]
        )
        return gauss.logpdf(y[rows])

    expected = log_pdf(np.ones(len(y), bool))
    if likelihood == "conditional":
        expected -= log_pdf(source >= 0)
    s = miso_gp.surrogate(num_sources=2, likelihood=likelihood)
    got = observed_log_density(s.model, PARAMS, data)
    np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_no_bias_and_equal_noise_is_the_pooled_gp():
    X, y, _, data = make_data()
    params = PARAMS | {
        "bias_outputscale": np.zeros(2),
        "source_noise": np.full(2, PARAMS["noise"]),
    }
    mean, var = fixed(SURROGATE, params, data).predict(X_TEST)
    gp_params = {k: PARAMS[k] for k in ("lengthscale", "outputscale", "noise", "mean")}
    pooled = fixed(gp.surrogate(), gp_params, ppbo.Dataset(X, y, capacity=16))
    gp_mean, gp_var = pooled.predict(X_TEST)
    np.testing.assert_allclose(mean, gp_mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(var, gp_var, rtol=0, atol=1e-10)


def test_padding_does_not_matter():
    a = fixed(SURROGATE, PARAMS, make_data(capacity=11)[3]).predict(X_TEST)
    b = fixed(SURROGATE, PARAMS, make_data(capacity=16)[3]).predict(X_TEST)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)


def test_data_checks_and_bad_arguments():
    bad = ppbo.Dataset(np.zeros((3, DIM)), np.zeros(3), source=[0, 2, -1])
    with pytest.raises(ValueError, match=r"data.source\[1\] = 2"):
        fixed(SURROGATE, PARAMS, bad)
    with pytest.raises(ValueError, match="data.source is None"):
        fixed(SURROGATE, PARAMS, ppbo.Dataset(np.zeros((3, DIM)), np.zeros(3)))
    with pytest.raises(ValueError, match="num_sources"):
        miso_gp.surrogate(num_sources=True)
    with pytest.raises(ValueError, match="bias_variance"):
        miso_gp.surrogate(priors={"bias_variance": None})
    with pytest.raises(ValueError, match="likelihood='target'"):
        miso_gp.surrogate(likelihood="target")


def test_registry_entry():
    surrogate, spec = resolve_surrogate({"name": "miso_gp", "num_sources": 3})
    assert spec == {
        "name": "miso_gp",
        "num_sources": 3,
        "kernel": "matern52",
        "likelihood": "conditional",
    }
    assert surrogate.name == "miso_gp(matern52, K=3)"


@pytest.mark.slow
@pytest.mark.parametrize("method", ["map", "nuts"])
def test_campaign_step_with_map_and_nuts(method):
    _, _, _, data = make_data()
    if method == "map":
        inference, acquisition, pending = ppbo.MAP(num_restarts=2), "ei", None
    else:
        inference = ppbo.NUTS(num_warmup=20, num_samples=10)
        acquisition, pending = "ucb", np.array([[0.5, 0.5]])
    result = step(
        jax.random.key(0),
        SURROGATE,
        inference,
        getattr(ppbo.acquisition, acquisition),
        data,
        pending=pending,
        optimizer_options={"num_raw": 64, "num_restarts": 2, "max_iterations": 20},
    )
    assert result.X.shape == (1, DIM)
    assert np.all((result.X >= 0.0) & (result.X <= 1.0))
    samples = result.posterior.samples
    assert samples["bias_lengthscale"].shape[1:] == (2, DIM)
    assert samples["bias_outputscale"].shape[1:] == (2,)
    mean, var = result.posterior.predict(X_TEST)
    assert np.all(np.isfinite(mean)) and np.all(var >= 0.0)
