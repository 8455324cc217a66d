"""benchmarks/preferential.py: the drifting experts and the per-budget summary.

No campaign is run: the problems are checked against their known minimisers and
the summary against hand-made records.
"""

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "preferential.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("preferential_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _unit(problem, x):
    lo, hi = problem.bounds[:, 0], problem.bounds[:, 1]
    return (np.asarray(x, dtype=np.float64) - lo) / (hi - lo)


@pytest.mark.parametrize(
    ("name", "minimiser"),
    [
        ("branin_drift", (math.pi, 2.275)),  # the minimiser that stays in the box
        ("six_hump_camel_drift", (0.0898, -0.7126)),
    ],
)
def test_drifting_minimiser_moves_by_the_shift(script, name, minimiser):
    problem = script.Simulated(name)
    shift = np.asarray(script.DRIFTS[name])
    u0 = _unit(problem, minimiser)
    for tau in (0.0, 0.4, 1.0):
        moved = u0 + tau * shift
        assert np.all((moved > 0) & (moved < 1))
        value = problem.value(moved[None], tau)[0]
        assert value == pytest.approx(problem.f_star, abs=1e-4)
        assert problem.utility(moved[None], tau)[0] == pytest.approx(0.0, abs=1e-6)
    # nothing in the box is below the known minimum at the end (grid search)
    g = np.linspace(0.0, 1.0, 201)
    grid = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    assert problem.value(grid, 1.0).min() >= problem.f_star - 1e-9
    # the start's minimiser is no longer optimal at the end
    assert problem.utility(u0[None], 1.0)[0] < -0.01


def test_static_problem_ignores_time(script):
    problem = script.Simulated("branin")
    U = np.random.default_rng(0).random((5, 2))
    assert np.array_equal(problem.value(U, 0.0), problem.value(U, 1.0))


def test_summary_keeps_budgets_apart(script):
    def record(comparisons, regret):
        return {
            "problem": "forrester",
            "level": "medium",
            "arm": "eubo",
            "comparisons": comparisons,
            "regret": regret,
            "latent_scale_ratio": 1.0,
            "seconds_per_comparison": 0.5,
        }

    rows = script.summarise([record(10, 0.5), record(10, 0.3), record(30, 0.1)])["rows"]
    assert [(r["comparisons"], r["runs"], r["median_regret"]) for r in rows] == [
        (10, 2, 0.4),
        (30, 1, 0.1),
    ]
