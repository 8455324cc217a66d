"""The exact Laplace predictive (``laplace_predictive``) and EUBO on it.

References: the Laplace approximation computed from scratch in the latent
values ``f`` with dense NumPy linear algebra (Rasmussen and Williams 2006,
Algorithm 3.1 with a full likelihood Hessian, and eqs. (3.21) and (3.24)), and
the mixture of many latent draws, which converges to it.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import ppbo
from ppbo.acquisition.base import bind
from ppbo.acquisition.preferential import eubo, expected_max
from ppbo.models import preference_gp as pgp
from ppbo.preference import _acquire

PARAMS = {
    "lengthscale": jnp.array([0.25, 0.4]),
    "outputscale": 0.8,
    "mean": 0.2,
    "preference_noise": 0.05,
    "noise": 0.1,
}


def _data():
    X = np.random.default_rng(0).uniform(size=(12, 2))
    y = np.zeros(12)
    y[[2, 7]] = [0.9, -0.4]
    anchor = np.zeros(12, bool)
    anchor[[2, 7]] = True
    duels = [[0, 1], [3, 1], [4, 5], [6, 4], [0, 8], [9, 10], [11, 3], [2, 6]]
    return ppbo.Dataset(X, y, duels=np.array(duels), anchor=anchor)


def _kernel(A, B):
    ell = np.asarray(PARAMS["lengthscale"])
    d2 = np.sum(((A[:, None, :] - B[None, :, :]) / ell) ** 2, axis=-1)
    return PARAMS["outputscale"] * np.exp(-0.5 * d2)


def _dense_laplace(data, Xs):
    """Mode by Newton in ``f``, then the Gaussian predictive at ``Xs``."""
    n = data.n
    X, y = np.asarray(data.X)[:n], np.asarray(data.y)[:n]
    duels = np.asarray(data.duels)[: int(np.sum(np.asarray(data.duel_mask)))]
    anchor = np.asarray(data.anchor)[:n]
    mu, s = PARAMS["mean"], np.sqrt(2.0 * PARAMS["preference_noise"])
    K = _kernel(X, X) + pgp.JITTER * PARAMS["outputscale"] * np.eye(n)
    K_inv = np.linalg.inv(K)
    D = np.zeros((len(duels), n))
    D[np.arange(len(duels)), duels[:, 0]] = 1.0
    D[np.arange(len(duels)), duels[:, 1]] = -1.0
    f = np.full(n, mu)
    for _ in range(50):
        z = D @ f / s
        lam = np.exp(stats.norm.logpdf(z) - stats.norm.logcdf(z))
        grad = D.T @ (lam / s) + anchor * (y - f) / PARAMS["noise"]
        W = D.T @ np.diag(lam * (z + lam) / s**2) @ D
        W = W + np.diag(anchor / PARAMS["noise"])
        f = f + np.linalg.solve(K_inv + W, grad - K_inv @ (f - mu))
    Ks = _kernel(Xs, X)
    mean = mu + Ks @ K_inv @ (f - mu)
    A = Ks @ K_inv
    cov = _kernel(Xs, Xs) - A @ K @ A.T + A @ np.linalg.inv(K_inv + W) @ A.T
    return mean, cov


def _posterior(num_samples, seed=0):
    laplace = pgp.Laplace(num_samples=num_samples, params=PARAMS)
    surrogate = pgp.surrogate("rbf", beta=0.5)
    return ppbo.fit(surrogate, _data(), laplace, jax.random.key(seed))


def test_the_exact_predictive_is_the_dense_laplace_predictive():
    Xs = np.random.default_rng(1).uniform(size=(6, 2))
    exact = pgp.laplace_predictive(_posterior(4))
    assert exact.num_samples == 1 and exact.method == "laplace-exact"
    mean, cov = exact.surrogate.predict_joint_one(
        jax.tree.map(lambda a: a[0], exact.samples),
        exact.data,
        jnp.asarray(Xs),
        jax.tree.map(lambda a: a[0], exact.cache),
    )
    expected_mean, expected_cov = _dense_laplace(exact.data, Xs)
    np.testing.assert_allclose(mean, expected_mean, atol=1e-8)
    np.testing.assert_allclose(cov, expected_cov, atol=1e-8)
    _, var = exact.predict(Xs)
    np.testing.assert_allclose(var[0], np.diag(expected_cov), atol=1e-8)
    # idempotent
    assert pgp.laplace_predictive(exact) is exact


def test_many_latent_draws_converge_to_the_exact_predictive():
    """The mixture of N antithetic draws has the exact mean and a variance whose
    latent part (``V^T B^-1 V``) is a sample variance over N / 2 independent
    pairs: relative sd about ``2 / sqrt(N)``, 3% at N = 4096; 5 sd allowed."""
    Xs = np.random.default_rng(2).uniform(size=(5, 2))
    draws = _posterior(4096, seed=3)
    exact = pgp.laplace_predictive(draws)
    mix_mean, mix_var = draws.predict_marginal(Xs)
    mean, var = exact.predict(Xs)
    np.testing.assert_allclose(mix_mean, mean[0], atol=1e-9)
    _, conditional = draws.sample(0).predict(Xs)  # var given the latent values
    latent = np.asarray(var[0] - conditional[0])
    assert np.all(latent > 0)
    np.testing.assert_allclose(
        np.asarray(mix_var - conditional[0]), latent, rtol=5 * 2 / np.sqrt(4096)
    )


def test_eubo_on_the_exact_predictive_is_clarks_formula_on_the_dense_laplace():
    rng = np.random.default_rng(4)
    pairs = rng.uniform(size=(4, 4))
    posterior = _posterior(8)
    eubo_posterior = _acquire._eubo_posterior(posterior)
    assert eubo_posterior.method == "laplace-exact"
    values = np.asarray(bind(eubo, eubo_posterior).reduced(pairs))
    for pair, value in zip(pairs, values, strict=True):
        m, c = _dense_laplace(posterior.data, pair.reshape(2, 2))
        expected = expected_max(m[0], m[1], c[0, 0], c[1, 1], c[0, 1])
        np.testing.assert_allclose(value, expected, atol=1e-8)


def test_laplace_predictive_rejects_other_posteriors():
    surrogate = pgp.surrogate("rbf", beta=0.5)
    data = _data()
    inference = ppbo.Fixed(PARAMS | {"latent": jnp.zeros(data.capacity)})
    fixed = ppbo.fit(surrogate, data, inference, jax.random.key(0))
    with pytest.raises(ValueError, match="method='Fixed'"):
        pgp.laplace_predictive(fixed)
