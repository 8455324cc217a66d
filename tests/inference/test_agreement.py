"""NUTS and slice sampling target the same GP hyperparameter posterior."""

import arviz as az
import jax
import numpy as np
import pytest

import ppbo
from ppbo.models import gp


@pytest.mark.slow
def test_nuts_and_slice_agree_on_gp_hyperparameters():
    rng = np.random.default_rng(11)
    X = rng.random((15, 1))
    y = np.sin(7 * X[:, 0]) + 0.1 * rng.standard_normal(15)
    data = ppbo.Dataset(X, (y - y.mean()) / y.std())
    surrogate = gp.surrogate(kernel="rbf")
    nuts = ppbo.fit(
        surrogate,
        data,
        ppbo.NUTS(num_warmup=300, num_samples=600, num_chains=2),
        jax.random.key(0),
    )
    slice_ = ppbo.fit(
        surrogate,
        data,
        ppbo.Slice(num_warmup=300, num_samples=600, num_chains=2),
        jax.random.key(1),
    )
    for site in ("lengthscale", "outputscale", "noise", "mean"):
        a = np.asarray(nuts.samples[site]).reshape(2, 600, -1)[..., 0]
        b = np.asarray(slice_.samples[site]).reshape(2, 600, -1)[..., 0]
        if site != "mean":  # positive sites are compared on the log scale
            a, b = np.log(a), np.log(b)
        ess_a, ess_b = float(az.ess(a)), float(az.ess(b))
        # Monte Carlo standard error of the difference of two posterior means
        se = np.sqrt(a.var() / ess_a + b.var() / ess_b)
        assert abs(a.mean() - b.mean()) < 4 * se, (site, a.mean(), b.mean(), se)
        # and the spreads agree (sd of the sd estimate ~ sd / sqrt(2 ess))
        se_sd = np.sqrt(a.var() / (2 * ess_a) + b.var() / (2 * ess_b))
        assert abs(a.std() - b.std()) < 4 * se_sd, (site, a.std(), b.std(), se_sd)


def test_slice_refit_in_same_bucket_does_not_compile(compile_counter):
    rng = np.random.default_rng(2)
    X, y = rng.random((11, 2)), rng.standard_normal(11)
    surrogate = gp.surrogate()
    config = ppbo.Slice(num_warmup=10, num_samples=10)
    data = ppbo.Dataset(X[:10], y[:10])
    first = ppbo.fit(surrogate, data, config, jax.random.key(0))
    with compile_counter.measure():
        second = ppbo.fit(
            surrogate, data.append(X[10], y[10]), config, jax.random.key(1), init=first
        )
    assert compile_counter.count == 0
    assert second.method == "Slice" and second.num_samples == 10
    assert second.sample_stats["num_evals"].shape == (10,)
