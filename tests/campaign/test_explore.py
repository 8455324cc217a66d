"""The step's exploration rule: a negligible improvement gives way to the variance."""

import jax
import numpy as np
import pytest

import ppbo
from ppbo import benchmarks
from ppbo.acquisition import evaluate
from ppbo.benchmarks.campaign import problem_space
from ppbo.campaign import step as step_module
from ppbo.campaign.step import EXPLORE_BELOW, EXPLORE_WITHIN, _converged, step
from ppbo.models import gp

SETTINGS = {"num_raw": 256, "num_restarts": 4}


def _fitted(X, y, inference=None):
    data = ppbo.Dataset(np.asarray(X, dtype=float)[:, None], np.asarray(y, float))
    surrogate = gp.surrogate()
    inference = inference or ppbo.MAP()
    return data, ppbo.fit(surrogate, data, inference, jax.random.key(0))


def _log_ei_step(key, data, posterior, acquisition_options=None):
    # one step of the default acquisition on an already fitted posterior
    return step(
        key,
        posterior.surrogate,
        ppbo.MAP(),
        ppbo.acquisition.log_ei,
        data,
        fitted=posterior,
        optimizer_options=SETTINGS,
        acquisition_options=acquisition_options,
    )


def _dense_variance(posterior, grid):
    # Rasmussen and Williams (2006), eq. (2.26), by dense linear algebra on the
    # fitted sample's kernel: k(x, x) - k(x, X) (K + noise I)^-1 k(X, x)
    params = {k: v[0] for k, v in posterior.samples.items()}
    data = posterior.data
    X = np.asarray(data.X)[np.asarray(data.mask)]
    ell, s2 = np.asarray(params["lengthscale"]), float(params["outputscale"])
    noise = float(params["noise"]) + gp.JITTER

    def k(A, B):
        r = np.sqrt(5.0 * (((A[:, None, :] - B[None, :, :]) / ell) ** 2).sum(-1))
        return s2 * (1.0 + r + r**2 / 3.0) * np.exp(-r)

    K = k(X, X) + noise * np.eye(len(X))
    cross = k(grid, X)
    return s2 - np.einsum("ij,ji->i", cross, np.linalg.solve(K, cross.T))


def test_variance_is_the_log_of_the_dense_posterior_variance():
    X = np.array([0.05, 0.3, 0.35, 0.8])
    _, posterior = _fitted(X, np.sin(6 * X))
    grid = np.linspace(0, 1, 41)[:, None]
    got = np.asarray(evaluate(ppbo.acquisition.variance, posterior, grid))
    np.testing.assert_allclose(got, np.log(_dense_variance(posterior, grid)), atol=1e-8)


@pytest.mark.parametrize(
    ("acquisition", "x", "values", "threshold", "expected"),
    [
        ("log_ei", 0.5 + 5e-5, [np.log(1e-4)], 3e-4, True),
        ("log_ei", 0.5 + 5e-4, [np.log(1e-4)], 3e-4, False),  # a new point
        ("log_ei", 0.5, [np.log(1e-3)], 3e-4, False),  # a real improvement
        ("log_ei", 0.5, [np.log(1e-4), np.log(1e-3)], 3e-4, True),  # batch: first
        ("log_ei", 0.5, [np.log(1e-4)], None, False),  # switched off
        ("log_ei", 0.5, [-np.inf], 3e-4, True),  # EI underflowed
        ("log_ei", 0.5, [np.nan], 3e-4, False),
        ("ei", 0.5, [1e-4], 3e-4, True),  # not in log space
        ("ei", 0.5, [1e-3], 3e-4, False),
        ("log_nei", 0.5, [np.log(1e-5)], 3e-4, True),
        ("ucb", 0.5, [-10.0], 3e-4, False),  # not an improvement
        ("pes", 0.5, [1e-9], 3e-4, False),
    ],
)
def test_the_rule_needs_a_repeated_input_and_a_negligible_improvement(
    acquisition, x, values, threshold, expected
):
    data = ppbo.Dataset(np.array([[0.1], [0.5], [0.9]]), np.zeros(3))
    acquisition = getattr(ppbo.acquisition, acquisition)
    X = np.full((len(values), 1), x)
    assert _converged(acquisition, X, np.array(values), data, threshold) is expected
    assert EXPLORE_WITHIN == 1e-4  # the distances above are chosen around it


def test_only_the_targets_own_inputs_count_as_repeated():
    # the rows of a source task (``source >= 0``) are not evaluations of the target
    data = ppbo.Dataset(np.array([[0.1], [0.5], [0.9]]), np.zeros(3), source=[0, -1, 1])
    log_ei, value = ppbo.acquisition.log_ei, np.array([np.log(1e-6)])
    assert _converged(log_ei, np.array([[0.5 + 5e-5]]), value, data, 1e-3)
    assert not _converged(log_ei, np.array([[0.9 + 5e-5]]), value, data, 1e-3)
    assert not _converged(log_ei, np.array([[0.1]]), value, data, 1e-3)


def test_a_converged_step_suggests_the_point_of_largest_variance(monkeypatch):
    # a smooth function observed without noise on a grid with one wide gap: the
    # expected improvement is small everywhere, the variance largest in the gap;
    # any distance counts as a repeat here, so only the threshold decides
    monkeypatch.setattr(step_module, "EXPLORE_WITHIN", 1.0)
    X = np.concatenate([np.linspace(0.0, 0.45, 10), np.linspace(0.75, 1.0, 6)])
    data, posterior = _fitted(X, -((X - 0.2) ** 2))
    key = jax.random.key(2)
    plain = _log_ei_step(key, data, posterior, {"explore_below": None})
    assert not plain.explored
    # just above the best expected improvement
    threshold = 1.01 * float(np.exp(plain.values[0]))
    explored = _log_ei_step(key, data, posterior, {"explore_below": threshold})
    assert explored.explored
    grid = np.linspace(0, 1, 2001)[:, None]
    variance = _dense_variance(posterior, grid)
    best = grid[np.argmax(variance), 0]
    assert 0.45 < best < 0.75
    assert abs(explored.X[0, 0] - best) < 5e-3
    np.testing.assert_allclose(np.exp(explored.values[0]), variance.max(), rtol=1e-4)


def test_a_step_with_real_improvement_left_does_not_explore(monkeypatch):
    monkeypatch.setattr(step_module, "EXPLORE_WITHIN", 1.0)  # only EI decides
    X = np.array([0.1, 0.5, 0.9])
    data, posterior = _fitted(X, np.sin(6 * X))
    result = _log_ei_step(jax.random.key(0), data, posterior)
    assert not result.explored
    assert result.values[0] > np.log(EXPLORE_BELOW)


def test_the_default_campaign_leaves_forresters_local_minimum_without_noise():
    # seed 1 of the regret benchmark: without the rule the campaign stayed at the
    # local minimum x = 0.14 (value -0.99) for all 30 evaluations, proposing points
    # within 1e-5 of each other (benchmarks/README.md, "The exploration rule")
    problem = benchmarks.get("forrester")
    space = problem_space(problem)
    opt = ppbo.Optimizer(space, seed=1)
    for _ in range(30):
        trial = opt.ask()
        x = np.array([[trial.params[space.names[0]]]])
        opt.tell(trial, float(problem.noise_free(x)[0]))
    assert opt.best_trial.value < -5.0  # the global minimum is -6.02 at x = 0.757
    explored = [t for t in opt.get_trials() if t.extra.get("explored")]
    assert explored and all(t.origin == "model" for t in explored)


def test_a_bad_threshold_is_refused_when_the_campaign_is_made():
    space = {"x": ppbo.Real(0.0, 1.0)}
    for bad in (-1.0, 0.0, float("nan"), "small", True):
        with pytest.raises(ValueError, match=r"acquisition_options\['explore_below'\]"):
            ppbo.Optimizer(space, acquisition_options={"explore_below": bad})
    ppbo.Optimizer(space, acquisition_options={"explore_below": None})
