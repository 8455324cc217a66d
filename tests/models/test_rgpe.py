"""RGPE (Feurer, Letham and Bakshy 2018): ranking loss, weights, mixture."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppbo
from ppbo.campaign.step import step
from ppbo.models import gp, rgpe

SURROGATE = rgpe.surrogate(num_sources=2, num_bootstrap=64, num_steps=100)


def test_ranking_loss_matches_brute_force_count():
    rng = np.random.default_rng(0)
    t, n, S = 3, 7, 5
    f, y = rng.normal(size=(t, n)), rng.normal(size=n)
    counts = rng.multinomial(n, np.ones(n) / n, size=S).astype(np.float64)
    losses = np.asarray(rgpe.ranking_losses(jnp.asarray(f), y, counts))
    for s in range(S):
        rows = np.repeat(np.arange(n), counts[s].astype(int))  # the resample
        for k in range(t):
            brute = sum(
                (f[k, a] < f[k, b]) != (y[a] < y[b]) for a in rows for b in rows
            )
            assert losses[k, s] == brute


def test_weights_split_ties_and_discard_diluting_models():
    losses = jnp.array(
        [
            [0.0, 0.0, 3.0, 0.0],  # best or tied on every resample
            [9.0, 9.0, 9.0, 0.0],  # median 9 > 95th percentile of the target's
            [0.0, 1.0, 1.0, 1.0],  # the target
        ]
    )
    w = np.asarray(rgpe.ensemble_weights(losses))
    np.testing.assert_allclose(w, [(0.5 + 1 + 0 + 1) / 4, 0.0, (0.5 + 0 + 1 + 0) / 4])


def target_function(X):
    return np.sin(9 * X[:, 0]) * np.cos(5 * X[:, 1])


def constructed_data(rng):
    # source 0 IS the target function, densely observed; source 1 is its negative
    X0, X1, Xt = rng.random((30, 2)), rng.random((30, 2)), rng.random((8, 2))
    y = np.concatenate([target_function(X0), -target_function(X1), target_function(Xt)])
    source = np.repeat([0, 1, -1], [30, 30, 8])
    return ppbo.Dataset(np.vstack([X0, X1, Xt]), y, source=source)


def test_a_source_equal_to_the_target_gets_most_weight():
    data = constructed_data(np.random.default_rng(1))
    posterior = ppbo.fit(SURROGATE, data, ppbo.Train(), jax.random.key(0))
    w = np.asarray(posterior.samples["weights"][0])
    np.testing.assert_allclose(w.sum(), 1.0)
    assert w[0] > 0.5, w
    assert w[1] == 0.0, w


def test_prediction_is_the_weighted_mixture_of_per_task_gps():
    data = constructed_data(np.random.default_rng(2))
    posterior = ppbo.fit(SURROGATE, data, ppbo.Train(), jax.random.key(1))
    samples = {k: np.asarray(v[0]) for k, v in posterior.samples.items()}
    X, y, _ = data.unpadded()
    source = data.unpadded_fields()["source"]
    Xq = np.random.default_rng(3).random((5, 2))
    mean, var = np.zeros(5), np.zeros(5)
    for k, task in enumerate([0, 1, -1]):
        rows = source == task
        params = {
            name: samples[name][k]
            for name in ("lengthscale", "outputscale", "noise", "mean")
        }
        single = ppbo.fit(
            gp.surrogate(), ppbo.Dataset(X[rows], y[rows]), ppbo.Fixed(params), None
        )
        m, v = (np.asarray(a[0]) for a in single.predict(Xq))
        mean += samples["weights"][k] * m
        var += samples["weights"][k] ** 2 * v
    got_mean, got_var = posterior.predict(Xq)
    np.testing.assert_allclose(got_mean[0], mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got_var[0], var, rtol=1e-7, atol=1e-12)


def test_check_data_and_options():
    with pytest.raises(ValueError, match="data.source is None"):
        SURROGATE.check_data(ppbo.Dataset(np.zeros((2, 1)), np.zeros(2)))
    with pytest.raises(ValueError, match="num_bootstrap"):
        rgpe.surrogate(num_bootstrap=0)


@pytest.mark.parametrize("acquisition", ["ei", "ucb"])
def test_campaign_step(acquisition):
    data = constructed_data(np.random.default_rng(4))
    result = step(
        jax.random.key(0),
        SURROGATE,
        ppbo.Train(),
        getattr(ppbo.acquisition, acquisition),
        data,
        q=2,
        optimizer_options={"num_raw": 32, "num_restarts": 2, "max_iterations": 20},
    )
    assert result.X.shape == (2, 2) and np.all(np.isfinite(result.values))


def test_registry_entry_builds_this_surrogate():
    from ppbo.campaign.registry import SURROGATES, resolve_surrogate

    assert "num_sources" in SURROGATES["rgpe"][1]
    surrogate, spec = resolve_surrogate({"name": "rgpe", "num_sources": 3})
    assert spec["name"] == "rgpe" and spec["num_sources"] == 3
    assert surrogate.extras["num_sources"] == 3
