"""The warm-start initial design from source tasks (Feurer et al. 2015, Alg. 1).

References: the design built by hand from the sources' best points in the order
of the meta-features' L1 distance to the target, and the uninterrupted campaign
(exact resume).
"""

import warnings

import numpy as np
import pytest

import ppbo
from ppbo.campaign.designs import initial_design, source_design
from ppbo.storage import SQLiteStorage

SPACE = {"x": ppbo.Real(0.0, 10.0), "z": ppbo.Real(-1.0, 1.0)}
FAST = {"num_raw": 64, "num_restarts": 2, "max_iterations": 20}
MAP = ppbo.MAP(num_restarts=2, max_iterations=50)


def _sources(meta=True):
    rng = np.random.default_rng(7)
    out = []
    for k, shift in enumerate([3.0, 0.5, 8.0]):
        X = np.column_stack([rng.uniform(0, 10, 6), rng.uniform(-1, 1, 6)])
        y = (X[:, 0] - shift) ** 2 + X[:, 1] ** 2
        features = [shift, 1.0] if meta else None
        out.append(ppbo.Source(f"s{k}", X, y, meta_features=features))
    return out


def _warm(sources, n_initial, **options):
    """A campaign whose design is the warm start from ``sources``."""
    options = {"surrogate": "multitask_gp", "seed": 2} | options
    return ppbo.Optimizer(
        SPACE,
        inference=MAP,
        initial_design="sources",
        n_initial=n_initial,
        optimizer_options=FAST,
        sources=sources,
        **options,
    )


def _points(trials):
    return [np.array([t.params["x"], t.params["z"]]) for t in trials]


def test_the_design_is_the_nearest_sources_best_points_in_turn():
    sources = _sources()
    trials = _warm(sources, 5, meta_features=[1.0, 1.0]).ask(5)
    # by hand: distances |shift - 1| order the sources s1 (0.5), s0 (3), s2 (8);
    # each source's points sorted by value (minimisation: smallest first)
    order = [1, 0, 2]
    ranked = [np.asarray(sources[k].X)[np.argsort(sources[k].y)] for k in order]
    expected = [ranked[0][0], ranked[1][0], ranked[2][0], ranked[0][1], ranked[1][1]]
    np.testing.assert_allclose(_points(trials), expected, rtol=0, atol=1e-12)
    assert [t.origin for t in trials] == ["design"] * 5


def test_without_meta_features_the_sources_keep_their_order():
    sources = _sources(meta=False)
    got = _points(_warm(sources, 3).ask(3))
    expected = [np.asarray(s.X)[np.argmin(s.y)] for s in sources]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_maximisation_takes_the_largest_source_values():
    sources = _sources(meta=False)
    got = _points(_warm(sources, 2, direction="maximize").ask(2))
    expected = [np.asarray(s.X)[np.argmax(s.y)] for s in sources[:2]]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_duplicates_are_skipped_and_the_latin_hypercube_fills_the_rest():
    X = np.array([[0.1, 0.1], [0.1, 0.1], [0.5, 0.5]])
    y = np.array([3.0, 3.0, 1.0])
    ids = np.array([0, 1, 1])
    fallback = initial_design("lhs", 4, 2, 0)
    design = source_design(X, y, ids, 4, fallback)
    np.testing.assert_array_equal(design[0], [0.1, 0.1])  # source 0's best
    np.testing.assert_array_equal(design[1], [0.5, 0.5])  # source 1's is a repeat
    np.testing.assert_array_equal(design[2:], fallback[2:])


def test_a_surrogate_without_transfer_takes_the_design_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ppbo.CampaignWarning)
        opt = _warm(_sources(meta=False), 1, surrogate=None, seed=0)
    trial = opt.ask()
    first = _sources(meta=False)[0]
    best = np.asarray(first.X)[np.argmin(first.y)]
    np.testing.assert_allclose([trial.params["x"], trial.params["z"]], best)


def test_the_warm_started_campaign_resumes_exactly(tmp_path, interrupted_campaign):
    def objective(trial):
        return float((trial.params["x"] - 1.0) ** 2 + trial.params["z"] ** 2)

    def make(storage, name):
        return _warm(
            _sources(), 3, seed=4, storage=storage, name=name, meta_features=[1.0, 1.0]
        )

    def run(path, steps, stop_at=None):
        storage = SQLiteStorage(path)
        return interrupted_campaign(
            lambda: make(storage, "c"),
            lambda: ppbo.Optimizer.load(storage, "c"),
            objective,
            steps,
            stop_at,
        )

    whole = run(tmp_path / "a.db", 5)
    resumed = run(tmp_path / "b.db", 6, stop_at=2)  # the killed ask is re-told
    assert [t.params for t in whole] == [t.params for t in resumed]


def test_the_design_needs_sources():
    with pytest.raises(ValueError, match="initial_design='sources'.*needs sources"):
        ppbo.Optimizer(SPACE, initial_design="sources")
