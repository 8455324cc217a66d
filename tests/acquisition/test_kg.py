"""Knowledge gradient against brute-force Monte Carlo with dense NumPy conditioning.

The GP has fixed hyperparameters (``ppbo.Fixed``); the reference re-conditions a
NumPy Matérn-5/2 GP on the data plus each fantasised observation (a full dense
solve, not the library's rank-one update) for many fantasies, and the library's
estimate is compared within the combined Monte Carlo standard error.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppbo
from ppbo.acquisition.base import bind, evaluate, per_sample
from ppbo.acquisition.kg import fantasy_normals, kg
from ppbo.models import gp

X_OBS = np.array([0.45, 0.55, 0.62, 0.7, 0.8, 0.9])[:, None]
Y_OBS = 0.5 * np.sin(8 * X_OBS[:, 0])
# The constant mean 1.5 lies above every observation, so the posterior mean at the
# padded rows (x = 0) is the largest: including them in the max would show.
PARAMS = {"lengthscale": [0.15], "outputscale": 1.3, "noise": 1e-3, "mean": 1.5}
X_DISCRETE = np.array([0.3, 0.5, 0.65, 0.75, 0.95])[:, None]
CANDIDATES = np.array([[0.2], [0.4], [0.58], [0.85]])
SURROGATE = gp.surrogate(kernel="matern52")
NUM_KEYS = 32


def _posterior(params=PARAMS):
    data = ppbo.Dataset(X_OBS, Y_OBS)
    assert data.capacity > data.n  # padded
    return ppbo.fit(SURROGATE, data, ppbo.Fixed(params), jax.random.key(0))


@pytest.fixture(scope="module")
def posterior():
    return _posterior()


def _matern52(A, B, params):
    r = np.abs(A[:, None, 0] - B[None, :, 0]) / params["lengthscale"][0]
    s = math.sqrt(5.0) * r
    return params["outputscale"] * (1.0 + s + s**2 / 3.0) * np.exp(-s)


def _reference_kg(x, A, params, num=400_000, seed=0):
    """KG at x over A + {x} by brute force; returns (estimate, standard error)."""
    rng = np.random.default_rng(seed)
    m0, noise = params["mean"], params["noise"]
    data_noise = noise + gp.JITTER  # the model's likelihood covariance
    A1 = np.concatenate([A, x[None]])
    K = _matern52(X_OBS, X_OBS, params) + data_noise * np.eye(len(X_OBS))
    Ks = _matern52(A1, X_OBS, params)
    mean = m0 + Ks @ np.linalg.solve(K, Y_OBS - m0)
    cov = _matern52(A1, A1, params) - Ks @ np.linalg.solve(K, Ks.T)
    y = mean[-1] + math.sqrt(cov[-1, -1] + noise) * rng.standard_normal(num)
    # condition on data + (x, y) from scratch
    X1 = np.concatenate([X_OBS, x[None]])
    K1 = _matern52(X1, X1, params) + np.diag(
        np.append(np.full(len(X_OBS), data_noise), noise)
    )
    W = np.linalg.solve(K1, _matern52(X1, A1, params)).T  # (p + 1, n + 1)
    residual = np.concatenate([np.repeat((Y_OBS - m0)[:, None], num, 1), y[None] - m0])
    best = np.max(m0 + W @ residual, axis=0)
    gain = best - np.max(mean)
    return gain.mean(), gain.std(ddof=1) / math.sqrt(num)


def _library_kg(posterior, X, **options):
    """KG for NUM_KEYS keys (compiled once, keys are arrays), shape (NUM_KEYS, m)."""
    keys = jax.random.split(jax.random.key(11), NUM_KEYS)
    X = jnp.asarray(X)
    return np.stack([bind(kg, posterior, key=k, **options).reduced(X) for k in keys])


@pytest.mark.parametrize("discrete", [True, False], ids=["X_discrete", "KGCP"])
def test_kg_matches_brute_force_monte_carlo(posterior, discrete):
    A = X_DISCRETE if discrete else X_OBS
    options = {"X_discrete": X_DISCRETE} if discrete else {}
    values = _library_kg(posterior, CANDIDATES, **options)
    lib_mean = values.mean(axis=0)
    lib_se = values.std(axis=0, ddof=1) / math.sqrt(NUM_KEYS)
    padding_gap = []
    for j, x in enumerate(CANDIDATES):
        ref, ref_se = _reference_kg(x, A, PARAMS, seed=j)
        tol = 4.0 * math.sqrt(ref_se**2 + lib_se[j] ** 2)
        assert abs(lib_mean[j] - ref) <= tol + 1e-12, (x, lib_mean[j], ref, tol)
        # each single-key estimate too, with its own spread
        single = 5.0 * math.sqrt(ref_se**2 + values[:, j].var(ddof=1))
        assert np.all(np.abs(values[:, j] - ref) <= single + 1e-12)
        if ref > 0.01:  # the comparison can fail: the tolerance is informative
            assert tol < 0.1 * ref
        if not discrete:
            # KGCP must skip the padded rows (inputs x = 0, where the posterior
            # mean is the largest); with them the value would be off
            padded, _ = _reference_kg(x, np.vstack([A, [[0.0]]]), PARAMS, seed=j)
            padding_gap.append(abs(padded - ref) / tol)
    assert discrete or max(padding_gap) > 10


def _two_sample_posterior():
    data = ppbo.Dataset(X_OBS, Y_OBS)
    samples = {
        "lengthscale": jnp.array([[0.15], [0.3]]),
        "outputscale": jnp.array([1.3, 0.7]),
        "noise": jnp.array([1e-3, 1e-2]),
        "mean": jnp.array([1.5, 0.0]),
    }
    cache = jax.vmap(lambda p: SURROGATE.prepare(p, data))(samples)
    return ppbo.Posterior(SURROGATE, samples, data, cache=cache)


GRID = np.linspace(0.0, 1.0, 41)[:, None]  # includes observed inputs 0.45, 0.7, ...


def test_kg_is_nonnegative_and_averages_per_sample_values():
    posterior = _two_sample_posterior()
    X = GRID
    for seed in range(3):
        key = jax.random.key(seed)
        values = per_sample(kg, posterior, X, key=key)
        assert values.shape == (2, 41)
        assert np.all(np.asarray(values) >= 0.0)
        np.testing.assert_allclose(
            evaluate(kg, posterior, X, key=key), np.mean(values, axis=0), rtol=1e-14
        )
    # the same key gives the same (common random numbers) values
    a = evaluate(kg, posterior, X, key=jax.random.key(7))
    b = evaluate(kg, posterior, X, key=jax.random.key(7))
    np.testing.assert_array_equal(a, b)


def test_candidates_in_one_block_do_not_interact(posterior):
    # 150 candidates: three blocks of 64, the last one filled up
    X = np.random.default_rng(1).random((150, 1))
    key = jax.random.key(5)
    together = np.asarray(evaluate(kg, posterior, X, key=key))
    for part in (X[:4], X[70:74], X[146:]):
        alone = evaluate(kg, posterior, part, key=key)
        index = [int(np.flatnonzero(X[:, 0] == x)[0]) for x in part[:, 0]]
        np.testing.assert_allclose(together[index], alone, rtol=1e-10, atol=1e-14)


def test_kg_vanishes_at_an_observed_noiseless_point():
    params = dict(PARAMS, noise=1e-10)
    posterior = _posterior(params)
    X = np.vstack([X_OBS[[3, 0]], CANDIDATES[:2]])  # two observed, two fresh
    values = np.asarray(evaluate(kg, posterior, X, key=jax.random.key(0)))
    # observing x again barely moves the mean anywhere: the sigma-tilde vector is at
    # the level of the model's jitter (sqrt(1e-6) times a correlation)
    assert np.all(values[2:] > 0.01)
    assert np.all(values[:2] < 1e-3 * values[2:].min())


def test_gradients_are_finite_and_match_finite_differences():
    posterior = _two_sample_posterior()
    # the grid holds observed inputs, where the candidate duplicates a row of A
    bound = bind(kg, posterior, key=jax.random.key(4))
    values, grads = map(np.asarray, bound.value_and_grad(jnp.asarray(GRID)))
    assert np.all(np.isfinite(values)) and np.all(np.isfinite(grads))
    h = 1e-6
    numeric = (
        np.asarray(bound.reduced(jnp.asarray(GRID + h)))
        - np.asarray(bound.reduced(jnp.asarray(GRID - h)))
    ) / (2 * h)
    # away from the observed inputs (kinks of the max are measure-zero)
    away = np.min(np.abs(GRID - X_OBS[:, 0]), axis=1) > 0.01
    np.testing.assert_allclose(grads[away, 0], numeric[away], rtol=1e-5, atol=1e-9)


def test_fantasies_are_stratified_antithetic_normals():
    eps = np.asarray(fantasy_normals(jax.random.key(2), 64))
    np.testing.assert_array_equal(eps[32:], -eps[:32])
    # one point in each of the 64 equal-probability strata
    from scipy.stats import norm

    strata = np.floor(norm.cdf(eps) * 64).astype(int)
    np.testing.assert_array_equal(np.sort(strata), np.arange(64))


def test_kg_validates_its_options(posterior):
    with pytest.raises(ValueError, match="needs a key"):
        evaluate(kg, posterior, CANDIDATES)
    with pytest.raises(ValueError, match="positive even integer"):
        evaluate(kg, posterior, CANDIDATES, key=jax.random.key(0), num_fantasies=7)

    def predict_joint(params, data, X):
        return X[:, 0], jnp.eye(X.shape[0])

    no_noise = ppbo.Surrogate(
        model=lambda data: None,
        predict=lambda params, data, X: (X[:, 0], jnp.ones(X.shape[0])),
        predict_joint=predict_joint,
    )
    fake = ppbo.Posterior(no_noise, {"c": jnp.zeros(1)}, posterior.data)
    with pytest.raises(ValueError, match="pass noise="):
        evaluate(kg, fake, CANDIDATES, key=jax.random.key(0))
    # with noise given, independent unit-variance points: KG = E[max(x, x' + ...)]
    values = evaluate(kg, fake, CANDIDATES, key=jax.random.key(0), noise=1.0)
    assert np.all(np.isfinite(np.asarray(values)))
