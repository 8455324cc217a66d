import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.distance import cdist

from ppbo.models.kernels import (
    Linear,
    Matern12,
    Matern32,
    Matern52,
    Product,
    Scaled,
    SquaredExponential,
    Sum,
)

RNG = np.random.default_rng(0)
X1 = RNG.random((5, 3))
X2 = RNG.random((4, 3))
ELL = np.array([0.3, 0.7, 1.5])


def _reference(name, A, B):
    r = cdist(A / ELL, B / ELL)  # scipy's Euclidean distance, independent of ppbo
    if name == "matern12":
        return np.exp(-r)
    if name == "matern32":
        return (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r)
    if name == "matern52":
        return (1 + np.sqrt(5) * r + 5 * r**2 / 3) * np.exp(-np.sqrt(5) * r)
    if name == "rbf":
        return np.exp(-0.5 * r**2)
    return (A / ELL) @ (B / ELL).T


KERNELS = {
    "matern12": Matern12,
    "matern32": Matern32,
    "matern52": Matern52,
    "rbf": SquaredExponential,
    "linear": Linear,
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_matrix_evaluate_and_diag_match_closed_form(name):
    k = KERNELS[name](jnp.asarray(ELL))
    expected = _reference(name, X1, X2)
    np.testing.assert_allclose(k.matrix(X1, X2), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(k.evaluate(X1[0], X2[1]), expected[0, 1], rtol=1e-10)
    np.testing.assert_allclose(
        k.diag(X1), np.diag(_reference(name, X1, X1)), rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_pytree_round_trip_jit_and_finite_gradients(name):
    k = KERNELS[name](jnp.asarray(ELL))
    leaves, treedef = jax.tree.flatten(k)
    rebuilt = jax.tree.unflatten(treedef, leaves)
    np.testing.assert_array_equal(rebuilt.lengthscale, k.lengthscale)
    out = jax.jit(lambda k: k.matrix(X1, X1))(k)
    np.testing.assert_allclose(out, _reference(name, X1, X1), rtol=1e-10, atol=1e-12)
    # gradients w.r.t. the lengthscale stay finite on the diagonal (r = 0)
    grad = jax.grad(lambda ell: KERNELS[name](ell).matrix(X1, X1).sum())(
        jnp.asarray(ELL)
    )
    assert np.all(np.isfinite(grad))


def test_composition():
    a, b = Matern52(jnp.asarray(ELL)), Linear(jnp.asarray(ELL))
    ka, kb = _reference("matern52", X1, X2), _reference("linear", X1, X2)
    assert isinstance(a + b, Sum) and isinstance(a * b, Product)
    assert isinstance(2.0 * a, Scaled) and isinstance(a * 2.0, Scaled)
    np.testing.assert_allclose((a + b).matrix(X1, X2), ka + kb, rtol=1e-10)
    np.testing.assert_allclose((a * b).matrix(X1, X2), ka * kb, rtol=1e-10)
    np.testing.assert_allclose(
        (0.5 * a + b).evaluate(X1[1], X2[2]), 0.5 * ka[1, 2] + kb[1, 2]
    )
    np.testing.assert_allclose((a * b).diag(X1), np.diag(_reference("linear", X1, X1)))
    composite = jax.jit(lambda k: k.matrix(X1, X2))(0.5 * a + a * b)
    np.testing.assert_allclose(composite, 0.5 * ka + ka * kb, rtol=1e-10)


def test_stationary_kernels_are_positive_semidefinite():
    X = RNG.random((30, 3))
    for name in ("matern12", "matern32", "matern52", "rbf"):
        K = np.asarray(KERNELS[name](jnp.asarray(ELL)).matrix(X, X))
        assert np.linalg.eigvalsh(K).min() > -1e-10
