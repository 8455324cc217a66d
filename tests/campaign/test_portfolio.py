"""GP-Hedge as a campaign's acquisition (Hoffman, Brochu and de Freitas 2011)."""

import jax
import numpy as np
import pytest

import ppbo
from ppbo.campaign.portfolio import check_hedge_options, hedge_step
from ppbo.campaign.step import step
from ppbo.models import forest, gp
from ppbo.storage import SQLiteStorage

FAST = {"num_raw": 64, "num_restarts": 2, "max_iterations": 50}


def _objective(params):
    x, y = params["x"], params["y"]
    return (x - 0.3) ** 2 + 2.0 * (y - 0.6) ** 2 + 0.1 * np.sin(9.0 * x)


def _space():
    return {"x": ppbo.Real(0.0, 1.0), "y": ppbo.Real(0.0, 1.0)}


def _campaign(storage, name, steps, stop_at=None, **options):
    def make():
        return ppbo.Optimizer(
            _space(),
            acquisition="gp_hedge",
            n_initial=3,
            seed=11,
            storage=storage,
            name=name,
            optimizer_options=FAST,
            load_if_exists=True,
            **options,
        )

    opt = make()
    for number in range(steps):
        if number == stop_at:
            opt = ppbo.Optimizer.load(storage, name)
        trial = opt.ask()
        opt.tell(trial, _objective(trial.params))
    return opt


def test_each_arm_nominates_its_own_maximiser_and_the_choice_is_one_of_them():
    rng = np.random.default_rng(0)
    X = rng.random((7, 2))
    data = ppbo.Dataset(X, np.sin(5 * X[:, 0]) - (X[:, 1] - 0.4) ** 2)
    key = jax.random.key(4)
    options = {
        "acquisitions": ["log_ei", "ucb", "pi"],
        "options": {"ucb": {"beta": 4.0}},
    }
    result, record = hedge_step(
        key, gp.surrogate(), ppbo.MAP(), data, None, options=options,
        optimizer_options=FAST,
    )  # fmt: skip
    assert record["acquisitions"] == ["log_ei", "ucb", "pi"]
    assert record["gains"] == [0.0, 0.0, 0.0]
    posterior = result.posterior
    for arm, nominee in zip(record["acquisitions"], record["nominees"], strict=True):
        alone = step(
            key, gp.surrogate(), ppbo.MAP(), getattr(ppbo.acquisition, arm), data,
            fitted=posterior, optimizer_options=FAST,
            acquisition_options={"beta": 4.0} if arm == "ucb" else None,
        )  # fmt: skip
        np.testing.assert_array_equal(alone.X[0], nominee)
    chosen = record["acquisitions"].index(record["chosen"])
    np.testing.assert_array_equal(result.X[0], record["nominees"][chosen])
    # UCB with beta = 4 is not UCB with the campaign's beta = 1
    default = step(
        key, gp.surrogate(), ppbo.MAP(), ppbo.acquisition.ucb, data,
        fitted=posterior, optimizer_options=FAST,
    )  # fmt: skip
    assert not np.array_equal(default.X[0], record["nominees"][1])


def test_gains_add_the_refitted_mean_at_the_previous_nominees():
    opt = _campaign(None, "gains", 7)
    trials = [t for t in opt.get_trials() if t.origin == "model"]
    assert len(trials) == 4
    assert trials[0].extra["hedge"]["acquisitions"] == ["log_ei", "ucb"]
    assert trials[0].extra["hedge"]["gains"] == [0.0, 0.0]
    # the record of each ask: its point is the chosen arm's nominee
    for trial in trials:
        record = trial.extra["hedge"]
        chosen = record["nominees"][record["acquisitions"].index(record["chosen"])]
        np.testing.assert_allclose(opt.space.to_unit(trial.params), chosen, atol=1e-12)
    # the last ask's gains are the previous gains plus the mean of the posterior
    # that ask fitted (the one the campaign stores) at the previous nominees
    before, last = trials[-2].extra["hedge"], trials[-1].extra["hedge"]
    mean, _ = opt.posterior.predict_marginal(np.asarray(before["nominees"]))
    np.testing.assert_allclose(
        np.subtract(last["gains"], before["gains"]), np.asarray(mean), rtol=1e-9
    )


def test_a_reloaded_portfolio_campaign_continues_exactly(tmp_path):
    whole = _campaign(SQLiteStorage(tmp_path / "a.db"), "a", 8)
    resumed = _campaign(SQLiteStorage(tmp_path / "b.db"), "b", 8, stop_at=5)
    assert [t.params for t in whole.get_trials()] == [
        t.params for t in resumed.get_trials()
    ]
    assert [t.extra.get("hedge") for t in whole.get_trials()] == [
        t.extra.get("hedge") for t in resumed.get_trials()
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"arms": ["ei"]}, "unknown keys \\['arms'\\]"),
        ({"acquisitions": ["log_ei"]}, "at least two distinct"),
        ({"acquisitions": ["log_ei", "log_ei"]}, "at least two distinct"),
        ({"acquisitions": ["log_ei", "nope"]}, "got 'nope'"),
        ({"acquisitions": ["log_ei", "gp_hedge"]}, "got 'gp_hedge'"),
        ({"acquisitions": "log_ei"}, "list of acquisition names"),
        ({"eta": 0.0}, "eta'\\] must be > 0, got 0.0"),
        ({"eta": float("nan")}, "eta'\\] must be > 0"),
        ({"options": {"mes": {"num_max_samples": 4}}}, "must map arms"),
    ],
)
def test_bad_portfolio_options_are_refused_at_creation(options, message):
    with pytest.raises(ValueError, match=message):
        check_hedge_options(options)
    with pytest.raises(ValueError, match=message):
        ppbo.Optimizer(_space(), acquisition="gp_hedge", acquisition_options=options)


def test_every_arm_must_suit_the_surrogate():
    with pytest.raises(ppbo.MissingCapabilityError, match="'pes' of 'gp_hedge'"):
        ppbo.Optimizer(
            _space(),
            surrogate=forest.surrogate(),
            acquisition="gp_hedge",
            acquisition_options={"acquisitions": ["log_ei", "pes"]},
        )


def test_the_portfolio_itself_cannot_be_evaluated():
    posterior = ppbo.fit(
        gp.surrogate(),
        ppbo.Dataset(np.array([[0.2], [0.8]]), np.array([0.0, 1.0])),
        ppbo.MAP(),
        jax.random.key(0),
    )
    with pytest.raises(TypeError, match="is a portfolio"):
        ppbo.acquisition.evaluate(ppbo.acquisition.gp_hedge, posterior, np.ones((1, 1)))
