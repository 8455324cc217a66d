"""PPBOSampler against Optuna's sampler expectations and a known optimum."""

import math

import numpy as np
import pytest

optuna = pytest.importorskip("optuna", reason="the optuna extra is not installed")

import ppbo  # noqa: E402
from ppbo.integrations import optuna as ppbo_optuna  # noqa: E402
from ppbo.integrations.optuna import PPBOSampler, to_space  # noqa: E402

D = optuna.distributions
FAST = {
    "inference": ppbo.MAP(num_restarts=2),
    "optimizer_options": {"num_raw": 64, "num_restarts": 2, "max_iterations": 30},
}


@pytest.fixture(autouse=True)
def quiet_optuna():
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    yield
    optuna.logging.set_verbosity(level)


def quadratic(trial):
    x = trial.suggest_float("x", -5.0, 5.0)
    y = trial.suggest_float("y", -5.0, 5.0)
    return (x - 1.2) ** 2 + (y + 0.7) ** 2


def test_to_space_maps_each_distribution_and_back():
    search_space = {
        "lr": D.FloatDistribution(1e-4, 1e-1, log=True),
        "drop": D.FloatDistribution(0.0, 0.5, step=0.1),
        "units": D.IntDistribution(8, 64, step=8),
        "layers": D.IntDistribution(1, 4),
        "act": D.CategoricalDistribution(["relu", None, 3.5]),
    }
    space, encodings = ppbo_optuna._space(search_space)
    assert space == to_space(search_space)
    assert space.dimensions["lr"] == ppbo.Real(1e-4, 1e-1, log=True)
    assert space.dimensions["drop"] == ppbo.Integer(0, 5)
    assert space.dimensions["units"] == ppbo.Integer(0, 7)
    assert space.dimensions["layers"] == ppbo.Integer(1, 4)
    assert space.dimensions["act"] == ppbo.Categorical([0, 1, 2])
    params = {"lr": 1e-3, "drop": 0.3, "units": 40, "layers": 3, "act": None}
    inner = {n: encodings[n].to_ppbo(v) for n, v in params.items()}
    assert inner == {"lr": 1e-3, "drop": 3, "units": 4, "layers": 3, "act": 1}
    back = space.from_unit(space.to_unit(inner))
    restored = {n: encodings[n].to_optuna(v) for n, v in back.items()}
    assert restored["units"] == 40 and restored["layers"] == 3
    assert restored["act"] is None and math.isclose(restored["drop"], 0.3)
    assert math.isclose(restored["lr"], 1e-3, rel_tol=1e-12)
    for name, dist in search_space.items():
        assert dist._contains(dist.to_internal_repr(restored[name])), name
    with pytest.raises(ValueError, match="'c'"):
        to_space({"c": D.FloatDistribution(1.0, 1.0)})


def test_bad_arguments_name_the_field():
    with pytest.raises(ValueError, match="n_startup_trials"):
        PPBOSampler(n_startup_trials=0)
    with pytest.raises(ValueError, match="seed"):
        PPBOSampler(seed=1.5)
    with pytest.raises(ValueError, match="acquisition"):
        PPBOSampler(acquisition="no_such_acquisition")
    with pytest.raises(ValueError, match="'gp_hedge' needs a ppbo campaign"):
        PPBOSampler(acquisition="gp_hedge")


def test_seeded_studies_propose_the_same_parameters():
    def params(seed):
        sampler = PPBOSampler(n_startup_trials=3, seed=seed, **FAST)
        study = optuna.create_study(sampler=sampler)
        study.optimize(quadratic, n_trials=4)
        return [t.params for t in study.trials]

    first = params(3)
    assert first == params(3)
    # the model trial differs from a differently seeded study's (not a constant)
    assert first[3:] != params(4)[3:]


def test_relative_search_space_is_the_intersection_without_single_values():
    sampler = PPBOSampler(n_startup_trials=2, seed=0, **FAST)
    study = optuna.create_study(sampler=sampler)

    def dynamic(trial):
        x = trial.suggest_float("x", -5.0, 5.0)
        y = trial.suggest_float("y", -5.0, 5.0)
        trial.suggest_int("fixed", 3, 3)  # single-valued: never relative
        if trial.number % 2:
            trial.suggest_float("z", 0.0, 1.0)  # only in some trials
        return x**2 + y**2

    study.optimize(dynamic, n_trials=4)
    frozen = study.trials[-1]
    space = sampler.infer_relative_search_space(study, frozen)
    assert space == {"x": D.FloatDistribution(-5.0, 5.0), "y": space["y"]}
    # trial 3 (after 2 completed) sampled x, y relatively and z independently
    assert "z" in study.trials[3].params
    relative = study.trials[3].system_attrs[ppbo_optuna._PENDING_ATTR]
    assert relative.keys() == {"x", "y"}
    assert {k: study.trials[3].params[k] for k in "xy"} == relative
    assert "ppbo:relative_params" not in study.trials[1].system_attrs


def test_failed_pruned_and_nan_trials_are_not_modelled(monkeypatch):
    sampler = PPBOSampler(n_startup_trials=2, seed=0, **FAST)
    study = optuna.create_study(sampler=sampler)

    def objective(trial):
        x = trial.suggest_float("x", -5.0, 5.0)
        trial.suggest_float("y", -5.0, 5.0)
        if trial.number in (0, 2):
            raise RuntimeError("simulated crash")
        if trial.number == 3:
            return float("nan")
        if trial.number == 4:
            raise optuna.TrialPruned()
        return (x - 0.5) ** 2

    study.optimize(objective, n_trials=6, catch=(RuntimeError,))
    states = [t.state.name for t in study.trials]
    assert states == ["FAIL", "COMPLETE", "FAIL", "FAIL", "PRUNED", "COMPLETE"]
    # two completed trials: the next one is modelled on exactly those two
    seen = {}

    def spy(key, surrogate, inference, acquisition, data, **options):
        seen["X"] = np.asarray(data.X[: data.n])
        seen["pending"] = options["pending"]
        return real_step(key, surrogate, inference, acquisition, data, **options)

    real_step = ppbo_optuna.step
    monkeypatch.setattr(ppbo_optuna, "step", spy)
    study.optimize(objective, n_trials=1)
    expected = [
        [(study.trials[i].params[n] + 5.0) / 10.0 for n in "xy"] for i in (1, 5)
    ]
    np.testing.assert_allclose(seen["X"], expected, rtol=0, atol=1e-12)
    assert seen["pending"] is None


def test_running_trials_are_pending_points(monkeypatch):
    sampler = PPBOSampler(n_startup_trials=2, seed=0, **FAST)
    study = optuna.create_study(sampler=sampler)
    study.optimize(quadratic, n_trials=2)
    seen = []
    real_step = ppbo_optuna.step

    def spy(key, surrogate, inference, acquisition, data, **options):
        seen.append(options["pending"])
        return real_step(key, surrogate, inference, acquisition, data, **options)

    monkeypatch.setattr(ppbo_optuna, "step", spy)
    first = study.ask()  # RUNNING; its relative parameters are already drawn
    x0, y0 = first.suggest_float("x", -5.0, 5.0), first.suggest_float("y", -5.0, 5.0)
    second = study.ask()
    second.suggest_float("x", -5.0, 5.0)
    assert seen[0] is None
    np.testing.assert_allclose(seen[1], [[(x0 + 5) / 10, (y0 + 5) / 10]], atol=1e-12)
    study.tell(first, 1.0)
    study.tell(second, state=optuna.trial.TrialState.FAIL)


@pytest.mark.slow
def test_sqlite_study_beats_random_search_on_a_quadratic(tmp_path):
    # 12 trials, 4 of them random, in an RDB (SQLite) study; the same budget of
    # random search is the reference, averaged over two seeds.
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    best, reference = [], []
    for seed in (0, 1):
        sampler = PPBOSampler(n_startup_trials=4, seed=seed, **FAST)
        study = optuna.create_study(
            sampler=sampler, storage=storage, study_name=f"ppbo-{seed}"
        )
        study.optimize(quadratic, n_trials=12)
        loaded = optuna.load_study(study_name=f"ppbo-{seed}", storage=storage)
        assert len(loaded.trials) == 12
        assert loaded.best_value == study.best_value
        random = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed))
        random.optimize(quadratic, n_trials=12)
        best.append(study.best_value)
        reference.append(random.best_value)
    assert np.mean(best) < np.mean(reference), (best, reference)
