"""Tests for :mod:`ppbo.models.env_gp` against dense NumPy references.

The source-noise update is checked against a hand computation of Joy et al.
(2019)'s inverse-gamma update (source GP means by dense solves), the predictive
against the dense GP posterior with per-row noise, and the two limits the model
must reach: infinite source noise (the target-only GP) and zero source noise with
the target data duplicated as source rows (the GP on the pooled data).
"""

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
import pytest  # noqa: E402
from _observed_density import observed_log_density, site_log_prior  # noqa: E402
from scipy import stats  # noqa: E402

import ppbo  # noqa: E402
from ppbo.campaign.registry import resolve_surrogate  # noqa: E402
from ppbo.campaign.step import step  # noqa: E402
from ppbo.models import env_gp, gp  # noqa: E402
from ppbo.models.gp import JITTER  # noqa: E402

DIM = 2
MODE = env_gp.surrogate(num_sources=2, variant="mode")
BAYES = env_gp.surrogate(num_sources=2, variant="bayes", likelihood="joint")
X_TEST = np.random.default_rng(99).uniform(size=(5, DIM))
PARAMS = {
    "lengthscale": np.array([0.3, 0.6]),
    "outputscale": 1.2,
    "noise": 1e-3,
    "mean": 0.1,
}


def matern52(A, B, lengthscale):
    """Matérn-5/2 kernel matrix, R&W eq. (4.17), written out in NumPy."""
    r = np.sqrt((((A[:, None, :] - B[None, :, :]) / lengthscale) ** 2).sum(-1))
    s = np.sqrt(5.0) * r
    return (1.0 + s + s**2 / 3.0) * np.exp(-s)


def kernel(A, B, params=PARAMS):
    return params["outputscale"] * matern52(A, B, params["lengthscale"])


def dense_gp(X, y, row_noise, params=PARAMS, X_test=X_TEST):
    """GP posterior mean and covariance at X_test with per-row noise variances."""
    K = kernel(X, X, params) + np.diag(row_noise)
    Ks = kernel(X_test, X, params)
    mu = params["mean"] + Ks @ np.linalg.solve(K, y - params["mean"])
    return mu, kernel(X_test, X_test, params) - Ks @ np.linalg.solve(K, Ks.T)


def make_data(capacity=32, seed=0):
    rng = np.random.default_rng(seed)
    source = np.array([0] * 10 + [1] * 6 + [-1] * 3)
    X = rng.uniform(size=(len(source), DIM))
    y = np.sin(5.0 * X[:, 0]) + X[:, 1]
    y[source == 1] = -y[source == 1] + 0.3  # an unrelated (anti-correlated) source
    y[source == 0] += 0.05 * rng.normal(size=10)  # a close source
    return X, y, source, ppbo.Dataset(X, y, source=source, capacity=capacity)


def fixed(surrogate, params, data):
    return ppbo.fit(surrogate, data, ppbo.Fixed(params), jax.random.key(0))


def first(tree):
    return jax.tree.map(lambda a: a[0], tree)


def hand_mode(X, y, source, k, tau0, upsilon0):
    """Joy et al. (2019): tau_t, upsilon_t and the mode, with dense source GPs."""
    tau, upsilon = hand_update(X, y, source, k, tau0, upsilon0)
    return upsilon / (tau + 1.0)


def hand_update(X, y, source, k, tau0, upsilon0):
    """Joy et al. (2019)'s (tau_t, upsilon_t) of source k, with a dense source GP."""
    rows, target = source == k, source == -1
    mu, _ = dense_gp(
        X[rows],
        y[rows],
        np.full(rows.sum(), PARAMS["noise"] + JITTER),
        X_test=X[target],
    )
    residuals = y[target] - mu
    tau = tau0 + target.sum() / 2.0
    upsilon = upsilon0 + 0.5 * np.sum(residuals**2)
    return tau, upsilon


def test_mode_source_noise_matches_hand_computation():
    X, y, source, data = make_data()
    posterior = fixed(MODE, PARAMS, data)
    got = MODE.extras["source_noise"](first(posterior.samples), data)
    want = [hand_mode(X, y, source, k, 2.0, 0.3) for k in (0, 1)]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    # the close source's envelope shrinks below the prior mode 0.3 / 3, the
    # anti-correlated source's widens
    assert got[0] < 0.1 < 0.5 < got[1]
    # the helper on its own, with other prior parameters
    other = env_gp.mode_source_noise(
        PARAMS, data, num_sources=2, tau0=0.5, upsilon0=1.5
    )
    want = [hand_mode(X, y, source, k, 0.5, 1.5) for k in (0, 1)]
    np.testing.assert_allclose(other, want, rtol=1e-9)


def test_inverse_gamma_update_counts_only_masked_entries():
    residuals = np.array([[0.5, -1.0, 7.0], [2.0, 0.0, 7.0]])
    mask = np.array([True, True, False])
    tau, upsilon = env_gp.inverse_gamma_update(residuals, mask, 1.5, 0.25)
    np.testing.assert_allclose(tau, [2.5, 2.5])
    np.testing.assert_allclose(upsilon, [0.25 + 1.25 / 2, 0.25 + 4.0 / 2])


@pytest.mark.parametrize("surrogate", [MODE, BAYES], ids=["mode", "bayes"])
def test_prediction_is_the_dense_gp_with_source_noise(surrogate):
    X, y, source, data = make_data()
    params = PARAMS | {"source_noise": np.array([0.02, 0.7])}
    if surrogate is MODE:
        params = PARAMS
    posterior = fixed(surrogate, params, data)
    s2 = surrogate.extras["source_noise"](first(posterior.samples), data)
    if surrogate is BAYES:
        np.testing.assert_array_equal(s2, params["source_noise"])
    row_noise = PARAMS["noise"] + JITTER + np.where(source >= 0, s2[source], 0.0)
    mu, cov = dense_gp(X, y, row_noise)
    mean, var = posterior.predict(X_TEST)
    np.testing.assert_allclose(mean[0], mu, rtol=0, atol=1e-8)
    np.testing.assert_allclose(var[0], np.diag(cov), rtol=0, atol=1e-8)
    sample, cache = first(posterior.samples), first(posterior.cache)
    joint_mean, joint = surrogate.predict_joint(sample, data, X_TEST, cache)
    np.testing.assert_allclose(joint_mean, mu, rtol=0, atol=1e-8)
    np.testing.assert_allclose(joint, cov, rtol=0, atol=1e-8)


@pytest.mark.parametrize(
    "variant, likelihood",
    [
        ("mode", None),
        ("mode", "joint"),
        ("mode", "conditional"),
        ("bayes", "joint"),
        ("bayes", "conditional"),
    ],
)
def test_fitted_likelihood_is_the_dense_gaussian_density(variant, likelihood):
    """The model's data term is the dense Gaussian density the option names:
    the target rows alone, all rows, or the target given the sources (the
    joint density minus the sources' own marginal)."""
    surrogate = env_gp.surrogate(num_sources=2, variant=variant, likelihood=likelihood)
    X, y, source, data = make_data()
    params = PARAMS | {"source_noise": np.array([0.02, 0.7])}
    if variant == "mode":
        params = PARAMS
    sample = first(fixed(surrogate, params, data).samples)
    s2 = surrogate.extras["source_noise"](sample, data)
    row_noise = PARAMS["noise"] + JITTER + np.where(source >= 0, s2[source], 0.0)
    K = kernel(X, X) + np.diag(row_noise)
    mean = np.full(len(y), PARAMS["mean"])

    def log_pdf(rows):
        gauss = stats.multivariate_normal(mean[rows], K[np.ix_(rows, rows)])
        return gauss.logpdf(y[rows])

    everything, sources = np.ones(len(y), bool), source >= 0
    expected = {
        "target": log_pdf(source == -1),
        "joint": log_pdf(everything),
        "conditional": log_pdf(everything) - log_pdf(sources),
    }[likelihood or "target"]
    got = observed_log_density(surrogate.model, sample, data)
    np.testing.assert_allclose(got, expected, rtol=1e-10)


@pytest.mark.parametrize("capacity", [19, 64, 128])
def test_target_likelihood_is_computed_on_the_target_rows_at_any_capacity(capacity):
    """The target rows' density is the same (the dense one) whether the target
    buffer is the whole capacity (19) or a cut of it (64, 128 rows hold 32)."""
    X, y, source, data = make_data(capacity=capacity)
    assert data.target_capacity == min(capacity, 32)
    target = source == -1
    K = kernel(X, X) + np.diag(np.full(len(y), PARAMS["noise"] + JITTER))
    want = stats.multivariate_normal(
        np.full(target.sum(), PARAMS["mean"]), K[np.ix_(target, target)]
    ).logpdf(y[target])
    np.testing.assert_allclose(
        observed_log_density(MODE.model, PARAMS, data), want, rtol=1e-10
    )


def test_likelihood_option_is_checked():
    with pytest.raises(ValueError, match="likelihood='whole'"):
        env_gp.surrogate(likelihood="whole")
    with pytest.raises(ValueError, match=r"priors\['source_noise'\].*InverseGamma"):
        env_gp.surrogate(
            variant="bayes",
            likelihood="target",
            priors={"source_noise": dist.LogNormal(0.0, 1.0)},
        )


@pytest.mark.parametrize(
    "tau0, upsilon0, user_prior", [(2.0, 0.3, False), (0.5, 1.5, True)]
)
def test_bayes_target_source_noise_is_the_inverse_gamma_update(
    tau0, upsilon0, user_prior
):
    """variant="bayes", likelihood="target" (the cut posterior): the kernel's sites
    see the target rows alone, and ``source_gamma`` ~ Gamma(tau_t, 1) maps to
    ``sigma_s^2 = upsilon_t / g``, so that given the kernel's sites the source noise
    is InverseGamma(tau_t, upsilon_t), Joy et al. (2019)'s update (scipy's
    quantiles against a hand computation), with the mode variant's value at its
    mode."""
    X, y, source, data = make_data()
    kwargs = {"tau0": tau0, "upsilon0": upsilon0}
    if user_prior:  # a user's inverse-gamma prior replaces tau0 and upsilon0
        kwargs = {"priors": {"source_noise": dist.InverseGamma(tau0, upsilon0)}}
    cut = env_gp.surrogate(
        num_sources=2, variant="bayes", likelihood="target", **kwargs
    )
    updates = [hand_update(X, y, source, k, tau0, upsilon0) for k in (0, 1)]
    tau = np.array([u[0] for u in updates])
    upsilon = np.array([u[1] for u in updates])
    for q in (0.05, 0.5, 0.95):
        gamma = stats.gamma(tau).ppf(1.0 - q)
        params = PARAMS | {"source_gamma": gamma}
        got = cut.extras["source_noise"](params, data)
        want = stats.invgamma(tau, scale=upsilon).ppf(q)
        np.testing.assert_allclose(got, want, rtol=1e-9)
    # the site's density is Gamma(tau_t, 1), tau_t counting the target rows
    params = PARAMS | {"source_gamma": np.array([1.7, 4.2])}
    prior = site_log_prior(cut.model, params, "source_gamma", data)
    np.testing.assert_allclose(prior, stats.gamma(tau).logpdf([1.7, 4.2]).sum())
    # at g = tau_t + 1 the source noise is the inverse gamma's mode, the mode variant's
    mode = env_gp.surrogate(num_sources=2, variant="mode", tau0=tau0, upsilon0=upsilon0)
    at_mode = cut.extras["source_noise"](PARAMS | {"source_gamma": tau + 1.0}, data)
    np.testing.assert_allclose(
        at_mode, mode.extras["source_noise"](PARAMS, data), rtol=1e-9
    )
    # the data term is the target rows' own Gaussian density
    target = source == -1
    K = kernel(X, X) + np.diag(np.full(len(y), PARAMS["noise"] + JITTER))
    want = stats.multivariate_normal(
        np.full(target.sum(), PARAMS["mean"]), K[np.ix_(target, target)]
    ).logpdf(y[target])
    got = observed_log_density(cut.model, params, data)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_infinite_source_noise_gives_the_target_only_gp():
    X, y, source, data = make_data()
    params = PARAMS | {"source_noise": np.array([1e12, 1e12])}
    mean, var = fixed(BAYES, params, data).predict(X_TEST)
    target = source == -1
    mu, cov = dense_gp(X[target], y[target], np.full(3, PARAMS["noise"] + JITTER))
    np.testing.assert_allclose(mean[0], mu, rtol=0, atol=1e-8)
    np.testing.assert_allclose(var[0], np.diag(cov), rtol=0, atol=1e-8)


def test_zero_source_noise_with_duplicated_data_gives_the_pooled_gp():
    rng = np.random.default_rng(3)
    X_t = rng.uniform(size=(4, DIM))
    y_t = np.cos(4.0 * X_t[:, 0]) - X_t[:, 1]
    X = np.concatenate([X_t, X_t])
    y = np.concatenate([y_t, y_t])
    data = ppbo.Dataset(X, y, source=[0] * 4 + [-1] * 4, capacity=16)
    params = PARAMS | {"source_noise": np.array([0.0])}
    surrogate = env_gp.surrogate(num_sources=1, variant="bayes", likelihood="joint")
    mean, var = fixed(surrogate, params, data).predict(X_TEST)
    mu, cov = dense_gp(X, y, np.full(8, PARAMS["noise"] + JITTER))
    np.testing.assert_allclose(mean[0], mu, rtol=0, atol=1e-8)
    np.testing.assert_allclose(var[0], np.diag(cov), rtol=0, atol=1e-8)
    # ... which is ppbo's own single-task GP on the pooled rows
    pooled = fixed(gp.surrogate(), PARAMS, ppbo.Dataset(X, y, capacity=16))
    gp_mean, gp_var = pooled.predict(X_TEST)
    np.testing.assert_allclose(mean, gp_mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(var, gp_var, rtol=0, atol=1e-10)


def test_padding_does_not_matter():
    _, _, _, tight = make_data(capacity=19)
    _, _, _, wide = make_data(capacity=32)
    for surrogate in (MODE, BAYES):
        params = PARAMS | ({"source_noise": [0.1, 0.2]} if surrogate is BAYES else {})
        a = fixed(surrogate, params, tight).predict(X_TEST)
        b = fixed(surrogate, params, wide).predict(X_TEST)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)


def test_sites_and_data_checks():
    _, _, _, data = make_data()
    with pytest.raises(ValueError, match="source_noise"):  # a mode site it lacks
        fixed(MODE, PARAMS | {"source_noise": [0.1, 0.1]}, data)
    no_source = ppbo.Dataset(np.zeros((3, DIM)), np.zeros(3))
    with pytest.raises(ValueError, match="data.source is None"):
        fixed(MODE, PARAMS, no_source)
    bad = ppbo.Dataset(np.zeros((3, DIM)), np.zeros(3), source=[0, 2, -1])
    with pytest.raises(ValueError, match=r"data.source\[1\] = 2"):
        fixed(MODE, PARAMS, bad)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_sources": 0}, "num_sources"),
        ({"variant": "map"}, "variant"),
        ({"kernel": "cosine"}, "kernel"),
        ({"mean": "quadratic"}, "mean"),
        ({"tau0": -1.0}, "tau0"),
        ({"priors": {"source_noise": None}}, "source_noise"),  # mode: unknown site
        ({"variant": "bayes", "priors": {"source_noise": 1.0}}, "Distribution"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        env_gp.surrogate(**kwargs)


def test_registry_entry():
    surrogate, spec = resolve_surrogate({"name": "env_gp", "num_sources": 2})
    assert spec == {
        "name": "env_gp",
        "num_sources": 2,
        "variant": "mode",
        "kernel": "matern52",
        "likelihood": None,
    }
    assert surrogate.name == "env_gp(matern52, K=2, mode)"
    bayes, _ = resolve_surrogate({"name": "env_gp", "variant": "bayes"})
    assert bayes.name == "env_gp(matern52, K=1, bayes)"


OPTIMIZER = {"num_raw": 64, "num_restarts": 2, "max_iterations": 20}


@pytest.mark.slow
@pytest.mark.parametrize(
    "variant, likelihood, method",
    [
        ("mode", None, "map"),
        ("mode", None, "nuts"),
        ("bayes", "joint", "nuts"),
        ("bayes", None, "nuts"),
    ],
)
def test_campaign_step_with_map_and_nuts(variant, likelihood, method):
    # MAP with EI, NUTS with UCB and a pending point (conditioning); each compiles
    # one fit, which dominates the time (the sampled-site MAP path is the GP's)
    surrogate = env_gp.surrogate(num_sources=2, variant=variant, likelihood=likelihood)
    _, _, _, data = make_data()
    if method == "map":
        inference, acquisition, pending = ppbo.MAP(num_restarts=2), "ei", None
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
        optimizer_options=OPTIMIZER,
    )
    assert result.X.shape == (1, DIM)
    assert np.all((result.X >= 0.0) & (result.X <= 1.0))
    mean, var = result.posterior.predict(X_TEST)
    assert np.all(np.isfinite(mean)) and np.all(var >= 0.0)
    if method == "nuts":
        assert result.posterior.num_samples == 10
    if variant == "bayes":
        samples = result.posterior.samples
        s2 = jax.vmap(surrogate.extras["source_noise"], (0, None))(samples, data)
        assert s2.shape == (10, 2) and np.all(s2 > 0.0)
        # a sampled site of the joint fit, a deterministic site of the cut posterior
        np.testing.assert_allclose(s2, samples["source_noise"], rtol=1e-12)


@pytest.mark.parametrize("variant", ["mode", "bayes"])
def test_target_noise_prior_is_the_documented_default_or_the_users(variant):
    """The target noise's prior density is LogNormal(log 1e-4, 2.5) (scipy's
    log-normal) by default, and a user's ``priors["noise"]`` replaces it."""
    *_, data = make_data()
    params = PARAMS | {"source_noise": np.array([0.02, 0.7])}
    params["source_gamma"] = np.array([2.0, 3.0])  # the default bayes fit's site

    def noise_log_prior(surrogate):
        return site_log_prior(surrogate.model, params, "noise", data)

    default = env_gp.surrogate(num_sources=2, variant=variant)
    expected = stats.lognorm(s=2.5, scale=1e-4).logpdf(PARAMS["noise"])
    np.testing.assert_allclose(noise_log_prior(default), expected, rtol=1e-12)
    users = env_gp.surrogate(
        num_sources=2, variant=variant, priors={"noise": dist.LogNormal(-4.0, 1.0)}
    )
    expected = stats.lognorm(s=1.0, scale=np.exp(-4.0)).logpdf(PARAMS["noise"])
    np.testing.assert_allclose(noise_log_prior(users), expected, rtol=1e-12)
