"""PreferenceOptimizer: pair ask/tell, ties and skips, anchors, bad input, resume."""

import math
import sqlite3

import numpy as np
import pytest
from _preference_helpers import answer, make, utility

import ppbo
from ppbo.storage import SCHEMA_VERSION, SQLiteStorage


def test_pair_round_trip_in_user_units():
    opt = make()
    for expected_id, origin in ((0, "design"), (1, "design"), (2, "eubo")):
        pair = opt.ask()
        assert (pair.id, pair.origin, pair.state) == (expected_id, origin, "RUNNING")
        assert set(pair.a) == set(pair.b) == {"x"}
        assert -2.0 <= pair.a["x"] <= 2.0 and -2.0 <= pair.b["x"] <= 2.0
        assert pair.a != pair.b
        told = opt.tell(pair.id, answer(pair))
        assert (told.state, told.winner) == ("COMPLETE", answer(pair))
    stored = opt.get_pairs()
    assert [p.winner for p in stored] == [answer(p) for p in stored]
    # the model sees one duel per told pair, winner first
    data = opt.fit().data
    assert data.num_duels == 3
    X = np.asarray(data.X)[: data.n, 0] * 4.0 - 2.0  # unit cube -> user units
    duels = np.asarray(data.duels)[:3]
    for p, (w, loser) in zip(stored, duels, strict=True):
        win, lose = (p.a, p.b) if p.winner == "a" else (p.b, p.a)
        assert X[w] == pytest.approx(win["x"]) and X[loser] == pytest.approx(lose["x"])


def test_ties_and_skips_are_stored_and_left_out_of_the_likelihood():
    opt = make()
    outcomes = ["a", "tie", "skip", "b"]
    for winner in outcomes:
        opt.tell(opt.ask(), winner)
    assert [p.winner for p in opt.get_pairs()] == outcomes
    assert opt.fit().data.num_duels == 2


@pytest.mark.slow
@pytest.mark.parametrize("acquisition", ["dueling_thompson", "anpei"])
def test_other_acquisitions_ask_valid_pairs(acquisition):
    opt = make(acquisition=acquisition)
    opt.add_anchor({"x": 1.5}, -1.0)
    for _ in range(3):
        pair = opt.ask()
        assert pair.a != pair.b
        opt.tell(pair, answer(pair))
    assert pair.origin == acquisition


def test_anpei_without_anchors_falls_back_to_eubo():
    opt = make(acquisition="anpei")
    for _ in range(3):
        pair = opt.ask()
        opt.tell(pair, answer(pair))
    assert pair.origin == "eubo (no anchors yet)"


def test_bad_input_gets_clear_errors():
    opt = make()
    pair = opt.ask()
    with pytest.raises(ValueError, match="winner must be one of.*got winner='c'"):
        opt.tell(pair, "c")
    with pytest.raises(ValueError, match="winner"):
        opt.tell(pair, pair.a)
    with pytest.raises(KeyError, match="pair 99 does not exist"):
        opt.tell(99, "a")
    with pytest.raises(ValueError, match="pair must be a Pair or an integer"):
        opt.tell("0", "a")
    forged = ppbo.storage.Pair(pair.id, {"x": 0.0}, {"x": 1.0})
    with pytest.raises(ValueError, match="compares other points"):
        opt.tell(forged, "a")
    opt.tell(pair, "a")
    with pytest.raises(ValueError, match="already told"):
        opt.tell(pair, "b")
    with pytest.raises(ValueError, match="anchor value must be finite, got value=nan"):
        opt.add_anchor({"x": 0.0}, math.nan)
    with pytest.raises(ValueError, match="anchor value must be finite"):
        opt.add_anchor({"x": 0.0}, np.inf)
    with pytest.raises(ValueError, match="x"):
        opt.add_anchor({"x": 5.0}, 1.0)
    assert opt.get_anchors() == []
    with pytest.raises(ValueError, match="acquisition must be one of"):
        make(acquisition="qnei")
    with pytest.raises(ValueError, match=r"strategy_options\['decay'\]"):
        make(anchor_strategy="weighted_penalty", strategy_options={"decay": 0.0})
    with pytest.raises(ValueError, match=r"strategy_options.*'window'"):
        make(anchor_strategy="sliding_window", strategy_options={"horizon": 3})


def test_resume_in_process_asks_the_same_pair(tmp_path):
    path = str(tmp_path / "p.db")
    straight = make()
    straight.add_anchor({"x": 1.0}, -0.25)
    interrupted = make(storage=path, name="taste")
    interrupted.add_anchor({"x": 1.0}, -0.25)
    for _ in range(3):
        for opt in (straight, interrupted):
            pair = opt.ask()
            opt.tell(pair, answer(pair))
    del interrupted
    reloaded = ppbo.PreferenceOptimizer.load(path, "taste")
    assert reloaded.config == straight.config
    a, b = straight.ask(), reloaded.ask()
    assert (a.id, a.a, a.b, a.origin) == (b.id, b.a, b.b, b.origin)
    # load_if_exists with the same configuration also continues it
    again = make(storage=path, name="taste", load_if_exists=True)
    assert len(again.get_pairs()) == 4
    with pytest.raises(ValueError, match="different configuration"):
        make(storage=path, name="taste", load_if_exists=True, beta=0.9)
    with pytest.raises(ValueError, match="not a preference campaign"):
        ppbo.Optimizer({"x": ppbo.Real(0.0, 1.0)}, storage=path, name="plain")
        ppbo.PreferenceOptimizer.load(path, "plain")


@pytest.mark.slow
def test_anchor_budget_replaces_the_least_promising_anchor():
    opt = make(anchor_budget=2)
    first = opt.add_anchor({"x": -2.0}, utility({"x": -2.0}))
    second = opt.add_anchor({"x": 1.8}, utility({"x": 1.8}))
    for _ in range(2):
        pair = opt.ask()
        opt.tell(pair, answer(pair))
    # x = 0.5 is the maximiser; x = -2 the worst anchor by far
    best = opt.add_anchor({"x": 0.5}, 0.0)
    assert best.active and best.replaced == first.id
    active = {a.id for a in opt.get_anchors() if a.active}
    assert active == {second.id, best.id}
    worse = opt.add_anchor({"x": -1.9}, utility({"x": -1.9}))
    assert not worse.active and worse.replaced is None
    assert opt.fit().data.anchor.sum() == 2


def test_sliding_window_drops_old_duels():
    opt = make(anchor_strategy="sliding_window", strategy_options={"window": 2})
    for _ in range(4):
        pair = opt.ask()
        opt.tell(pair, answer(pair))
    assert opt.fit().data.num_duels == 2


def test_recommend_is_the_best_evaluated_point():
    opt = make()
    for _ in range(3):
        pair = opt.ask()
        opt.tell(pair, answer(pair))
    posterior = opt.fit()
    X = np.asarray(posterior.data.X)[: posterior.data.n]
    mean = np.asarray(posterior.predict_marginal(X)[0])
    recommended = opt.recommend()
    assert recommended["params"]["x"] == pytest.approx(4.0 * X[np.argmax(mean), 0] - 2)
    assert recommended["utility"] == pytest.approx(mean.max())
    points = [p.a["x"] for p in opt.get_pairs()] + [p.b["x"] for p in opt.get_pairs()]
    assert min(abs(recommended["params"]["x"] - x) for x in points) < 1e-9


def test_one_compilation_per_bucket():
    import jax

    opt = make()
    for _ in range(2):
        pair = opt.ask()
        opt.tell(pair, answer(pair))
    pair = opt.ask()  # first model-based ask: compiles for this bucket
    opt.tell(pair, answer(pair))
    with jax.log_compiles():
        import logging

        records = []

        class Catch(logging.Handler):
            def emit(self, record):
                records.append(record.getMessage())

        handler = Catch()
        logging.getLogger("jax").addHandler(handler)
        try:
            opt.ask()  # same row and duel buckets (4 rows -> 8, 3 duels -> 8)
        finally:
            logging.getLogger("jax").removeHandler(handler)
    compiled = [m for m in records if "Compiling" in m or "compiling" in m]
    assert compiled == []


def test_version_1_database_is_migrated(tmp_path):
    path = tmp_path / "old.db"
    old = SQLiteStorage(path)
    campaign = old.create_campaign("legacy", {"seed": 0})
    old.add_trials(campaign.id, [{"params": {"x": 0.1}}])
    old.close()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE pairs")
    conn.execute("UPDATE schema_version SET version = 1")
    conn.commit()
    conn.close()
    storage = SQLiteStorage(path)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT version FROM schema_version").fetchall() == [
        (SCHEMA_VERSION,)
    ]
    conn.close()
    assert [t.params for t in storage.get_trials(campaign.id)] == [{"x": 0.1}]
    assert storage.get_pairs(campaign.id) == []


def test_an_anchor_at_a_duel_point_shares_its_row():
    opt = make(n_initial=1)
    pair = opt.ask()
    opt.tell(pair, "a")
    opt.add_anchor(pair.a, 1.0)
    opt.add_anchor(pair.a, 1.2)  # a repeated measurement: its own row
    data = opt.fit().data
    assert data.n == 3
    assert np.asarray(data.anchor)[:3].tolist() == [True, False, True]
    assert np.asarray(data.y)[[0, 2]].tolist() == pytest.approx([-1.0, 1.0])


def test_joint_evidence_campaign_asks_and_one_stored_without_it_resumes(tmp_path):
    import json

    path = tmp_path / "prefs.db"
    opt = make(storage=str(path), name="joint", evidence="joint")
    opt.add_anchor({"x": 0.2}, 1.0)
    opt.add_anchor({"x": 0.8}, -1.0)
    for _ in range(3):
        pair = opt.ask()
        opt.tell(pair, answer(pair))
    assert opt.fit().surrogate.name.endswith("evidence=joint)")
    # a campaign stored before the key existed was run with the separate criterion
    make(storage=str(path), name="old")
    conn = sqlite3.connect(path)
    (config,) = conn.execute(
        "SELECT config FROM campaigns WHERE name = 'old'"
    ).fetchone()
    config = json.loads(config)
    del config["evidence"]
    conn.execute(
        "UPDATE campaigns SET config = ? WHERE name = 'old'", (json.dumps(config),)
    )
    conn.commit()
    conn.close()
    again = make(storage=str(path), name="old", load_if_exists=True)
    assert again.config["evidence"] == "separate"
    assert ppbo.PreferenceOptimizer.load(str(path), "old").config["evidence"] == (
        "separate"
    )
    with pytest.raises(ValueError, match="evidence must be one of .* got 'both'"):
        make(evidence="both")
