"""Transfer task families: formulas, relatedness, sizes and optima.

References: the closed forms of the module docstring evaluated by hand, and a
dense grid for the 1-D optima.
"""

import numpy as np
import pytest

from ppbo.benchmarks import problems
from ppbo.benchmarks.transfer_problems import FAMILIES, make


def test_every_family_draws_reproducible_tasks_of_the_right_sizes():
    for family in FAMILIES:
        task = make(family, 3)
        again = make(family, 3)
        assert len(task.sources) == 5
        for s, t in zip(task.sources, again.sources, strict=True):
            assert 20 <= len(s.y) <= 50 and s.X.shape == (len(s.y), task.dim)
            np.testing.assert_array_equal(s.y, t.y)
            lo, hi = task.bounds[:, 0], task.bounds[:, 1]
            assert np.all((s.X >= lo) & (s.X <= hi)) and np.isfinite(s.y).all()
        assert make(family, 4).sources[0].y[0] != task.sources[0].y[0]


def test_the_closed_forms():
    task = make("sin1d", 0)
    x = np.array([[1.0], [7.5]])
    np.testing.assert_allclose(
        task.objective(x), -x[:, 0] * np.sin(x[:, 0]) + x[:, 0] / 10
    )
    s = task.sources[2]  # s_3 = pi * 3 / 12
    assert s.meta_features.tolist() == [np.pi * 3 / 12]
    np.testing.assert_allclose(
        s.y, s.X[:, 0] * np.sin(s.X[:, 0] + np.pi + np.pi / 4) + s.X[:, 0] / 10
    )
    low = make("forrester", 0).sources[0]
    assert low.meta_features.tolist() == [0.5, 10.0, -5.0]
    x = low.X[:, 0]
    high = (6 * x - 2) ** 2 * np.sin(12 * x - 4)
    np.testing.assert_allclose(low.y, 0.5 * high + 10 * (x - 0.5) + 5)
    # translated and scaled: a * branin(x - delta * width), delta in +-0.1, a ~ 1
    branin = make("branin", 1)
    for source in branin.sources:
        *delta, a = source.meta_features
        assert np.all(np.abs(delta) <= 0.1) and 0.9 <= a <= 1.1
        shifted = source.X - np.asarray(delta) * np.array([15.0, 15.0])
        expected = a * problems.get("branin").noise_free(
            np.clip(shifted, [-5, 0], [10, 15])
        )
        inside = np.all((shifted >= [-5, 0]) & (shifted <= [10, 15]), axis=1)
        np.testing.assert_allclose(source.y[inside], np.asarray(expected)[inside])


@pytest.mark.parametrize("family", ["sin1d", "forrester", "negative"])
def test_the_target_optimum_is_the_minimum_of_a_dense_grid(family):
    task = make(family, 2)
    grid = np.linspace(*task.bounds[0], 200001)[:, None]
    assert task.optimum == pytest.approx(task.objective(grid).min(), abs=1e-6)
    assert task.optimum <= task.objective(grid).min() + 1e-9


def test_the_negative_family_has_an_anti_correlated_source():
    task = make("negative", 0)
    anti = task.sources[0]
    np.testing.assert_allclose(anti.y, -task.objective(anti.X))
    with pytest.raises(ValueError, match="family must be one of"):
        make("nope", 0)
