"""Storage glue of a campaign: configurations as JSON, posteriors as arrays.

A campaign's configuration is stored as JSON (the component specs of
:mod:`ppbo.campaign.registry`), each model-based ask's posterior as named arrays
(:func:`ppbo.storage.encode_arrays`; samples, sampler state and data), never as
pickle, so that a reloaded campaign warm-starts its next fit exactly as an
uninterrupted one would.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppbo.data import Dataset
from ppbo.surrogate import Posterior, Surrogate

__all__ = [
    "encode_posterior",
    "decode_posterior",
    "json_ready",
    "check_compatible",
    "campaign_config",
    "stored_components",
]


def _is_array_tree(tree: Any) -> bool:
    if not isinstance(tree, Mapping):
        return False
    return all(
        isinstance(v, jax.Array | np.ndarray)
        or (isinstance(v, Mapping) and _is_array_tree(v))
        for v in tree.values()
    )


def encode_posterior(posterior: Posterior) -> bytes:
    """A posterior's samples, sampler state and data as stored bytes.

    Example:
        >>> decode_posterior(encode_posterior(posterior),
        ...                  posterior.surrogate).num_samples
        1
    """
    from ppbo.storage import encode_arrays

    state = posterior.state if _is_array_tree(posterior.state) else {}
    X, y, task = posterior.data.unpadded()
    data = {"X": X, "y": y, "task": task, "capacity": np.array(posterior.data.capacity)}
    data |= posterior.data.unpadded_fields()
    if posterior.data.duels is not None:
        data["duel_capacity"] = np.array(posterior.data.duel_capacity)
    return encode_arrays(
        {
            "samples": {k: np.asarray(v) for k, v in posterior.samples.items()},
            "sample_stats": {
                k: np.asarray(v) for k, v in posterior.sample_stats.items()
            },
            "state": jax.tree.map(np.asarray, state),
            "data": data,
            "meta": {
                "num_chains": np.array(posterior.num_chains),
                "method": np.array(posterior.method),
            },
        }
    )


def decode_posterior(blob: bytes, surrogate: Surrogate) -> Posterior:
    """The posterior stored by :func:`encode_posterior`, for ``surrogate``.

    Example:
        >>> blob = encode_posterior(posterior)
        >>> decode_posterior(blob, posterior.surrogate).data.n
        8
    """
    from ppbo.inference._mcmc import prepare_cache
    from ppbo.storage import decode_arrays

    arrays = decode_arrays(blob)
    stored = arrays["data"]
    task = stored.get("task")
    data = Dataset(
        stored["X"],
        stored["y"],
        task=None if task is None else np.asarray(task),
        capacity=int(stored["capacity"]),
        duels=stored.get("duels"),
        anchor=stored.get("anchor"),
        source=stored.get("source"),
        weight=stored.get("weight"),
        duel_weight=stored.get("duel_weight"),
        duel_capacity=(
            int(stored["duel_capacity"]) if "duel_capacity" in stored else None
        ),
    )
    samples = {k: jnp.asarray(v) for k, v in arrays["samples"].items()}
    state = jax.tree.map(jnp.asarray, arrays.get("state") or {}) or None
    return Posterior(
        surrogate,
        samples,
        data,
        cache=prepare_cache(surrogate, samples, data),
        sample_stats={
            k: jnp.asarray(v) for k, v in arrays.get("sample_stats", {}).items()
        },
        state=state,
        num_chains=int(arrays["meta"]["num_chains"]),
        method=str(arrays["meta"]["method"]),
    )


def json_ready(field: str, value: Mapping[str, Any] | None) -> dict:
    """``value`` as a dict if it is JSON-ready, else a ValueError naming ``field``.

    Example:
        >>> json_ready("metadata", {"owner": "lab"})
        {'owner': 'lab'}
    """
    from ppbo.storage.base import dumps

    value = dict(value or {})
    try:
        dumps(value)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"{field} must be JSON-ready (numbers, strings): {error}"
        ) from None
    return value


def check_compatible(stored: Mapping[str, Any], given: Mapping[str, Any]) -> None:
    """Refuse to load a campaign whose space or direction differ from the given.

    Example:
        >>> check_compatible({"space": [], "direction": "minimize"},
        ...                  {"space": [], "direction": "maximize"})
        Traceback (most recent call last):
        ...
        ValueError: campaign exists with a different direction: ...
    """
    for field in ("space", "direction"):
        if stored[field] != given[field]:
            raise ValueError(
                f"campaign exists with a different {field}: stored {stored[field]!r}, "
                f"given {given[field]!r}"
            )
    # campaigns stored before sources existed have none
    if (stored.get("sources") or []) != (given.get("sources") or []):
        names = [s["name"] for s in stored.get("sources") or []]
        raise ValueError(
            f"campaign exists with different sources: stored {names}, given "
            f"{[s['name'] for s in given.get('sources') or []]} (or other data)"
        )
    # how the sources are used (the surrogate is built for it): e.g. a Diff-GP
    # campaign stored with every source is reopened with every source
    stored_use, given_use = _source_use(stored), _source_use(given)
    if stored_use != given_use:
        (kept, gamma), (asked, asked_gamma) = stored_use, given_use
        kept, asked = kept or "all", asked or "all"
        options = (
            ""
            if gamma is None
            else f" and source_selection_options={{'gamma': {gamma}}}"
        )
        raise ValueError(
            f"campaign exists with a different source_selection: stored {kept!r} "
            f"(gamma {gamma}), given {asked!r} (gamma {asked_gamma}); pass "
            f"source_selection={kept!r}{options} to reopen it, or load it with "
            "Optimizer.load"
        )


def _source_use(config: Mapping[str, Any]) -> tuple[Any, Any]:
    if not config.get("sources"):
        return (None, None)
    transfer = config.get("transfer") or {}
    return (transfer.get("source_selection"), transfer.get("gamma"))


def campaign_config(
    space: Any,
    *,
    surrogate: dict,
    inference: dict,
    acquisition: dict,
    direction: str,
    initial_design: str,
    n_initial: int,
    seed: int,
    acquisition_samples: int | None,
    acquisition_options: Mapping[str, Any] | None,
    optimizer_options: Mapping[str, Any] | None,
    metadata: Mapping[str, Any] | None,
) -> dict:
    """The stored (JSON) configuration of a new campaign.

    Example:
        >>> import ppbo
        >>> config = campaign_config(
        ...     ppbo.Space({"x": ppbo.Real(0, 1)}), surrogate={"name": "gp"},
        ...     inference={"name": "map"}, acquisition={"name": "log_ei"},
        ...     direction="minimize", initial_design="lhs",
        ...     n_initial=3, seed=0, acquisition_samples=None,
        ...     acquisition_options=None, optimizer_options=None, metadata=None)
        >>> config["format"], config["acquisition"]
        (1, {'name': 'log_ei'})
    """
    return {
        "format": 1,
        "space": space.to_json(),
        "direction": direction,
        "initial_design": initial_design,
        "n_initial": int(n_initial),
        "seed": int(seed),
        "surrogate": surrogate,
        "inference": inference,
        "acquisition": acquisition,
        "acquisition_samples": acquisition_samples,
        "acquisition_options": json_ready("acquisition_options", acquisition_options),
        "optimizer_options": json_ready("optimizer_options", optimizer_options),
        "metadata": json_ready("metadata", metadata),
    }


def stored_components(config: Mapping[str, Any], name: str, **given: Any) -> dict:
    """The surrogate, inference and acquisition a stored configuration names.

    Args:
        config: the stored configuration.
        name: the campaign's name, for the messages.
        **given: ``surrogate``, ``inference``, ``acquisition`` objects to use
            instead (required for the custom components a campaign was created
            with).

    Raises:
        ValueError: when a custom component is needed and not given.

    Example:
        >>> config = {"surrogate": {"name": "gp"}, "inference": {"name": "MAP"},
        ...           "acquisition": {"name": "log_ei"}}
        >>> sorted(stored_components(config, "demo"))
        ['acquisition', 'inference', 'surrogate']
    """
    from ppbo.campaign import registry

    parts = {}
    for field, resolve in (
        ("surrogate", registry.resolve_surrogate),
        ("inference", registry.resolve_inference),
        ("acquisition", registry.resolve_acquisition),
    ):
        spec, component = config[field], given.get(field)
        if component is None and spec.get("name") == "custom":
            raise ValueError(
                f"campaign {name!r} was created with a custom {field} "
                f"({spec.get('repr')}); pass it again: Optimizer.load(storage, "
                f"name, {field}=...)"
            )
        if component is None:
            component = spec if field != "acquisition" else spec["name"]
        parts[field] = resolve(component)[0]
    return parts
