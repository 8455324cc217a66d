"""Bandit source selection (Ramachandran et al. 2018): hand computations, the
concentration on the related source (a tolerance derived below), and a campaign
that chooses sources with it and resumes exactly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import ppbo
from ppbo.storage import SQLiteStorage
from ppbo.transfer import bandit


def test_probabilities_selection_and_update_by_hand():
    state = bandit.init(3)._replace(log_weights=jnp.log(jnp.array([1.0, 3.0, 0.5])))
    gamma = 0.3
    w = np.array([1.0, 3.0, 0.5])
    expected = (1 - gamma) * w / w.sum() + gamma / 3
    np.testing.assert_allclose(bandit.probabilities(state, gamma), expected)
    assert int(bandit.select(state, gamma)) == 1
    new = bandit.update(state, 1, -0.8, gamma)
    # only the chosen arm moves: log w += gamma r / (K p)
    step = gamma * -0.8 / (3 * expected[1])
    np.testing.assert_allclose(new.log_weights, np.log(w) + [0.0, step, 0.0])
    assert new.counts.tolist() == [0, 1, 0]
    # gamma = 1 makes p uniform: the tie goes to the larger weight
    assert int(bandit.select(state, 1.0)) == 1
    # equal weights: the lower index
    assert int(bandit.select(bandit.init(4), 0.5)) == 0
    assert float(bandit.reward(2.0, 0.5)) == -2.25
    with pytest.raises(ValueError, match=r"gamma must be in \(0, 1\]"):
        bandit.check_gamma(1.5)


def test_the_bandit_concentrates_on_the_related_source():
    """Arm 2 is related (its source predicts the target: small squared errors),
    arms 0 and 1 are not. Losses ``ℓ = -r``: the i-th pull of arm k gets the i-th
    entry of a pre-drawn table, ``σ_k² χ²_1`` distributed.

    Tolerance. The chosen arm is the argmax of the weights and its probability
    is at least 1/K, so (i) before its last pull an unrelated arm u had a log
    weight ``≥`` the related arm's, which only falls: ``≥ L_R(T)``; (ii)
    ``L_u ≤ -(γ/K) Σ_{i < n_u} ℓ_{u,i}`` as ``p ≤ 1``, and
    ``L_R(T) ≥ -γ Σ_{j ≤ T} ℓ_{R,j} = -γ S_R`` as ``p ≥ 1/K``. Hence
    ``Σ_{i < n_u} ℓ_{u,i} ≤ K S_R``. With ``S_R ≤ σ_R² q`` (q the 1 - δ quantile
    of χ²_T) and M the smallest m with ``P(σ_u² χ²_m ≤ K σ_R² q) ≤ δ``, each
    unrelated arm is pulled at most ``M + 1`` times, except with probability
    ``≤ 3δ`` (δ = 1e-6) per seed.
    """
    K, T, gamma, delta = 3, 400, 0.5, 1e-6
    sigma = np.array([1.0, 1.0, 0.05])
    q = stats.chi2.ppf(1 - delta, T)
    M = next(
        m
        for m in range(1, T)
        if stats.chi2.cdf(K * sigma[2] ** 2 * q / sigma[0] ** 2, m) <= delta
    )

    def play(losses):
        def one(state, _):
            arm = bandit.select(state, gamma)
            reward = -losses[arm, state.counts[arm]]
            return bandit.update(state, arm, reward, gamma), arm

        return jax.lax.scan(one, bandit.init(K), None, length=T)[0]

    play = jax.jit(play)
    for seed in range(3):
        losses = sigma[:, None] ** 2 * np.random.default_rng(seed).chisquare(1, (K, T))
        state = play(jnp.asarray(losses))
        counts = np.asarray(state.counts)
        assert counts.sum() == T
        assert counts[:2].max() <= M + 1, (counts, M)
        assert counts[2] >= T - 2 * (M + 1)
        assert int(bandit.select(state, gamma)) == 2


def f(x, shift):
    return x * np.sin(x + np.pi + shift) + x / 10.0


@pytest.mark.slow
def test_a_bandit_campaign_records_its_arms_and_resumes_exactly(
    tmp_path, interrupted_campaign
):
    rng = np.random.default_rng(4)
    sources = []
    for k, shift in enumerate([np.pi, 0.0, np.pi / 2]):
        X = rng.uniform(0.0, 10.0, (10, 1))
        sources.append(ppbo.Source(f"s{k}", X, f(X[:, 0], shift)))

    def make(storage, name):
        return lambda: ppbo.Optimizer(
            {"x": ppbo.Real(0.0, 10.0)},
            surrogate="multitask_gp",
            inference=ppbo.MAP(num_restarts=2, max_iterations=50),
            acquisition="ei",
            n_initial=3,
            seed=2,
            storage=storage,
            name=name,
            optimizer_options={"num_raw": 64, "num_restarts": 2, "max_iterations": 20},
            sources=sources,
            source_selection="bandit",
            source_selection_options={"gamma": 0.4},
        )

    def run(storage, name, steps, stop_at=None):
        return interrupted_campaign(
            make(storage, name),
            lambda: ppbo.Optimizer.load(storage, name),
            lambda t: float(f(t.params["x"], 0.0)),
            steps,
            stop_at,
        )

    whole = run(SQLiteStorage(tmp_path / "a.db"), "a", 8)
    storage = SQLiteStorage(tmp_path / "b.db")
    resumed = run(storage, "b", 9, stop_at=6)
    assert [t.params for t in whole] == [t.params for t in resumed]
    model = [t for t in resumed if t.origin == "model"]
    assert [t.extra["source_arm"] for t in model] == [
        t.extra["source_arm"] for t in whole if t.origin == "model"
    ]
    # the first model ask: every weight 1, the tie goes to arm 0
    assert model[0].extra["source_arm"] == 0
    assert model[0].extra["source_probability"] == pytest.approx(1 / 3)
    # each later ask's weights are the replay of the earlier trials' rewards
    opt = ppbo.Optimizer.load(storage, "b")
    transfer = opt._setup.transfer
    model_data = opt._setup.model(resumed)
    state = transfer.bandit_state(resumed, model_data.standardization)
    assert state.counts.sum() == len(model)
    assert (
        model_data.extra["bandit_log_weights"] == np.asarray(state.log_weights).tolist()
    )
    # a single-source fit: the chosen source's rows and the target's only
    data = opt.posterior.data
    source = data.unpadded_fields()["source"]
    assert set(source.tolist()) == {0, -1} and (source == 0).sum() == 10
