"""Tests for :mod:`ppbo.inference.sghmc` against targets with known moments.

Tolerances come from the Monte Carlo error: a mean estimated from draws with
effective sample size ESS (``numpyro.diagnostics.effective_sample_size``) has
standard error sd / sqrt(ESS), and every check allows four standard errors. SGHMC
has no Metropolis correction, so its discretisation bias must stay well below that:
the step sizes below are small for this reason. Keys are fixed.
"""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
import pytest  # noqa: E402
from numpyro.diagnostics import effective_sample_size  # noqa: E402
from numpyro.infer import MCMC  # noqa: E402

import ppbo  # noqa: E402
from ppbo.inference.sghmc import SGHMCKernel, minibatch  # noqa: E402
from ppbo.models import gp  # noqa: E402

# Allowed error in Monte Carlo standard errors.
Z = 4.0

MEAN = jnp.array([1.0, -2.0])
COV = jnp.array([[1.0, 0.9 * 0.5], [0.9 * 0.5, 0.25]])


def assert_expectation(draws, expected, name):
    """Check the mean of ``draws`` (chains, draws) against ``expected``."""
    draws = np.asarray(draws, dtype=np.float64)
    ess = float(effective_sample_size(draws))
    error = abs(draws.mean() - expected)
    tolerance = Z * draws.std() / np.sqrt(ess)
    print(f"{name}: {draws.mean():.4f} vs {float(expected):.4f} +- {tolerance:.4f}")
    assert error < tolerance, f"{name}: |{draws.mean()} - {expected}| >= {tolerance}"
    return ess


def gaussian_model():
    numpyro.sample("x", dist.MultivariateNormal(MEAN, COV))


def test_correlated_gaussian_moments_full_batch():
    mcmc = MCMC(
        SGHMCKernel(gaussian_model, step_size=0.05, mdecay=0.05),
        num_warmup=1000,
        num_samples=40000,
        num_chains=4,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(jax.random.key(0))
    x = mcmc.get_samples(group_by_chain=True)["x"]
    assert x.shape == (4, 40000, 2)
    r = x - MEAN
    assert_expectation(x[..., 0], MEAN[0], "E[x0]")
    assert_expectation(x[..., 1], MEAN[1], "E[x1]")
    assert_expectation(r[..., 0] ** 2, COV[0, 0], "Var[x0]")
    assert_expectation(r[..., 1] ** 2, COV[1, 1], "Var[x1]")
    assert_expectation(r[..., 0] * r[..., 1], COV[0, 1], "Cov[x0, x1]")


def test_minibatch_draws_valid_rows_and_scales():
    data = ppbo.Dataset(np.zeros((10, 1)), np.arange(10.0))
    assert data.capacity > data.n
    batch, scale = minibatch(jax.random.key(0), data, 4)
    assert batch.mask.shape == data.mask.shape
    assert int(batch.mask.sum()) == 4
    assert not bool(jnp.any(batch.mask & ~data.mask))
    assert float(scale) == 10 / 4
    everything, scale = minibatch(jax.random.key(0), data, 100)
    assert bool(jnp.all(everything.mask == data.mask)) and float(scale) == 1.0


def mean_model(data, prior_scale, noise):
    mu = numpyro.sample("mu", dist.Normal(0.0, prior_scale))
    numpyro.sample("y", dist.Normal(mu, noise).mask(data.mask), obs=data.y)


def test_minibatch_posterior_mean_matches_conjugate_closed_form():
    n, prior_scale, noise, batch_size = 200, 2.0, 1.0, 20
    rng = np.random.default_rng(0)
    y = 0.4 + noise * rng.standard_normal(n)
    data = ppbo.Dataset(rng.random((n, 1)), y)
    post_var = 1 / (1 / prior_scale**2 + n / noise**2)
    post_mean = post_var * y.sum() / noise**2
    # With B_hat = 0 the minibatch gradient noise is not compensated: it adds about
    # eta * Var(grad) / (2 mdecay) to the injected noise, with eta = eps^2 V^-1/2.
    # Here Var(grad) ~ n^2 / batch_size = 2000 and V^-1/2 ~ 0.02, so eps = 0.01
    # keeps the inflation of the spread near 4% (eps = 0.1 would quadruple it).
    # The mean of this linear-Gaussian target is not biased by that noise, but a
    # large step also adds discretisation error, which a small step keeps below
    # the Monte Carlo error.
    kernel = SGHMCKernel(mean_model, step_size=0.01, mdecay=0.05, batch_size=batch_size)
    mcmc = MCMC(
        kernel,
        num_warmup=2000,
        num_samples=20000,
        num_chains=4,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(jax.random.key(1), data, prior_scale, noise)
    mu = mcmc.get_samples(group_by_chain=True)["mu"]
    assert mu.shape == (4, 20000)
    assert_expectation(mu, post_mean, "E[mu]")
    print(f"Var[mu]: {float(mu.var()):.5f} vs {post_var:.5f}")


def test_minibatch_needs_a_dataset():
    kernel = SGHMCKernel(gaussian_model, batch_size=4)
    with pytest.raises(ValueError, match="Dataset"):
        kernel.init(jax.random.key(0), 10, model_args=(jnp.zeros(3),))
    with pytest.raises(ValueError, match="potential_fn"):
        SGHMCKernel(potential_fn=lambda z: 0.0, batch_size=4)


def test_fit_on_gp_surrogate_returns_posterior():
    X = np.random.default_rng(0).random((8, 2))
    data = ppbo.Dataset(X, np.sin(3 * X[:, 0]) + X[:, 1])
    inference = ppbo.SGHMC(num_warmup=50, num_samples=30, num_chains=2)
    posterior = ppbo.fit(gp.surrogate(), data, inference, jax.random.key(0))
    assert posterior.method == "SGHMC"
    assert posterior.num_samples == 60
    assert posterior.samples["lengthscale"].shape == (60, 2)
    assert posterior.samples["noise"].shape == (60,)
    assert np.all(np.isfinite(np.asarray(posterior.samples["outputscale"])))
    mean, var = posterior.predict(X[:3])
    assert mean.shape == var.shape == (60, 3)
    again = ppbo.fit(gp.surrogate(), data, inference, jax.random.key(0))
    np.testing.assert_array_equal(again.samples["noise"], posterior.samples["noise"])


def test_registry_name_and_spec_round_trip():
    from ppbo.campaign.registry import make_inference, resolve_inference

    inference = make_inference("sghmc", 64, batch_size=16)
    assert inference == ppbo.SGHMC(num_warmup=32, num_samples=64, batch_size=16)
    same, spec = resolve_inference(inference)
    assert spec["name"] == "SGHMC"
    assert resolve_inference(spec)[0] == inference
    with pytest.raises(ValueError, match="mdecay"):
        ppbo.SGHMC(mdecay=0.0)
