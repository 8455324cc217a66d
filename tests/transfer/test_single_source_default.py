"""Diff-GP, a single-source model, chooses one source per ask by default.

References: the stored configuration (what a resumed campaign uses), the
single-source surrogate the campaign fits (its ``num_sources``), the arms the
trials record, and the uninterrupted campaign (exact resume).
"""

import numpy as np
import pytest

import ppbo
from ppbo.storage import SQLiteStorage

SPACE = {"x": ppbo.Real(0.0, 10.0)}
MAP = ppbo.MAP(num_restarts=2, max_iterations=50)
FAST = {"num_raw": 64, "num_restarts": 2, "max_iterations": 20}


def f(x, shift):
    return x * np.sin(x + np.pi + shift) + x / 10.0


def sources(count):
    rng = np.random.default_rng(6)
    out = []
    for k in range(count):
        X = rng.uniform(0.0, 10.0, (8, 1))
        out.append(ppbo.Source(f"s{k}", X, f(X[:, 0], np.pi * k / 6)))
    return out


def make(count, storage=None, name=None, acquisition="ei", **options):
    return ppbo.Optimizer(
        SPACE,
        surrogate="diff_gp",
        inference=MAP,
        acquisition=acquisition,
        n_initial=3,
        seed=4,
        storage=storage,
        name=name,
        optimizer_options=FAST,
        sources=sources(count),
        **options,
    )


@pytest.mark.parametrize(
    "count, options, selection, num_sources",
    [
        (2, {}, "bandit", 1),
        (2, {"source_selection": "all"}, None, 2),
        (1, {}, None, 1),
        (2, {"source_selection_options": {"gamma": 0.3}}, "bandit", 1),
    ],
    ids=["several-sources", "all-asked", "one-source", "gamma-given"],
)
def test_diff_gp_selects_one_source_unless_told_otherwise(
    count, options, selection, num_sources
):
    opt = make(count, **options)
    assert opt.config["transfer"]["source_selection"] == selection
    for _ in range(4):
        trial = opt.ask()
        opt.tell(trial, float(f(trial.params["x"], 0.0)))
    assert opt.posterior.surrogate.extras["num_sources"] == num_sources
    model = [t for t in opt.get_trials() if t.origin == "model"]
    assert len(model) == 1
    assert ("source_arm" in model[0].extra) == (selection == "bandit")
    if "source_selection_options" in options:
        assert opt.config["transfer"]["gamma"] == 0.3


def test_other_transfer_models_keep_every_source():
    opt = ppbo.Optimizer(SPACE, surrogate="env_gp", inference=MAP, sources=sources(2))
    assert opt.config["transfer"]["source_selection"] is None


@pytest.mark.parametrize("acquisition", ["ei", "ucb"])
def test_a_diff_gp_campaign_resumes_exactly(
    tmp_path, acquisition, interrupted_campaign
):
    def run(storage, name, steps, stop_at=None):
        return interrupted_campaign(
            lambda: make(2, storage, name, acquisition),
            lambda: ppbo.Optimizer.load(storage, name),
            lambda t: float(f(t.params["x"], 0.0)),
            steps,
            stop_at,
        )

    whole = run(SQLiteStorage(tmp_path / "a.db"), "a", 6)
    resumed = run(SQLiteStorage(tmp_path / "b.db"), "b", 7, stop_at=5)
    assert [t.params for t in whole] == [t.params for t in resumed]
    arms = [t.extra.get("source_arm") for t in resumed if t.origin == "model"]
    assert len(arms) == 3 and None not in arms
    assert arms == [t.extra.get("source_arm") for t in whole if t.origin == "model"]


def test_reopening_with_another_source_selection_is_a_clear_error(tmp_path):
    path = str(tmp_path / "c.db")
    make(2, path, "every", source_selection="all")
    with pytest.raises(ValueError, match="different source_selection: stored 'all'"):
        make(2, path, "every", load_if_exists=True)
    again = make(2, path, "every", load_if_exists=True, source_selection="all")
    assert again.config["transfer"]["source_selection"] is None
    make(2, path, "bandit")
    assert make(2, path, "bandit", load_if_exists=True).config["transfer"] == {
        "source_selection": "bandit",
        "gamma": 0.5,
        "meta_features": None,
    }
