"""Shared pieces of the preference-campaign tests: a 1-D space, a simulated
expert who prefers points near x = 0.5, and a fast campaign factory."""

import ppbo

FAST = {"num_raw": 32, "num_restarts": 2, "max_iterations": 5}
SPACE = {"x": ppbo.Real(-2.0, 2.0)}


def utility(params):
    return -((params["x"] - 0.5) ** 2)


def answer(pair):
    return "a" if utility(pair.a) > utility(pair.b) else "b"


def make(**kw):
    options = dict(seed=3, n_initial=2, num_samples=8, optimizer_options=FAST)
    return ppbo.PreferenceOptimizer(SPACE, **(options | kw))
