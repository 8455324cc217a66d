"""Nearest-neighbour task kernel (Yogatama and Mann 2014) against dense references."""

import jax
import numpy as np
import pytest
from _observed_density import observed_log_density, site_log_prior

import ppbo
from ppbo.campaign.step import step
from ppbo.models import gp, nn_task_gp

K = 3
META = [[0.0, 0.0], [0.1, 0.05], [4.0, 4.0], [0.05, 0.2]]  # sources 0-2, target
SURROGATE = nn_task_gp.surrogate(num_sources=K, meta_features=META, num_neighbours=2)

PARAMS = {
    "lengthscale": np.array([0.3, 0.4]),
    "outputscale": 0.9,
    "noise": 0.01,
    "source_noise": 0.05,
    "mean": 0.1,
    "task_weight": 0.6,
}


def brute_overlap(M, n):
    M = np.asarray(M)
    t = len(M)
    hoods = []
    for a in range(t):
        d = [
            (0.0 if b == a else float(np.sum((M[a] - M[b]) ** 2)), b) for b in range(t)
        ]
        hoods.append({b for _, b in sorted(d)[:n]})
    return np.array(
        [[len(hoods[a] & hoods[b]) / n for b in range(t)] for a in range(t)]
    )


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_overlap_matches_sets_and_is_psd(n):
    M = np.random.default_rng(n).normal(size=(7, 3))
    S = nn_task_gp.neighbour_overlap(M, n)
    np.testing.assert_allclose(S, brute_overlap(M, n), atol=0)
    np.testing.assert_allclose(np.diag(S), 1.0)
    np.testing.assert_allclose(S, S.T)
    assert np.linalg.eigvalsh(S).min() > -1e-12


def test_disjoint_neighbourhoods_are_independent():
    S = SURROGATE.extras["overlap"]
    # source 2 is far away; with n = 2 its neighbourhood is {2, 3} (the target is
    # the least far), so it shares nothing with sources 0 and 1
    assert S[2, [0, 1, 3]].tolist() == [0.0, 0.0, 0.5]
    # N(0) = {0, 1}, N(1) = {1, 0}, N(3) = {3, 0}
    assert S[0, 1] == 1.0 and S[3, 0] == S[3, 1] == 0.5


def make_data(rng):
    source = np.array([0, 0, 1, 1, 2, 2, -1, -1, -1])
    X = rng.random((len(source), 2))
    y = np.sin(3 * X[:, 0]) + X[:, 1] + 0.3 * (source == 2)
    return ppbo.Dataset(X, y, source=source), (X, y, source)


def dense_kernel(p, Xa, ta, Xb, tb):
    T = (1 - p["task_weight"]) * np.eye(K + 1) + p["task_weight"] * brute_overlap(
        META, 2
    )
    r2 = np.sum(((Xa[:, None] - Xb[None]) / p["lengthscale"]) ** 2, axis=-1)
    out = np.empty((len(Xa), len(Xb)))
    for i in range(len(Xa)):
        for j in range(len(Xb)):
            out[i, j] = p["outputscale"] * T[ta[i], tb[j]] * np.exp(-0.5 * r2[i, j])
    return out


def test_predict_matches_dense_gp_and_kernel_is_psd():
    rng = np.random.default_rng(0)
    data, (X, y, source) = make_data(rng)
    tasks = np.where(source < 0, K, source)
    Kxx = dense_kernel(PARAMS, X, tasks, X, tasks)
    assert np.linalg.eigvalsh(Kxx).min() > -1e-10
    noise = np.where(source < 0, PARAMS["noise"], PARAMS["source_noise"]) + gp.JITTER
    Xq = rng.random((4, 2))
    tq = np.full(4, K)
    Kqx = dense_kernel(PARAMS, Xq, tq, X, tasks)
    A = np.linalg.solve(Kxx + np.diag(noise), np.column_stack([y - 0.1, Kqx.T]))
    ref_mean = 0.1 + Kqx @ A[:, 0]
    ref_cov = dense_kernel(PARAMS, Xq, tq, Xq, tq) - Kqx @ A[:, 1:]
    posterior = ppbo.fit(SURROGATE, data, ppbo.Fixed(PARAMS), jax.random.key(0))
    mean, var = posterior.predict(Xq)
    np.testing.assert_allclose(mean[0], ref_mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(var[0], np.diag(ref_cov), rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("likelihood", ["conditional", "joint"])
def test_model_density_is_the_dense_joint_or_conditional(likelihood):
    """The data term is log N(y; m, K + noise) over all rows ("joint"), or that
    minus the source rows' own marginal ("conditional": log p(y_T | y_S))."""
    from scipy import stats

    rng = np.random.default_rng(1)
    data, (X, y, source) = make_data(rng)
    tasks = np.where(source < 0, K, source)
    noise = np.where(source < 0, PARAMS["noise"], PARAMS["source_noise"]) + gp.JITTER
    C = dense_kernel(PARAMS, X, tasks, X, tasks) + np.diag(noise)

    def log_pdf(rows):
        gauss = stats.multivariate_normal(np.full(rows.sum(), 0.1), C[rows][:, rows])
        return gauss.logpdf(y[rows])

    expected = log_pdf(np.ones(len(y), bool))
    if likelihood == "conditional":
        expected -= log_pdf(source >= 0)
    s = nn_task_gp.surrogate(
        num_sources=K, meta_features=META, num_neighbours=2, likelihood=likelihood
    )
    got = observed_log_density(s.model, PARAMS, data)
    np.testing.assert_allclose(got, expected, rtol=1e-9)


def test_without_meta_features_every_task_is_a_neighbour():
    s = nn_task_gp.surrogate(num_sources=2)
    np.testing.assert_array_equal(s.extras["overlap"], np.ones((3, 3)))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_sources": 2, "meta_features": [[0.0], [1.0]]}, "3 rows"),
        ({"num_sources": 1, "meta_features": [[0.0], [np.nan]]}, "finite"),
        ({"num_sources": 1, "num_neighbours": 0}, "num_neighbours"),
        ({"num_sources": 1, "kernel": "linear"}, "kernel"),
        ({"num_sources": 1, "likelihood": "target"}, "likelihood='target'"),
    ],
)
def test_bad_options_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        nn_task_gp.surrogate(**kwargs)


@pytest.mark.parametrize(
    "acquisition, fitted",
    [
        pytest.param("ei", "map", marks=pytest.mark.slow),
        ("pi", "fixed"),
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
    data, _ = make_data(np.random.default_rng(1))
    result = step(
        jax.random.key(0),
        SURROGATE,
        inference,
        getattr(ppbo.acquisition, acquisition),
        data,
        optimizer_options={"num_raw": 32, "num_restarts": 2, "max_iterations": 20},
    )
    assert result.X.shape == (1, 2) and np.all(np.isfinite(result.values))
    assert 0.0 < float(result.posterior.samples["task_weight"][0]) < 1.0


def test_registry_entry_builds_this_surrogate():
    from ppbo.campaign.registry import SURROGATES, resolve_surrogate

    assert "num_sources" in SURROGATES["nn_task_gp"][1]
    surrogate, spec = resolve_surrogate({"name": "nn_task_gp", "num_sources": 3})
    assert spec["name"] == "nn_task_gp" and spec["num_sources"] == 3
    assert surrogate.extras["num_sources"] == 3


def test_registry_fills_meta_features():
    from ppbo.campaign.registry import SURROGATES, resolve_surrogate

    assert SURROGATES["nn_task_gp"][1]["meta_features"] is None
    rows = ((0.0, 1.0), (0.1, 1.0), (3.0, 0.0))  # the campaign's rows, frozen
    spec = {"name": "nn_task_gp", "num_sources": 2, "meta_features": rows}
    surrogate, _ = resolve_surrogate(spec)
    np.testing.assert_array_equal(
        surrogate.extras["overlap"], nn_task_gp.neighbour_overlap(np.array(rows), 3)
    )


def test_target_noise_prior_is_the_documented_default_or_the_users():
    """The target noise's prior density is LogNormal(log 1e-4, 2.5) (scipy's
    log-normal) by default, the sources' noise keeps the GP's LogNormal(-4, 1),
    and a user's ``priors["noise"]`` replaces the target's."""
    import numpyro.distributions as dist
    from scipy import stats

    data, _ = make_data(np.random.default_rng(1))

    def log_prior(surrogate, name):
        return site_log_prior(surrogate.model, PARAMS, name, data)

    gp_noise = stats.lognorm(s=1.0, scale=np.exp(-4.0))
    expected = stats.lognorm(s=2.5, scale=1e-4).logpdf(PARAMS["noise"])
    np.testing.assert_allclose(log_prior(SURROGATE, "noise"), expected, rtol=1e-12)
    expected = gp_noise.logpdf(PARAMS["source_noise"])
    np.testing.assert_allclose(log_prior(SURROGATE, "source_noise"), expected)
    users = nn_task_gp.surrogate(
        num_sources=K,
        meta_features=META,
        num_neighbours=2,
        priors={"noise": dist.LogNormal(-4.0, 1.0)},
    )
    expected = gp_noise.logpdf(PARAMS["noise"])
    np.testing.assert_allclose(log_prior(users, "noise"), expected, rtol=1e-12)
