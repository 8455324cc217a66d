import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppbo.linalg import JITTERS, CholeskyError, check_factor, cholesky


def test_matches_numpy_on_positive_definite():
    A = np.random.default_rng(0).random((6, 6))
    K = A @ A.T + 6 * np.eye(6)
    np.testing.assert_allclose(
        cholesky(jnp.asarray(K)), np.linalg.cholesky(K), atol=1e-12
    )


def test_escalates_jitter_on_singular_matrix():
    K = jnp.ones((4, 4))  # rank one
    assert bool(jnp.any(jnp.isnan(jnp.linalg.cholesky(K))))
    L = jax.jit(cholesky)(K)
    assert bool(jnp.all(jnp.isfinite(L)))
    # the added jitter is one of the documented levels
    added = np.diag(np.asarray(L @ L.T - K)).mean()
    assert any(np.isclose(added, j, rtol=1e-6) for j in JITTERS[1:])


def test_indefinite_matrix_raises_typed_error():
    K = jnp.diag(jnp.array([1.0, -1.0]))
    L = cholesky(K)
    with pytest.raises(CholeskyError, match="noise prior"):
        check_factor(L)
    with pytest.raises(CholeskyError, match="posterior sample 1"):
        check_factor(jnp.stack([jnp.eye(2), L]))
