"""The ask/tell Optimizer: design, batches, failures, bad input, exact resume."""

import math
import warnings

import numpy as np
import pytest

import ppbo
import ppbo.campaign.registry
import ppbo.campaign.step
from ppbo import CampaignWarning, Integer, Optimizer, Real, Space
from ppbo.optimize import optimize_acquisition
from ppbo.storage import DuplicateCampaignError, SQLiteStorage

FAST = {"num_raw": 32, "num_restarts": 2, "max_iterations": 5}
TINY_NUTS = ppbo.NUTS(num_warmup=16, num_samples=16)


def _space():
    return Space({"x": Real(-1.0, 2.0), "n": Integer(0, 4)})


def _objective(params):
    return (params["x"] - 0.7) ** 2 + 0.1 * params["n"]


def _optimizer(**kwargs):
    options = {
        "inference": ppbo.MAP(num_restarts=2, max_iterations=50),
        "n_initial": 3,
        "optimizer_options": FAST,
    } | kwargs
    return Optimizer(_space(), **options)


def test_design_then_model_trials():
    opt = _optimizer()
    trials = [opt.ask() for _ in range(3)]
    assert [t.origin for t in trials] == ["design"] * 3
    # a Latin hypercube: one point per third of each unit axis
    u = np.stack([opt.space.to_unit(t.params) for t in trials])
    assert sorted(np.floor(u[:, 0] * 3).astype(int)) == [0, 1, 2]
    for trial in trials:
        opt.tell(trial, _objective(trial.params))
    trial = opt.ask()
    assert trial.origin == "model" and trial.iteration == 3
    assert opt.space.validate(trial.params) == trial.params
    assert opt.posterior is not None and opt.posterior.data.n == 3
    assert set(opt.trials.columns) >= {"number", "state", "value", "params_x"}


def test_batches_and_pending_points_are_distinct():
    opt = _optimizer()
    for trial in opt.ask(3):
        opt.tell(trial, _objective(trial.params))
    batch = opt.ask(3)
    assert [t.number for t in batch] == [3, 4, 5]
    assert len({(t.params["x"], t.params["n"]) for t in batch}) == 3
    # a further ask sees the batch as pending and does not repeat it
    again = opt.ask()
    assert (again.params["x"], again.params["n"]) not in {
        (t.params["x"], t.params["n"]) for t in batch
    }


def test_failed_nan_and_abandoned_trials_are_kept_but_not_modelled():
    opt = _optimizer()
    a, b, c = opt.ask(3)
    opt.tell(a, 1.0)
    with pytest.warns(CampaignWarning, match="returned NaN"):
        assert opt.tell(b, float("nan")).state == "FAILED"
    assert opt.abandon(c, "node lost").state == "ABANDONED"
    failed = opt.tell(opt.ask(), failed=True, message="crashed")
    assert failed.state == "FAILED" and failed.message == "crashed"
    states = [t.state for t in opt.get_trials()]
    assert states == ["COMPLETE", "FAILED", "ABANDONED", "FAILED"]
    trial = opt.ask()  # fits on the single COMPLETE trial
    assert opt.posterior.data.n == 1
    assert trial.state == "RUNNING" and trial.origin == "model"


def test_infinite_values_are_stored_and_clipped_for_the_model():
    opt = _optimizer()
    trials = opt.ask(3)
    opt.tell(trials[0], 1.0)
    opt.tell(trials[1], 3.0)
    with pytest.warns(CampaignWarning, match="clipped"):
        opt.tell(trials[2], math.inf)
    assert opt.get_trials()[2].value == math.inf
    opt.ask()
    y = opt.posterior.data.unpadded()[1]
    # minimisation: -[1, 3, 3] standardised
    expected = -np.array([1.0, 3.0, 3.0])
    expected = (expected - expected.mean()) / expected.std()
    np.testing.assert_allclose(y, expected)


@pytest.mark.parametrize(
    "values",
    [
        [2.0, 2.0, 2.0],  # constant
        [1e-12, 3e-12, 2e-12],  # tiny scale
        [1e12, 3e12, -2e12],  # huge scale
    ],
)
def test_degenerate_values_give_valid_suggestions(values):
    opt = _optimizer()
    for trial, value in zip(opt.ask(3), values, strict=True):
        opt.tell(trial, value)
    trial = opt.ask()
    assert opt.space.validate(trial.params) == trial.params
    y = opt.posterior.data.unpadded()[1]
    assert np.all(np.isfinite(y)) and np.max(np.abs(y)) < 2.0


def test_duplicates_and_a_single_observation():
    opt = _optimizer(n_initial=0)
    opt.add({"x": 0.5, "n": 1}, 1.0)
    trial = opt.ask()  # one observation
    assert opt.posterior.data.n == 1
    opt.tell(trial, 2.0)
    for _ in range(3):
        opt.add({"x": 0.5, "n": 1}, 1.0)  # the same point again
    assert opt.space.validate(opt.ask().params)
    assert opt.posterior.data.n == 5


def test_no_complete_trials_gives_random_points():
    opt = _optimizer(n_initial=1)
    opt.tell(opt.ask(), failed=True)
    trial = opt.ask()
    assert trial.origin == "random"


def test_bad_tells_are_named():
    opt = _optimizer()
    trial = opt.ask()
    with pytest.raises(KeyError, match="trial 99 does not exist"):
        opt.tell(99, 1.0)
    with pytest.raises(ValueError, match="value must be a real number, got 'a'"):
        opt.tell(trial, "a")
    with pytest.raises(ValueError, match=r"must be a scalar, got an array of shape"):
        opt.tell(trial, np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="value must be float64, got float32"):
        opt.tell(trial, np.float32(1.0))
    with pytest.raises(ValueError, match="give one of them"):
        opt.tell(trial, 1.0, failed=True)
    with pytest.raises(ValueError, match="needs a value"):
        opt.tell(trial)
    with pytest.raises(ValueError, match="trial must be a Trial or an integer"):
        opt.tell("0", 1.0)
    opt.tell(trial, np.float64(1.0))
    with pytest.raises(ValueError, match="trial 0 is already COMPLETE"):
        opt.tell(trial, 2.0)
    with pytest.raises(ValueError, match="trial 0 is already COMPLETE"):
        opt.abandon(0)
    with pytest.raises(ValueError, match="parameter 'x' = 5.0 is outside"):
        opt.add({"x": 5.0, "n": 1}, 1.0)
    with pytest.raises(ValueError, match="unknown parameter 'y'"):
        opt.add({"x": 0.0, "n": 1, "y": 2}, 1.0)
    with pytest.raises(ValueError, match="n must be >= 1"):
        opt.ask(0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"direction": "down"}, "direction must be one of"),
        ({"initial_design": "grid"}, "initial_design must be one of"),
        ({"n_initial": -1}, "n_initial must be >= 0"),
        ({"seed": 1.5}, "seed must be an integer"),
        ({"acquisition": "nope"}, "acquisition must be one of"),
        ({"inference": "hmc"}, "inference must be one of"),
        ({"surrogate": "gradient_boosting"}, "surrogate must be"),
        ({"acquisition_options": {"beta": object()}}, "must be JSON-ready"),
    ],
)
def test_bad_configuration_is_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _optimizer(**kwargs)


def test_names_are_unique_and_load_reports_running_trials(tmp_path):
    path = tmp_path / "c.db"
    opt = _optimizer(storage=path, name="c")
    with pytest.raises(DuplicateCampaignError):
        _optimizer(storage=path, name="c")
    trial = opt.ask()
    with pytest.warns(CampaignWarning, match=r"RUNNING trials \[0\]"):
        again = Optimizer.load(path, "c")
    assert again.tell(trial.number, 1.0).state == "COMPLETE"
    with pytest.raises(ValueError, match="no campaign named 'd'"):
        Optimizer.load(path, "d")
    custom = Optimizer(
        _space(),
        surrogate=ppbo.models.gp.surrogate(kernel="matern32"),
        storage=path,
        name="custom",
    )
    del custom
    with pytest.raises(ValueError, match="custom surrogate"):
        Optimizer.load(path, "custom")


def _campaign(storage, name, steps, stop_at=None):
    """Ask/tell ``steps`` times; with ``stop_at``, stop after that many asks and
    reload the campaign from storage into a fresh Optimizer before going on."""
    opt = Optimizer(
        _space(),
        inference=TINY_NUTS,
        n_initial=3,
        seed=3,
        storage=storage,
        name=name,
        optimizer_options=FAST,
    )
    for step in range(steps):
        if step == stop_at:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CampaignWarning)
                opt = Optimizer.load(storage, name)
            for trial in opt.get_trials("RUNNING"):
                opt.tell(trial, _objective(trial.params))
            continue
        trial = opt.ask()
        if stop_at is not None and step == stop_at - 1:
            continue  # "killed" after the ask, before the tell
        opt.tell(trial, _objective(trial.params))
    return opt.get_trials()


def test_resume_gives_the_uninterrupted_suggestions(tmp_path):
    whole = _campaign(SQLiteStorage(tmp_path / "a.db"), "a", 7)
    resumed = _campaign(SQLiteStorage(tmp_path / "b.db"), "b", 8, stop_at=5)
    assert [t.params for t in whole] == [t.params for t in resumed]
    assert [t.value for t in whole] == [t.value for t in resumed]
    assert [t.origin for t in resumed].count("model") == 4


def test_recommend_does_not_change_later_suggestions():
    plain, probed = _optimizer(seed=5), _optimizer(seed=5)
    for opt in (plain, probed):
        for trial in opt.ask(3):
            opt.tell(trial, _objective(trial.params))
    rec = probed.recommend(num_raw=64)
    assert set(rec.params) == {"x", "n"} and rec.sd >= 0
    assert plain.ask().params == probed.ask().params


def test_minimize_and_maximize_record_failures():
    calls = []

    def flaky(params):
        calls.append(params)
        if len(calls) == 2:
            raise RuntimeError("simulator crashed")
        return _objective(params)

    with pytest.warns(CampaignWarning, match="simulator crashed"):
        result = ppbo.minimize(
            flaky,
            _space(),
            budget=5,
            inference=ppbo.MAP(num_restarts=2),
            optimizer_options=FAST,
            recommend_options={"num_raw": 32},
        )
    states = list(result.trials["state"])
    assert states.count("FAILED") == 1 and len(states) == 5
    assert "simulator crashed" in result.trials["message"][1]
    assert result.best_value == min(
        v
        for v, s in zip(result.trials["value"], states, strict=True)
        if s == "COMPLETE"
    )
    best = ppbo.maximize(
        lambda p: -_objective(p),
        _space(),
        budget=4,
        inference=ppbo.MAP(num_restarts=2),
        optimizer_options=FAST,
    )
    assert best.best_value == max(best.trials["value"])
    with pytest.raises(ValueError, match="budget must be >= 1"):
        ppbo.minimize(_objective, _space(), budget=0)


def test_asks_inside_a_bucket_compile_nothing(compile_counter):
    opt = _optimizer(inference=TINY_NUTS)
    for trial in opt.ask(3):
        opt.tell(trial, _objective(trial.params))
    for _ in range(2):
        trial = opt.ask()
        opt.tell(trial, _objective(trial.params))
    with compile_counter.measure():
        trial = opt.ask()
    assert compile_counter.count == 0


def test_default_acquisition_is_log_ei_and_pes_refuses_rough_kernels():
    assert _optimizer().config["acquisition"] == {"name": "log_ei"}
    rough = _optimizer(surrogate="gp-matern32")
    assert rough.config["acquisition"] == {"name": "log_ei"}
    assert _optimizer(acquisition="pes").config["acquisition"] == {"name": "pes"}
    with pytest.raises(ValueError, match="not twice differentiable|Matérn"):
        _optimizer(surrogate="gp-matern32", acquisition="pes")
    with pytest.raises(ValueError, match="acquisition_samples must be a positive"):
        _optimizer(acquisition_samples=0)


def test_pes_is_averaged_over_a_thinned_posterior(monkeypatch):
    seen = []

    def spy(acquisition, posterior, key, **kwargs):
        seen.append((acquisition.name, posterior.num_samples))
        return optimize_acquisition(acquisition, posterior, key, **kwargs)

    monkeypatch.setattr(ppbo.campaign.step, "optimize_acquisition", spy)
    nuts = ppbo.NUTS(num_warmup=16, num_samples=32)
    cases = [
        (nuts, 4, 4),
        (nuts, None, 16),  # pes.num_samples is 16
        (ppbo.MAP(num_restarts=2), None, 16),  # one sample, 16 draws of x*
    ]
    for inference, samples, expected in cases:
        opt = _optimizer(
            inference=inference, acquisition="pes", acquisition_samples=samples
        )
        for trial in opt.ask(3):
            opt.tell(trial, _objective(trial.params))
        assert opt.ask().origin == "model"
        assert seen[-1] == ("pes", expected)
        stored = 1 if isinstance(inference, ppbo.MAP) else 32
        assert opt.posterior.num_samples == stored  # stored in full


@pytest.mark.slow
@pytest.mark.parametrize("name", ppbo.campaign.registry.acquisition_names())
def test_every_named_acquisition_drives_a_campaign(name):
    opt = _optimizer(acquisition=name, n_initial=3)
    for trial in opt.ask(3):
        opt.tell(trial, _objective(trial.params))
    trial = opt.ask()
    assert trial.origin == "model" and opt.space.validate(trial.params)
    assert opt.config["acquisition"] == {"name": name}
