import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import ppbo
from ppbo.models import gp


def _normal_mean_model(data):
    c = numpyro.sample("c", dist.Normal(0.0, 2.0))
    numpyro.sample("y", dist.Normal(c, 0.5).mask(data.mask), obs=data.y)


def _predict(params, data, X):
    return jnp.full(X.shape[0], params["c"]), jnp.zeros(X.shape[0])


def test_map_matches_conjugate_mode():
    y = np.array([0.3, 1.1, 0.8, 1.6])
    data = ppbo.Dataset(np.zeros((4, 1)), y)
    surrogate = ppbo.Surrogate(model=_normal_mean_model, predict=_predict)
    posterior = ppbo.fit(surrogate, data, ppbo.MAP(num_restarts=4), jax.random.key(0))
    # Normal-normal conjugacy: mode = (sum y / s^2) / (n / s^2 + 1 / t^2)
    expected = (y.sum() / 0.25) / (4 / 0.25 + 1 / 4.0)
    np.testing.assert_allclose(posterior.samples["c"], [expected], rtol=1e-6)
    assert posterior.method == "MAP" and posterior.num_samples == 1


def test_map_gp_beats_prior_draws():
    rng = np.random.default_rng(0)
    X = rng.random((15, 1))
    y = np.sin(6 * X[:, 0])
    data = ppbo.Dataset(X, (y - y.mean()) / y.std())
    surrogate = gp.surrogate()
    posterior = ppbo.fit(surrogate, data, ppbo.MAP(), jax.random.key(1))
    lp_map = float(posterior.sample_stats["lp"][0])
    prior = numpyro.infer.Predictive(surrogate.model, num_samples=200)(
        jax.random.key(2), data
    )
    prior.pop("y")
    lps = jax.vmap(
        lambda p: numpyro.infer.util.log_density(surrogate.model, (data,), {}, p)[0]
    )(prior)
    assert lp_map >= float(np.nanmax(np.asarray(lps))) - 1e-6
    mean, var = posterior.predict(X)
    assert float(np.max(np.abs(mean[0] - data.y[:15]))) < 0.2


def test_fixed_validates_sites_shapes_and_values():
    data = ppbo.Dataset(np.zeros((3, 2)), np.zeros(3))
    good = {"lengthscale": [0.3, 0.4], "outputscale": 1.0, "noise": 0.1, "mean": 0.0}
    posterior = ppbo.fit(gp.surrogate(), data, ppbo.Fixed(good), jax.random.key(0))
    assert posterior.samples["lengthscale"].shape == (1, 2)
    with pytest.raises(ValueError, match=r"missing \['mean'\]"):
        ppbo.Fixed({k: v for k, v in good.items() if k != "mean"}).fit(
            None, gp.surrogate(), data
        )
    with pytest.raises(ValueError, match=r"unknown \['lengthscales'\]"):
        ppbo.Fixed({**good, "lengthscales": 1.0}).fit(None, gp.surrogate(), data)
    with pytest.raises(
        ValueError, match=r"params\['lengthscale'\] must have shape \(2,\)"
    ):
        ppbo.Fixed({**good, "lengthscale": [1.0, 2.0, 3.0]}).fit(
            None, gp.surrogate(), data
        )
    with pytest.raises(ValueError, match=r"params\['noise'\] must be finite"):
        ppbo.Fixed({**good, "noise": np.nan}).fit(None, gp.surrogate(), data)


def test_cholesky_error_is_raised_for_a_broken_model():
    def model(data):
        numpyro.sample("s", dist.Normal(0.0, 1.0))

    def prepare(params, data):
        return {"L": jnp.linalg.cholesky(-jnp.eye(2))}

    surrogate = ppbo.Surrogate(model=model, predict=_predict, prepare=prepare)
    with pytest.raises(ppbo.CholeskyError, match="posterior sample 0"):
        ppbo.fit(surrogate, ppbo.Dataset([[0.0]], [0.0]), ppbo.Fixed({"s": 0.0}), None)


def test_map_bad_config():
    with pytest.raises(ValueError, match="num_restarts must be an integer >= 1"):
        ppbo.MAP(num_restarts=0)


@pytest.mark.slow
def test_map_with_many_restarts_on_hundreds_of_points_does_not_deadlock():
    # Independent LAPACK triangular solves running at once used to deadlock
    # jaxlib's two-thread CPU pool here (capacity 320, 8 vmapped restarts); run in
    # a subprocess so that a regression fails by timeout instead of hanging.
    import subprocess
    import sys

    code = (
        "import jax, numpy as np, ppbo\n"
        "jax.config.update('jax_enable_x64', True)\n"
        "from ppbo.models import gp\n"
        "X = np.random.default_rng(0).random((300, 2))\n"
        "data = ppbo.Dataset(X, np.sin(6 * X[:, 0]) + X[:, 1])\n"
        "p = ppbo.fit(gp.surrogate(), data, ppbo.MAP(num_restarts=8, "
        "max_iterations=20), jax.random.key(0))\n"
        "print(p.num_samples)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "1"
