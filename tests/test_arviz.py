"""The ArviZ-facing API; CI also runs these under ArviZ 1.x (Python 3.12)."""

import warnings

import arviz as az
import jax
import numpy as np
import pytest

import ppbo
from ppbo.inference.diagnostics import arviz_major_version
from ppbo.models import gp

pytestmark = pytest.mark.arviz

RNG = np.random.default_rng(7)
X = RNG.random((10, 2))
Y = np.cos(4 * X[:, 0]) + X[:, 1]
Y = (Y - Y.mean()) / Y.std()


@pytest.fixture(scope="module")
def posterior():
    config = ppbo.NUTS(num_warmup=60, num_samples=50, num_chains=2)
    return ppbo.fit(gp.surrogate(), ppbo.Dataset(X, Y), config, jax.random.key(0))


def _group(data, name):
    if arviz_major_version() >= 1:
        return data[name].to_dataset()
    return getattr(data, name)


def test_to_arviz_groups_shapes_and_values(posterior):
    data = posterior.to_arviz()
    if arviz_major_version() >= 1:
        import xarray

        assert isinstance(data, xarray.DataTree)
    else:
        assert isinstance(data, az.InferenceData)
    post = _group(data, "posterior")
    assert post["lengthscale"].shape == (2, 50, 2)
    assert post["noise"].shape == (2, 50)
    np.testing.assert_array_equal(
        post["lengthscale"].values.reshape(100, 2), posterior.samples["lengthscale"]
    )
    stats = _group(data, "sample_stats")
    for name in ("diverging", "tree_depth", "energy", "step_size", "n_steps", "lp"):
        assert stats[name].shape == (2, 50)
    observed = _group(data, "observed_data")
    np.testing.assert_array_equal(observed["y"].values, Y)  # padding removed
    summary = az.summary(data)
    assert len(summary) >= 5


def test_diagnostics_report_and_warn(posterior):
    report = posterior.diagnostics(warn=False)
    assert set(report.rhat) == {"lengthscale", "outputscale", "noise", "mean"}
    for site in report.rhat:
        assert np.isfinite(report.rhat[site]) and report.rhat[site] > 0.9
        assert report.ess_bulk[site] > 0 and report.ess_tail[site] > 0
    assert report.num_divergences == int(np.sum(posterior.sample_stats["diverging"]))
    # 100 draws are below the ESS threshold of 100 per chain: a warning, no error
    assert any("ESS" in w for w in report.warnings)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        posterior.diagnostics()
    assert caught and all(
        issubclass(w.category, ppbo.DiagnosticWarning) for w in caught
    )


def test_diagnostics_flag_stuck_chains_and_never_crash(posterior):
    # two chains stuck at different values: R-hat must flag it
    samples = {
        "c": np.concatenate([np.full(50, 0.0), np.full(50, 5.0)])
        + 0.01 * RNG.standard_normal(100)
    }
    broken = ppbo.Posterior(
        posterior.surrogate,
        samples,
        posterior.data,
        num_chains=2,
        method="NUTS",
        sample_stats={
            "diverging": np.array([True] * 3 + [False] * 97),
            "tree_depth": np.full(100, 8),
            "max_tree_depth": np.full(100, 8),
        },
    )
    report = broken.diagnostics(warn=False)
    assert report.rhat["c"] > 1.5
    assert report.num_divergences == 3 and report.num_max_tree_depth == 100
    assert any("R-hat of 'c'" in w for w in report.warnings)
    assert any("divergent" in w for w in report.warnings)
    # degenerate inputs: constant draws, NaN, a single sample
    odd = ppbo.Posterior(
        posterior.surrogate,
        {"a": np.zeros(4), "b": np.array([np.nan, 1.0, 2.0, 3.0])},
        posterior.data,
        method="NUTS",
    )
    report = odd.diagnostics(warn=False)
    assert np.isnan(report.rhat["a"]) and np.isnan(report.rhat["b"])
    map_posterior = ppbo.fit(
        gp.surrogate(), posterior.data, ppbo.MAP(num_restarts=2), jax.random.key(0)
    )
    assert map_posterior.diagnostics().warnings == ()
    assert _group(map_posterior.to_arviz(), "posterior")["noise"].shape == (1, 1)
