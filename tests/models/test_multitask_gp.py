"""Tests for :mod:`ppbo.models.multitask_gp` against dense NumPy references.

Predictions with fixed hyperparameters are compared with the ICM posterior computed
by dense ``numpy.linalg`` solves (Bonilla, Chai and Williams 2008, eqs. (1)-(2));
with an identity task correlation that is a set of independent single-task GPs
(Rasmussen and Williams 2006, eqs. (2.25)-(2.26)). Keys and data seeds are fixed, so
every test is deterministic.
"""

from functools import partial

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
import pytest  # noqa: E402
from numpyro import handlers  # noqa: E402
from numpyro.infer import Predictive  # noqa: E402
from numpyro.infer.util import log_density  # noqa: E402
from scipy import stats  # noqa: E402

import ppbo  # noqa: E402
from ppbo.models import gp, multitask_gp  # noqa: E402
from ppbo.models.multitask_gp import JITTER  # noqa: E402

NUM_TASKS = 3
DIM = 2
LKJ = multitask_gp.surrogate(NUM_TASKS)
POSITIVE = multitask_gp.surrogate(NUM_TASKS, positive_correlation=True)
X_TEST = np.random.default_rng(99).uniform(size=(6, DIM))
PARAMS = {
    "lengthscale": np.array([0.3, 0.6]),
    "task_scales": np.array([1.3, 0.7, 1.1]),
    "noise": np.array([1e-3, 1e-2, 5e-3]),
    "mean": np.array([0.2, -0.4, 0.1]),
}


# -- independent references ---------------------------------------------------------
def matern52(A, B, lengthscale):
    """Matérn-5/2 kernel matrix, R&W eq. (4.17), written out in NumPy."""
    r = np.sqrt((((A[:, None, :] - B[None, :, :]) / lengthscale) ** 2).sum(-1))
    s = np.sqrt(5.0) * r
    return (1.0 + s + s**2 / 3.0) * np.exp(-s)


def icm_covariance(X, task, Kt, params):
    """Dense covariance of the observations: ``Kt[t_i, t_j] k(x_i, x_j) + noise``."""
    K = Kt[np.ix_(task, task)] * matern52(X, X, params["lengthscale"])
    return K + np.diag(params["noise"][task] + JITTER)


def icm_posterior(X, y, task, k, Kt, params):
    """Dense ICM posterior mean (m,) and covariance (m, m) of task ``k`` at X_TEST."""
    K = icm_covariance(X, task, Kt, params)
    Ks = Kt[k, task][None, :] * matern52(X_TEST, X, params["lengthscale"])
    mean = params["mean"]
    mu = mean[k] + Ks @ np.linalg.solve(K, y - mean[task])
    prior = Kt[k, k] * matern52(X_TEST, X_TEST, params["lengthscale"])
    return mu, prior - Ks @ np.linalg.solve(K, Ks.T)


def single_task_posterior(X, y, scale, noise, mean, lengthscale):
    """Dense single-task GP posterior mean and variance at X_TEST."""
    K = scale**2 * matern52(X, X, lengthscale) + (noise + JITTER) * np.eye(len(y))
    Ks = scale**2 * matern52(X_TEST, X, lengthscale)
    mu = mean + Ks @ np.linalg.solve(K, y - mean)
    var = scale**2 - np.sum(Ks * np.linalg.solve(K, Ks.T).T, axis=1)
    return mu, var


def make_data(capacity=15, counts=(3, 7, 5), seed=0):
    rng = np.random.default_rng(seed)
    task = np.repeat(np.arange(len(counts)), counts)
    rng.shuffle(task)
    X = rng.uniform(size=(len(task), DIM))
    y = np.sin(5.0 * X[:, 0]) + X[:, 1] + 0.3 * task
    return X, y, task, ppbo.Dataset(X, y, task, capacity=capacity)


def correlated_params(positive):
    """Hyperparameters with coupled tasks, and the task covariance they imply."""
    rng = np.random.default_rng(1)
    t = NUM_TASKS
    if positive:
        W = rng.uniform(size=(t, t))
        kappa = rng.uniform(0.1, 1.0, size=t)
        params = PARAMS | {"task_factors": W, "task_specific": kappa}
        B = W @ W.T + np.diag(kappa)
        C = B / np.sqrt(np.outer(np.diag(B), np.diag(B)))
    else:
        L = np.tril(rng.normal(size=(t, t)))
        L[np.diag_indices(t)] = np.abs(L[np.diag_indices(t)]) + 0.5
        L /= np.linalg.norm(L, axis=1, keepdims=True)
        params = PARAMS | {"task_cholesky": L}
        C = L @ L.T
    assert np.abs(C - np.eye(t)).max() > 0.2  # the tasks really are coupled
    return params, np.outer(PARAMS["task_scales"], PARAMS["task_scales"]) * C


def fixed_posterior(surrogate, params, data):
    return ppbo.fit(surrogate, data, ppbo.Fixed(params), jax.random.key(0))


def predict_task(posterior, k, X=X_TEST):
    mean, var = posterior.predict(X, task=k)
    return np.asarray(mean[0]), np.asarray(var[0])


def first(tree):
    return jax.tree.map(lambda a: a[0], tree)


@partial(jax.jit, static_argnums=0)
def _all_tasks(surrogate, sample, data, cache):
    def one(k):
        X = jnp.asarray(X_TEST)
        mean, var = surrogate.predict(sample, data, X, cache, task=k)
        joint_mean, cov = surrogate.predict_joint(sample, data, X, cache, task=k)
        return mean, var, joint_mean, cov

    # A traced task id: one compilation for all tasks.
    return jax.vmap(one)(jnp.arange(NUM_TASKS))


def predict_all_tasks(posterior):
    """Per-sample predictions of every task at X_TEST, each with a leading axis t."""
    sample, cache = first(posterior.samples), first(posterior.cache)
    return _all_tasks(posterior.surrogate, sample, posterior.data, cache)


# -- exactness against dense linear algebra -----------------------------------------
def test_identity_correlation_equals_independent_single_task_gps():
    X, y, task, data = make_data()
    params = PARAMS | {"task_cholesky": np.eye(NUM_TASKS)}
    posterior = fixed_posterior(LKJ, params, data)
    for k in range(NUM_TASKS):
        rows = task == k
        mu, var = single_task_posterior(
            X[rows],
            y[rows],
            params["task_scales"][k],
            params["noise"][k],
            params["mean"][k],
            params["lengthscale"],
        )
        mean, variance = predict_task(posterior, k)
        np.testing.assert_allclose(mean, mu, rtol=0, atol=1e-8)
        np.testing.assert_allclose(variance, var, rtol=0, atol=1e-8)


@pytest.mark.parametrize("positive", [False, True], ids=["lkj", "positive"])
def test_correlated_tasks_match_dense_icm_posterior(positive):
    surrogate = POSITIVE if positive else LKJ
    params, Kt = correlated_params(positive)
    X, y, task, data = make_data(capacity=24)
    posterior = fixed_posterior(surrogate, params, data)
    sample = first(posterior.samples)
    np.testing.assert_allclose(
        surrogate.extras["task_covariance"](sample), Kt, rtol=1e-12, atol=1e-14
    )
    means, variances, joint_means, joint_covs = predict_all_tasks(posterior)
    for k in range(NUM_TASKS):
        mu, cov = icm_posterior(X, y, task, k, Kt, params)
        np.testing.assert_allclose(means[k], mu, rtol=0, atol=1e-8)
        np.testing.assert_allclose(variances[k], np.diag(cov), rtol=0, atol=1e-8)
        np.testing.assert_allclose(joint_means[k], mu, rtol=0, atol=1e-8)
        np.testing.assert_allclose(joint_covs[k], cov, rtol=0, atol=1e-8)
    # The observation site is the exact Gaussian marginal likelihood of the data.
    model = handlers.substitute(surrogate.model, sample)
    site = handlers.trace(model).get_trace(data)["y"]
    expected = stats.multivariate_normal(
        params["mean"][task], icm_covariance(X, task, Kt, params)
    ).logpdf(y)
    np.testing.assert_allclose(site["fn"].log_prob(data.y), expected, rtol=1e-10)


def test_padded_equals_unpadded():
    params, _ = correlated_params(positive=False)
    X, y, task, tight = make_data(capacity=15)
    # Capacities shared with the tests above, so the compiled code is reused.
    X_pad, y_pad, task_pad, mask = jax.tree.leaves(make_data(capacity=24)[3])
    assert tight.capacity == 15 and mask.shape == (24,) and not mask[15:].any()
    # Whatever the padded rows hold must not matter.
    padded = jax.tree.unflatten(
        jax.tree.structure(tight),
        [X_pad.at[15:].set(0.5), y_pad.at[15:].set(100.0), task_pad, mask],
    )
    fits = [fixed_posterior(LKJ, params, data) for data in (tight, padded)]
    exact, wide = (predict_all_tasks(post) for post in fits)
    for a, b in zip(exact, wide, strict=True):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-10)
    log_p = [
        log_density(LKJ.model, (data,), {}, first(fits[0].samples))[0]
        for data in (tight, padded)
    ]
    np.testing.assert_allclose(log_p[1], log_p[0], rtol=1e-12)


def test_one_task_is_a_single_task_gp():
    X, y, _, _ = make_data(counts=(9,))
    data = ppbo.Dataset(X, y, capacity=16)
    params = {
        "lengthscale": PARAMS["lengthscale"],
        "task_scales": np.array([1.3]),
        "noise": np.array([1e-3]),
        "mean": np.array([0.2]),
    }
    posterior = fixed_posterior(multitask_gp.surrogate(1), params, data)
    mean, var = predict_task(posterior, 0)
    expected = single_task_posterior(X, y, 1.3, 1e-3, 0.2, PARAMS["lengthscale"])
    np.testing.assert_allclose(mean, expected[0], rtol=0, atol=1e-8)
    np.testing.assert_allclose(var, expected[1], rtol=0, atol=1e-8)


# -- transfer -----------------------------------------------------------------------
def target(x):
    return np.sin(9.0 * x) + 0.5 * np.cos(4.0 * x)


def source(x):
    return target(x) + 0.15 * np.sin(3.0 * x + 1.0)


def test_source_task_improves_data_poor_target():
    # 4 target and 30 source points: the single-task GP cannot resolve the two
    # oscillations of the target, the multi-task GP borrows them from the source.
    # Here the RMSE ratio is 0.16; over data seeds 0-7 and fit keys 0-1 it ranged
    # from 0.09 to 0.49, so the threshold 0.5 is a margin, not a tuned value.
    rng = np.random.default_rng(0)
    xt, xs = rng.uniform(size=4), rng.uniform(size=30)
    X = np.concatenate([xt, xs])[:, None]
    y = np.concatenate([target(xt), source(xs)])
    y = y + 0.01 * rng.normal(size=y.shape)
    task = np.repeat([0, 1], [4, 30])
    grid = np.linspace(0.0, 1.0, 101)[:, None]
    truth = target(grid[:, 0])
    inference = ppbo.MAP(num_restarts=8, max_iterations=200)
    key = jax.random.key(0)

    single = ppbo.fit(gp.surrogate(), ppbo.Dataset(X[:4], y[:4]), inference, key)
    multi = ppbo.fit(
        multitask_gp.surrogate(2), ppbo.Dataset(X, y, task), inference, key
    )
    rmse_single = np.sqrt(np.mean((single.predict_marginal(grid)[0] - truth) ** 2))
    mean = multi.predict_marginal(grid, task=0)[0]
    rmse_multi = np.sqrt(np.mean((mean - truth) ** 2))
    assert rmse_multi < 0.5 * rmse_single, (rmse_multi, rmse_single)
    assert rmse_multi < 0.25, rmse_multi
    correlation = multi.surrogate.extras["task_correlation"](first(multi.samples))
    assert correlation[0, 1] > 0.9  # the transfer comes from the learnt correlation


# -- task correlation priors --------------------------------------------------------
def prior_correlations(surrogate, num_samples=300):
    data = make_data()[3]
    draws = Predictive(surrogate.model, num_samples=num_samples)(
        jax.random.key(3), data
    )
    return np.asarray(jax.vmap(surrogate.extras["task_correlation"])(draws))


def test_positive_correlation_prior_gives_nonnegative_correlations():
    C = prior_correlations(POSITIVE)
    off = C[:, ~np.eye(NUM_TASKS, dtype=bool)]
    np.testing.assert_allclose(np.diagonal(C, axis1=1, axis2=2), 1.0, atol=1e-12)
    assert off.min() >= 0.0
    assert off.max() > 0.5 and off.min() < 0.1  # not degenerate
    assert np.linalg.eigvalsh(C).min() > 0.0


def test_lkj_prior_gives_negative_correlations():
    C = prior_correlations(LKJ)
    off = C[:, ~np.eye(NUM_TASKS, dtype=bool)]
    np.testing.assert_allclose(np.diagonal(C, axis1=1, axis2=2), 1.0, atol=1e-12)
    assert 0.25 < np.mean(off < 0) < 0.75  # LKJ(1) is symmetric about zero
    assert np.linalg.eigvalsh(C).min() > 0.0


def test_sites_and_shapes():
    data = make_data()[3]
    for surrogate, extra in [
        (LKJ, {"task_cholesky": (3, 3)}),
        (POSITIVE, {"task_factors": (3, 3), "task_specific": (3,)}),
        (
            multitask_gp.surrogate(3, positive_correlation=True, rank=1),
            {"task_factors": (3, 1), "task_specific": (3,)},
        ),
        (multitask_gp.surrogate(1), {}),
    ]:
        t = surrogate.extras["num_tasks"]
        expected = {"lengthscale": (DIM,), "task_scales": (t,), "noise": (t,)}
        expected |= {"mean": (t,)} | extra
        data_t = data if t == 3 else ppbo.Dataset(np.asarray(data.X), data.y)
        trace = handlers.trace(handlers.seed(surrogate.model, 0)).get_trace(data_t)
        shapes = {
            name: site["value"].shape
            for name, site in trace.items()
            if not site["is_observed"]
        }
        assert shapes == expected, surrogate.name


def test_custom_priors_are_broadcast_and_used():
    s = multitask_gp.surrogate(
        NUM_TASKS,
        priors={"noise": dist.LogNormal(-7.0, 0.1), "task_scales": dist.Delta(2.0)},
    )
    trace = handlers.trace(handlers.seed(s.model, 0)).get_trace(make_data()[3])
    assert trace["noise"]["value"].shape == (NUM_TASKS,)
    assert np.all(np.asarray(trace["noise"]["value"]) < np.exp(-6.0))
    np.testing.assert_array_equal(trace["task_scales"]["value"], 2.0)


# -- errors -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_tasks": 0}, "num_tasks must be an integer >= 1, got num_tasks=0"),
        ({"num_tasks": 2.0}, "num_tasks=2.0"),
        ({"num_tasks": True}, "num_tasks=True"),
        ({"num_tasks": 2, "kernel": "cubic"}, "kernel must be one of .* 'cubic'"),
        ({"num_tasks": 2, "kernel": 3}, "kernel must be a name or a callable"),
        ({"num_tasks": 2, "priors": {"outputscale": dist.Normal()}}, "'outputscale'"),
        ({"num_tasks": 2, "priors": {"task_cholesky": None}}, "lkj_concentration"),
        ({"num_tasks": 2, "priors": {"noise": 1.0}}, r"priors\['noise'\]"),
        ({"num_tasks": 2, "lkj_concentration": 0.0}, "lkj_concentration must be"),
        ({"num_tasks": 2, "rank": 1}, "rank only applies"),
        ({"num_tasks": 2, "positive_correlation": True, "rank": 0}, "rank=0"),
        ({"num_tasks": 2, "positive_correlation": 1}, "positive_correlation"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        multitask_gp.surrogate(**kwargs)


def test_task_ids_out_of_range_fail_clearly():
    X, y, task, _ = make_data()
    bad = ppbo.Dataset(X, y, np.where(task == 2, 3, task))
    row = int(np.argmax(task == 2))
    message = rf"data.task\[{row}\] = 3 .* num_tasks=3"
    with pytest.raises(ValueError, match=message):
        multitask_gp.check_tasks(bad, NUM_TASKS)
    params = PARAMS | {"task_cholesky": np.eye(NUM_TASKS)}
    with pytest.raises(ValueError, match=message):
        fixed_posterior(LKJ, params, bad)  # the model checks concrete data
    with pytest.raises(ValueError, match=message):  # and ppbo.fit before compiling
        ppbo.fit(LKJ, bad, ppbo.MAP(), jax.random.key(0))
    # Inside compiled code the ids cannot raise: they poison the covariance instead
    # of being clipped, so fitting fails (ppbo.CholeskyError) rather than mis-fits.
    params = {k: jnp.asarray(v) for k, v in params.items()}
    value = jax.jit(lambda d: log_density(LKJ.model, (d,), {}, params)[0])(bad)
    assert np.isnan(value)
    cache = jax.jit(LKJ.prepare)(params, bad)
    assert np.isnan(np.diag(np.asarray(cache["L"]))).all()
    # Padded rows (task 0, masked) are never a problem.
    multitask_gp.check_tasks(make_data(capacity=32)[3], NUM_TASKS)


@pytest.mark.parametrize(
    ("task", "match"),
    [(3, r"task must be in \[0, 3\)"), (-1, "got task=-1"), (0.5, "integer")],
)
def test_bad_prediction_task_raises(task, match):
    params = PARAMS | {"task_cholesky": np.eye(NUM_TASKS)}
    posterior = fixed_posterior(LKJ, params, make_data()[3])
    with pytest.raises(ValueError, match=match):
        posterior.predict(X_TEST, task=task)


@pytest.mark.slow
def test_positive_correlation_as_a_transfer_model_cannot_borrow_a_negated_source():
    # The campaign's transfer layout: target = task 0, source k = task k + 1. A
    # source that is the NEGATED target: the LKJ model's MAP finds a strong negative
    # correlation; the non-negative parameterisation can at most switch the source
    # off (correlation near 0), never use it with the wrong sign.
    rng = np.random.default_rng(7)
    Xs, Xt = rng.uniform(size=(14, 1)), rng.uniform(size=(6, 1))
    f = lambda X: np.sin(6.0 * X[:, 0])  # noqa: E731
    X = np.vstack([Xt, Xs])
    y = np.concatenate([f(Xt), -f(Xs)])
    data = ppbo.Dataset(X, y, task=np.repeat([0, 1], [6, 14]))
    fits = {}
    for label, positive in (("lkj", False), ("positive", True)):
        s = multitask_gp.surrogate(2, positive_correlation=positive)
        post = ppbo.fit(s, data, ppbo.MAP(num_restarts=4), jax.random.key(0))
        C = s.extras["task_correlation"](jax.tree.map(lambda a: a[0], post.samples))
        fits[label] = float(C[0, 1])
    assert fits["lkj"] < -0.5, fits
    assert 0.0 <= fits["positive"] < 0.2, fits
