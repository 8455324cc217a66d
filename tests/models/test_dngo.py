"""DNGO: the network's last layer as Bayesian linear regression.

References: dense numpy linear algebra for the weight posterior on the trained
network's features (Bishop 2006, eqs. 3.53-3.59), scipy.stats for the evidence
that alpha and beta maximise, and Monte Carlo moments of the sample paths.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import ppbo
from ppbo.models import blr, dngo
from ppbo.surrogate import Capability

SMALL = dngo.surrogate(hidden=(16, 16), num_steps=300)


def objective(X):
    return np.sin(6.0 * X[:, 0]) + 0.5 * X[:, 0]


@pytest.fixture(scope="module")
def data():
    X = np.random.default_rng(0).random((14, 1))
    return ppbo.Dataset(X, objective(X), capacity=24)


@pytest.fixture(scope="module")
def posterior(data):
    return ppbo.fit(SMALL, data, ppbo.Train(), jax.random.key(1))


def _features(posterior, X):
    params = {k: v[0] for k, v in posterior.samples.items()}
    return np.asarray(dngo.features(params, jnp.asarray(X)))


def _dense(Phi, y, alpha, beta):
    A = alpha * np.eye(Phi.shape[1]) + beta * Phi.T @ Phi
    S = np.linalg.inv(A)
    return beta * S @ Phi.T @ y, S


def _mean_atol(Phi, Phis, y, alpha, beta):
    # forward error of a linear solve: cond(A) * eps relative to the solution,
    # carried to the predicted means (A = alpha I + beta Phi^T Phi is badly
    # conditioned when the features interpolate the data and beta is large)
    A = alpha * np.eye(Phi.shape[1]) + beta * Phi.T @ Phi
    mean_w = _dense(Phi, y, alpha, beta)[0]
    scale = np.max(np.abs(Phis) @ np.abs(mean_w))
    return max(1e-10, 10 * np.linalg.cond(A) * np.finfo(float).eps * scale)


def test_samples_and_capabilities(posterior):
    assert sorted(posterior.samples) == ["alpha", "b0", "b1", "beta", "w0", "w1"]
    assert posterior.samples["w1"].shape == (1, 16, 16)
    assert all(v.dtype == jnp.float64 for v in posterior.samples.values())
    assert SMALL.capabilities == {
        Capability.PREDICT_JOINT,
        Capability.NOISE,
        Capability.SAMPLE_PATHS,
        Capability.CONDITIONING,
    }


def test_predictions_are_the_dense_blr_posterior_on_the_features(posterior, data):
    X, y, _ = data.unpadded()
    alpha = float(posterior.samples["alpha"][0])
    beta = float(posterior.samples["beta"][0])
    mean_w, S = _dense(_features(posterior, X), y, alpha, beta)
    Xs = np.linspace(0.0, 1.0, 9)[:, None]
    Phis = _features(posterior, Xs)
    mean, var = posterior.predict(Xs)
    atol = _mean_atol(_features(posterior, X), Phis, y, alpha, beta)
    np.testing.assert_allclose(mean[0], Phis @ mean_w, rtol=1e-8, atol=atol)
    np.testing.assert_allclose(
        var[0], np.einsum("mi,ij,mj->m", Phis, S, Phis), rtol=1e-7, atol=1e-12
    )
    np.testing.assert_allclose(posterior.noise_var(Xs)[0], 1.0 / beta, rtol=1e-12)
    _, cov = SMALL.predict_joint_one(
        {k: v[0] for k, v in posterior.samples.items()},
        data,
        jnp.asarray(Xs),
        jax.tree.map(lambda a: a[0], posterior.cache),
    )
    np.testing.assert_allclose(cov, Phis @ S @ Phis.T, rtol=1e-7, atol=1e-12)


def test_precisions_maximise_the_evidence_of_the_features(posterior, data):
    X, y, _ = data.unpadded()
    Phi = _features(posterior, X)
    alpha = float(posterior.samples["alpha"][0])
    beta = float(posterior.samples["beta"][0])

    def evidence(a, b):
        cov = Phi @ Phi.T / a + np.eye(len(y)) / b
        return stats.multivariate_normal(np.zeros(len(y)), cov).logpdf(y)

    best = evidence(alpha, beta)
    lo_a, hi_a = np.exp(blr.LOG_ALPHA_BOUNDS)
    lo_b, hi_b = np.exp(blr.LOG_BETA_BOUNDS)
    for fa, fb in [(1.05, 1), (1 / 1.05, 1), (1, 1.05), (1, 1 / 1.05)]:
        a, b = alpha * fa, beta * fb
        if lo_a <= a <= hi_a and lo_b <= b <= hi_b:
            assert evidence(a, b) <= best + 1e-9


def test_the_network_fits_the_function(posterior):
    Xs = np.linspace(0.02, 0.98, 25)[:, None]
    mean, _ = posterior.predict_marginal(Xs)
    # much better than the best constant predictor (the data span [0, 1])
    rmse = np.sqrt(np.mean((np.asarray(mean) - objective(Xs)) ** 2))
    assert rmse < 0.2 * np.std(objective(Xs))


def test_conditioning_is_the_blr_posterior_on_the_appended_data(posterior, data):
    Xn, yn = np.array([[0.33], [0.71]]), np.array([0.4, -0.2])
    more = posterior.condition(Xn, yn)
    X, y, _ = more.data.unpadded()
    alpha = float(posterior.samples["alpha"][0])
    beta = float(posterior.samples["beta"][0])
    mean_w, S = _dense(_features(posterior, X), y, alpha, beta)
    Xs = np.array([[0.3], [0.7]])
    Phis = _features(posterior, Xs)
    mean, var = more.predict(Xs)
    np.testing.assert_allclose(mean[0], Phis @ mean_w, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(
        var[0], np.einsum("mi,ij,mj->m", Phis, S, Phis), rtol=1e-7, atol=1e-12
    )


def test_sample_paths_have_the_predictive_moments(posterior):
    num = 4000
    params = {k: v[0] for k, v in posterior.samples.items()}
    cache = jax.tree.map(lambda a: a[0], posterior.cache)
    paths = SMALL.paths.draw(jax.random.key(5), params, posterior.data, cache, num)
    Xs = np.array([[0.1], [0.5], [0.9]])
    values = np.asarray(SMALL.paths.evaluate(paths, jnp.asarray(Xs)))
    mean, var = (np.asarray(a[0]) for a in posterior.predict(Xs))
    # five Monte Carlo standard errors: sd / sqrt(N) for the mean and, for a
    # Gaussian, var * sqrt(2 / (N - 1)) for the sample variance
    np.testing.assert_array_less(np.abs(values.mean(0) - mean), 5 * np.sqrt(var / num))
    np.testing.assert_array_less(
        np.abs(values.var(0, ddof=1) - var), 5 * var * np.sqrt(2 / (num - 1))
    )


def test_one_compilation_per_bucket(data, compile_counter):
    X, y, _ = data.unpadded()
    ppbo.fit(
        SMALL,
        ppbo.Dataset(X[:10], y[:10], capacity=24),
        ppbo.Train(),
        jax.random.key(0),
    )
    with compile_counter.measure():
        for n in (11, 12):
            ppbo.fit(
                SMALL,
                ppbo.Dataset(X[:n], y[:n], capacity=24),
                ppbo.Train(),
                jax.random.key(n),
            )
    assert compile_counter.count == 0


SLICED = dngo.surrogate(hidden=(16, 16), num_steps=300, precisions="slice")


def test_sliced_precisions_keep_the_network_and_give_per_sample_blr_heads(
    posterior, data
):
    # the posterior of the sampled precisions themselves is checked against a
    # dense grid in tests/models/test_blr.py; here: DNGO wires them per sample
    sliced = ppbo.fit(SLICED, data, ppbo.Train(), jax.random.key(1))
    s = dngo.SLICE_SCHEDULE["num_samples"]
    assert sliced.num_samples == s
    for name in ("w0", "b0", "w1", "b1"):  # the same key trains the same network
        np.testing.assert_array_equal(
            sliced.samples[name],
            np.broadcast_to(
                posterior.samples[name][0], (s, *posterior.samples[name].shape[1:])
            ),
        )
    alpha, beta = (
        np.asarray(sliced.samples["alpha"]),
        np.asarray(sliced.samples["beta"]),
    )
    assert len(np.unique(alpha)) > 1 and len(np.unique(beta)) > 1
    X, y, _ = data.unpadded()
    Phi = _features(posterior, X)
    Xs = np.linspace(0.0, 1.0, 9)[:, None]
    Phis = _features(posterior, Xs)
    mean, var = sliced.predict(Xs)
    for i in (0, s // 2, s - 1):
        mean_w, S = _dense(Phi, y, alpha[i], beta[i])
        atol = _mean_atol(Phi, Phis, y, alpha[i], beta[i])
        np.testing.assert_allclose(mean[i], Phis @ mean_w, rtol=1e-8, atol=atol)
        np.testing.assert_allclose(
            var[i], np.einsum("mi,ij,mj->m", Phis, S, Phis), rtol=1e-7, atol=1e-12
        )
        np.testing.assert_allclose(sliced.noise_var(Xs)[i], 1.0 / beta[i], rtol=1e-12)


def test_an_ensemble_is_the_mixture_of_independently_trained_members(data):
    # member e is the single DNGO trained with the e-th split key, and the
    # posterior's samples are the members' samples one after another
    ensemble = dngo.surrogate(hidden=(16, 16), num_steps=300, ensemble=3)
    posterior = ppbo.fit(ensemble, data, ppbo.Train(), jax.random.key(1))
    assert posterior.num_samples == 3
    Xs = np.linspace(0.0, 1.0, 9)[:, None]
    mean, var = posterior.predict(Xs)
    keys = jax.random.split(jax.random.key(1), 3)
    for e in range(3):
        member = {k: v[e] for k, v in posterior.samples.items()}
        alone = dngo._trainer(
            keys[e],
            data,
            ensemble=1,
            hidden=(16, 16),
            num_steps=300,
            learning_rate=1e-2,
            weight_decay=0.0,
            precisions="evidence",
        )
        for name in alone:  # the same program up to XLA's fusion: not bitwise
            np.testing.assert_allclose(
                member[name], alone[name][0], rtol=1e-6, atol=1e-9
            )
    # the members differ (independent initialisations), so the mixture's
    # variance exceeds the mean of the members' variances where they disagree
    assert float(np.ptp(np.asarray(mean), axis=0).max()) > 1e-3
    X, y, _ = data.unpadded()
    for e in range(3):
        params = {k: v[e] for k, v in posterior.samples.items()}
        Phi = np.asarray(dngo.features(params, jnp.asarray(X)))
        Phis = np.asarray(dngo.features(params, jnp.asarray(Xs)))
        alpha, beta = float(params["alpha"]), float(params["beta"])
        mean_w, S = _dense(Phi, y, alpha, beta)
        atol = _mean_atol(Phi, Phis, y, alpha, beta)
        np.testing.assert_allclose(mean[e], Phis @ mean_w, rtol=1e-8, atol=atol)
        np.testing.assert_allclose(
            var[e], np.einsum("mi,ij,mj->m", Phis, S, Phis), rtol=1e-7, atol=1e-12
        )


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="hidden"):
        dngo.surrogate(hidden=())
    with pytest.raises(ValueError, match="num_steps"):
        dngo.surrogate(num_steps=0)
    with pytest.raises(ValueError, match="precisions must be one of .* got 'nuts'"):
        dngo.surrogate(precisions="nuts")
    with pytest.raises(ValueError, match="ensemble must be >= 1, got 0"):
        dngo.surrogate(ensemble=0)


def test_features_are_the_tanh_network_on_standardised_inputs(posterior):
    # dense numpy forward pass: x -> (x - 1/2) sqrt(12) -> tanh layers -> [h, 1]
    params = {k: np.asarray(v[0]) for k, v in posterior.samples.items()}
    X = np.random.default_rng(3).random((7, 1))
    h = (X - 0.5) * np.sqrt(12.0)
    for i in range(dngo.network_layers(params)):
        h = np.tanh(h @ params[f"w{i}"] + params[f"b{i}"])
    expected = np.hstack([h, np.ones((7, 1))])
    np.testing.assert_allclose(_features(posterior, X), expected, rtol=1e-12)


def test_first_layer_sees_the_input_variance_glorot_initialisation_assumes():
    # Glorot and Bengio (2010) size the weights for inputs of unit variance: a
    # unit's pre-activation w^T x has variance |w|^2 over x ~ U[0, 1]^d once the
    # inputs are standardised (1/12 of that on raw unit-cube inputs, which kept
    # every tanh in its linear range: benchmarks/README.md, surrogates.py).
    d, h, m = 6, 50, 20000
    net = dngo.init_network(jax.random.key(0), (d, h))
    net = {"w0": net["w0"], "b0": net["b0"]}
    X = jax.random.uniform(jax.random.key(1), (m, d))
    Z = np.arctanh(np.clip(np.asarray(dngo.features(net, X))[:, :-1], -1, 1))
    expected = np.sum(np.asarray(net["w0"]) ** 2, axis=0)  # (h,)
    ratio = Z.var(0) / expected
    # the sample variance of m draws has relative sd <= sqrt((kurtosis - 1) / m),
    # at most sqrt(2 / m) for these light-tailed sums of uniforms: five sds
    np.testing.assert_array_less(np.abs(ratio - 1.0), 5 * np.sqrt(2.0 / m))
