"""GP-Hedge portfolio: probabilities, choices and gains (Hoffman et al. 2011)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppbo
from ppbo.acquisition.hedge import (
    HedgeState,
    hedge,
    hedge_choose,
    hedge_init,
    hedge_probabilities,
    hedge_update,
)
from ppbo.models import gp


def test_probabilities_are_the_softmax_of_scaled_gains():
    state = hedge_init(["ei", "pi", "ucb"], eta=2.0)
    np.testing.assert_allclose(hedge_probabilities(state), np.full(3, 1 / 3))
    state = HedgeState(state.names, jnp.array([0.5, -1.0, 400.0]), state.eta)
    p = np.asarray(hedge_probabilities(state))
    expected = np.exp(2.0 * np.array([0.5, -1.0, 400.0]) - 800.0)
    np.testing.assert_allclose(p, expected / expected.sum(), rtol=1e-12)
    assert p.sum() == pytest.approx(1.0, abs=1e-15)
    assert np.all(np.isfinite(p))


def test_choices_follow_the_probabilities_and_are_deterministic_per_key():
    state = hedge_init(["a", "b", "c"])
    state = HedgeState(state.names, jnp.array([0.0, 1.0, 2.0]), state.eta)
    nominees = jnp.array([[0.1, 0.1], [0.5, 0.5], [0.9, 0.9]])
    index, x = hedge_choose(jax.random.key(0), state, nominees)
    again = hedge_choose(jax.random.key(0), state, nominees)
    assert int(index) == int(again[0]) and np.array_equal(x, again[1])
    np.testing.assert_array_equal(x, nominees[int(index)])
    num = 4000
    keys = jax.random.split(jax.random.key(1), num)
    choose = jax.jit(jax.vmap(hedge_choose, in_axes=(0, None, None)))
    indices, _ = choose(keys, state, nominees)
    frequency = np.bincount(np.asarray(indices), minlength=3) / num
    p = np.asarray(hedge_probabilities(state))
    np.testing.assert_array_less(np.abs(frequency - p), 4 * np.sqrt(p * (1 - p) / num))


@pytest.fixture(scope="module")
def posterior():
    """A 1-D GP whose posterior mean is clearly highest near x = 0.7."""
    X = np.array([[0.1], [0.3], [0.5], [0.7], [0.9]])
    y = np.array([-1.0, -0.5, 0.2, 1.5, 0.3])
    surrogate = gp.surrogate(kernel="rbf", mean="zero")
    params = {"lengthscale": [0.2], "outputscale": 1.0, "noise": 1e-2}
    return ppbo.fit(
        surrogate, ppbo.Dataset(X, y), ppbo.Fixed(params), jax.random.key(0)
    )


def test_gains_add_the_new_posterior_mean_and_favour_the_best_arm(posterior):
    state = hedge.init(("explore", "exploit", "middle"))
    nominees = np.array([[0.05], [0.7], [0.45]])
    rewards, _ = posterior.predict_marginal(nominees)
    probabilities = []
    for _ in range(10):
        state = hedge.update(state, posterior, nominees)
        probabilities.append(np.asarray(hedge.probabilities(state)))
    np.testing.assert_allclose(state.gains, 10 * np.asarray(rewards), rtol=1e-12)
    # the arm whose nominees have the highest posterior mean becomes most likely,
    # increasingly so with every step
    assert int(np.argmax(rewards)) == 1
    assert np.argmax(probabilities[-1]) == 1 and probabilities[-1][1] > 0.99
    assert np.all(np.diff([p[1] for p in probabilities]) > 0)
    assert state.names == ("explore", "exploit", "middle")


def test_state_is_a_pytree_and_jit_compatible():
    state = hedge_init(["ei", "pi"], eta=0.5)
    leaves, treedef = jax.tree.flatten(state)
    assert len(leaves) == 2
    rebuilt = jax.tree.unflatten(treedef, leaves)
    assert rebuilt.names == state.names and float(rebuilt.eta) == 0.5
    probabilities = jax.jit(hedge_probabilities)(state)
    np.testing.assert_allclose(probabilities, [0.5, 0.5])


def test_invalid_arguments_raise(posterior):
    with pytest.raises(ValueError, match="distinct and not empty"):
        hedge_init(["ei", "ei"])
    with pytest.raises(ValueError, match="distinct and not empty"):
        hedge_init([])
    with pytest.raises(ValueError, match="sequence of names"):
        hedge_init("ei")
    with pytest.raises(ValueError, match="eta must be finite"):
        hedge_init(["ei", "pi"], eta=0.0)
    state = hedge_init(["ei", "pi"])
    with pytest.raises(ValueError, match="nominees must have shape"):
        hedge_choose(jax.random.key(0), state, np.ones((3, 1)))
    with pytest.raises(ValueError, match="nominees must have shape"):
        hedge_update(state, posterior, np.ones(2))
