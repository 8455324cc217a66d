"""BayesOpt methods for the regret runner."""

import pickle

import jax
import numpy as np
import pytest

from ppbo import benchmarks
from ppbo.benchmarks.methods import BayesOpt


def test_bayes_opt_runs_the_protocol_and_improves_on_the_design():
    method = benchmarks.bayes_opt("ei", inference="map", num_raw=64, num_restarts=2)
    result = benchmarks.run_one(
        "ei_map", method, "forrester", seed=0, budget=8, noise_var=0.0
    )
    regret = np.asarray(result["regret_best_observed"])
    assert regret.shape == (8,) and np.all(np.diff(regret) <= 0)
    # five EI steps on the 1-D Forrester function get close to its minimum
    assert regret[-1] < 0.1 * regret[2]
    assert np.isfinite(result["regret_recommendation"]).all()


def test_fit_is_shared_between_recommend_and_suggest_and_pickles():
    bo = BayesOpt("ei", inference="map", num_raw=32, num_restarts=2)
    problem = benchmarks.get("branin")
    X = np.random.default_rng(0).random((5, 2))
    y = problem(problem.from_unit(X))
    first = bo.posterior(jax.random.key(0), problem, X, y)
    assert bo.posterior(jax.random.key(1), problem, X, y) is first
    # minimisation: the model sees -y, so the best observation has the top mean
    mean, _ = first.predict_marginal(X)
    assert int(np.argmax(np.asarray(mean))) == int(np.argmin(y))
    x = bo.recommend(jax.random.key(2), problem, X, y)
    assert x.shape == (2,) and np.all((x >= 0) & (x <= 1))
    clone = pickle.loads(pickle.dumps(bo))
    assert clone.config == bo.config and clone._cache == {}


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown acquisition 'eii'"):
        BayesOpt("eii")
    with pytest.raises(ValueError, match="inference must be"):
        BayesOpt("ei", inference="hmc")


def _data(problem, n=6, seed=0):
    X = np.random.default_rng(seed).random((n, problem.dim))
    return X, problem(problem.from_unit(X))


def test_fixed_hyperparameters_see_unstandardised_negated_outputs():
    problem = benchmarks.get("branin")
    X, y = _data(problem)
    params = {"lengthscale": [0.3, 0.4], "outputscale": 2.0, "noise": 1e-3}
    bo = BayesOpt(
        "ei", inference="fixed", params=params, mean="zero", standardize=False
    )
    posterior = bo.posterior(jax.random.key(0), problem, X, y)
    assert posterior.num_samples == 1
    np.testing.assert_allclose(posterior.samples["lengthscale"][0], [0.3, 0.4])
    np.testing.assert_allclose(float(posterior.samples["outputscale"][0]), 2.0)
    X_obs, y_obs, _ = posterior.data.unpadded()
    np.testing.assert_allclose(np.asarray(y_obs), -y)  # minimised: negated only
    # the same data standardised: zero mean, unit variance
    standard = BayesOpt("ei", inference="fixed", params=params, mean="zero")
    _, y_std, _ = standard.posterior(jax.random.key(0), problem, X, y).data.unpadded()
    np.testing.assert_allclose(np.asarray(y_std), (-y - (-y).mean()) / y.std())


def test_point_estimate_is_the_posterior_mean_of_the_samples():
    problem = benchmarks.get("forrester")
    X, y = _data(problem)
    kwargs = dict(num_warmup=20, num_samples=16, thinning=4)
    bo = BayesOpt("pes", point_estimate="mean", **kwargs)
    posterior = bo.posterior(jax.random.key(0), problem, X, y)
    full = bo._cache["full"]
    assert full.num_samples == 4 and posterior.num_samples == 1
    for site, value in full.samples.items():
        np.testing.assert_allclose(
            np.asarray(posterior.samples[site][0]), np.mean(np.asarray(value), axis=0)
        )
    # log_mean: geometric means of the positive sites, the mean of "mean"
    geometric = BayesOpt("pes", point_estimate="log_mean", **kwargs)
    point = geometric.posterior(jax.random.key(0), problem, X, y)
    full = geometric._cache["full"]
    for site, value in full.samples.items():
        value = np.asarray(value)
        expected = (
            np.mean(value, axis=0)
            if site == "mean"
            else np.exp(np.mean(np.log(value), axis=0))
        )
        np.testing.assert_allclose(np.asarray(point.samples[site][0]), expected)
    assert np.all(point.samples["lengthscale"] <= np.mean(full.samples["lengthscale"]))
    mean, _ = point.predict(X)
    assert np.all(np.isfinite(np.asarray(mean)))
    # the next fit warm-starts from the full MCMC posterior, not the point estimate
    X2 = np.vstack([X, [[0.5]]])
    bo.posterior(jax.random.key(1), problem, X2, problem(problem.from_unit(X2)))
    assert bo._cache["full"].num_samples == 4


@pytest.mark.parametrize(
    ("acquisition", "given", "expected"),
    [("ei", None, 8), ("pes", None, 16), ("ei", 2, 2), ("es", 3, 3), ("pes", 12, 12)],
)
def test_acquisition_averages_over_the_thinned_samples(
    monkeypatch, acquisition, given, expected
):
    from ppbo.campaign import step as methods

    seen = {}

    def fake_optimize(acq, posterior, key, **options):
        seen.update(acq=acq, num=posterior.num_samples, options=options)
        return np.full((1, posterior.data.dim), 0.5), np.zeros(1)

    monkeypatch.setattr(methods, "optimize_acquisition", fake_optimize)
    problem = benchmarks.get("forrester")
    X, y = _data(problem)
    bo = BayesOpt(
        acquisition,
        num_warmup=20,
        num_samples=8,
        acquisition_samples=given,
        max_iterations=0,
        acquisition_options={"num_paths": 64},
    )
    x = bo.suggest(jax.random.key(0), problem, X, y)
    assert x.shape == (1,)
    # by default EI uses all 8 and PES its 16 (the 8 repeated, 16 draws of x*);
    # an explicit 12 repeats some of them
    assert seen["num"] == expected
    assert seen["acq"].name == acquisition
    assert seen["options"]["max_iterations"] == 0
    assert seen["options"]["num_paths"] == 64


def test_pes_nb_and_es_suggest_points_in_the_cube():
    problem = benchmarks.get("forrester", noise_var=1e-3)
    X, y = _data(problem, n=5)
    small = dict(num_warmup=16, num_samples=8, thinning=4, num_raw=32, num_restarts=2)
    for bo in (
        BayesOpt("pes", point_estimate="mean", kernel="rbf", **small),
        BayesOpt(
            "es", max_iterations=0, acquisition_options={"num_paths": 64}, **small
        ),
    ):
        x = bo.suggest(jax.random.key(3), problem, X, y)
        assert x.shape == (1,) and 0.0 <= x[0] <= 1.0


def test_new_options_pickle_and_are_checked():
    bo = BayesOpt(
        "ei",
        inference="fixed",
        params={"lengthscale": np.array([0.1]), "outputscale": 1.0, "noise": 1e-3},
        acquisition_options={"best_f": 0.0},
    )
    clone = pickle.loads(pickle.dumps(bo))
    assert clone.config == bo.config
    assert clone._inference().params["lengthscale"].tolist() == [0.1]
    with pytest.raises(ValueError, match="params must be given exactly"):
        BayesOpt("ei", inference="fixed")
    with pytest.raises(ValueError, match="params must be given exactly"):
        BayesOpt("ei", params={"noise": 1e-3})
    with pytest.raises(ValueError, match="thinning must be >= 1"):
        BayesOpt("ei", thinning=0)
    with pytest.raises(ValueError, match="acquisition_samples must be >= 1"):
        BayesOpt("ei", acquisition_samples=0)
    with pytest.raises(ValueError, match="point_estimate must be None or one of"):
        BayesOpt("ei", point_estimate="median")
    with pytest.raises(ValueError, match="max_iterations must be >= 0"):
        BayesOpt("ei", max_iterations=-1)


def test_a_one_sample_posterior_is_repeated_so_pes_draws_several_maximizers(
    monkeypatch,
):
    from ppbo.acquisition.pes import sample_maximizers
    from ppbo.campaign import step as methods

    seen = {}

    def fake_optimize(acq, posterior, key, **options):
        seen["posterior"] = posterior
        return np.full((1, posterior.data.dim), 0.5), np.zeros(1)

    monkeypatch.setattr(methods, "optimize_acquisition", fake_optimize)
    problem = benchmarks.get("branin")
    X, y = _data(problem)
    params = {"lengthscale": [0.3, 0.4], "outputscale": 1.0, "noise": 1e-3}
    bo = BayesOpt(
        "pes",
        inference="fixed",
        params=params,
        mean="zero",
        kernel="rbf",
        acquisition_samples=16,
    )
    bo.suggest(jax.random.key(0), problem, X, y)
    copies = seen["posterior"]
    assert copies.num_samples == 16
    np.testing.assert_array_equal(
        np.asarray(copies.samples["lengthscale"]), np.tile([0.3, 0.4], (16, 1))
    )
    mean, var = copies.predict(X[:2])
    np.testing.assert_allclose(np.asarray(mean), np.asarray(mean)[:1].repeat(16, 0))
    # one x* per copy, and they differ
    x_star = np.asarray(
        sample_maximizers(
            jax.random.key(1), copies, num_features=64, num_candidates=64, num_steps=5
        )
    )
    assert x_star.shape == (16, 2) and len(np.unique(x_star.round(6), axis=0)) > 8
