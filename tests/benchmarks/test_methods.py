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
