"""The surrogate contract on a model that is not a Gaussian process.

A Bayesian linear model on fixed features with a per-point (heteroscedastic) noise,

.. math:: f(x) = \\phi(x)^\\top w, \\quad w \\sim N(0, s^2 I), \\quad
    y_i = f(x_i) + \\varepsilon_i, \\quad \\varepsilon_i \\sim N(0, \\sigma^2 g(x_i)),

(Bishop 2006, "Pattern Recognition and Machine Learning", §3.3), written as a plain
NumPyro model with its conjugate weight-space posterior as ``predict``, its own
``noise`` and exact sample paths (weight draws). It declares no GP parts, so PES
refuses it, while EI, KG, MES (Gumbel y*) and Thompson sampling work on it through
the acquisition API and in a campaign with batches of q = 3.

References: the function-space (kernel) form of the same posterior with dense
linear algebra, and brute-force Monte Carlo over weight draws.
"""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from jax.scipy.linalg import cho_solve, solve_triangular

import ppbo
from ppbo.acquisition import evaluate, kg, mes, per_sample, pes, thompson
from ppbo.models.gaussian import MaskedMultivariateNormal
from ppbo.surrogate import Capability, PathSampler

CENTERS = jnp.linspace(0.0, 1.0, 9)
WIDTH = 0.15


def features(X):
    """Fixed radial features and a constant, (m, 10), on the first input."""
    bumps = jnp.exp(-0.5 * ((X[:, :1] - CENTERS[None, :]) / WIDTH) ** 2)
    return jnp.concatenate([jnp.ones((X.shape[0], 1), X.dtype), bumps], axis=1)


def noise(params, X):
    """Per-point noise variance: sigma^2 (0.2 + x_0)^2, larger on the right."""
    return params["noise"] * (0.2 + X[:, 0]) ** 2


def blm_model(data):
    s2 = numpyro.sample("weight_variance", dist.LogNormal(0.0, 0.5))
    sigma2 = numpyro.sample("noise", dist.LogNormal(-3.0, 0.5))
    Phi = features(data.X)
    K = s2 * Phi @ Phi.T + jnp.diag(noise({"noise": sigma2}, data.X))
    loc = jnp.zeros_like(data.y)
    numpyro.sample("y", MaskedMultivariateNormal(loc, K, data.mask), obs=data.y)


def blm_prepare(params, data):
    # weight-space posterior: A = Phi^T D^-1 Phi + I / s^2, mean A^-1 Phi^T D^-1 y
    Phi = jnp.where(data.mask[:, None], features(data.X), 0.0)
    inv_noise = jnp.where(data.mask, 1.0 / noise(params, data.X), 0.0)
    p = Phi.shape[1]
    A = Phi.T @ (inv_noise[:, None] * Phi) + jnp.eye(p) / params["weight_variance"]
    L = jnp.linalg.cholesky(A)
    mean = cho_solve((L, True), Phi.T @ (inv_noise * jnp.where(data.mask, data.y, 0)))
    return {"L": L, "mean": mean}


def blm_predict_joint(params, data, X, cache):
    Phi = features(X)
    V = solve_triangular(cache["L"], Phi.T, lower=True)
    return Phi @ cache["mean"], V.T @ V


def blm_predict(params, data, X, cache):
    Phi = features(X)
    V = solve_triangular(cache["L"], Phi.T, lower=True)
    return Phi @ cache["mean"], jnp.sum(V**2, axis=0)


def blm_draw(key, params, data, cache, num_paths):
    # exact draws w = mean + L^-T e of N(mean, A^-1)
    e = jax.random.normal(key, (num_paths, cache["mean"].shape[0]))
    return cache["mean"] + solve_triangular(cache["L"].T, e.T, lower=False).T


def blm_evaluate(weights, X):
    return weights @ features(X).T


BLM = ppbo.Surrogate(
    model=blm_model,
    predict=blm_predict,
    prepare=blm_prepare,
    predict_joint=blm_predict_joint,
    noise=noise,
    paths=PathSampler(draw=blm_draw, evaluate=blm_evaluate),
    name="bayesian_linear",
)

PARAMS = {"weight_variance": 0.8, "noise": 0.01}


def objective(x):
    return np.sin(6.0 * x[..., 0]) + 0.5 * x[..., 0]


@pytest.fixture(scope="module")
def posterior():
    X = np.array([[0.05], [0.2], [0.35], [0.6], [0.75], [0.95]])
    data = ppbo.Dataset(X, objective(X), capacity=8)
    return ppbo.fit(BLM, data, ppbo.Fixed(PARAMS), jax.random.key(0))


def test_capabilities_are_declared_not_sniffed():
    assert BLM.capabilities == {
        Capability.PREDICT_JOINT,
        Capability.NOISE,
        Capability.SAMPLE_PATHS,
        Capability.CONDITIONING,
    }
    assert ppbo.acquisition.default_acquisition(BLM) == "log_ei"


def test_posterior_matches_the_function_space_form(posterior):
    # the same model as a GP with kernel s^2 phi(x)^T phi(x') and noise D
    X, y, _ = posterior.data.unpadded()
    Xs = np.linspace(0.0, 1.0, 7)[:, None]
    Phi, Phis = np.asarray(features(jnp.asarray(X))), np.asarray(features(Xs))
    s2, sigma2 = PARAMS["weight_variance"], PARAMS["noise"]
    D = np.diag(sigma2 * (0.2 + X[:, 0]) ** 2)
    K = s2 * Phi @ Phi.T + D
    Ks = s2 * Phis @ Phi.T
    mean_ref = Ks @ np.linalg.solve(K, y)
    cov_ref = s2 * Phis @ Phis.T - Ks @ np.linalg.solve(K, Ks.T)
    mean, var = posterior.predict(Xs)
    np.testing.assert_allclose(mean[0], mean_ref, atol=1e-9)
    np.testing.assert_allclose(var[0], np.diag(cov_ref), atol=1e-9)
    # per-point noise as the posterior reports it
    np.testing.assert_allclose(
        posterior.noise_var(Xs)[0], sigma2 * (0.2 + Xs[:, 0]) ** 2, rtol=1e-12
    )


def test_ei_kg_mes_and_thompson_work_through_the_acquisition_api(posterior):
    X = np.linspace(0.0, 1.0, 11)[:, None]
    key = jax.random.key(1)
    for acquisition, options in (
        (ppbo.acquisition.ei, {}),
        (ppbo.acquisition.log_ei, {}),
        (kg, {"key": key}),
        (mes, {"key": key, "method": "gumbel", "num_grid": 512}),
        (thompson, {"key": key}),
    ):
        values = np.asarray(evaluate(acquisition, posterior, X, **options))
        assert values.shape == (11,) and np.all(np.isfinite(values)), acquisition
    # KG reads the per-point noise: the same values as passing it explicitly at
    # each point, and different ones with another noise
    Xk = np.array([[0.15], [0.4]])  # near the best observations: KG > 0
    own = np.asarray(evaluate(kg, posterior, Xk, key=key))
    assert np.all(own > 1e-6)
    noise_at = np.asarray(posterior.noise_var(Xk))[0]
    for i in range(2):
        given = evaluate(kg, posterior, Xk[i : i + 1], key=key, noise=noise_at[i])
        np.testing.assert_allclose(own[i], given[0], rtol=1e-10)
    louder = np.asarray(evaluate(kg, posterior, Xk, key=key, noise=10 * noise_at))
    assert np.all(louder < own)


def test_thompson_draws_exact_weight_paths(posterior):
    # mean and variance of f at two points over many Thompson keys equal the
    # posterior's (brute-force Monte Carlo over exact weight draws)
    X = np.array([[0.45], [0.99]])
    num = 400
    draws = np.stack(
        [
            np.asarray(per_sample(thompson, posterior, X, key=k))[0]
            for k in jax.random.split(jax.random.key(2), num)
        ]
    )
    mean, var = (np.asarray(a)[0] for a in posterior.predict(X))
    se = np.sqrt(var / num)
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean), 4.5 * se)
    np.testing.assert_allclose(draws.var(0), var, rtol=4.5 * np.sqrt(2 / num))


def test_pes_refuses_naming_the_missing_capability(posterior):
    with pytest.raises(ppbo.MissingCapabilityError, match="capability 'gp'"):
        evaluate(pes, posterior, np.array([[0.5]]), key=jax.random.key(0))
    with pytest.raises(ppbo.MissingCapabilityError, match="method='gumbel'"):
        evaluate(mes, posterior, np.array([[0.5]]), key=jax.random.key(0))
    with pytest.raises(ppbo.MissingCapabilityError, match="capability 'gp'"):
        ppbo.Optimizer(
            {"x": ppbo.Real(0.0, 1.0)}, surrogate=BLM, acquisition="pes", seed=0
        )


def test_a_surrogate_that_cannot_condition_refuses_batches(posterior):
    frozen = ppbo.Surrogate(
        model=blm_model,
        predict=blm_predict,
        prepare=blm_prepare,
        noise=noise,
        conditioning=False,
        name="trained_elsewhere",
    )
    data = posterior.data
    fitted = ppbo.fit(frozen, data, ppbo.Fixed(PARAMS), jax.random.key(0))
    X, _ = ppbo.optimize_acquisition(
        ppbo.acquisition.ei, fitted, jax.random.key(0), num_raw=32
    )
    assert X.shape == (1, 1)
    with pytest.raises(ppbo.MissingCapabilityError, match="'conditioning'"):
        ppbo.optimize_acquisition(
            ppbo.acquisition.ei, fitted, jax.random.key(0), q=2, num_raw=32
        )


@pytest.mark.parametrize(
    "acquisition, options",
    [
        ("ei", {}),
        ("kg", {}),
        ("mes", {"method": "gumbel", "num_grid": 256}),
        ("thompson", {}),
    ],
)
def test_short_campaign_with_batches_of_three(acquisition, options):
    opt = ppbo.Optimizer(
        {"x": ppbo.Real(0.0, 1.0)},
        surrogate=BLM,
        inference=ppbo.MAP(num_restarts=2),
        acquisition=acquisition,
        acquisition_options=options,
        n_initial=4,
        seed=3,
        optimizer_options={"num_raw": 64, "num_restarts": 2, "max_iterations": 20},
    )
    for _ in range(3):
        trials = opt.ask(3)
        assert len(trials) == 3
        for trial in trials:
            opt.tell(trial, float(-objective(np.array([trial.params["x"]]))))
    trials = opt.get_trials()
    xs = [t.params["x"] for t in trials]
    assert len(xs) == 9 and all(0.0 <= x <= 1.0 for x in xs)
    assert [t.state for t in trials] == ["COMPLETE"] * 9
    # five model-based points (after the four of the design), all distinct: the
    # batches condition on their earlier points instead of repeating them
    model_points = [t.params["x"] for t in trials if t.origin == "model"]
    assert len(model_points) == 5 and len(set(model_points)) == 5
