"""Source-task rows of the transfer models: the data check and row masks they share.

The transfer-learning data contract: a :class:`ppbo.Dataset` whose ``source`` field
is -1 on the target's rows and ``k`` on the rows of source task ``k < K``, all in
model space (unit cube, outputs standardised per task). Every transfer surrogate
(:mod:`ppbo.models.env_gp`, ``diff_gp``, ``miso_gp``, ``bhgp``, ``nn_task_gp``,
``rgpe``, ``metabo``, and :mod:`ppbo.models.ablr` with ``num_sources``) checks its
data with :func:`check_sources` before anything is compiled.
"""

from __future__ import annotations

import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from ppbo.data import Dataset
from ppbo.models.gaussian import MaskedMultivariateNormal

__all__ = [
    "check_sources",
    "check_num_sources",
    "source_masks",
    "condition_on_sources",
    "LIKELIHOODS",
    "TARGET_NOISE_PRIOR",
]

#: What a transfer GP's sites can be fitted to (its ``likelihood`` option):
#: ``p(y_T | y_S)`` or ``p(y_S, y_T)``.
LIKELIHOODS = ("conditional", "joint")

#: The target's noise-variance prior of the transfer GPs whose sources can outweigh
#: the target (MISO, Env-GP, the nearest-neighbour task kernel):
#: ``LogNormal(log 1e-4, 2.5)``, lower and wider than the GP's ``LogNormal(-4, 1)``,
#: so that the target's own rows can outweigh source rows near its optimum
#: (``benchmarks/README.md``, the negative-transfer family).
TARGET_NOISE_PRIOR = dist.LogNormal(math.log(1e-4), 2.5)


def check_sources(data: Dataset, num_sources: int) -> None:
    """Raise unless ``data`` has source ids, each below ``num_sources``.

    The transfer models' host-side data check (the surrogate's ``check_data``):
    target rows have ``source == -1``, rows of source task ``k`` have
    ``source == k`` with ``0 <= k < num_sources``.

    Args:
        data: observations with ``data.source`` (n,).
        num_sources: the number of source tasks ``K`` the surrogate was built for.

    Raises:
        ValueError: if ``data.source`` is None, or naming the first row whose id
            is ``>= num_sources``.

    Example:
        >>> import jax, numpy as np
        >>> from ppbo.data import Dataset
        >>> jax.config.update("jax_enable_x64", True)
        >>> data = Dataset(np.zeros((3, 1)), np.zeros(3), source=[0, 1, -1])
        >>> check_sources(data, num_sources=2)  # passes silently
    """
    if data.source is None:
        raise ValueError(
            "data.source is None: a transfer surrogate needs the source id of every "
            "row (-1 for the target, 0..K-1 for the source tasks)"
        )
    source = np.asarray(data.source)
    bad = np.asarray(data.mask) & (source >= num_sources)
    if bad.any():
        row = int(np.argmax(bad))
        raise ValueError(
            f"data.source[{row}] = {int(source[row])} is not a valid source id for a "
            f"surrogate built with num_sources={num_sources}; source ids must be -1 "
            f"(target) or in [0, {num_sources})"
        )


def source_masks(data: Dataset) -> tuple[jax.Array, jax.Array]:
    """Masks of the real source rows and the real target rows, each (capacity,).

    Example:
        >>> import jax, numpy as np
        >>> from ppbo.data import Dataset
        >>> jax.config.update("jax_enable_x64", True)
        >>> data = Dataset(np.zeros((2, 1)), np.zeros(2), source=[0, -1])
        >>> [m.tolist()[:3] for m in source_masks(data)]
        [[True, False, False], [False, True, False]]
    """
    if data.source is None:
        return jnp.zeros_like(data.mask), data.mask
    return data.mask & (data.source >= 0), data.mask & (data.source < 0)


def check_num_sources(num_sources) -> int:
    """Validate ``num_sources`` (a plain int ``>= 1``) and return it as an int.

    Example:
        >>> check_num_sources(2)
        2
    """
    integral = isinstance(num_sources, numbers.Integral) and not isinstance(
        num_sources, bool
    )
    if not integral or num_sources < 1:
        raise ValueError(f"num_sources must be an integer >= 1, got {num_sources!r}")
    return int(num_sources)


def condition_on_sources(loc: jax.Array, K: jax.Array, data: Dataset) -> None:
    """Turn a model's joint data site into ``p(y_T | y_S)``: subtract ``log p(y_S)``.

    Called inside a NumPyro model after the site that observes every row with
    ``MaskedMultivariateNormal(loc, K, data.mask)``, it adds the factor
    ``-log N(y_S; loc_S, K_SS)`` (the source rows' own marginal), so the model's
    density is the conditional density of the target rows given the source rows
    (``p(y_S, y_T) / p(y_S)``). Sites fitted to it are judged by how well the
    sources and the target's own rows predict the target, not by how well they
    explain the many source rows: with hundreds of source rows beside a few
    target rows, the joint density fits the shared kernel to the sources.

    Args:
        loc: prior mean of the rows (n,).
        K: covariance of the rows' observations (n, n).
        data: padded observations with ``data.source``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from numpyro import handlers
        >>> jax.config.update("jax_enable_x64", True)
        >>> data = Dataset([[0.1], [0.2]], [1.0, -1.0], source=[0, -1], capacity=2)
        >>> model = lambda: condition_on_sources(jnp.zeros(2), jnp.eye(2), data)
        >>> site = handlers.trace(model).get_trace()["source_evidence"]
        >>> round(float(site["fn"].log_prob(site["value"])), 4)  # -log N(1; 0, 1)
        1.4189
    """
    source_rows, _ = source_masks(data)
    evidence = MaskedMultivariateNormal(loc, K, source_rows).log_prob(data.y)
    numpyro.factor("source_evidence", -evidence)
