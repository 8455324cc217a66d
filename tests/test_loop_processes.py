"""Campaigns across processes: SIGKILL and exact resume; concurrent workers."""

import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import ppbo
from ppbo.storage import SQLiteStorage

sys.path.insert(0, str(Path(__file__).parent))
import _campaign_worker as worker  # noqa: E402

WORKER = str(Path(__file__).parent / "_campaign_worker.py")
BUDGET = 8


def _start(db, name, *args, budget=BUDGET):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, WORKER, str(db), name, str(budget), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def _wait_for(process, line):
    for out in process.stdout:
        if out.strip() == line:
            return
    raise AssertionError(f"worker exited before printing {line!r}")


def _finish(db, name):
    """Load the campaign, tell the RUNNING trials, and run it to the budget."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = ppbo.Optimizer.load(db, name)
    running = opt.get_trials("RUNNING")
    for trial in running:
        opt.tell(trial, worker.objective(trial.params))
    while len(opt.get_trials()) < BUDGET:
        trial = opt.ask()
        opt.tell(trial, worker.objective(trial.params))
    return opt.get_trials(), running, caught


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    db = tmp_path_factory.mktemp("whole") / "c.db"
    opt = worker.optimizer(str(db), "c")
    while len(opt.get_trials()) < BUDGET:
        trial = opt.ask()
        opt.tell(trial, worker.objective(trial.params))
    return opt.get_trials()


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["after_ask", "mid_ask"])
def test_sigkill_then_resume_loses_nothing(tmp_path, uninterrupted, moment):
    db = tmp_path / "c.db"
    if moment == "after_ask":  # killed while "evaluating" trial 5
        process = _start(db, "c", "--pause-after", "5")
        _wait_for(process, "asked 5")
    else:  # killed while fitting and maximising for trial 6
        process = _start(db, "c")
        _wait_for(process, "asking 6")
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stdout.close()
    storage = SQLiteStorage(db)
    before = storage.get_trials(1)
    storage.close()
    told = [t for t in before if t.state == "COMPLETE"]
    assert len(told) >= 5  # every tell that returned is there
    trials, running, caught = _finish(db, "c")
    if moment == "after_ask":
        assert [t.number for t in running] == [5]
        assert any("RUNNING trials [5]" in str(w.message) for w in caught)
    else:
        assert running == []
    assert [t.params for t in trials] == [t.params for t in uninterrupted]
    assert [t.value for t in trials] == [t.value for t in uninterrupted]
    assert [t.state for t in trials] == ["COMPLETE"] * BUDGET


@pytest.mark.slow
def test_three_processes_share_one_campaign(tmp_path):
    db = tmp_path / "shared.db"
    worker.optimizer(str(db), "shared")  # create it once
    processes = [_start(db, "shared", "--trials", "3", budget=100) for _ in range(3)]
    for process in processes:
        process.stdout.read()
        process.stdout.close()
        assert process.wait(timeout=600) == 0
    storage = SQLiteStorage(db)
    trials = storage.get_trials(1)
    storage.close()
    assert [t.number for t in trials] == list(range(len(trials)))
    assert len(trials) == 9
    assert all(t.state == "COMPLETE" for t in trials)
    assert all(t.value == worker.objective(t.params) for t in trials)
    points = {tuple(t.params.values()) for t in trials}
    assert len(points) == len(trials)  # pending points were seen: no duplicates
