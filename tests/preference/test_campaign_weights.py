"""PreferenceOptimizer: the weighted-penalty strategy and the NUTS path."""

import math

import numpy as np
import pytest
from _preference_helpers import answer, make

import ppbo

DRIFT = {"anchor_strategy": "weighted_penalty", "strategy_options": {"decay": 0.8}}


def _play(opts, rounds):
    for _ in range(rounds):
        for opt in opts:
            pair = opt.ask()
            opt.tell(pair, answer(pair))


def test_weighted_penalty_weights_by_age_and_resumes_exactly(tmp_path, compile_counter):
    path = str(tmp_path / "drift.db")
    straight = make(**DRIFT)
    interrupted = make(storage=path, name="drift", **DRIFT)
    for opt in (straight, interrupted):
        opt.add_anchor({"x": 1.0}, -0.25)
    _play((straight, interrupted), 3)
    for opt in (straight, interrupted):
        opt.add_anchor({"x": -1.0}, -2.25)
    _play((straight, interrupted), 1)
    del interrupted
    reloaded = ppbo.PreferenceOptimizer.load(path, "drift")
    assert reloaded.config["strategy_options"] == {"decay": 0.8}
    assert reloaded.config == straight.config
    a, b = straight.ask(), reloaded.ask()
    assert (a.id, a.a, a.b, a.origin) == (b.id, b.a, b.b, b.origin)

    # Now 5 pairs exist (the last RUNNING): duel k (told pairs 0..3) has age
    # 5 - k; the anchors were added after 0 and 3 pairs.
    data = reloaded.fit().data
    np.testing.assert_allclose(
        np.asarray(data.duel_weight)[: data.num_duels],
        [0.8 ** (5 - k) for k in range(4)],
        rtol=1e-15,
    )
    rows = np.asarray(data.anchor)
    np.testing.assert_allclose(
        sorted(np.asarray(data.weight)[rows]), [0.8**5, 0.8**2], rtol=1e-15
    )
    # the weights are data: a new duel in the same buckets (12 rows -> 16, 5
    # duels -> 8) changes every weight and compiles nothing
    straight.tell(a, answer(a))
    with compile_counter.measure():
        straight.ask()
    assert compile_counter.count == 0


def test_weighted_penalty_options_are_checked():
    for decay in (0.0, 1.5, math.nan, "0.5", True):
        with pytest.raises(ValueError, match=r"strategy_options\['decay'\]"):
            make(anchor_strategy="weighted_penalty", strategy_options={"decay": decay})
    with pytest.raises(ValueError, match=r"strategy_options.*'decay'"):
        make(anchor_strategy="weighted_penalty", strategy_options={"window": 3})
    opt = make(anchor_strategy="weighted_penalty", strategy_options={"decay": 1})
    assert opt.config["strategy_options"] == {"decay": 1.0}


@pytest.mark.slow
def test_nuts_campaign_fits_asks_and_resumes(tmp_path):
    path = str(tmp_path / "nuts.db")
    options = {"inference": "nuts", "num_samples": 4, **DRIFT}
    straight = make(**options)
    interrupted = make(storage=path, name="bayes", **options)
    for opt in (straight, interrupted):
        opt.add_anchor({"x": 1.0}, -0.25)
    _play((straight, interrupted), 3)
    posterior = straight.fit()
    assert posterior.method == "NUTS"
    assert posterior.samples["latent"].shape == (4, posterior.data.capacity)
    assert np.isfinite(np.asarray(posterior.samples["outputscale"])).all()
    model_pairs = [p for p in straight.get_pairs() if p.origin != "design"]
    assert model_pairs, "no pair came from the fitted model"
    for p in straight.get_pairs():
        assert all(-2.0 <= v <= 2.0 for v in (p.a["x"], p.b["x"]))
    del interrupted
    reloaded = ppbo.PreferenceOptimizer.load(path, "bayes")
    a, b = straight.ask(), reloaded.ask()
    assert (a.id, a.a, a.b, a.origin) == (b.id, b.a, b.b, b.origin)
