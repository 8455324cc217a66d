import jax
import numpy as np
import pytest

import ppbo
from ppbo.inference import _mcmc
from ppbo.models import gp

RNG = np.random.default_rng(3)
X = RNG.random((12, 2))
Y = np.sin(5 * X[:, 0]) * np.cos(3 * X[:, 1])
Y = (Y - Y.mean()) / Y.std()
SMALL = ppbo.NUTS(num_warmup=40, num_samples=40, max_tree_depth=5)


def test_refit_in_same_bucket_does_not_compile(compile_counter):
    surrogate = gp.surrogate()
    data = ppbo.Dataset(X[:10], Y[:10])
    first = ppbo.fit(surrogate, data, SMALL, jax.random.key(0))
    first.predict(X[:3])
    first.predict_marginal(X[:3])
    grown = data.append(X[10], Y[10])
    assert grown.capacity == data.capacity
    # the first warm-started refit compiles the refit program (its shorter
    # warm-up adapts only the step size), once; later ones, warm or cold, reuse
    warm = ppbo.fit(surrogate, data, SMALL, jax.random.key(5), init=first)
    with compile_counter.measure():
        second = ppbo.fit(surrogate, grown, SMALL, jax.random.key(1), init=warm)
        second.predict(X[:3])
        third = ppbo.fit(
            surrogate, grown.append(X[11], Y[11]), SMALL, jax.random.key(2)
        )
        third.predict_marginal(X[:3])
    assert compile_counter.count == 0
    assert second.num_samples == 40 and second.data.n == 11


def test_warm_start_reuses_adaptation():
    surrogate = gp.surrogate()
    data = ppbo.Dataset(X, Y)
    first = ppbo.fit(surrogate, data, SMALL, jax.random.key(0))
    step = float(first.state["warm"]["step_size"][0])
    assert step > 0 and step != 1.0
    # Without warm-up nothing adapts, so the sampler runs at the step size it
    # started from: the previous posterior's when warm-started, else 1.
    frozen = ppbo.NUTS(num_warmup=0, num_samples=5, refit_warmup=0)
    warm = ppbo.fit(surrogate, data, frozen, jax.random.key(1), init=first)
    np.testing.assert_allclose(warm.sample_stats["step_size"], step)
    cold = ppbo.NUTS(num_warmup=0, num_samples=5, warm_start=False)
    posterior = ppbo.fit(surrogate, data, cold, jax.random.key(1), init=first)
    np.testing.assert_allclose(posterior.sample_stats["step_size"], 1.0)
    # a previous posterior of another surrogate object, or of another layout,
    # is not used
    z, state = first.state["z"], first.state["warm"]
    assert _mcmc.warm_start(first, surrogate, z, state)[1] is state
    marker = {"step_size": state["step_size"] + 1, "inverse_mass_matrix": 1.0}
    assert _mcmc.warm_start(first, gp.surrogate(), z, marker)[1] is marker
    assert _mcmc.warm_start(first, surrogate, z, marker)[1] is marker
    assert _mcmc.warm_start(None, surrogate, z, marker)[1] is marker


def test_refit_warmup_keeps_the_mass_matrix_of_the_previous_draws(compile_counter):
    # A warm-started fit with refit_warmup adapts only the step size: its inverse
    # mass matrix is the regularised variance of the previous posterior's
    # unconstrained draws (sites in sorted order, positive sites on the log
    # scale), it never changes during the refit, and refits in a bucket share
    # one compilation.
    surrogate = gp.surrogate()
    data = ppbo.Dataset(X[:10], Y[:10])
    config = ppbo.NUTS(num_warmup=40, num_samples=40, max_tree_depth=5, refit_warmup=8)
    first = ppbo.fit(surrogate, data, config, jax.random.key(0))
    s = first.samples
    draws = np.column_stack(
        [
            np.log(s["lengthscale"]),
            s["mean"],
            np.log(s["noise"]),
            np.log(s["outputscale"]),
        ]
    )
    shrink = 40 / 45
    expected = shrink * draws.var(0, ddof=1) + 1e-3 * (1 - shrink)
    np.testing.assert_allclose(
        first.state["warm"]["inverse_mass_matrix"][0], expected, rtol=1e-8
    )
    grown = data.append(X[10], Y[10])
    second = ppbo.fit(surrogate, grown, config, jax.random.key(1), init=first)
    with compile_counter.measure():
        third = ppbo.fit(
            surrogate,
            grown.append(X[11], Y[11]),
            config,
            jax.random.key(2),
            init=second,
        )
    assert compile_counter.count == 0
    assert third.num_samples == 40
    # refit_warmup=0: nothing adapts, the step size is the previous one
    frozen = ppbo.NUTS(num_warmup=40, num_samples=5, refit_warmup=0)
    warm = ppbo.fit(surrogate, data, frozen, jax.random.key(3), init=first)
    np.testing.assert_allclose(
        warm.sample_stats["step_size"], first.state["warm"]["step_size"][0]
    )


def test_chains_thinning_and_sample_stats():
    config = ppbo.NUTS(num_warmup=30, num_samples=40, thinning=2, num_chains=2)
    posterior = ppbo.fit(gp.surrogate(), ppbo.Dataset(X, Y), config, jax.random.key(4))
    assert posterior.num_samples == 40 and posterior.num_chains == 2
    assert posterior.samples["lengthscale"].shape == (40, 2)
    for name in ("diverging", "tree_depth", "n_steps", "energy", "step_size", "lp"):
        assert posterior.sample_stats[name].shape == (40,)
    depth = np.asarray(posterior.sample_stats["tree_depth"])
    steps = np.asarray(posterior.sample_stats["n_steps"])
    assert np.all(steps <= 2**depth - 1) and np.all(steps >= 2 ** (depth - 1))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_samples": 0}, "num_samples must be an integer >= 1"),
        ({"num_warmup": -1}, "num_warmup must be an integer >= 0"),
        ({"refit_warmup": -1}, "refit_warmup must be None or an integer >= 0"),
        ({"refit_warmup": 1.5}, "refit_warmup must be None or an integer >= 0"),
        ({"num_chains": 1.5}, "num_chains must be an integer"),
        ({"thinning": 5, "num_samples": 4}, "must be >= thinning=5"),
        ({"max_tree_depth": 0}, "max_tree_depth must be in"),
        ({"target_accept_prob": 1.0}, "target_accept_prob must be in"),
    ],
)
def test_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ppbo.NUTS(**kwargs)


def test_fit_argument_errors():
    data = ppbo.Dataset(X, Y)
    with pytest.raises(TypeError, match="surrogate must be a ppbo.Surrogate"):
        ppbo.fit(lambda d: None, data, SMALL, jax.random.key(0))
    with pytest.raises(TypeError, match="data must be a ppbo.Dataset"):
        ppbo.fit(gp.surrogate(), (X, Y), SMALL, jax.random.key(0))
    with pytest.raises(TypeError, match="inference must have a fit method"):
        ppbo.fit(gp.surrogate(), data, "nuts", jax.random.key(0))
