"""Tests for :mod:`ppbo.models.diff_gp` against a dense NumPy Diff-GP.

The reference builds Shilton et al. (2017)'s steps by dense solves: each source's
GP, the difference GP on ``Delta y = y_T - mu_s(x)`` with noise ``lambda_T +
lambda_s(x)``, the corrected source rows ``y + mu_g(x)`` with noise ``Lambda^g =
lambda_s + lambda_g`` and the target GP on all rows; and the model's likelihood
against scipy's multivariate normal densities.
"""

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from _observed_density import observed_log_density, site_log_prior  # noqa: E402
from scipy import stats  # noqa: E402

import ppbo  # noqa: E402
from ppbo.campaign.registry import resolve_surrogate  # noqa: E402
from ppbo.campaign.step import step  # noqa: E402
from ppbo.models import diff_gp  # noqa: E402
from ppbo.models.gp import JITTER  # noqa: E402

DIM = 2
AUGMENTED = diff_gp.surrogate(num_sources=2)
SUM = diff_gp.surrogate(num_sources=1, prediction="sum")
X_TEST = np.random.default_rng(99).uniform(size=(5, DIM))
PARAMS = {
    "lengthscale": np.array([0.3, 0.6]),
    "outputscale": 1.2,
    "noise": 1e-3,
    "mean": 0.1,
    "source_noise": np.array([5e-3, 2e-2]),
    "diff_lengthscale": np.array([[0.4, 0.5], [0.7, 0.3]]),
    "diff_outputscale": np.array([0.3, 0.05]),
}
PARAMS_1 = PARAMS | {
    name: PARAMS[name][:1]
    for name in ("source_noise", "diff_lengthscale", "diff_outputscale")
}


def matern52(A, B, lengthscale):
    """Matérn-5/2 kernel matrix, R&W eq. (4.17), written out in NumPy."""
    r = np.sqrt((((A[:, None, :] - B[None, :, :]) / lengthscale) ** 2).sum(-1))
    s = np.sqrt(5.0) * r
    return (1.0 + s + s**2 / 3.0) * np.exp(-s)


def gp_posterior(kernel, X, r, noise, X_test, prior_var):
    """Zero-mean GP posterior mean and variance at X_test from residuals r."""
    K = kernel(X, X) + np.diag(noise)
    Ks = kernel(X_test, X)
    return Ks @ np.linalg.solve(K, r), prior_var - np.sum(
        Ks * np.linalg.solve(K, Ks.T).T, axis=1
    )


def dense_diff_gp(X, y, source, params, X_test, corrections="diagonal"):
    """Every quantity of the Diff-GP by dense solves, as a dict of arrays.

    ``corrections="dense"``: the corrected rows of source ``k`` have the error
    covariance ``diag(lambda_s) + Sigma_g,k``, the difference GP's posterior
    covariance over those rows (R&W eq. (2.24)), instead of ``diag(lambda_s +
    lambda_g)``.
    """
    p = params

    def k(A, B):
        return p["outputscale"] * matern52(A, B, p["lengthscale"])

    target = source == -1
    y_c = y.copy()
    noise_c = np.full(len(y), p["noise"] + JITTER)
    block = np.zeros((len(y), len(y)))
    out = {"source_mean": [], "source_var": [], "diff_mean": [], "diff_var": []}
    for s in range(len(p["source_noise"])):
        rows = source == s
        noise_s = np.full(rows.sum(), p["source_noise"][s] + JITTER)

        def source_gp(Z, rows=rows, noise_s=noise_s):
            mu, var = gp_posterior(
                k, X[rows], y[rows] - p["mean"], noise_s, Z, p["outputscale"]
            )
            return p["mean"] + mu, var

        def kg(A, B, s=s):
            return p["diff_outputscale"][s] * matern52(A, B, p["diff_lengthscale"][s])

        mu_T, var_T = source_gp(X[target])
        dy = y[target] - mu_T
        noise_g = p["noise"] + JITTER + var_T

        def diff_gp_at(Z, dy=dy, noise_g=noise_g, kg=kg, s=s):
            return gp_posterior(kg, X[target], dy, noise_g, Z, p["diff_outputscale"][s])

        mu_s, var_s = source_gp(X[rows])
        mu_g, var_g = diff_gp_at(X[rows])
        y_c[rows] = y[rows] + mu_g
        if corrections == "dense":
            Xt, Xr = X[target], X[rows]
            Kt = kg(Xt, Xt) + np.diag(noise_g)
            cov_g = kg(Xr, Xr) - kg(Xr, Xt) @ np.linalg.solve(Kt, kg(Xt, Xr))
            block[np.ix_(rows, rows)] = cov_g
            noise_c[rows] = var_s + JITTER
        else:
            noise_c[rows] = var_s + var_g + JITTER
        values = (*source_gp(X_test), *diff_gp_at(X_test))
        for name, value in zip(out, values, strict=True):
            out[name].append(value)
    C = k(X, X) + block + np.diag(noise_c)
    mu = k(X_test, X) @ np.linalg.solve(C, y_c - p["mean"])
    cov = k(X_test, X_test) - k(X_test, X) @ np.linalg.solve(C, k(X, X_test))
    out = {name: np.array(value) for name, value in out.items()}
    return out | {"mean": p["mean"] + mu, "cov": cov}


def make_data(num_sources=2, capacity=16, seed=0):
    rng = np.random.default_rng(seed)
    source = np.array([0, 1, 0, -1, 1, 0, -1, 1, 0, -1, 0])
    if num_sources == 1:
        source = np.where(source == 1, 0, source)
    X = rng.uniform(size=(len(source), DIM))
    y = np.sin(5.0 * X[:, 0]) + X[:, 1] + 0.3 * (source >= 0) * np.cos(3 * X[:, 1])
    return X, y, source, ppbo.Dataset(X, y, source=source, capacity=capacity)


def fixed(surrogate, params, data):
    return ppbo.fit(surrogate, data, ppbo.Fixed(params), jax.random.key(0))


def first(tree):
    return jax.tree.map(lambda a: a[0], tree)


def check_prediction(surrogate, data, ref):
    """Predictive mean, variance and joint covariance against ``ref``; returns
    the joint mean and the first sample."""
    posterior = fixed(surrogate, PARAMS, data)
    mean, var = posterior.predict(X_TEST)
    np.testing.assert_allclose(mean[0], ref["mean"], rtol=0, atol=1e-8)
    np.testing.assert_allclose(var[0], np.diag(ref["cov"]), rtol=0, atol=1e-8)
    sample, cache = first(posterior.samples), first(posterior.cache)
    joint_mean, joint = surrogate.predict_joint(sample, data, X_TEST, cache)
    np.testing.assert_allclose(joint, ref["cov"], rtol=0, atol=1e-8)
    return joint_mean, sample


def test_augmented_prediction_matches_dense_diff_gp():
    X, y, source, data = make_data()
    ref = dense_diff_gp(X, y, source, PARAMS, X_TEST)
    joint_mean, sample = check_prediction(AUGMENTED, data, ref)
    np.testing.assert_allclose(joint_mean, ref["mean"], rtol=0, atol=1e-8)
    parts = AUGMENTED.extras["difference_posterior"](sample, data, X_TEST)
    for name in ("source_mean", "source_var", "diff_mean", "diff_var"):
        np.testing.assert_allclose(parts[name], ref[name], rtol=0, atol=1e-8)


@pytest.mark.parametrize("capacity", [16, 11])
def test_dense_corrections_match_the_dense_reference(capacity):
    X, y, source, data = make_data(capacity=capacity)
    dense = diff_gp.surrogate(num_sources=2, corrections="dense")
    ref = dense_diff_gp(X, y, source, PARAMS, X_TEST, corrections="dense")
    check_prediction(dense, data, ref)
    # it differs from the survey's diagonal, and only in the prediction: the
    # hyperparameters' likelihood is the same
    diagonal = dense_diff_gp(X, y, source, PARAMS, X_TEST)
    assert np.max(np.abs(diagonal["mean"] - ref["mean"])) > 1e-4
    sample = {name: np.asarray(value) for name, value in PARAMS.items()}
    assert observed_log_density(dense.model, sample, data) == observed_log_density(
        AUGMENTED.model, sample, data
    )
    assert dense.name == "diff_gp(matern52, K=2, augmented, dense corrections)"
    with pytest.raises(ValueError, match="corrections must be one of"):
        diff_gp.surrogate(corrections="full")


@pytest.mark.parametrize("capacity", [16, 11], ids=["target-block", "full"])
def test_likelihood_is_source_gps_times_difference_gps(capacity):
    # capacity 16: the 3 target rows fit the gathered block of 16 // 4 rows;
    # capacity 11: they do not (11 // 4 = 2), and the full-size path runs
    X, y, source, data = make_data(capacity=capacity)
    sample = {name: np.asarray(value) for name, value in PARAMS.items()}
    observed = observed_log_density(AUGMENTED.model, sample, data)
    p = PARAMS
    expected, difference = 0.0, []
    target = source == -1
    for s in (0, 1):
        rows = source == s
        K = p["outputscale"] * matern52(X[rows], X[rows], p["lengthscale"])
        K += np.diag(np.full(rows.sum(), p["source_noise"][s] + JITTER))
        expected += stats.multivariate_normal(np.full(rows.sum(), p["mean"]), K).logpdf(
            y[rows]
        )
        ref = dense_diff_gp(X, y, source, p, X[target])
        dy = y[target] - ref["source_mean"][s]
        G = p["diff_outputscale"][s] * matern52(
            X[target], X[target], p["diff_lengthscale"][s]
        ) + np.diag(p["noise"] + JITTER + ref["source_var"][s])
        difference.append(stats.multivariate_normal(np.zeros(3), G).logpdf(dy))
    expected += np.mean(difference)  # each of K = 2 terms to the power 1 / K
    np.testing.assert_allclose(observed, expected, rtol=1e-10)


def test_sum_prediction_matches_dense_mu_s_plus_mu_g():
    X, y, source, data = make_data(num_sources=1)
    ref = dense_diff_gp(X, y, source, PARAMS_1, X_TEST)
    mean, var = fixed(SUM, PARAMS_1, data).predict(X_TEST)
    np.testing.assert_allclose(
        mean[0], ref["source_mean"][0] + ref["diff_mean"][0], rtol=0, atol=1e-8
    )
    np.testing.assert_allclose(
        var[0], ref["source_var"][0] + ref["diff_var"][0], rtol=0, atol=1e-8
    )


def test_target_identical_to_the_source_gives_the_source_gp():
    # target values equal to the source GP's own predictions: Delta y = 0, so g's
    # posterior mean vanishes and the prediction is the source GP's
    X, y, source, _ = make_data(num_sources=1)
    target = source == -1
    ref = dense_diff_gp(X, y, source, PARAMS_1, X[target])
    y = y.copy()
    y[target] = ref["source_mean"][0]
    data = ppbo.Dataset(X, y, source=source, capacity=16)
    ref = dense_diff_gp(X, y, source, PARAMS_1, X_TEST)
    np.testing.assert_allclose(ref["diff_mean"], 0.0, atol=1e-12)
    mean, var = fixed(SUM, PARAMS_1, data).predict(X_TEST)
    np.testing.assert_allclose(mean[0], ref["source_mean"][0], rtol=0, atol=1e-8)
    np.testing.assert_allclose(
        var[0], ref["source_var"][0] + ref["diff_var"][0], rtol=0, atol=1e-8
    )
    # the augmented target GP sees the source rows uncorrected
    augmented = diff_gp.surrogate(num_sources=1)
    mean, _ = fixed(augmented, PARAMS_1, data).predict(X_TEST)
    np.testing.assert_allclose(mean[0], ref["mean"], rtol=0, atol=1e-8)


def test_source_with_the_targets_points_and_values_gives_the_source_gp():
    # the target rows repeated as the source rows, with a near noise-free source:
    # Delta y is of the order of the source noise, and by Cauchy-Schwarz
    # |mu_g(x)| <= sqrt(k_g(x, x)) ||Delta y|| / sqrt(min noise of Delta y)
    rng = np.random.default_rng(5)
    X_t = rng.uniform(size=(5, DIM))
    y_t = np.sin(5.0 * X_t[:, 0]) + X_t[:, 1]
    X, y = np.concatenate([X_t, X_t]), np.concatenate([y_t, y_t])
    source = np.array([0] * 5 + [-1] * 5)
    data = ppbo.Dataset(X, y, source=source, capacity=16)
    params = PARAMS_1 | {"source_noise": np.array([1e-9])}
    ref = dense_diff_gp(X, y, source, params, X_t)
    dy = y_t - ref["source_mean"][0]
    bound = (
        np.sqrt(params["diff_outputscale"][0])
        * np.linalg.norm(dy)
        / np.sqrt(params["noise"] + JITTER)
    )
    assert bound < 1e-3
    mean, _ = fixed(SUM, params, data).predict(X_TEST)
    source_mean = dense_diff_gp(X, y, source, params, X_TEST)["source_mean"][0]
    assert np.max(np.abs(mean[0] - source_mean)) <= bound


def test_padding_does_not_matter():
    a = fixed(AUGMENTED, PARAMS, make_data(capacity=11)[3]).predict(X_TEST)
    b = fixed(AUGMENTED, PARAMS, make_data(capacity=16)[3]).predict(X_TEST)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)


def test_data_checks_and_bad_arguments():
    bad = ppbo.Dataset(np.zeros((3, DIM)), np.zeros(3), source=[0, 2, -1])
    with pytest.raises(ValueError, match=r"data.source\[1\] = 2"):
        fixed(AUGMENTED, PARAMS, bad)
    with pytest.raises(ValueError, match="data.source is None"):
        fixed(AUGMENTED, PARAMS, ppbo.Dataset(np.zeros((3, DIM)), np.zeros(3)))
    with pytest.raises(ValueError, match="num_sources=1"):
        diff_gp.surrogate(num_sources=2, prediction="sum")
    with pytest.raises(ValueError, match="prediction"):
        diff_gp.surrogate(prediction="mean")


def test_registry_entry():
    surrogate, spec = resolve_surrogate({"name": "diff_gp", "num_sources": 2})
    assert spec == {
        "name": "diff_gp",
        "num_sources": 2,
        "prediction": "augmented",
        "kernel": "matern52",
        "corrections": "diagonal",
    }
    assert surrogate.name == "diff_gp(matern52, K=2, augmented)"


@pytest.mark.slow
@pytest.mark.parametrize("method", ["map", "map-dense", "nuts"])
def test_campaign_step_with_map_and_nuts(method):
    _, _, _, data = make_data()
    surrogate = AUGMENTED
    if method == "map":
        inference, acquisition, pending = ppbo.MAP(num_restarts=2), "ei", None
    elif method == "map-dense":  # the dense corrections, conditioned on a pending point
        surrogate = diff_gp.surrogate(num_sources=2, corrections="dense")
        inference, acquisition = ppbo.MAP(num_restarts=2), "ei"
        pending = np.array([[0.5, 0.5]])
    else:
        inference = ppbo.NUTS(num_warmup=20, num_samples=10)
        acquisition, pending = "ucb", np.array([[0.5, 0.5]])
    result = step(
        jax.random.key(0),
        surrogate,
        inference,
        getattr(ppbo.acquisition, acquisition),
        data,
        pending=pending,
        optimizer_options={"num_raw": 64, "num_restarts": 2, "max_iterations": 20},
    )
    assert result.X.shape == (1, DIM)
    assert np.all((result.X >= 0.0) & (result.X <= 1.0))
    assert result.posterior.samples["diff_lengthscale"].shape[1:] == (2, DIM)
    mean, var = result.posterior.predict(X_TEST)
    assert np.all(np.isfinite(mean)) and np.all(var >= 0.0)


def _log_density(data):
    from numpyro.infer.util import log_density

    def value(params):
        return log_density(AUGMENTED.model, (data,), {}, params)[0]

    return jax.jit(jax.value_and_grad(value))


def test_likelihood_gradient_same_on_both_paths_and_matches_finite_differences():
    # the target-block path (capacity 32) and the full one (capacity 11) give the
    # same value and gradient, and the gradient is the central difference quotient
    params = {name: np.asarray(value, float) for name, value in PARAMS.items()}
    block = _log_density(make_data(capacity=32)[3])
    full = _log_density(make_data(capacity=11)[3])
    value, grad = block(params)
    value_full, grad_full = full(params)
    np.testing.assert_allclose(value, value_full, rtol=1e-12)
    for name in params:
        np.testing.assert_allclose(grad[name], grad_full[name], rtol=1e-9, atol=1e-9)
    h = 1e-6
    for name, theta in params.items():
        flat = theta.reshape(-1)
        for i in range(flat.size):
            step = np.zeros_like(flat)
            step[i] = h * max(1.0, abs(flat[i]))
            up = params | {name: (flat + step).reshape(theta.shape)}
            down = params | {name: (flat - step).reshape(theta.shape)}
            quotient = (block(up)[0] - block(down)[0]) / (2 * step[i])
            np.testing.assert_allclose(
                np.asarray(grad[name]).reshape(-1)[i], quotient, rtol=1e-5, atol=1e-5
            )


def test_difference_variance_prior_is_the_documented_default_or_the_users():
    """Each difference GP's signal variance has the prior LogNormal(0, 1.5) (scipy's
    log-normal, summed over the K sources) by default, and a user's
    ``priors["diff_outputscale"]`` replaces it."""
    import numpyro.distributions as dist

    *_, data = make_data()

    def log_prior(surrogate):
        return site_log_prior(surrogate.model, PARAMS, "diff_outputscale", data)

    values = PARAMS["diff_outputscale"]
    expected = stats.lognorm(s=1.5, scale=1.0).logpdf(values).sum()
    np.testing.assert_allclose(log_prior(AUGMENTED), expected, rtol=1e-12)
    users = diff_gp.surrogate(
        num_sources=2, priors={"diff_outputscale": dist.LogNormal(-2.0, 1.0)}
    )
    expected = stats.lognorm(s=1.0, scale=np.exp(-2.0)).logpdf(values).sum()
    np.testing.assert_allclose(log_prior(users), expected, rtol=1e-12)
