"""A surrogate with its own trainer: a bootstrap ensemble of least-squares fits.

Each of ``s`` members resamples the observed rows with replacement (a bootstrap,
Efron 1979, "Bootstrap methods: another look at the jackknife"), solves a
least-squares problem for the weights of fixed features (with a small ridge,
written as extra rows) and keeps the weights, the residual noise variance and
the weights' covariance. No NumPyro program: ``ppbo.Train`` fits it, its
posterior stores as arrays and a stored campaign resumes exactly.

Reference: numpy least squares (``np.linalg.lstsq``) on the same bootstrap rows.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppbo
from ppbo.campaign.codec import decode_posterior, encode_posterior
from ppbo.storage import SQLiteStorage
from ppbo.surrogate import Capability

NUM_MEMBERS = 8
RIDGE = 1e-3
FAST = {"num_raw": 64, "num_restarts": 2, "max_iterations": 20}


def features(X):
    """Fixed features (m, 4) of the first input: 1, x, x^2, sin(6 x)."""
    x = X[:, 0]
    return jnp.stack([jnp.ones_like(x), x, x**2, jnp.sin(6.0 * x)], axis=1)


def bootstrap_rows(key, data):
    """Per member, ``capacity`` row indices drawn from the observed rows; the
    first ``n`` of them are that member's bootstrap resample."""
    p = data.mask / jnp.sum(data.mask)

    def one(key):
        return jax.random.choice(key, data.capacity, (data.capacity,), p=p)

    return jax.vmap(one)(jax.random.split(key, NUM_MEMBERS))


def trainer(key, data):
    rows = bootstrap_rows(key, data)
    n = jnp.sum(data.mask)

    def member(rows):
        use = (jnp.arange(data.capacity) < n).astype(data.y.dtype)
        Phi = features(data.X[rows]) * use[:, None]
        y = data.y[rows] * use
        k = Phi.shape[1]
        A = Phi.T @ Phi + RIDGE * jnp.eye(k)
        weights = jnp.linalg.solve(A, Phi.T @ y)
        residual = jnp.sum((y - Phi @ weights) ** 2) / jnp.maximum(n - 1, 1)
        noise = residual + 1e-6
        return {
            "weights": weights,
            "noise": noise,
            "covariance": noise * jnp.linalg.inv(A),
        }

    return jax.vmap(member)(rows)


def predict(params, data, X):
    Phi = features(X)
    var = jnp.sum((Phi @ params["covariance"]) * Phi, axis=1)
    return Phi @ params["weights"], var


ENSEMBLE = ppbo.Surrogate(
    trainer=trainer,
    predict=predict,
    noise=lambda params, X: params["noise"],
    conditioning=False,
    name="bootstrap_least_squares",
)


def objective(x):
    return np.sin(6.0 * x[..., 0]) + 0.5 * x[..., 0]


@pytest.fixture(scope="module")
def data():
    X = np.array([[0.05], [0.2], [0.35], [0.5], [0.6], [0.75], [0.95]])
    return ppbo.Dataset(X, objective(X), capacity=16)


@pytest.fixture(scope="module")
def posterior(data):
    return ppbo.fit(ENSEMBLE, data, ppbo.Train(), jax.random.key(4))


def _reference(key, data, Xs):
    """numpy least squares on the same bootstrap rows, member by member."""
    rows = np.asarray(bootstrap_rows(key, data))[:, : data.n]
    X, y, _ = data.unpadded()
    Phis = np.asarray(features(jnp.asarray(Xs)))
    means, variances = [], []
    for index in rows:
        assert np.all(index < data.n)  # never a padded row
        Phi = np.asarray(features(jnp.asarray(X[index])))
        k = Phi.shape[1]
        # ridge as k extra rows sqrt(ridge) I with targets 0
        Phi_aug = np.vstack([Phi, np.sqrt(RIDGE) * np.eye(k)])
        y_aug = np.concatenate([y[index], np.zeros(k)])
        weights = np.linalg.lstsq(Phi_aug, y_aug, rcond=None)[0]
        noise = np.sum((y[index] - Phi @ weights) ** 2) / (data.n - 1) + 1e-6
        covariance = noise * np.linalg.inv(Phi_aug.T @ Phi_aug)
        means.append(Phis @ weights)
        variances.append(np.einsum("mi,ij,mj->m", Phis, covariance, Phis))
    return np.array(means), np.array(variances)


def test_capabilities_and_construction_errors():
    assert ENSEMBLE.capabilities == {Capability.NOISE}
    with pytest.raises(TypeError, match="either a NumPyro model or its own trainer"):
        ppbo.Surrogate(model=lambda data: None, trainer=trainer, predict=predict)
    with pytest.raises(TypeError, match="model must be callable"):
        ppbo.Surrogate(predict=predict)


def test_numpyro_inferences_refuse_a_trainer(data):
    for inference in (ppbo.MAP(), ppbo.NUTS(), ppbo.Fixed({})):
        with pytest.raises(TypeError, match="fit it with ppbo.Train"):
            ppbo.fit(ENSEMBLE, data, inference, jax.random.key(0))
    blm = ppbo.Surrogate(model=lambda data: None, predict=predict)
    with pytest.raises(TypeError, match="has a NumPyro model"):
        ppbo.fit(blm, data, ppbo.Train(), jax.random.key(0))


def test_predictions_match_numpy_least_squares_on_the_same_rows(posterior, data):
    Xs = np.linspace(0.0, 1.0, 9)[:, None]
    mean, var = posterior.predict(Xs)
    mean_ref, var_ref = _reference(jax.random.key(4), data, Xs)
    assert mean.shape == (NUM_MEMBERS, 9)
    np.testing.assert_allclose(mean, mean_ref, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(var, var_ref, rtol=1e-8, atol=1e-10)
    # the mixture over members: the ensemble mean and the law of total variance
    m, v = posterior.predict_marginal(Xs)
    np.testing.assert_allclose(m, mean_ref.mean(0), rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(
        v, var_ref.mean(0) + mean_ref.var(0), rtol=1e-7, atol=1e-10
    )
    # members differ (the bootstraps differ) and padded rows are never used
    assert np.ptp(np.asarray(mean), axis=0).max() > 1e-3


def test_posterior_round_trips_through_the_codec_without_pickle(posterior):
    blob = encode_posterior(posterior)
    assert b"pickle" not in blob
    again = decode_posterior(blob, ENSEMBLE)
    assert again.method == "Train" and again.num_samples == NUM_MEMBERS
    for name, value in posterior.samples.items():
        np.testing.assert_array_equal(again.samples[name], value)
    Xs = np.array([[0.3], [0.8]])
    np.testing.assert_array_equal(again.predict(Xs)[0], posterior.predict(Xs)[0])


def test_batches_need_conditioning_and_say_so():
    opt = ppbo.Optimizer(
        {"x": ppbo.Real(0.0, 1.0)},
        surrogate=ENSEMBLE,
        n_initial=3,
        seed=1,
        optimizer_options=FAST,
    )
    for trial in opt.ask(3):  # the design needs no model
        opt.tell(trial, float(-objective(np.array([trial.params["x"]]))))
    with pytest.raises(ppbo.MissingCapabilityError, match="'conditioning'"):
        opt.ask(3)


def _campaign(run, storage, name, steps, acquisition, stop_at=None):
    """Ask/tell ``steps`` times; with ``stop_at``, reload the campaign from
    storage after that many asks (the last ask not told) and go on."""

    def make():
        return ppbo.Optimizer(
            {"x": ppbo.Real(0.0, 1.0)},
            surrogate=ENSEMBLE,
            acquisition=acquisition,
            n_initial=3,
            seed=7,
            storage=storage,
            name=name,
            optimizer_options=FAST,
        )

    def load():
        return ppbo.Optimizer.load(storage, name, surrogate=ENSEMBLE)

    def value(trial):
        return float(objective(np.array([trial.params["x"]])))

    return run(make, load, value, steps, stop_at)


@pytest.mark.parametrize("acquisition", ["ei", "log_ei"])
def test_campaign_resumes_with_the_uninterrupted_suggestions(
    tmp_path, acquisition, interrupted_campaign
):
    run = interrupted_campaign
    whole = _campaign(run, SQLiteStorage(tmp_path / "a.db"), "a", 7, acquisition)
    resumed = _campaign(
        run, SQLiteStorage(tmp_path / "b.db"), "b", 8, acquisition, stop_at=5
    )
    assert [t.params for t in whole] == [t.params for t in resumed]
    assert [t.value for t in whole] == [t.value for t in resumed]
    assert [t.origin for t in resumed].count("model") == 4
    assert [t.state for t in resumed] == ["COMPLETE"] * 7
    storage = SQLiteStorage(tmp_path / "b.db")
    with pytest.raises(ValueError, match="custom surrogate"):
        ppbo.Optimizer.load(storage, "b")


def test_codec_keeps_the_structured_fields_of_the_data(data):
    X, y, _ = data.unpadded()
    n = len(y)
    rich = ppbo.Dataset(
        X,
        y,
        capacity=16,
        duels=[[0, 1], [4, 2]],
        anchor=np.arange(n) == 3,
        source=np.where(np.arange(n) < 2, 0, -1),
        duel_capacity=16,
    )
    posterior = ppbo.fit(ENSEMBLE, rich, ppbo.Train(), jax.random.key(4))
    again = decode_posterior(encode_posterior(posterior), ENSEMBLE).data
    assert jax.tree.structure(again) == jax.tree.structure(rich)
    for a, b in zip(jax.tree.leaves(again), jax.tree.leaves(rich), strict=True):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype
