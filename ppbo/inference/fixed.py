"""Fixed hyperparameters: a one-sample posterior at given values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro import handlers

from ppbo.data import Dataset
from ppbo.inference import _mcmc
from ppbo.surrogate import Posterior, Surrogate

__all__ = ["Fixed", "latent_sites"]


def latent_sites(surrogate: Surrogate, data: Dataset) -> dict[str, tuple[int, ...]]:
    """Names and shapes of the model's latent (non-observed) sample sites.

    Example:
        >>> from ppbo.models import gp
        >>> latent_sites(gp.surrogate(), data)["lengthscale"]
        (2,)
    """
    seeded = handlers.seed(surrogate.model, jax.random.key(0))
    trace = handlers.trace(seeded).get_trace(data, **surrogate.options)
    return {
        name: tuple(site["value"].shape)
        for name, site in trace.items()
        if site["type"] == "sample" and not site["is_observed"]
    }


@dataclass(frozen=True)
class Fixed:
    """Given hyperparameter values as a posterior with one sample (no inference).

    Args:
        params: site name -> value for every latent site of the model.

    Example:
        >>> import jax.numpy as jnp
        >>> from ppbo.models import gp
        >>> fixed = Fixed({"lengthscale": jnp.array([0.2, 0.3]), "outputscale": 1.0,
        ...                "noise": 1e-4, "mean": 0.0})
        >>> fixed.fit(None, gp.surrogate(), data).num_samples
        1
    """

    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.params, Mapping):
            raise ValueError(
                f"params must be a mapping of site -> value, got {self.params!r}"
            )
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    def __hash__(self) -> int:
        return id(self)

    def fit(self, key: jax.Array, surrogate: Surrogate, data: Dataset) -> Posterior:
        """Return the one-sample posterior at ``params``.

        Raises:
            ValueError: naming missing or unknown sites, wrong shapes and
                non-finite values.
        """
        del key
        sites = latent_sites(surrogate, data)
        missing = sorted(set(sites) - set(self.params))
        unknown = sorted(set(self.params) - set(sites))
        if missing or unknown:
            raise ValueError(
                f"params must give exactly the latent sites {sorted(sites)}; "
                f"missing {missing}, unknown {unknown}"
            )
        samples = {}
        for name, shape in sites.items():
            value = np.asarray(self.params[name], dtype=np.float64)
            if value.shape != shape:
                if value.size == 1 and shape == ():
                    value = value.reshape(())
                else:
                    raise ValueError(
                        f"params[{name!r}] must have shape {shape}, got {value.shape}"
                    )
            if not np.all(np.isfinite(value)):
                raise ValueError(f"params[{name!r}] must be finite, got {value}")
            samples[name] = jnp.asarray(value)[None]
        cache = _mcmc.prepare_cache(surrogate, samples, data)
        return Posterior(
            surrogate, samples, data, cache=cache, num_chains=1, method="Fixed"
        )
