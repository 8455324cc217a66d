"""Property tests: random ask/tell/fail/abandon sequences with hostile values.

Whatever the sequence, the Optimizer raises only its documented errors and the
storage stays consistent: trial numbers 0..n-1 without gaps, every state valid,
values only on COMPLETE trials, every told value kept exactly as told.
"""

import math
import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ppbo
from ppbo import CampaignWarning
from ppbo.campaign.trials import complete_data

SPACE = ppbo.Space(
    {
        "x": ppbo.Real(0.0, 1.0),
        "n": ppbo.Integer(1, 3),
        "c": ppbo.Categorical(["a", "b"]),
    }
)
PARAMS = {
    "lengthscale": [0.3, 0.5, 0.5, 0.5],
    "outputscale": 1.0,
    "noise": 1e-3,
    "mean": 0.0,
}

hostile = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, -1e-300, 1e300, -1e308, 1e-12, 1e12]),
    st.integers(-(10**6), 10**6),
)
operation = st.one_of(
    st.tuples(st.just("ask"), st.integers(1, 3)),
    st.tuples(st.just("tell"), st.integers(0, 30), hostile),
    st.tuples(st.just("fail"), st.integers(0, 30)),
    st.tuples(st.just("abandon"), st.integers(0, 30)),
    st.tuples(
        st.just("add"),
        st.floats(-0.5, 1.5, allow_nan=False),
        st.integers(0, 4),
        st.sampled_from(["a", "b", "z"]),
        hostile,
    ),
)


def _check_consistent(opt, told):
    trials = opt.get_trials()
    assert [t.number for t in trials] == list(range(len(trials)))
    for t in trials:
        assert t.state in ("RUNNING", "COMPLETE", "FAILED", "ABANDONED")
        assert SPACE.validate(t.params) == t.params
        if t.state == "COMPLETE":
            assert t.value is not None and not math.isnan(t.value)
            assert t.value == told[t.number]
        else:
            assert t.value is None
        assert (t.finished is None) == (t.state == "RUNNING")
    for number, value in told.items():
        if isinstance(value, float) and math.isnan(value):
            assert trials[number].state == "FAILED"


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(st.lists(operation, max_size=12))
def test_random_sequences_keep_storage_consistent(operations):
    opt = ppbo.Optimizer(
        SPACE,
        inference=ppbo.Fixed(PARAMS),
        n_initial=2,
        optimizer_options={"num_raw": 16, "num_restarts": 1, "max_iterations": 3},
    )
    told = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CampaignWarning)
        for op in operations:
            kind, *args = op
            trials = opt.get_trials()
            known = {t.number: t for t in trials}
            try:
                if kind == "ask":
                    opt.ask(args[0])
                elif kind == "tell":
                    trial = opt.tell(args[0], args[1])
                    told[trial.number] = float(args[1])
                elif kind == "fail":
                    opt.tell(args[0], failed=True)
                elif kind == "abandon":
                    opt.abandon(args[0])
                else:
                    x, n, c, value = args
                    trial = opt.add({"x": x, "n": n, "c": c}, value)
                    told[trial.number] = float(value)
            except KeyError as error:
                assert args[0] not in known, error
            except ValueError as error:
                message = str(error)
                if kind in ("tell", "fail", "abandon"):
                    assert known[args[0]].state != "RUNNING", message
                    assert f"trial {args[0]} is already" in message
                else:
                    assert kind == "add", message
                    x, n, c, _ = args
                    assert not (0 <= x <= 1 and 1 <= n <= 3 and c in "ab"), message
                    assert "parameter" in message
            _check_consistent(opt, told)
    data, _ = complete_data(opt.get_trials(), opt.space, opt.direction, False)
    if data is not None:
        _, y, _ = data.unpadded()
        assert np.all(np.isfinite(y))
