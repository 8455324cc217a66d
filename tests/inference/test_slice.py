"""Tests for :mod:`ppbo.inference.slice` against analytic posteriors.

Tolerances come from the Monte Carlo error: a mean estimated from draws with
effective sample size ESS has standard error sd / sqrt(ESS), and every check below
allows four standard errors. Keys are fixed, so the tests are deterministic.
"""

from functools import partial

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
import pytest  # noqa: E402
from numpyro.diagnostics import effective_sample_size  # noqa: E402
from numpyro.infer import MCMC  # noqa: E402
from scipy import stats  # noqa: E402

from ppbo.inference.slice import SliceKernel, SliceState  # noqa: E402

# Allowed error in Monte Carlo standard errors; a false alarm per check has
# probability about 6e-5 for a normal estimator.
Z = 4.0
# p-value below which a Kolmogorov–Smirnov test on near-independent draws fails.
KS_ALPHA = 1e-3


def assert_expectation(draws, expected, name):
    """Check the mean of ``draws`` (chains, draws) against ``expected``."""
    draws = np.asarray(draws, dtype=np.float64)
    ess = float(effective_sample_size(draws))
    error = abs(draws.mean() - expected)
    tolerance = Z * draws.std() / np.sqrt(ess)
    assert error < tolerance, f"{name}: |{draws.mean()} - {expected}| >= {tolerance}"
    return ess


def thinned(draws, ess):
    """Pool chains and thin to about ``ess`` nearly independent draws."""
    draws = np.asarray(draws)
    step = int(np.ceil(draws.size / ess))
    return draws[:, ::step].ravel()


def normal_model(y, prior_loc, prior_scale, noise):
    mu = numpyro.sample("mu", dist.Normal(prior_loc, prior_scale))
    numpyro.sample("y", dist.Normal(mu, noise), obs=y)


def test_normal_normal_matches_conjugate_posterior():
    prior_loc, prior_scale, noise = 1.0, 2.0, 0.7
    y = 0.4 + noise * jax.random.normal(jax.random.key(1), (15,))
    precision = 1 / prior_scale**2 + y.size / noise**2
    post_var = 1 / precision
    post_mean = post_var * (prior_loc / prior_scale**2 + y.sum() / noise**2)

    mcmc = MCMC(
        SliceKernel(normal_model),
        num_warmup=300,
        num_samples=4000,
        progress_bar=False,
    )
    mcmc.run(jax.random.key(2), y, prior_loc, prior_scale, noise)
    mu = mcmc.get_samples(group_by_chain=True)["mu"]

    ess = assert_expectation(mu, post_mean, "mean")
    assert_expectation((mu - post_mean) ** 2, post_var, "variance")
    draws = thinned(mu, ess)
    posterior = stats.norm(float(post_mean), float(np.sqrt(post_var)))
    assert stats.kstest(draws, posterior.cdf).pvalue > KS_ALPHA


def poisson_model(y, shape, rate):
    lam = numpyro.sample("lam", dist.Gamma(shape, rate))
    numpyro.sample("y", dist.Poisson(lam), obs=y)


def test_gamma_poisson_sequential_chains_with_thinning():
    shape, rate = 2.0, 0.5
    y = jnp.array([3, 1, 4, 1, 5, 2, 0, 3])
    post = stats.gamma(a=shape + float(y.sum()), scale=1 / (rate + y.size))

    mcmc = MCMC(
        SliceKernel(poisson_model),
        num_warmup=300,
        num_samples=4000,
        num_chains=2,
        thinning=2,
        chain_method="sequential",
        progress_bar=False,
    )
    mcmc.run(jax.random.key(3), y, shape, rate)
    lam = mcmc.get_samples(group_by_chain=True)["lam"]
    assert lam.shape == (2, 2000)
    assert mcmc.get_samples()["lam"].shape == (4000,)
    assert mcmc.get_extra_fields()["num_evals"].shape == (4000,)
    assert bool(jnp.all(lam > 0))

    ess = assert_expectation(lam, post.mean(), "mean")
    assert_expectation((lam - post.mean()) ** 2, post.var(), "variance")
    assert stats.kstest(thinned(lam, ess), post.cdf).pvalue > KS_ALPHA


def test_correlated_gaussian_from_potential_fn():
    mean = jnp.array([1.0, -2.0])
    cov = jnp.array([[1.0, 0.9 * 0.5], [0.9 * 0.5, 0.25]])
    precision = jnp.linalg.inv(cov)

    def potential_fn(z):
        r = z["x"] - mean
        return 0.5 * r @ precision @ r

    mcmc = MCMC(
        SliceKernel(potential_fn=potential_fn),
        num_warmup=300,
        num_samples=6000,
        progress_bar=False,
    )
    mcmc.run(jax.random.key(4), init_params={"x": jnp.zeros(2)})
    x = mcmc.get_samples(group_by_chain=True)["x"]
    assert x.shape == (1, 6000, 2)

    r = x - mean
    assert_expectation(x[..., 0], mean[0], "E[x0]")
    assert_expectation(x[..., 1], mean[1], "E[x1]")
    assert_expectation(r[..., 0] ** 2, cov[0, 0], "Var[x0]")
    assert_expectation(r[..., 1] ** 2, cov[1, 1], "Var[x1]")
    assert_expectation(r[..., 0] * r[..., 1], cov[0, 1], "Cov[x0, x1]")


def test_vectorized_chains_and_progress_bar(capsys):
    mcmc = MCMC(
        SliceKernel(poisson_model),
        num_warmup=20,
        num_samples=50,
        num_chains=2,
        chain_method="vectorized",
        progress_bar=True,
    )
    mcmc.run(jax.random.key(5), jnp.array([2, 3, 1]), 2.0, 0.5)
    lam = mcmc.get_samples(group_by_chain=True)["lam"]
    assert lam.shape == (2, 50)
    assert not np.allclose(lam[0], lam[1])
    mcmc.print_summary()
    assert "lam" in capsys.readouterr().out


def test_diagnostics_count_evaluations():
    args = (jnp.array([2, 3]), 2.0, 0.5)
    kernel = SliceKernel(poisson_model)
    state = kernel.sample(kernel.init(jax.random.key(6), 5, None, args, {}), args, {})
    # each step-out and each shrinkage draw costs one evaluation, and so does the
    # accepted draw of the one coordinate
    spent = int(state.num_steps_out) + int(state.num_shrinks) + 1
    assert int(state.num_evals) >= spent
    assert kernel.get_diagnostics_str(state) == f"{int(state.num_evals)} evals/sweep"


def regression_model(X, y):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    numpyro.sample("y", dist.Normal(X @ w, sigma), obs=y)


@partial(jax.jit, static_argnames=("num_warmup", "num_samples"))
def run_by_hand(key, X, y, num_warmup, num_samples):
    kernel = SliceKernel(regression_model)
    state = kernel.init(key, num_warmup, None, model_args=(X, y), model_kwargs={})

    def step(s, _):
        s = kernel.sample(s, (X, y), {})
        return s, s.z

    state, zs = jax.lax.scan(step, state, None, length=num_warmup + num_samples)
    zs = jax.tree.map(lambda a: a[num_warmup:], zs)
    return jax.vmap(kernel.postprocess_fn((X, y), {}))(zs), state


def test_jitted_scan_driver_compiles_once():
    key_x, key_noise, key_run = jax.random.split(jax.random.key(7), 3)
    X = jax.random.normal(key_x, (12, 2))
    y = X @ jnp.array([1.5, -0.5]) + 0.3 * jax.random.normal(key_noise, (12,))
    # new data of the same shapes: 2X and -y flip the sign of the regression weights
    X2, y2 = jax.block_until_ready((2 * X, -y))

    compilations = []

    def on_event(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compilations.append(duration)

    jax.monitoring.register_event_duration_secs_listener(on_event)
    try:
        first, state = jax.block_until_ready(run_by_hand(key_run, X, y, 100, 200))
        num_first = len(compilations)
        second, _ = jax.block_until_ready(run_by_hand(key_run, X2, y2, 100, 200))
    finally:
        jax.monitoring.unregister_event_duration_listener(on_event)
    assert num_first > 0  # the listener sees compilations
    assert len(compilations) == num_first

    assert first["w"].shape == (200, 2)
    assert first["sigma"].shape == (200,)
    assert isinstance(state, SliceState)
    assert state.width.shape == (3,)
    assert bool(jnp.all(second["sigma"] > 0))
    assert bool(jnp.all(jnp.isfinite(second["w"])))
    assert float(first["w"][:, 0].mean()) > 0 > float(second["w"][:, 0].mean())


def test_bimodal_target_with_truncated_stepping_out():
    # Slices of this mixture are often two disjoint intervals, and one step-out
    # from a unit-width bracket rarely covers both: only the exact random placement
    # and split of Neal's Fig. 3 keep the mode weights right here.
    weights, locs, scale = jnp.array([0.3, 0.7]), jnp.array([-1.5, 1.5]), 0.5

    def potential_fn(x):
        log_prob = jax.scipy.stats.norm.logpdf(x, locs, scale)
        return -jax.scipy.special.logsumexp(jnp.log(weights) + log_prob)

    kernel = SliceKernel(
        potential_fn=potential_fn, width=1.0, max_steps_out=1, adapt_width=False
    )
    mcmc = MCMC(kernel, num_warmup=100, num_samples=20000, progress_bar=False)
    mcmc.run(jax.random.key(10), init_params=jnp.array(0.0))
    x = np.asarray(mcmc.get_samples(group_by_chain=True))

    assert_expectation(x < 0, weights[0], "P(x < 0)")

    def cdf(v):
        return sum(
            float(weight) * stats.norm.cdf(v, float(loc), scale)
            for weight, loc in zip(weights, locs, strict=True)
        )

    ess = float(effective_sample_size(x))
    assert stats.kstest(thinned(x, ess), cdf).pvalue > KS_ALPHA


@pytest.mark.parametrize("bad", [jnp.nan, jnp.inf])
def test_non_finite_potential_is_outside_the_slice(bad):
    def potential_fn(x):
        return jnp.where(x > 1.0, bad, 0.5 * x**2)

    mcmc = MCMC(
        SliceKernel(potential_fn=potential_fn),
        num_warmup=200,
        num_samples=4000,
        progress_bar=False,
    )
    mcmc.run(jax.random.key(8), init_params=jnp.array(0.0))
    x = mcmc.get_samples(group_by_chain=True)
    assert float(x.max()) <= 1.0
    # the target is a standard normal truncated to x <= 1
    truncated = stats.truncnorm(-np.inf, 1.0)
    ess = assert_expectation(x, truncated.mean(), "mean")
    assert stats.kstest(thinned(x, ess), truncated.cdf).pvalue > KS_ALPHA


def test_widths_adapt_to_scale_in_warmup_then_freeze():
    scale = 300.0
    kernel = SliceKernel(potential_fn=lambda x: 0.5 * jnp.sum((x / scale) ** 2))
    num_warmup = 150

    @jax.jit
    def widths(key):
        state = kernel.init(key, num_warmup, jnp.zeros(2), (), {})

        def step(s, _):
            s = kernel.sample(s, (), {})
            return s, s.width

        return jax.lax.scan(step, state, None, length=num_warmup + 50)[1]

    w = widths(jax.random.key(9))
    # Balanced step-outs and shrinks put a Gaussian's width at a few standard
    # deviations (about 2.8 in long runs); the start was 300 times too narrow.
    assert bool(jnp.all((w[num_warmup - 1] > scale) & (w[num_warmup - 1] < 6 * scale)))
    assert bool(jnp.all(w[num_warmup - 1 :] == w[num_warmup - 1]))


def test_invalid_construction():
    with pytest.raises(ValueError, match="exactly one"):
        SliceKernel()
    with pytest.raises(ValueError, match="exactly one"):
        SliceKernel(normal_model, potential_fn=lambda z: 0.0)
    with pytest.raises(ValueError, match="width"):
        SliceKernel(normal_model, width=0.0)
    with pytest.raises(ValueError, match="init_params"):
        SliceKernel(potential_fn=lambda z: 0.0).init(jax.random.key(0), 10)
    with pytest.raises(RuntimeError, match="init"):
        SliceKernel(normal_model).postprocess_fn((), {})
