"""PPBOSearch: Tune's Searcher contract, ppbo's storage, and a real Ray Tune run."""

import json
import math
import os
import signal
import sys

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed")

# Starting Ray forks helper processes from this multithreaded (JAX) process; JAX
# warns at every fork, and the warning surfaces as an unraisable exception.
pytestmark = [
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function _at_fork"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
]
tune = pytest.importorskip("ray.tune")

import ppbo  # noqa: E402
from ppbo.integrations.ray_tune import PPBOSearch, to_space  # noqa: E402
from ppbo.storage import SQLiteStorage  # noqa: E402

FAST = {
    "inference": "map",
    "n_initial": 3,
    "seed": 0,
    "optimizer_options": {"num_raw": 64, "num_restarts": 2, "max_iterations": 30},
}


def test_to_space_maps_tune_domains():
    space = to_space(
        {
            "lr": tune.loguniform(1e-4, 1e-1),
            "drop": tune.uniform(0.0, 0.5),
            "net": {"units": tune.lograndint(8, 65), "act": tune.choice(["a", "b"])},
            "epochs": 3,
        }
    )
    assert space == ppbo.Space(
        {
            "lr": ppbo.Real(1e-4, 1e-1, log=True),
            "drop": ppbo.Real(0.0, 0.5),
            "net/units": ppbo.Integer(8, 64, log=True),
            "net/act": ppbo.Categorical(["a", "b"]),
        }
    )
    with pytest.raises(ValueError, match="'q'"):
        to_space({"q": tune.quniform(0.0, 1.0, 0.1)})
    with pytest.raises(ValueError, match="'g'"):
        to_space({"g": tune.grid_search([1, 2])})
    with pytest.raises(ValueError, match="mode"):
        PPBOSearch(mode="minimise")


def test_suggest_and_complete_without_a_cluster(tmp_path):
    space = {"x": tune.uniform(-1.0, 1.0), "nested": {"c": 7}}
    search = PPBOSearch(space, "loss", "min", storage=tmp_path / "c.db", **FAST)
    configs = {tid: search.suggest(tid) for tid in "abcde"}
    assert configs["a"]["nested"] == {"c": 7}
    search.on_trial_complete("a", {"loss": 1.0})
    search.on_trial_complete("b", error=True)
    search.on_trial_complete("c", {"loss": float("nan")})
    search.on_trial_complete("d", {"other": 2.0})
    search.on_trial_complete("e", {"loss": configs["e"]["x"] ** 2})
    search.on_trial_complete("unknown", {"loss": 0.0})
    trials = search.optimizer.get_trials()
    assert [t.state for t in trials] == [
        "COMPLETE",
        "FAILED",
        "FAILED",
        "FAILED",
        "COMPLETE",
    ]
    assert [t.params["x"] for t in trials] == [configs[t]["x"] for t in "abcde"]
    assert "raised" in trials[1].message and "nan" in trials[2].message
    assert "'loss'" in trials[3].message
    # a second searcher on the same file sees exactly what was told
    stored = SQLiteStorage(tmp_path / "c.db").get_trials(
        SQLiteStorage(tmp_path / "c.db").get_campaign(search.optimizer.name).id
    )
    assert [(t.state, t.value) for t in stored] == [(t.state, t.value) for t in trials]


def test_running_trials_are_pending_and_save_restore_round_trips(tmp_path):
    # In memory: save copies the campaign next to the checkpoint, as JSON + SQLite.
    search = PPBOSearch(
        {"x": ppbo.Real(0.0, 1.0), "y": ppbo.Real(0.0, 1.0)}, "score", "max", **FAST
    )
    for tid in "abc":
        config = search.suggest(tid)
        search.on_trial_complete(tid, {"score": -((config["x"] - 0.3) ** 2)})
    busy = search.suggest("d")  # RUNNING while "e" is asked
    search.suggest("e")
    posterior = search.optimizer.posterior
    # the fourth and fifth asks conditioned on... the pending "d": the ask of "e"
    # is model-based and "d" is RUNNING in the storage
    running = search.optimizer.get_trials("RUNNING")
    assert [t.params for t in running][0] == busy
    assert posterior is not None
    path = tmp_path / "searcher-state-x.pkl"
    search.save(str(path))
    state = json.loads(path.read_text())
    assert state["trials"] == {"d": 3, "e": 4}
    assert os.path.exists(state["storage"])
    restored = PPBOSearch(**FAST)
    restored.restore(str(path))
    restored.on_trial_complete("d", {"score": -1.0})
    restored.on_trial_complete("e", error=True)
    states = [t.state for t in restored.optimizer.get_trials()]
    assert states == ["COMPLETE"] * 4 + ["FAILED"]
    # an uninterrupted searcher and the restored one make the same next ask
    search.on_trial_complete("d", {"score": -1.0})
    search.on_trial_complete("e", error=True)
    assert restored.suggest("f") == search.suggest("f")
    with pytest.raises(ValueError, match="not a PPBOSearch checkpoint"):
        (tmp_path / "bad.json").write_text("{}")
        restored.restore(str(tmp_path / "bad.json"))


def objective(config):
    """A cheap function of (x, y). The first trial to run kills its own Ray
    worker process mid-trial, the second reports NaN (markers in a shared folder
    decide which is first)."""
    for kind in ("kill", "nan"):
        try:
            os.close(
                os.open(os.path.join(config["folder"], kind), os.O_CREAT | os.O_EXCL)
            )
        except FileExistsError:
            continue
        if kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        tune.report({"loss": math.nan})
        return
    x, y = config["x"], config["y"]
    tune.report({"loss": (x - 0.2) ** 2 + (y + 0.4) ** 2})


@pytest.mark.slow
def test_tune_run_with_concurrency_limiter(ray_cluster, tmp_path):
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    db = tmp_path / "campaign.db"
    search = PPBOSearch(storage=db, name="tune", **FAST)
    folder = tmp_path / "markers"
    folder.mkdir()
    tuner = tune.Tuner(
        objective,
        param_space={
            "x": tune.uniform(-1.0, 1.0),
            "y": tune.uniform(-1.0, 1.0),
            "folder": str(folder),
        },
        tune_config=tune.TuneConfig(
            search_alg=tune.search.ConcurrencyLimiter(search, max_concurrent=2),
            metric="loss",
            mode="min",
            num_samples=8,
        ),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path / "results"), name="exp", verbose=0
        ),
    )
    results = tuner.fit()
    assert len(results) == 8
    assert len(results.errors) == 1  # the killed worker's trial

    trials = search.optimizer.get_trials()
    assert len(trials) == 8
    states = sorted(t.state for t in trials)
    assert states == ["COMPLETE"] * 6 + ["FAILED"] * 2
    # every completed Tune trial's metric is in ppbo's storage
    told = sorted(t.value for t in trials if t.state == "COMPLETE")
    reported = sorted(
        r.metrics["loss"]
        for r in results
        if r.error is None and np.isfinite(r.metrics.get("loss", np.nan))
    )
    np.testing.assert_allclose(told, reported, rtol=0, atol=0)
    # two at a time: some trials were asked while another was still running
    overlaps = sum(
        1
        for a, b in zip(trials, trials[1:], strict=False)
        if b.created < (a.finished or math.inf)
    )
    assert overlaps >= 1
    # Tune checkpointed the searcher as JSON naming the SQLite file; it restores
    (checkpoint,) = (tmp_path / "results" / "exp").glob("searcher-state-*.pkl")
    assert json.loads(checkpoint.read_text())["storage"] == str(db)
    again = PPBOSearch(**FAST)
    again.restore_from_dir(str(tmp_path / "results" / "exp"))
    assert [t.number for t in again.optimizer.get_trials()] == list(range(8))
