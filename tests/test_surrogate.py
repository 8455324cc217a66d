"""Surrogate and Posterior: a user-defined model, mixtures and joint draws."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from jax.scipy.linalg import cho_solve

import ppbo
from ppbo.models import gp
from ppbo.models.gaussian import MaskedMultivariateNormal, masked_covariance

RNG = np.random.default_rng(5)
X = np.sort(RNG.random(40))[:, None]
Y = np.sin(2 * np.pi * X[:, 0] / 0.25) + 0.05 * RNG.standard_normal(40)


def _periodic(A, B, params):
    # MacKay (1998) periodic kernel; not one of ppbo's models.
    d = jnp.abs(A[:, None, 0] - B[None, :, 0])
    s = jnp.sin(jnp.pi * d / params["period"]) / params["lengthscale"][0]
    return params["outputscale"] * jnp.exp(-2.0 * s**2)


def periodic_model(data):
    params = {
        "lengthscale": numpyro.sample(
            "lengthscale", dist.LogNormal(0.0, 0.5).expand([1]).to_event(1)
        ),
        "outputscale": numpyro.sample("outputscale", dist.LogNormal(0.0, 1.0)),
        "period": numpyro.sample("period", dist.Uniform(0.2, 0.35)),
        "noise": numpyro.sample("noise", dist.LogNormal(-4.0, 1.0)),
    }
    K = _periodic(data.X, data.X, params) + (params["noise"] + 1e-6) * jnp.eye(
        len(data.y)
    )
    numpyro.sample(
        "y", MaskedMultivariateNormal(jnp.zeros_like(data.y), K, data.mask), obs=data.y
    )


def periodic_prepare(params, data):
    K = _periodic(data.X, data.X, params) + (params["noise"] + 1e-6) * jnp.eye(
        len(data.y)
    )
    L = jnp.linalg.cholesky(masked_covariance(K, data.mask))
    return {"L": L, "alpha": cho_solve((L, True), jnp.where(data.mask, data.y, 0.0))}


def periodic_predict(params, data, X, cache):
    Ks = jnp.where(data.mask[None], _periodic(X, data.X, params), 0.0)
    V = jax.scipy.linalg.solve_triangular(cache["L"], Ks.T, lower=True)
    return Ks @ cache["alpha"], params["outputscale"] - jnp.sum(V**2, 0)


def test_user_defined_surrogate_fits_and_predicts():
    surrogate = ppbo.Surrogate(
        model=periodic_model,
        predict=periodic_predict,
        prepare=periodic_prepare,
        name="periodic",
    )
    data = ppbo.Dataset(X, Y)
    config = ppbo.NUTS(num_warmup=150, num_samples=100)
    posterior = ppbo.fit(surrogate, data, config, jax.random.key(0))
    assert set(posterior.samples) == {"lengthscale", "outputscale", "period", "noise"}
    # the data have period 0.25 (multiples of it are excluded by the prior)
    period = np.asarray(posterior.samples["period"])
    assert abs(np.median(period) - 0.25) < 0.02
    # and extrapolates the periodic pattern beyond the data
    Xs = np.array([[1.1], [1.2]])
    mean, _ = posterior.predict_marginal(Xs)
    np.testing.assert_allclose(mean, np.sin(2 * np.pi * Xs[:, 0] / 0.25), atol=0.3)
    with pytest.raises(TypeError, match="capability .predict_joint."):
        posterior.sample_f(jax.random.key(1), Xs, 4)


def _two_sample_posterior():
    data = ppbo.Dataset(X, Y)
    samples = {
        "lengthscale": jnp.array([[0.1], [0.3]]),
        "outputscale": jnp.array([1.0, 2.0]),
        "noise": jnp.array([0.01, 0.05]),
        "mean": jnp.array([0.0, 0.5]),
    }
    surrogate = gp.surrogate()
    cache = jax.vmap(lambda p: surrogate.prepare(p, data))(samples)
    return ppbo.Posterior(surrogate, samples, data, cache=cache, num_chains=1)


def test_predict_marginal_is_the_mixture():
    posterior = _two_sample_posterior()
    Xs = RNG.random((5, 1))
    mean, var = posterior.predict(Xs)
    assert mean.shape == (2, 5) and var.shape == (2, 5)
    mix_mean, mix_var = posterior.predict_marginal(Xs)
    np.testing.assert_allclose(mix_mean, 0.5 * (mean[0] + mean[1]), rtol=1e-12)
    # law of total variance
    expected = 0.5 * (var[0] + var[1]) + 0.25 * (mean[0] - mean[1]) ** 2
    np.testing.assert_allclose(mix_var, expected, rtol=1e-10)
    one = posterior.sample(1)
    np.testing.assert_allclose(one.predict(Xs)[0][0], mean[1])


def test_sample_f_has_the_posterior_covariance():
    posterior = _two_sample_posterior()
    Xs = np.array([[0.2], [0.25], [0.9]])
    num = 4000
    draws = np.asarray(posterior.sample_f(jax.random.key(3), Xs, num))
    assert draws.shape == (2, num, 3)
    surrogate = posterior.surrogate
    for i in range(2):
        params = jax.tree.map(lambda a, i=i: a[i], posterior.samples)
        cache = jax.tree.map(lambda a, i=i: a[i], posterior.cache)
        mean, cov = surrogate.predict_joint(
            params, posterior.data, jnp.asarray(Xs), cache
        )
        mean, cov = np.asarray(mean), np.asarray(cov)
        sd = np.sqrt(np.diag(cov))
        np.testing.assert_array_less(
            np.abs(draws[i].mean(0) - mean), 5 * sd / np.sqrt(num) + 1e-9
        )
        # standard error of a sample covariance: sqrt((s_ii s_jj + s_ij^2) / num)
        se = np.sqrt((np.outer(sd**2, sd**2) + cov**2) / num)
        np.testing.assert_array_less(np.abs(np.cov(draws[i].T) - cov), 5 * se + 1e-9)


def test_posterior_is_a_pytree_and_validates_inputs():
    posterior = _two_sample_posterior()
    leaves, treedef = jax.tree.flatten(posterior)
    rebuilt = jax.tree.unflatten(treedef, leaves)
    assert isinstance(rebuilt, ppbo.Posterior) and rebuilt.num_samples == 2
    out = jax.jit(
        lambda p, x: p.surrogate.predict_one(
            jax.tree.map(lambda a: a[0], p.samples),
            p.data,
            x,
            jax.tree.map(lambda a: a[0], p.cache),
        )
    )(posterior, jnp.zeros((2, 1)))
    assert out[0].shape == (2,)
    with pytest.raises(ValueError, match=r"X must have shape \(m, 1\)"):
        posterior.predict(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="X must be float64"):
        posterior.predict(np.zeros((3, 1), np.float32))
    with pytest.raises(ValueError, match="num must be >= 1"):
        posterior.sample_f(jax.random.key(0), np.zeros((3, 1)), 0)
    with pytest.raises(IndexError, match="index must be in"):
        posterior.sample(5)
    with pytest.raises(TypeError, match="model must be callable"):
        ppbo.Surrogate(model=None, predict=periodic_predict)


def test_thin_takes_evenly_spaced_samples():
    X = np.linspace(0, 1, 6)[:, None]
    data = ppbo.Dataset(X, np.sin(4 * X[:, 0]))
    posterior = ppbo.fit(
        gp.surrogate(),
        data,
        ppbo.NUTS(num_warmup=20, num_samples=12),
        jax.random.key(0),
    )
    thinned = posterior.thin(4)
    assert thinned.num_samples == 4
    for site, values in posterior.samples.items():
        np.testing.assert_array_equal(thinned.samples[site], values[::3])
    np.testing.assert_array_equal(thinned.cache["L"], posterior.cache["L"][::3])
    mean, _ = thinned.predict(X)
    np.testing.assert_allclose(mean, posterior.predict(X)[0][::3])
    assert posterior.thin(12) is posterior
    repeated = posterior.thin(24)  # each sample twice, in order
    np.testing.assert_array_equal(
        repeated.samples["noise"], np.repeat(posterior.samples["noise"], 2)
    )
    with pytest.raises(ValueError, match="num must be a positive integer"):
        posterior.thin(0)


def test_posterior_is_immutable_and_derived_by_one_constructor():
    posterior = _two_sample_posterior()
    with pytest.raises(AttributeError, match="immutable"):
        posterior.data = None
    with pytest.raises(AttributeError, match="immutable"):
        del posterior.samples
    # conditioning returns a new posterior equal to fitting the same samples on
    # the extended data; the original is unchanged
    X_new, y_new = np.array([[1.3]]), np.array([0.4])  # beyond the data
    more = posterior.condition(X_new, y_new)
    assert more.data.n == posterior.data.n + 1 == 41
    assert posterior.data.n == 40
    X_all = np.concatenate([posterior.data.unpadded()[0], X_new])
    y_all = np.concatenate([posterior.data.unpadded()[1], y_new])
    Xs = np.array([[1.25], [0.7]])
    for i in range(posterior.num_samples):
        params = {k: np.asarray(v[i]) for k, v in posterior.samples.items()}
        refit = ppbo.fit(
            posterior.surrogate,
            ppbo.Dataset(X_all, y_all, capacity=more.data.capacity),
            ppbo.Fixed(params),
            jax.random.key(0),
        )
        np.testing.assert_allclose(
            more.predict(Xs)[0][i],
            refit.predict(Xs)[0][0],
            atol=1e-9,
        )
    # the Kriging believer keeps a one-sample posterior's mean and collapses the
    # variance there
    one = posterior.sample(0)
    busy = one.condition_on_pending(X_new)
    mean, var = one.predict_marginal(X_new)
    mean_busy, var_busy = busy.predict_marginal(X_new)
    np.testing.assert_allclose(mean_busy, mean, atol=1e-9)
    assert float(var_busy[0]) < 0.1 * float(var[0])
    assert posterior.condition_on_pending(np.zeros((0, 1))) is posterior


def test_noise_is_a_per_point_capability():
    posterior = _two_sample_posterior()
    X_test = np.array([[0.1], [0.9]])
    noise = np.asarray(posterior.noise_var(X_test))
    expected = np.asarray(posterior.samples["noise"])[:, None] + gp.JITTER
    np.testing.assert_allclose(noise, np.broadcast_to(expected, (2, 2)), rtol=1e-12)
    bare = ppbo.Surrogate(model=periodic_model, predict=periodic_predict)
    assert bare.capabilities == {ppbo.Capability.CONDITIONING}
    with pytest.raises(ppbo.MissingCapabilityError, match="capability 'noise'"):
        bare.noise_one({}, jnp.zeros((1, 1)))


def test_gp_capabilities_come_from_the_kernel_classes():
    from ppbo.models import multitask_gp
    from ppbo.models.kernels import Matern52, SquaredExponential

    C = ppbo.Capability
    smooth = gp.surrogate(kernel="matern52")
    assert smooth.gp.kernel is Matern52 and smooth.gp.differentiable
    assert {C.GP, C.GP_DERIVATIVES, C.NOISE} <= smooth.capabilities
    assert gp.surrogate(kernel="rbf").gp.kernel is SquaredExponential
    rough = gp.surrogate(kernel="matern12").capabilities
    assert C.GP in rough and C.GP_DERIVATIVES not in rough
    assert C.GP not in gp.surrogate(kernel="linear").capabilities
    # a multi-task GP carries GP extras for users, but declares no GP parts: the
    # default acquisition is log-EI and PES refuses it by capability
    multitask = multitask_gp.surrogate(num_tasks=2)
    assert C.GP not in multitask.capabilities and C.NOISE in multitask.capabilities
    assert ppbo.acquisition.default_acquisition(multitask) == "log_ei"
    from ppbo.acquisition.pes import check_surrogate

    with pytest.raises(ppbo.MissingCapabilityError, match="capability 'gp'"):
        check_surrogate(multitask)


def test_diagnostics_live_with_the_diagnostics_code():
    from ppbo.inference import diagnostics
    from ppbo.surrogate import Diagnostics, DiagnosticWarning

    assert Diagnostics is diagnostics.Diagnostics is ppbo.Diagnostics
    assert DiagnosticWarning is diagnostics.DiagnosticWarning
    report = _two_sample_posterior().diagnostics(warn=False)
    assert isinstance(report, Diagnostics)
