"""Maximum a posteriori (MAP) hyperparameters from several prior draws.

Maximises ``log p(y | theta) + log p(theta)`` in the model's own (constrained)
parameterisation by BFGS in the unconstrained space, from ``num_restarts`` starting
points drawn from the prior, restarts run one after another. With flat priors this
is type-II maximum likelihood (Rasmussen and Williams 2006, §5.4.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jax.scipy.optimize import minimize
from numpyro.infer import init_to_sample
from numpyro.infer.util import constrain_fn, initialize_model, log_density

from ppbo.data import Dataset
from ppbo.inference import _mcmc
from ppbo.surrogate import Posterior, Surrogate

__all__ = ["MAP"]


@partial(jax.jit, static_argnames=("surrogate", "config"))
def _optimise(key, data: Dataset, surrogate: Surrogate, config: MAP):
    args, kwargs = (data,), dict(surrogate.options)

    def start(key):
        info = initialize_model(
            key,
            surrogate.model,
            init_strategy=init_to_sample,
            model_args=args,
            model_kwargs=kwargs,
        )
        return info.param_info.z

    # starting points one after another too (lax.map): a vmap batches the model's
    # Cholesky factorisations and triangular solves over the restarts, and two
    # batched LAPACK calls running at once deadlock jaxlib's CPU thread pool (see
    # ppbo.models.diff_gp); one model evaluation per restart costs nothing here
    z0 = jax.lax.map(start, jax.random.split(key, config.num_restarts))
    _, unravel = ravel_pytree(jax.tree.map(lambda a: a[0], z0))

    def constrained(z):
        return constrain_fn(surrogate.model, args, kwargs, z)

    def objective(flat):
        value, _ = log_density(
            surrogate.model, args, kwargs, constrained(unravel(flat))
        )
        return jnp.where(jnp.isfinite(value), -value, jnp.inf)

    def solve(z):
        flat = ravel_pytree(z)[0]
        result = minimize(
            objective, flat, method="BFGS", options={"maxiter": config.max_iterations}
        )
        return result.x, result.fun

    # restarts one after another (lax.map), not vmapped: a vmapped BFGS runs its
    # line searches in lockstep, so every batched evaluation pays for all
    # restarts until the slowest one has converged; the results are the same
    xs, values = jax.lax.map(solve, z0)
    values = jnp.where(jnp.isfinite(values), values, jnp.inf)
    best = jnp.argmin(values)
    params = constrained(unravel(xs[best]))
    return jax.tree.map(lambda a: a[None], params), values


@dataclass(frozen=True)
class MAP:
    """MAP estimate by multi-start BFGS; a frozen config with one method, :meth:`fit`.

    Args:
        num_restarts: starting points drawn from the prior (run in sequence).
        max_iterations: BFGS iterations per restart.

    Example:
        >>> inference = MAP(num_restarts=8)
        >>> inference.fit(jax.random.key(0), posterior.surrogate, data).num_samples
        1
    """

    num_restarts: int = 8
    max_iterations: int = 200

    def __post_init__(self) -> None:
        for name in ("num_restarts", "max_iterations"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")

    def fit(self, key: jax.Array, surrogate: Surrogate, data: Dataset) -> Posterior:
        """Return a one-sample posterior at the best of the restarts.

        Raises:
            FloatingPointError: if no restart reached a finite objective.
        """
        with _mcmc.small_blas(data.capacity):
            params, values = jax.block_until_ready(
                _optimise(key, data, surrogate, self)
            )
        values = np.asarray(values)
        if not np.isfinite(values).any():
            raise FloatingPointError(
                f"MAP found no finite log posterior in {self.num_restarts} restarts; "
                "check the data and priors of the model"
            )
        samples = {k: v for k, v in params.items() if k != "y"}
        cache = _mcmc.prepare_cache(surrogate, samples, data)
        stats = {"lp": jnp.asarray([-np.nanmin(values)])}
        return Posterior(
            surrogate, samples, data, cache=cache, sample_stats=stats, method="MAP"
        )
