"""The Bayesian neural network: its likelihood, its forward pass and NUTS.

References: the log joint of the padded data against the unpadded one and
against scipy.stats densities written out site by site; the forward pass against
numpy; calibration on held-out points of a known 1-D function (the interval
bounds of the issue: 90% intervals cover between 80% and 98%, about four
binomial standard errors either side of 90% with 200 points). The fit uses 100
points, so that the noise level the data show (sampling sd of the estimated
noise sd about 0.1 / sqrt(200) = 7%) is close to the true one.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy import stats

import ppbo
from ppbo.models import bnn
from ppbo.storage import SQLiteStorage
from ppbo.surrogate import Capability

NOISE_SD = 0.1


def function(x):
    return np.sin(6.0 * x) + 0.5 * x


def _params(rng, sizes):
    params = {"noise": np.asarray(0.02)}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        params[f"z{i}"] = rng.normal(size=(a, b))
        params[f"b{i}"] = rng.normal(size=b)
        params[f"scale{i}"] = np.asarray(rng.uniform(0.5, 2.0))
    return params


def _forward(params, X, num_layers):
    h = X
    for i in range(num_layers):
        z = params[f"z{i}"]
        h = h @ (params[f"scale{i}"] * z / np.sqrt(z.shape[0])) + params[f"b{i}"]
        if i < num_layers - 1:
            h = np.tanh(h)
    return h[:, 0]


def test_log_joint_is_the_sum_of_the_site_densities_and_ignores_padding():
    rng = np.random.default_rng(0)
    surrogate = bnn.surrogate((5, 3))
    params = _params(rng, (2, 5, 3, 1))
    X = rng.random((7, 2))
    y = rng.normal(size=7)
    f = _forward(params, X, 3)
    reference = stats.lognorm(s=1.0, scale=np.exp(-4.0)).logpdf(params["noise"])
    reference += stats.norm(f, np.sqrt(params["noise"])).logpdf(y).sum()
    for i in range(3):
        reference += stats.halfnorm().logpdf(params[f"scale{i}"])
        reference += stats.norm().logpdf(params[f"z{i}"]).sum()
        reference += stats.norm().logpdf(params[f"b{i}"]).sum()
    for capacity in (7, 16):
        data = ppbo.Dataset(X, y, capacity=capacity)
        value, _ = log_density(surrogate.model, (data,), {}, params)
        np.testing.assert_allclose(value, reference, rtol=1e-12)
    mean, var = surrogate.predict(params, data, jnp.asarray(X))
    np.testing.assert_allclose(mean, f, rtol=1e-12)
    assert np.all(np.asarray(var) == 0.0)
    assert surrogate.capabilities == {Capability.NOISE, Capability.SAMPLE_PATHS}


@pytest.fixture(scope="module")
def posterior():
    # 2 chains of 150 draws after 300 warm-up steps: R-hat of the weights stays
    # high (hidden units permute between chains), the predictive agrees
    rng = np.random.default_rng(1)
    x = rng.random(100)
    y = function(x) + NOISE_SD * rng.normal(size=100)
    data = ppbo.Dataset(x[:, None], y)
    nuts = ppbo.NUTS(num_warmup=300, num_samples=150, num_chains=2)
    return ppbo.fit(bnn.surrogate((10,)), data, nuts, jax.random.key(2))


@pytest.mark.slow
def test_nuts_recovers_the_function_with_calibrated_intervals(posterior):
    rng = np.random.default_rng(3)
    x = rng.uniform(0.05, 0.95, 200)
    y = function(x) + NOISE_SD * rng.normal(size=200)
    f, _ = posterior.predict(x[:, None])
    noise = posterior.noise_var(x[:, None])
    # the predictive of y: each sample's network plus its own noise
    draws = np.asarray(f) + np.sqrt(np.asarray(noise)) * rng.normal(size=f.shape)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    coverage = np.mean((y >= lo) & (y <= hi))
    assert 0.80 <= coverage <= 0.98, coverage
    rmse = np.sqrt(np.mean((np.asarray(f).mean(0) - function(x)) ** 2))
    assert rmse < 0.5 * NOISE_SD  # the function, not just the data's spread


def test_sample_paths_are_the_samples_networks(posterior):
    params = jax.tree.map(lambda a: a[3], posterior.samples)
    surrogate = posterior.surrogate
    paths = surrogate.paths.draw(jax.random.key(0), params, posterior.data, None, 2)
    X = jnp.linspace(0.0, 1.0, 5)[:, None]
    values = surrogate.paths.evaluate(paths, X)
    mean = posterior.predict(np.asarray(X))[0][3]
    np.testing.assert_allclose(values, np.stack([mean, mean]), rtol=1e-12)


SMALL = bnn.surrogate((4,))
#: The registry's name for SMALL: the campaign stores it and reloads by name.
SMALL_SPEC = {"name": "bnn", "width": 4, "depth": 1}
TINY_NUTS = ppbo.NUTS(num_warmup=30, num_samples=16)
FAST = {"num_raw": 64, "num_restarts": 2, "max_iterations": 20}


def _campaign(run, storage, name, steps, stop_at=None):
    """Ask/tell ``steps`` times; with ``stop_at``, reload from storage after that
    many asks (the last ask not told) and go on."""

    def make():
        return ppbo.Optimizer(
            {"x": ppbo.Real(0.0, 1.0)},
            surrogate=SMALL_SPEC,
            inference=TINY_NUTS,
            n_initial=3,
            seed=5,
            storage=storage,
            name=name,
            optimizer_options=FAST,
        )

    def load():
        return ppbo.Optimizer.load(storage, name)  # the registry rebuilds SMALL

    def value(trial):
        return float(function(np.array(trial.params["x"])))

    return run(make, load, value, steps, stop_at)


@pytest.mark.slow
def test_campaign_resumes_with_the_uninterrupted_suggestions(
    tmp_path, interrupted_campaign
):
    run = interrupted_campaign
    with warnings.catch_warnings():
        # tiny NUTS runs do not mix; the campaign reports it, the test ignores it
        warnings.simplefilter("ignore", ppbo.DiagnosticWarning)
        whole = _campaign(run, SQLiteStorage(tmp_path / "a.db"), "a", 5)
        resumed = _campaign(run, SQLiteStorage(tmp_path / "b.db"), "b", 6, stop_at=4)
    assert [t.params for t in whole] == [t.params for t in resumed]
    assert [t.value for t in whole] == [t.value for t in resumed]
    assert [t.origin for t in resumed].count("model") == 2
