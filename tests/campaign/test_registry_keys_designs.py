"""Names of components, named key streams and initial designs."""

import jax
import numpy as np
import pytest
from scipy.stats import qmc

import ppbo
from ppbo.campaign import registry
from ppbo.campaign.designs import initial_design
from ppbo.campaign.keys import STREAMS, campaign_key, stream_id


def test_every_registered_acquisition_is_an_acquisition():
    for name in registry.acquisition_names():
        acquisition, spec = registry.resolve_acquisition(name)
        assert isinstance(acquisition, ppbo.acquisition.Acquisition)
        assert acquisition.name == name and spec == {"name": name}
    with pytest.raises(ValueError, match="acquisition must be one of"):
        registry.resolve_acquisition("eii")


def test_named_inferences_share_one_set_of_defaults():
    assert registry.make_inference("nuts") == ppbo.NUTS()
    assert registry.make_inference("Slice") == ppbo.Slice()
    # the slice sampler's warm-up is half its samples, as its own default
    assert ppbo.Slice().num_warmup * 2 == ppbo.Slice().num_samples
    assert registry.make_inference("slice", 64) == ppbo.Slice(
        num_warmup=32, num_samples=64
    )
    assert registry.make_inference("nuts", 8) == ppbo.NUTS(num_warmup=8, num_samples=8)
    assert registry.make_inference("map") == ppbo.MAP()
    for bad in ("fixed", "hmc"):
        with pytest.raises(ValueError, match="inference must be one of"):
            registry.make_inference(bad)


def test_specs_round_trip_to_the_same_objects():
    for given in ("gp", "gp-rbf", {"name": "gp", "mean": "zero"}):
        surrogate, spec = registry.resolve_surrogate(given)
        assert registry.resolve_surrogate(spec) == (surrogate, spec)
    inference, spec = registry.resolve_inference(ppbo.Slice(num_samples=32))
    assert registry.resolve_inference(spec)[0] == inference
    with pytest.raises(ValueError, match="has no option 'kernal'"):
        registry.resolve_surrogate({"name": "gp", "kernal": "rbf"})
    with pytest.raises(ValueError, match="surrogate must be"):
        registry.resolve_surrogate("gradient_boosting")


def _lengthscale_prior(surrogate, d=3):
    import numpyro

    X = np.random.default_rng(0).random((4, d))
    with numpyro.handlers.seed(rng_seed=0):
        trace = numpyro.handlers.trace(surrogate.model).get_trace(
            ppbo.Dataset(X, X.sum(1))
        )
    return trace["lengthscale"]["fn"].base_dist.base_dist  # Independent(Expanded(.))


def test_lengthscale_prior_is_a_stored_surrogate_option():
    from ppbo.models import gp

    assert (
        registry.SURROGATES["gp"][1]["lengthscale_prior"]
        == gp.DEFAULT_LENGTHSCALE_PRIOR
    )
    surrogate, spec = registry.resolve_surrogate(
        {"name": "gp", "lengthscale_prior": "dimension_scaled"}
    )
    assert spec["lengthscale_prior"] == "dimension_scaled"
    prior = _lengthscale_prior(surrogate)
    np.testing.assert_allclose(prior.loc, np.sqrt(2) + np.log(3) / 2)
    np.testing.assert_allclose(prior.scale, np.sqrt(3))
    default, spec = registry.resolve_surrogate("gp")
    assert spec["lengthscale_prior"] == "light"
    prior = _lengthscale_prior(default)
    np.testing.assert_allclose(prior.loc, np.log(np.sqrt(3) / 2))
    np.testing.assert_allclose(prior.scale, 1.0)
    with pytest.raises(ValueError, match="lengthscale_prior must be one of"):
        registry.resolve_surrogate({"name": "gp", "lengthscale_prior": "heavy"})

    # the campaign stores the name, so a resumed campaign fits the same model
    space = ppbo.Space({"a": ppbo.Real(0.0, 1.0), "b": ppbo.Real(0.0, 1.0)})
    storage = ppbo.storage.SQLiteStorage(":memory:")
    ppbo.Optimizer(
        space,
        storage=storage,
        name="old",
        surrogate={"name": "gp", "lengthscale_prior": "dimension_scaled"},
    )
    loaded = ppbo.Optimizer.load(storage, "old")
    assert loaded.config["surrogate"]["lengthscale_prior"] == "dimension_scaled"
    assert loaded._setup.surrogate is surrogate


def _noise_prior(surrogate):
    import numpyro

    X = np.random.default_rng(0).random((4, 2))
    with numpyro.handlers.seed(rng_seed=0):
        trace = numpyro.handlers.trace(surrogate.model).get_trace(
            ppbo.Dataset(X, X.sum(1))
        )
    return trace["noise"]["fn"]


def test_noise_prior_is_a_stored_surrogate_option():
    import numpyro.distributions as dist

    from ppbo.models import gp

    default, spec = registry.resolve_surrogate("gp")
    assert spec["noise_prior"] == "default"
    prior = _noise_prior(default)
    assert (float(prior.loc), float(prior.scale)) == (-4.0, 1.0)
    low, spec = registry.resolve_surrogate({"name": "gp", "noise_prior": "low"})
    assert spec["noise_prior"] == "low"
    prior = _noise_prior(low)
    np.testing.assert_allclose([prior.loc, prior.scale], [np.log(1e-4), 2.5])
    # an explicit prior for the site wins over the named one
    given = dist.LogNormal(-9.0, 0.5)
    prior = _noise_prior(gp.surrogate(noise_prior="low", priors={"noise": given}))
    assert (float(prior.loc), float(prior.scale)) == (-9.0, 0.5)
    with pytest.raises(ValueError, match="noise_prior must be one of.*'quiet'"):
        registry.resolve_surrogate({"name": "gp", "noise_prior": "quiet"})

    space = ppbo.Space({"a": ppbo.Real(0.0, 1.0)})
    storage = ppbo.storage.SQLiteStorage(":memory:")
    ppbo.Optimizer(space, storage=storage, name="quiet", surrogate=spec)
    loaded = ppbo.Optimizer.load(storage, "quiet")
    assert loaded.config["surrogate"]["noise_prior"] == "low"
    assert loaded._setup.surrogate is low


def test_key_streams_are_distinct_and_fixed():
    ids = {stream_id(name) for name in STREAMS}
    assert len(ids) == len(STREAMS) and all(0 <= i < 2**31 for i in ids)
    data = [jax.random.key_data(campaign_key(5, 2, s)) for s in STREAMS]
    assert len({np.asarray(d).tobytes() for d in data}) == len(STREAMS)
    expected = jax.random.fold_in(
        jax.random.fold_in(jax.random.key(5), 2), stream_id("step")
    )
    np.testing.assert_array_equal(
        jax.random.key_data(campaign_key(5, 2, "step")),
        jax.random.key_data(expected),
    )
    with pytest.raises(ValueError, match="stream must be one of"):
        campaign_key(0, 0, "steps")


def test_designs_are_scipy_designs_with_the_seeded_generator():
    np.testing.assert_array_equal(
        initial_design("lhs", 5, 3, 7), qmc.LatinHypercube(3, seed=7).random(5)
    )
    np.testing.assert_array_equal(
        initial_design("sobol", 4, 2, 7), qmc.Sobol(2, seed=7).random(4)
    )
    U = initial_design("lhs", 4, 2, [11, 3])
    np.testing.assert_array_equal(
        np.sort(np.floor(4 * U), axis=0), [[0, 0], [1, 1], [2, 2], [3, 3]]
    )
    with pytest.raises(ValueError, match="initial_design must be one of"):
        initial_design("grid", 2, 2, 0)


def test_saas_prior_campaign_samples_the_shrinkage_with_nuts():
    space = ppbo.Space({"a": ppbo.Real(0.0, 1.0), "b": ppbo.Real(0.0, 1.0)})
    storage = ppbo.storage.SQLiteStorage(":memory:")
    opt = ppbo.Optimizer(
        space,
        storage=storage,
        name="saas",
        n_initial=3,
        surrogate={"name": "gp", "lengthscale_prior": "saas"},
        inference=ppbo.NUTS(num_warmup=8, num_samples=8),
        seed=0,
    )
    for _ in range(4):
        trial = opt.ask()
        opt.tell(trial, (trial.params["a"] - 0.3) ** 2)
    assert opt.get_trials()[-1].origin == "model"
    samples = opt.posterior.samples
    assert samples["lengthscale_shrinkage"].shape == (8,)
    assert samples["lengthscale"].shape == (8, 2)
    loaded = ppbo.Optimizer.load(storage, "saas")
    assert loaded.config["surrogate"]["lengthscale_prior"] == "saas"
