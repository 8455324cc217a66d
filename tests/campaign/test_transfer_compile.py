"""A campaign with source tasks compiles once per capacity bucket.

Every ask of a transfer campaign refits its surrogate to the sources' rows and the
target's trials. The dataset keeps its capacity while the target grows inside a
bucket, so asks after the first in a bucket must reuse the compiled fit, the
compiled predictions and the compiled acquisition optimiser: a shape, a Python
float or a rebuilt surrogate that changed per ask would recompile and show up as
backend compilations here (the count is the reference; no timing is asserted).
"""

import warnings

import numpy as np
import pytest

import ppbo
from ppbo.data import bucket_capacity

SPACE = {"x": ppbo.Real(0.0, 10.0)}
FAST = {"num_raw": 64, "num_restarts": 2, "max_iterations": 20}


def _f(x, shift):
    return x * np.sin(x + np.pi + shift) + x / 10.0


def _sources():
    rng = np.random.default_rng(7)
    out = []
    for k, n in enumerate((9, 12)):
        X = rng.uniform(0.0, 10.0, (n, 1))
        out.append(ppbo.Source(f"s{k}", X, _f(X[:, 0], np.pi * (k + 1) / 12)))
    return out


@pytest.mark.parametrize(
    "surrogate, inference",
    [
        ({"name": "env_gp", "variant": "mode"}, ppbo.MAP(num_restarts=2)),
        (
            {"name": "env_gp", "variant": "bayes"},
            ppbo.NUTS(num_warmup=8, num_samples=8, num_chains=1),
        ),
        # every source in every fit (Diff-GP's default with several is the bandit)
        (
            {"name": "diff_gp", "source_selection": "all"},
            ppbo.MAP(num_restarts=2),
        ),
        # the bandit also fits a GP to each source alone at every ask (its rewards)
        (
            {"name": "env_gp", "variant": "mode", "source_selection": "bandit"},
            ppbo.MAP(num_restarts=2),
        ),
    ],
    ids=["env_gp-mode-map", "env_gp-bayes-nuts", "diff_gp-map", "bandit-env_gp-map"],
)
def test_asks_inside_a_bucket_do_not_compile(surrogate, inference, compile_counter):
    surrogate = dict(surrogate)
    options = {"source_selection": surrogate.pop("source_selection", None)}
    n_source = 9 + 12
    n_initial = 3
    asks = 4
    # every target size of the measured asks lies in the first ask's bucket
    capacities = {
        bucket_capacity(n_source + n_initial + i, minimum=32) for i in range(asks)
    }
    assert len(capacities) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ppbo.DiagnosticWarning)
        opt = ppbo.Optimizer(
            SPACE,
            surrogate=surrogate,
            inference=inference,
            n_initial=n_initial,
            seed=3,
            optimizer_options=FAST,
            sources=_sources(),
            **options,
        )
        # the design, the first model ask, then the first warm-started one (a
        # warm NUTS refit compiles its shorter-warm-up program once)
        for _ in range(n_initial + 2):
            trial = opt.ask()
            opt.tell(trial, float(_f(trial.params["x"], 0.0)))
        assert trial.origin == "model"
        with compile_counter.measure():
            for _ in range(asks - 2):
                trial = opt.ask()
                opt.tell(trial, float(_f(trial.params["x"], 0.0)))
                assert trial.origin == "model"
    assert compile_counter.count == 0
