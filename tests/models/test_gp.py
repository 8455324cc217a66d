import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer.util import log_density
from scipy.stats import multivariate_normal

import ppbo
from ppbo.models import gp
from ppbo.models.gaussian import gaussian_log_density

RNG = np.random.default_rng(1)
N, D = 9, 2
X = RNG.random((N, D))
Y = np.sin(6 * X[:, 0]) + X[:, 1] ** 2
XS = RNG.random((6, D))
PARAMS = {
    "lengthscale": np.array([0.3, 0.5]),
    "outputscale": 1.7,
    "noise": 0.01,
    "mean": 0.2,
}


def _matern52(A, B, ell, scale):
    r = np.sqrt((((A[:, None, :] - B[None, :, :]) / ell) ** 2).sum(-1))
    return scale * (1 + np.sqrt(5) * r + 5 * r**2 / 3) * np.exp(-np.sqrt(5) * r)


def _dense_posterior(params, mean_fn):
    """Rasmussen & Williams eqs. (2.22)-(2.24) by a dense numpy solve."""
    ell, scale = params["lengthscale"], params["outputscale"]
    K = _matern52(X, X, ell, scale) + (params["noise"] + gp.JITTER) * np.eye(N)
    Ks = _matern52(XS, X, ell, scale)
    mean = mean_fn(XS) + Ks @ np.linalg.solve(K, Y - mean_fn(X))
    cov = _matern52(XS, XS, ell, scale) - Ks @ np.linalg.solve(K, Ks.T)
    return mean, cov


@pytest.mark.parametrize("mean", ["zero", "constant", "linear"])
def test_predictions_match_dense_solve(mean):
    params = dict(PARAMS)
    if mean == "zero":
        del params["mean"]
        mean_fn = lambda A: np.zeros(len(A))  # noqa: E731
    elif mean == "constant":
        mean_fn = lambda A: np.full(len(A), 0.2)  # noqa: E731
    else:
        params["mean_weights"] = np.array([0.5, -1.0])
        mean_fn = lambda A: 0.2 + A @ np.array([0.5, -1.0])  # noqa: E731
    surrogate = gp.surrogate(mean=mean)
    data = ppbo.Dataset(X, Y)
    posterior = ppbo.fit(surrogate, data, ppbo.Fixed(params), jax.random.key(0))
    mu, var = posterior.predict(XS)
    ref_mean, ref_cov = _dense_posterior(params, mean_fn)
    np.testing.assert_allclose(mu[0], ref_mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(var[0], np.diag(ref_cov), rtol=1e-7, atol=1e-10)
    joint_mean, joint_cov = surrogate.predict_joint(
        {k: jnp.asarray(v) for k, v in params.items()},
        data,
        jnp.asarray(XS),
        jax.tree.map(lambda a: a[0], posterior.cache),
    )
    np.testing.assert_allclose(joint_mean, ref_mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(joint_cov, ref_cov, rtol=1e-7, atol=1e-10)


def test_padded_equals_unpadded():
    surrogate = gp.surrogate()
    fixed = ppbo.Fixed(PARAMS)
    tight = ppbo.fit(
        surrogate, ppbo.Dataset(X, Y, capacity=N), fixed, jax.random.key(0)
    )
    padded = ppbo.fit(
        surrogate, ppbo.Dataset(X, Y, capacity=40), fixed, jax.random.key(0)
    )
    for a, b in zip(tight.predict(XS), padded.predict(XS), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    # the log joint density (and so every sampler) is the same too
    params = {k: jnp.asarray(v) for k, v in PARAMS.items()}
    values = [
        log_density(surrogate.model, (ppbo.Dataset(X, Y, capacity=c),), {}, params)[0]
        for c in (N, 16, 40)
    ]
    np.testing.assert_allclose(values, values[0], rtol=1e-12)


def test_log_likelihood_matches_scipy_and_autodiff_gradient():
    A = RNG.random((7, 7))
    K = A @ A.T + 0.5 * np.eye(7)
    r = RNG.standard_normal(7)
    expected = multivariate_normal(np.zeros(7), K).logpdf(r)
    np.testing.assert_allclose(gaussian_log_density(K, r, 7.0), expected, rtol=1e-12)

    def plain(K, r):
        sign, logdet = jnp.linalg.slogdet(K)
        return (
            -0.5 * r @ jnp.linalg.solve(K, r) - 0.5 * logdet - 3.5 * jnp.log(2 * jnp.pi)
        )

    gK, gr = jax.grad(gaussian_log_density, argnums=(0, 1))(
        jnp.asarray(K), jnp.asarray(r), 7.0
    )
    eK, er = jax.grad(plain, argnums=(0, 1))(jnp.asarray(K), jnp.asarray(r))
    # a symmetric matrix's gradient is defined up to its antisymmetric part
    np.testing.assert_allclose(gK + gK.T, eK + eK.T, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(gr, er, rtol=1e-10)


def test_model_log_density_matches_scipy():
    surrogate = gp.surrogate()
    params = {k: jnp.asarray(v) for k, v in PARAMS.items()}
    lp, trace = log_density(surrogate.model, (ppbo.Dataset(X, Y),), {}, params)
    K = _matern52(X, X, PARAMS["lengthscale"], PARAMS["outputscale"])
    K += (PARAMS["noise"] + gp.JITTER) * np.eye(N)
    likelihood = multivariate_normal(np.full(N, 0.2), K).logpdf(Y)
    priors = gp.default_priors(D)
    prior = sum(
        float(jnp.sum(priors[name].log_prob(params[name])))
        for name in ("lengthscale", "outputscale", "noise", "mean")
    )
    np.testing.assert_allclose(lp, likelihood + prior, rtol=1e-10)


def test_prior_override_and_errors():
    surrogate = gp.surrogate(kernel="rbf", priors={"lengthscale": dist.Gamma(2.0, 8.0)})
    with numpyro.handlers.seed(rng_seed=0):
        trace = numpyro.handlers.trace(surrogate.model).get_trace(ppbo.Dataset(X, Y))
    assert trace["lengthscale"]["value"].shape == (D,)
    assert isinstance(trace["lengthscale"]["fn"].base_dist.base_dist, dist.Gamma)
    with pytest.raises(ValueError, match="kernel must be one of"):
        gp.surrogate(kernel="matern72")
    with pytest.raises(ValueError, match="mean must be one of"):
        gp.surrogate(mean="quadratic")
    with pytest.raises(ValueError, match="unknown site 'lengthscales'"):
        gp.surrogate(priors={"lengthscales": dist.Gamma(2.0, 8.0)})
    with pytest.raises(ValueError, match=r"priors\['noise'\] must be a numpyro"):
        gp.surrogate(priors={"noise": 0.1})


def test_kernel_builder_for_sums():
    from ppbo.models.kernels import Linear, Matern52

    surrogate = gp.surrogate(
        kernel=lambda ell: Matern52(ell) + Linear(ell), mean="zero"
    )
    params = {k: v for k, v in PARAMS.items() if k != "mean"}
    posterior = ppbo.fit(
        surrogate, ppbo.Dataset(X, Y), ppbo.Fixed(params), jax.random.key(0)
    )
    ell, scale = PARAMS["lengthscale"], PARAMS["outputscale"]

    def k(A, B):
        return _matern52(A, B, ell, scale) + scale * (A / ell) @ (B / ell).T

    K = k(X, X) + (PARAMS["noise"] + gp.JITTER) * np.eye(N)
    mean = k(XS, X) @ np.linalg.solve(K, Y)
    np.testing.assert_allclose(posterior.predict(XS)[0][0], mean, rtol=1e-8)


@pytest.mark.parametrize("n", [130, 200])
def test_lapack_gradient_matches_xla_and_closed_form(n, monkeypatch):
    # From LAPACK_MIN_SIZE rows the value and gradient come from dpotrf/dpotri on
    # the host: both must agree with XLA's path and with the closed form (R&W
    # eq. 5.9) computed by dense linear algebra, also under vmap, and a matrix
    # that is not positive definite must give NaN as XLA's Cholesky does.
    from ppbo.models import gaussian

    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n + 3))
    K = A @ A.T / n + 0.1 * np.eye(n)
    r = rng.standard_normal(n)
    K_inv = np.linalg.inv(K)
    alpha = K_inv @ r
    value = multivariate_normal(np.zeros(n), K).logpdf(r)
    monkeypatch.setattr(gaussian, "LAPACK_MIN_SIZE", 128)
    grad = jax.value_and_grad(gaussian_log_density, argnums=(0, 1))
    host = jax.jit(grad)(jnp.asarray(K), jnp.asarray(r), float(n))
    monkeypatch.setattr(gaussian, "LAPACK_MIN_SIZE", None)
    xla = jax.jit(grad)(jnp.asarray(K), jnp.asarray(r), float(n))
    # The host path folds the gradient onto the upper triangle (K is symmetric):
    # its symmetric part is the gradient, so every symmetric direction agrees.
    np.testing.assert_allclose(np.tril(host[1][0], -1), 0.0)
    for v, (gK, gr) in (host, xla):
        np.testing.assert_allclose(v, value, rtol=1e-10)
        np.testing.assert_allclose(
            0.5 * (gK + gK.T), 0.5 * (np.outer(alpha, alpha) - K_inv), atol=1e-9
        )
        np.testing.assert_allclose(gr, -alpha, rtol=1e-8, atol=1e-10)
    monkeypatch.setattr(gaussian, "LAPACK_MIN_SIZE", 128)
    Ks = jnp.stack([K, K + np.eye(n)])
    values, (gKs, _) = jax.vmap(grad, in_axes=(0, None, None))(Ks, jnp.asarray(r), n)
    np.testing.assert_allclose(values[0], value, rtol=1e-10)
    np.testing.assert_allclose(
        values[1], multivariate_normal(np.zeros(n), K + np.eye(n)).logpdf(r), rtol=1e-10
    )
    np.testing.assert_allclose(gKs[0], host[1][0], atol=1e-12)
    bad = K.copy()
    bad[0, 0] = -1.0
    v, (gK, _) = grad(jnp.asarray(bad), jnp.asarray(r), float(n))
    assert np.isnan(v) and np.isnan(gK).all()


def test_tight_lengthscale_prior_has_the_light_mode_and_half_its_scale():
    # mode of LogNormal(mu, s) is exp(mu - s^2); the tight prior keeps the light
    # prior's mode sqrt(d) / (2 e) with half the log-scale
    for d in (1, 3, 6):
        light = gp.default_priors(d, "light")["lengthscale"]
        tight = gp.default_priors(d, "tight")["lengthscale"]
        mode = np.exp(float(tight.loc) - float(tight.scale) ** 2)
        np.testing.assert_allclose(mode, np.sqrt(d) / (2 * np.e), rtol=1e-12)
        np.testing.assert_allclose(
            mode, np.exp(float(light.loc) - float(light.scale) ** 2), rtol=1e-12
        )
        assert float(tight.scale) == 0.5 * float(light.scale)


def test_saas_prior_log_density_matches_the_half_cauchy_hierarchy():
    # Eriksson and Jankowiak (2021): tau ~ HalfCauchy(0.1), rho_i ~ HalfCauchy(tau),
    # lengthscale_i = rho_i^(-1/2); the density of the lengthscale is the half-Cauchy
    # density of rho times |d rho / d lengthscale| = 2 lengthscale^-3
    from scipy.stats import halfcauchy

    surrogate = gp.surrogate(lengthscale_prior="saas")
    params = {k: jnp.asarray(v) for k, v in PARAMS.items()}
    params["lengthscale_shrinkage"] = jnp.asarray(0.07)
    lp, _ = log_density(surrogate.model, (ppbo.Dataset(X, Y),), {}, params)
    ell, tau = PARAMS["lengthscale"], 0.07
    K = _matern52(X, X, ell, PARAMS["outputscale"])
    K += (PARAMS["noise"] + gp.JITTER) * np.eye(N)
    expected = multivariate_normal(np.full(N, 0.2), K).logpdf(Y)
    expected += halfcauchy(scale=0.1).logpdf(tau)
    expected += np.sum(halfcauchy(scale=tau).logpdf(ell**-2.0) + np.log(2 * ell**-3.0))
    priors = gp.default_priors(D)
    expected += sum(
        float(priors[name].log_prob(params[name]))
        for name in ("outputscale", "noise", "mean")
    )
    np.testing.assert_allclose(lp, expected, rtol=1e-10)


def test_saas_prior_draws_follow_the_hierarchy_and_errors():
    surrogate = gp.surrogate(lengthscale_prior="saas")
    draws = numpyro.infer.Predictive(surrogate.model, num_samples=4000)(
        jax.random.PRNGKey(0), ppbo.Dataset(X, Y)
    )
    rho = draws["lengthscale"] ** -2.0 / draws["lengthscale_shrinkage"][:, None]
    assert draws["lengthscale"].shape == (4000, D)
    # rho / tau ~ HalfCauchy(1): P(rho / tau <= 1) = 1/2, P(<= tan(3 pi / 8)) = 3/4;
    # tolerance 4 binomial standard errors of 8000 draws
    tol = 4 * np.sqrt(0.25 / rho.size)
    assert abs(np.mean(rho <= 1.0) - 0.5) < tol
    assert abs(np.mean(rho <= np.tan(3 * np.pi / 8)) - 0.75) < tol
    # tau ~ HalfCauchy(0.1): median 0.1
    assert abs(np.mean(draws["lengthscale_shrinkage"] <= 0.1) - 0.5) < 4 * np.sqrt(
        0.25 / 4000
    )
    with pytest.raises(ValueError, match="lengthscale_prior must be one of.*saas"):
        gp.surrogate(lengthscale_prior="sparse")
    with pytest.raises(ValueError, match="unknown site 'lengthscale_shrinkage'"):
        gp.surrogate(priors={"lengthscale_shrinkage": dist.HalfCauchy(1.0)})
    fixed = gp.surrogate(
        lengthscale_prior="saas", priors={"lengthscale_shrinkage": dist.HalfCauchy(1.0)}
    )
    with numpyro.handlers.seed(rng_seed=0):
        trace = numpyro.handlers.trace(fixed.model).get_trace(ppbo.Dataset(X, Y))
    assert float(trace["lengthscale_shrinkage"]["fn"].scale) == 1.0
