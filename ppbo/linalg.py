"""Numerically guarded dense linear algebra.

JAX's Cholesky factorisation returns NaN instead of raising when a matrix is not
numerically positive definite. :func:`cholesky` retries with escalating diagonal
jitter inside compiled code; :func:`check_factor` is the host-side check that turns a
factor that stayed NaN into a :class:`CholeskyError` telling the user what to do.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["CholeskyError", "cholesky", "check_factor", "JITTERS"]

#: Relative jitters tried in turn, as multiples of the mean diagonal.
JITTERS = (0.0, 1e-8, 1e-6, 1e-4)


class CholeskyError(FloatingPointError):
    """A covariance matrix was not positive definite even with added jitter."""


def cholesky(matrix: jax.Array) -> jax.Array:
    """Lower Cholesky factor with escalating jitter, safe to call under ``jit``.

    Tries ``matrix + j * mean(diag(matrix)) * I`` for ``j`` in :data:`JITTERS` and
    returns the first factor without NaN; if every attempt fails, the returned factor
    holds NaN, which :func:`check_factor` reports. Not meant for differentiation
    (it contains a while loop); models use a fixed jitter in their likelihood.

    Args:
        matrix: symmetric matrix, shape (n, n).

    Returns:
        Lower-triangular factor, shape (n, n).

    Example:
        >>> import jax.numpy as jnp
        >>> L = cholesky(jnp.ones((2, 2)))  # singular: jitter makes it factorable
        >>> bool(jnp.all(jnp.isfinite(L)))
        True
    """
    jitters = jnp.asarray(JITTERS, dtype=matrix.dtype)
    scale = jnp.mean(jnp.diag(matrix))
    scale = jnp.where(jnp.isfinite(scale) & (scale > 0), scale, 1.0)
    eye = jnp.eye(matrix.shape[-1], dtype=matrix.dtype)

    def factor(i):
        return jnp.linalg.cholesky(matrix + jitters[i] * scale * eye)

    def cond(state):
        i, L = state
        return jnp.any(jnp.isnan(L)) & (i < len(JITTERS) - 1)

    def body(state):
        i, _ = state
        return i + 1, factor(i + 1)

    _, L = lax.while_loop(cond, body, (0, factor(0)))
    return L


def check_factor(factor: jax.Array, what: str = "the kernel matrix") -> None:
    """Raise :class:`CholeskyError` if a (batch of) Cholesky factors holds NaN.

    Args:
        factor: array of factors, any leading batch shape.
        what: description used in the error message.

    Raises:
        CholeskyError: naming the first failing batch index and the remedies.

    Example:
        >>> import jax.numpy as jnp
        >>> check_factor(jnp.eye(2))  # passes silently
    """
    bad = ~np.isfinite(np.asarray(factor))
    if bad.any():
        batch = np.argwhere(
            bad.reshape(bad.shape[: max(bad.ndim - 2, 0)] + (-1,)).any(-1)
        )
        where = f" for posterior sample {int(batch[0][0])}" if batch.size else ""
        raise CholeskyError(
            f"Cholesky factorisation of {what} failed{where} even with jitter up to "
            f"{JITTERS[-1]:g} x mean diagonal. Standardise the outputs, remove "
            "duplicate inputs, or give the noise prior a larger lower bound."
        )
