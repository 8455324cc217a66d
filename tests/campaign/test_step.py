"""The one BO step: every driver suggests the same point from the same inputs."""

import jax
import numpy as np
import pytest

import ppbo
from ppbo import benchmarks
from ppbo.benchmarks.campaign import problem_space
from ppbo.benchmarks.methods import BayesOpt
from ppbo.campaign.keys import campaign_key
from ppbo.campaign.step import step
from ppbo.campaign.transforms import model_data


def _evaluations(problem, space, n=6):
    U = np.random.default_rng(1).random((n, problem.dim))
    params = [space.from_unit(u) for u in U]
    X = np.stack([space.to_unit(p) for p in params])  # exactly what the campaign sees
    return params, X, problem.noise_free(problem.from_unit(X))


@pytest.mark.parametrize(
    ("acquisition", "inference", "optimizer_inference"),
    [
        ("log_ei", {"inference": "map"}, ppbo.MAP()),
        (
            "ucb",
            {"inference": "nuts", "num_warmup": 16, "num_samples": 16},
            ppbo.NUTS(num_warmup=16, num_samples=16),
        ),
    ],
)
def test_benchmark_method_and_optimizer_ask_suggest_the_same_point(
    acquisition, inference, optimizer_inference
):
    problem = benchmarks.get("branin")
    space = problem_space(problem)
    params, X, y = _evaluations(problem, space)
    settings = {"num_raw": 64, "num_restarts": 2, "max_iterations": 50}
    opt = ppbo.Optimizer(
        space,
        acquisition=acquisition,
        inference=optimizer_inference,
        direction=problem.direction,
        n_initial=0,
        seed=3,
        optimizer_options=settings,
    )
    for p, value in zip(params, y, strict=True):
        opt.add(p, float(value))
    trial = opt.ask()
    assert trial.origin == "model"
    key = campaign_key(3, len(params), "step")  # the key of this ask
    method = BayesOpt(acquisition, **inference, **settings)
    x = method.suggest(key, problem, X, y)
    np.testing.assert_array_equal(
        space.to_unit(trial.params), space.to_unit(space.from_unit(x))
    )
    # and the functional front door, on the same model-space data
    data, _ = model_data(X, y, maximize=False)
    front = ppbo.suggest(
        key,
        opt.posterior.surrogate,
        optimizer_inference,
        getattr(ppbo.acquisition, acquisition),
        data,
        optimizer_options=settings,
        **({"beta": 1.0} if acquisition == "ucb" else {}),
    )
    np.testing.assert_array_equal(front.X[0], x)


def test_a_fitted_posterior_skips_the_fit_and_keeps_the_optimiser_key():
    problem = benchmarks.get("forrester")
    X = np.random.default_rng(0).random((5, 1))
    data, _ = model_data(X, problem(problem.from_unit(X)), maximize=False)
    surrogate = ppbo.campaign.registry.resolve_surrogate("gp")[0]
    settings = {"num_raw": 32, "num_restarts": 2}
    key = jax.random.key(7)
    first = step(
        key,
        surrogate,
        ppbo.MAP(),
        ppbo.acquisition.ei,
        data,
        optimizer_options=settings,
    )
    again = step(
        key,
        surrogate,
        ppbo.MAP(),
        ppbo.acquisition.ei,
        data,
        optimizer_options=settings,
        fitted=first.posterior,
    )
    assert again.posterior is first.posterior
    np.testing.assert_array_equal(again.X, first.X)


def test_pending_points_and_batches_are_passed_to_the_optimiser(monkeypatch):
    from ppbo.campaign import step as module

    seen = {}

    def fake(acquisition, posterior, key, **options):
        seen.update(options, num=posterior.num_samples)
        return np.zeros((options["q"], posterior.data.dim)), np.zeros(options["q"])

    monkeypatch.setattr(module, "optimize_acquisition", fake)
    X = np.random.default_rng(0).random((4, 2))
    data, _ = model_data(X, X.sum(axis=1))
    surrogate = ppbo.campaign.registry.resolve_surrogate("gp")[0]
    pending = [np.array([0.5, 0.5])]
    result = step(
        jax.random.key(0),
        surrogate,
        ppbo.MAP(num_restarts=2),
        ppbo.acquisition.pes,
        data,
        pending=pending,
        q=2,
    )
    assert result.X.shape == (2, 2)
    np.testing.assert_array_equal(seen["pending"], [[0.5, 0.5]])
    assert seen["num"] == 16  # PES: a one-sample MAP posterior repeated 16 times
    step(
        jax.random.key(0),
        surrogate,
        ppbo.MAP(num_restarts=2),
        ppbo.acquisition.ucb,
        data,
        pending=[],
    )
    assert seen["pending"] is None and seen["beta"] == 1.0 and "t" not in seen
    seen.clear()
    step(  # asking for the schedule of Srinivas et al. gives it the round t = n
        jax.random.key(0),
        surrogate,
        ppbo.MAP(num_restarts=2),
        ppbo.acquisition.ucb,
        data,
        acquisition_options={"delta": 0.1},
    )
    assert seen["t"] == 4.0 and seen["delta"] == 0.1 and "beta" not in seen


def _integer_grid(U):
    return np.round(np.asarray(U) * 4.0) / 4.0  # Integer(0, 4) in the unit cube


@pytest.mark.parametrize("q", [1, 2])
def test_discrete_points_are_chosen_by_their_snapped_acquisition_value(q):
    from ppbo.acquisition import evaluate
    from ppbo.optimize import condition_on_pending

    X = np.array([[0.0], [0.5], [1.0], [0.3]])
    data, _ = model_data(X, [0.0, 1.0, 0.2, 0.9])
    surrogate = ppbo.campaign.registry.resolve_surrogate("gp")[0]
    params = {"lengthscale": [0.3], "outputscale": 1.0, "noise": 1e-4, "mean": 0.0}
    result = step(
        jax.random.key(0),
        surrogate,
        ppbo.Fixed(params),
        ppbo.acquisition.ei,
        data,
        q=q,
        optimizer_options={"num_raw": 64, "num_restarts": 2},
        snap=_integer_grid,
    )
    # brute force over the five points that can be run, greedily per batch point
    grid = np.linspace(0.0, 1.0, 5)[:, None]
    posterior = result.posterior
    for x, value in zip(result.X, result.values, strict=True):
        scores = np.asarray(evaluate(ppbo.acquisition.ei, posterior, grid))
        np.testing.assert_array_equal(x, grid[np.argmax(scores)])
        np.testing.assert_allclose(value, scores.max(), rtol=1e-10)
        posterior = condition_on_pending(result.posterior, result.X[:1])
    assert len({float(x[0]) for x in result.X}) == q


def _map_posterior():
    from ppbo.models import gp

    X = np.random.default_rng(0).random((6, 2))
    data = ppbo.Dataset(X, np.sin(3 * X).sum(axis=1))
    surrogate = gp.surrogate()
    return surrogate, data, ppbo.fit(surrogate, data, ppbo.MAP(), jax.random.key(0))


def _scored(monkeypatch, setup, acquisition, fitted, acquisition_samples=None):
    """The posterior a step hands to the acquisition optimiser (spied on)."""
    from ppbo.campaign import step as step_module

    seen = []

    def spy(acquisition, posterior, key, **kwargs):
        seen.append(posterior)
        return np.zeros((1, 2)), np.zeros(1)

    monkeypatch.setattr(step_module, "optimize_acquisition", spy)
    surrogate, data, _ = setup
    step(
        jax.random.key(1),
        surrogate,
        ppbo.MAP(),
        acquisition,
        data,
        fitted=fitted,
        acquisition_samples=acquisition_samples,
    )
    (scored,) = seen
    return scored


@pytest.mark.parametrize(
    ("num_samples", "given", "expected"),
    [(40, None, 16), (8, None, 8), (40, 32, 32), (1, None, 1)],
)
def test_acquisition_averages_over_sixteen_samples_unless_told(
    num_samples, given, expected, monkeypatch
):
    # An acquisition without its own num_samples averages over 16 evenly spaced
    # samples of a larger posterior and over all of a smaller one (MAP is not
    # repeated); the campaign's acquisition_samples overrides both.
    setup = _map_posterior()
    posterior = setup[2]
    # the MAP sample repeated, each copy marked by its index in its noise value
    many = posterior.thin(num_samples)
    marker = np.arange(num_samples, dtype=np.float64)
    posterior = many._replace(samples={**many.samples, "noise": marker})
    scored = _scored(monkeypatch, setup, ppbo.acquisition.log_ei, posterior, given)
    assert scored.num_samples == expected
    index = (np.arange(expected) * num_samples) // expected
    np.testing.assert_array_equal(scored.samples["noise"], marker[index])


@pytest.mark.parametrize(
    ("acquisition", "num_samples", "expected"),
    [("log_nei", 1, 1), ("log_nei", 40, 16), ("pes", 1, 16)],
)
def test_noisy_ei_does_not_repeat_a_smaller_posterior(
    acquisition, num_samples, expected, monkeypatch
):
    # PES repeats MAP's one sample to draw 16 maximisers; noisy EI draws its
    # incumbents per evaluation, so it averages over at most its 16 samples
    setup = _map_posterior()
    acquisition = getattr(ppbo.acquisition, acquisition)
    scored = _scored(monkeypatch, setup, acquisition, setup[2].thin(num_samples))
    assert scored.num_samples == expected
