"""EUBO against brute-force Monte Carlo and ANPEI against EI and its formula."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

import ppbo
from ppbo.acquisition import ei
from ppbo.acquisition.base import bind, evaluate
from ppbo.acquisition.preferential import (
    anchor_factor,
    anpei,
    dueling_thompson,
    eubo,
    expected_max,
)
from ppbo.models import gp

PARAMS = {"lengthscale": [0.3, 0.4], "outputscale": 1.0, "noise": 1e-2, "mean": 0.0}


@pytest.fixture(scope="module")
def posterior():
    X = np.random.default_rng(0).random((8, 2))
    data = ppbo.Dataset(X, np.sin(3 * X[:, 0]) + X[:, 1])
    return ppbo.fit(gp.surrogate(), data, ppbo.Fixed(PARAMS), jax.random.key(0))


@pytest.mark.parametrize(
    "mean, cov",
    [
        ((0.0, 0.0), ((1.0, 0.0), (0.0, 1.0))),
        ((0.5, -0.3), ((0.4, 0.3), (0.3, 2.0))),
        ((1.0, 1.2), ((1.0, -0.9), (-0.9, 1.0))),
        ((2.0, -2.0), ((0.1, 0.0), (0.0, 0.1))),
    ],
)
def test_expected_max_matches_monte_carlo(mean, cov):
    num = 1_000_000
    draws = np.random.default_rng(1).multivariate_normal(mean, cov, size=num)
    best = draws.max(axis=1)
    value = expected_max(mean[0], mean[1], cov[0][0], cov[1][1], cov[0][1])
    # four Monte Carlo standard errors
    assert abs(float(value) - best.mean()) < 4 * best.std() / np.sqrt(num)


def test_expected_max_degenerate_pair_is_the_larger_mean():
    assert float(expected_max(0.3, -0.2, 1.0, 1.0, 1.0)) == 0.3
    grad = jax.grad(expected_max)(0.3, -0.2, 1.0, 1.0, 1.0)
    assert np.isfinite(grad)


def test_eubo_matches_monte_carlo_on_a_gp_posterior(posterior):
    a = np.array([0.2, 0.7])
    b = np.array([0.8, 0.3])
    pairs = np.concatenate([a, b])[None]
    value = bind(eubo, posterior)(pairs)[0, 0]
    f = posterior.sample_f(jax.random.key(3), np.stack([a, b]), num=200_000)[0]
    best = np.asarray(f).max(axis=1)
    assert abs(float(value) - best.mean()) < 4 * best.std() / np.sqrt(len(best))
    against = evaluate(eubo, posterior, a[None], opponent=b)
    np.testing.assert_allclose(against, value, rtol=1e-12)
    values, grad = bind(eubo, posterior).value_and_grad(pairs)
    assert grad.shape == (1, 4) and np.all(np.isfinite(grad))


def test_eubo_refuses_a_surrogate_without_joint_covariances(posterior):
    def predict(params, data, X):
        return jnp.zeros(X.shape[0]), jnp.ones(X.shape[0])

    plain = ppbo.Surrogate(model=lambda data: None, predict=predict, name="plain")
    other = ppbo.Posterior(plain, {"c": jnp.zeros(1)}, posterior.data)
    with pytest.raises(ppbo.MissingCapabilityError, match="predict_joint"):
        bind(eubo, other)


X = np.array([[0.5, 0.5], [0.1, 0.9], [0.95, 0.05], [0.3, 0.6]])


def test_anpei_is_ei_when_rho_is_one_and_phi_is_one(posterior):
    anchors = np.array([[0.5, 0.5], [0.2, 0.8]])
    values = evaluate(
        anpei, posterior, X, anchors=anchors, weights=np.ones(2), rho=1.0, t=3.0
    )
    np.testing.assert_allclose(values, evaluate(ei, posterior, X), rtol=1e-12)


def test_anpei_matches_its_formula(posterior):
    anchors = np.array([[0.5, 0.5], [0.2, 0.8]])
    weights = np.array([3.0, 0.5])
    options = dict(anchors=anchors, weights=weights, lengthscale=0.2, gamma=2.0)
    values = evaluate(anpei, posterior, X, rho=0.3, t=4.0, **options)
    mean, var = (np.asarray(a)[0] for a in posterior.predict(X))
    mean_obs, _ = posterior.predict(np.asarray(posterior.data.X)[: posterior.data.n])
    best = float(np.max(mean_obs))
    d2 = ((X[:, None, :] - anchors[None]) ** 2).sum(-1)
    phi = 1 + np.exp(-0.5 * d2 / 0.2**2) @ (weights - 1)
    scale = phi ** (2.0 / 4.0)
    sigma = scale * np.sqrt(var)
    z = (mean - best) / sigma
    expected_ei = sigma * (z * norm.cdf(z) + norm.pdf(z))
    np.testing.assert_allclose(values, 0.3 * expected_ei - 0.7 * scale, rtol=1e-9)
    # the anchors' influence fades with the iteration: s -> 1 as t grows
    late = evaluate(anpei, posterior, X, rho=0.3, t=1e9, **options)
    plain = evaluate(ei, posterior, X)
    np.testing.assert_allclose(late, 0.3 * plain - 0.7, rtol=1e-6)


def test_anchor_factor_at_and_far_from_anchors():
    phi = anchor_factor(jnp.array([[0.0, 0.0], [9.0, 9.0]]), [[0.0, 0.0]], [4.0])
    np.testing.assert_allclose(phi, [4.0, 1.0])


def test_dueling_thompson_frequencies_match_maximiser_probabilities(posterior):
    C = np.array([[0.2, 0.3], [0.5, 0.5], [0.8, 0.2], [0.4, 0.8]])
    mean, cov = posterior.surrogate.predict_joint_one(
        {k: v[0] for k, v in posterior.samples.items()},
        posterior.data,
        jnp.asarray(C),
        jax.tree.map(lambda v: v[0], posterior.cache),
    )
    # Brute-force reference: joint numpy draws at the candidates.
    draws = np.random.default_rng(1).multivariate_normal(
        np.asarray(mean), np.asarray(cov), size=200_000, method="eigh"
    )
    p = np.bincount(draws.argmax(1), minlength=4) / draws.shape[0]
    assert (p > 0.05).sum() >= 2  # a non-trivial case
    n = 600
    rows = np.array(
        [dueling_thompson(k, posterior, C)[0] for k in jax.random.split(key(2), n)]
    )
    for j in range(2):
        freq = np.bincount(rows[:, j], minlength=4) / n
        tol = 4.0 * np.sqrt(p * (1 - p) / n) + 4.0 * np.sqrt(p * (1 - p) / 2e5)
        assert np.all(np.abs(freq - p) <= tol + 1e-12), (freq, p)
    # The two members are independent draws: the pair (i, j) has probability p_i p_j.
    same = np.mean(rows[:, 0] == rows[:, 1])
    expect = np.sum(p**2)
    assert abs(same - expect) <= 4.0 * np.sqrt(expect * (1 - expect) / n)
    idx, pair = dueling_thompson(key(3), posterior, C)
    np.testing.assert_array_equal(pair, C[np.asarray(idx)])


def test_dueling_thompson_bad_input(posterior):
    with pytest.raises(ValueError, match="shape"):
        dueling_thompson(key(0), posterior, np.zeros((3, 5)))
    with pytest.raises(ValueError, match="nan"):
        dueling_thompson(key(0), posterior, np.array([[0.1, np.nan]]))


def key(i):
    return jax.random.key(i)
