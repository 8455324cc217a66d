"""The Laplace fast path's MAP search and its posterior mean (issue 14 fixes).

Two defects made preference campaigns recommend poor points: the MAP restarts,
drawn from the lengthscale prior, missed the criterion's short-lengthscale mode
(the preference campaign ran two of them), and the posterior's mean was a Monte
Carlo average of the latent draws, so its argmax (the recommendation) moved
with the draws wherever the mean is flat.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

import ppbo
from ppbo.models import preference_gp as pgp

# A recorded state of a 1-D campaign (Forrester-like utility): 18 duel points,
# 4 anchors (rows 18-21, standardised values), 14 duels (winner first). Its
# criterion has two modes in the lengthscale, about 0.1 and 0.6.
_X = [0.8506, 0.9314, 0.4516, 0.1669, 0.2487, 0.5916, 0.5842, 0.3267, 0.0, 0.8107,
      0.755, 1.0, 0.6671, 0.2815, 0.5096, 0.0686, 0.3676, 0.8919, 0.7106, 0.1197,
      0.4377, 0.8565]  # fmt: skip
_Y = [0.0] * 18 + [1.6189, -0.1688, -1.1118, -0.3384]
_DUELS = [[0, 1], [3, 2], [4, 5], [7, 6], [3, 8], [9, 4], [10, 9], [10, 11],
          [10, 12], [13, 8], [14, 8], [2, 15], [10, 16], [17, 1]]  # fmt: skip


def _noise(X):
    return jnp.full(X.shape[0], 0.677)


def _bimodal_data():
    anchor = np.zeros(len(_X), bool)
    anchor[18:] = True
    return ppbo.Dataset(
        np.array(_X)[:, None], np.array(_Y), duels=np.array(_DUELS), anchor=anchor
    )


def _profile_optimum(surrogate, data):
    """max over theta of criterion + log prior, by profiling the lengthscale.

    An independent reference for the multi-start search: on a grid of 41 log
    lengthscales the other three sites are optimised by L-BFGS from a fixed
    start, and the best grid value is refined with the lengthscale free.
    """
    config = surrogate.extras["config"]

    def objective(z):
        value, grad = pgp._negative_log_posterior(jnp.asarray(z), data, config, 20)
        return float(value), np.asarray(grad)

    def profile(z, log_ell):
        value, grad = objective([log_ell, *z])
        return value, grad[1:]

    best = None
    for log_ell in np.linspace(np.log(0.02), np.log(5.0), 41):
        result = minimize(
            profile,
            np.array([0.0, 0.0, -2.0]),
            args=(log_ell,),
            jac=True,
            method="L-BFGS-B",
        )
        if best is None or result.fun < best[0]:
            best = (result.fun, np.concatenate([[log_ell], result.x]))
    refined = minimize(objective, best[1], jac=True, method="L-BFGS-B")
    return -min(refined.fun, best[0])


def test_laplace_map_finds_the_short_lengthscale_mode_of_a_bimodal_criterion():
    data = _bimodal_data()
    surrogate = pgp.surrogate("rbf", beta=0.5, anchor_noise=_noise)
    reference = _profile_optimum(surrogate, data)
    # The two modes differ by about 1.8 nats; the profile's grid is fine enough
    # that L-BFGS from its best point reaches the top of the higher one.
    laplace = pgp.Laplace(num_samples=4, num_restarts=2)
    found = []
    for seed in range(6):
        posterior = ppbo.fit(surrogate, data, laplace, jax.random.key(seed))
        found.append(float(posterior.sample_stats["lp"][0]))
    np.testing.assert_allclose(found, reference, atol=1e-3)


@pytest.mark.parametrize("num_samples", [16, 15])
def test_laplace_posterior_mean_is_the_mode_prediction_exactly(num_samples):
    data = _bimodal_data()
    params = {
        "lengthscale": jnp.array([0.3]),
        "outputscale": 0.5,
        "mean": 0.1,
        "preference_noise": 0.05,
    }
    surrogate = pgp.surrogate("rbf", beta=0.5, anchor_noise=_noise)
    laplace = pgp.Laplace(num_samples=num_samples, params=params)
    posterior = ppbo.fit(surrogate, data, laplace, jax.random.key(0))
    Xs = np.linspace(0.0, 1.0, 7)[:, None]
    mean, var = posterior.predict_marginal(Xs)

    # Reference by dense linear algebra: the mode f_hat at the rows, then the
    # GP conditional mean mu + K(Xs, X) K^-1 (f_hat - mu) with K's jitter.
    u_hat, B = pgp.laplace_mode(params, data, beta=0.5, anchor_noise=_noise)
    f_hat = np.asarray(pgp.latent_values({**params, "latent": u_hat}, data))
    n, X = data.n, np.array(_X)[:, None]

    def k(A, C):
        return 0.5 * np.exp(-0.5 * ((A[:, None, 0] - C[None, :, 0]) / 0.3) ** 2)

    K = k(X, X) + pgp.JITTER * 0.5 * np.eye(n)
    expected = 0.1 + k(Xs, X) @ np.linalg.solve(K, f_hat[:n] - 0.1)
    # Monte Carlo draws would leave an error of about sd / sqrt(num_samples)
    # (here > 1e-2); antithetic draws leave round-off only.
    np.testing.assert_allclose(mean, expected, atol=1e-9)
    assert np.all(np.asarray(var) > 0)


def test_the_map_objective_is_the_density_of_the_log_scales_and_the_lengthscales():
    """The Laplace fit maximises the density of the LOG scales (MacKay 1998) and
    of the lengthscales themselves (BoTorch's PairwiseGP fit).

    Reference: the criterion divided by the larger of its weights (2 at beta =
    1/2: the two evidences summed) plus each site's log prior density written in
    closed form: under ``LogNormal(mu, s)`` the log scale z is ``Normal(mu, s)``;
    the lengthscale's density is the ``Gamma(2.4, 2.7)`` density at ``e^z``,
    without the Jacobian ``e^z`` (with it, the prior's mode would move from
    0.52 to 0.89); the mean is not transformed.
    """
    from scipy import stats

    data = _bimodal_data()
    for anchor_noise in (_noise, None):
        surrogate = pgp.surrogate("rbf", beta=0.5, anchor_noise=anchor_noise)
        config = surrogate.extras["config"]
        names = pgp._hyper_names(config)
        z = np.array([-1.3, 0.4, -0.2, -2.5, -3.0][: len(names)])
        value, grad = pgp._negative_log_posterior(jnp.asarray(z), data, config, 20)
        params = pgp._unpack(jnp.asarray(z), names, 1)
        expected = 2.0 * float(
            pgp.criterion(
                params, data, beta=0.5, kernel="rbf", anchor_noise=anchor_noise
            )
        )
        expected += stats.gamma(2.4, scale=1 / 2.7).logpdf(np.exp(z[0]))
        expected += stats.norm(np.log(4.0) - 2.0, np.sqrt(3.0)).logpdf(z[1])
        expected += stats.norm(0.0, 1.0).logpdf(z[2])
        expected += stats.norm(-2.0, 1.0).logpdf(z[3])
        if anchor_noise is None:
            expected += stats.norm(-2.0, 1.5).logpdf(z[4])
        np.testing.assert_allclose(-float(value), expected, rtol=1e-10)
        assert np.isfinite(np.asarray(grad)).all()


def test_weak_data_leave_the_fitted_scales_at_the_prior_medians():
    """Two points and one duel say almost nothing about the scales: the fitted
    outputscale and probit noise stay within a factor e of the log-normal
    priors' medians (0.54 and 0.135), not at their modes e^(mu - s^2) (0.027
    and 0.050), where a MAP of the scales themselves puts them."""
    data = ppbo.Dataset([[0.2], [0.8]], [0.0, 0.0], duels=[[0, 1]])
    surrogate = pgp.surrogate("rbf", beta=1.0)
    posterior = ppbo.fit(
        surrogate, data, pgp.Laplace(num_samples=2, num_restarts=2), jax.random.key(0)
    )
    outputscale = float(posterior.samples["outputscale"][0])
    noise = float(posterior.samples["preference_noise"][0])
    assert abs(np.log(outputscale) - np.log(0.541)) < 1.0, outputscale
    assert abs(np.log(noise) - (-2.0)) < 1.0, noise


def test_without_anchors_the_anchor_noise_prior_leaves_the_fit_unchanged():
    """Duels alone never reach the anchor ``noise`` site, so its prior must not
    move the fit: the remaining hyperparameters and the latent draws agree to
    round-off under three noise priors (two log-normals, and a Gamma whose
    median has no closed form here), and the site sits at its prior median.
    Before the site was held there, its prior shared L-BFGS's line searches
    and moved the MAP of the others."""
    import numpyro.distributions as dist

    data = ppbo.Dataset(np.array(_X[:18])[:, None], np.zeros(18), duels=_DUELS)
    laplace = pgp.Laplace(num_samples=4, num_restarts=2)
    priors = [None, dist.LogNormal(-4.0, 1.0), dist.Gamma(2.0, 20.0)]
    fits = []
    for prior in priors:
        surrogate = pgp.surrogate(
            "rbf", beta=1.0, priors=None if prior is None else {"noise": prior}
        )
        fits.append(ppbo.fit(surrogate, data, laplace, jax.random.key(3)).samples)
    for samples in fits[1:]:
        for name in ("lengthscale", "outputscale", "mean", "preference_noise"):
            # round-off: the constant prior term changes the objective's last bits
            np.testing.assert_allclose(
                samples[name], fits[0][name], rtol=1e-12, atol=1e-12
            )
        np.testing.assert_allclose(samples["latent"], fits[0]["latent"], atol=1e-12)
    np.testing.assert_allclose(fits[0]["noise"], np.exp(-2.0), rtol=1e-12)
    np.testing.assert_allclose(fits[1]["noise"], np.exp(-4.0), rtol=1e-12)
    # Gamma(2, 20): median 0.0839 (scipy's quantile); 4096 draws give it to ~2%
    assert abs(float(fits[2]["noise"][0]) / 0.08392 - 1.0) < 0.05
