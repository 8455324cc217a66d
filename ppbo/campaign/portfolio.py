"""GP-Hedge in a campaign: one BO step that lets a portfolio choose the acquisition.

Hoffman, Brochu and de Freitas (2011), "Portfolio allocation for Bayesian
optimization", Algorithm 1, as a campaign step. Every base acquisition nominates
its maximiser under the same fitted posterior; one nominee is chosen with
probability ``p_j ∝ exp(eta g_j)``; once the chosen point is observed and the
model refitted, every acquisition is rewarded with the new posterior mean at its
own nominee, ``g_j += mu_t(x_j)`` (the pure functions of
:mod:`ppbo.acquisition.hedge`).

A campaign keeps no state outside its storage, so each model-based trial of a
portfolio campaign carries the step's record in its ``extra["hedge"]``: the
arms, the gains the choice was drawn with, every arm's nominee (unit cube) and
the arm chosen. The next ask fits its posterior to every COMPLETE trial, which
includes the chosen nominee's value, rewards the previous record's nominees under
it and draws from the updated gains; a reloaded campaign reads the same record
and continues exactly. Rewards are posterior means in model space (standardised
outputs, to be maximised), of the predictive mixture over hyperparameter samples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppbo.acquisition.hedge import HedgeState, hedge_choose, hedge_init, hedge_update
from ppbo.campaign.step import Step, step
from ppbo.data import Dataset
from ppbo.surrogate import Posterior, Surrogate

__all__ = [
    "HEDGE_ACQUISITIONS",
    "HEDGE_ETA",
    "check_hedge_options",
    "hedge_step",
    "latest_record",
]

#: The portfolio's arms when ``acquisition_options`` names none: log-EI and GP-UCB
#: with the campaign's weight ``beta = 1``. Hoffman et al.'s experiments add PI;
#: measured with it (benchmarks/README.md, "GP-Hedge in the campaign") the
#: portfolio followed PI, whose nominee next to the incumbent collects the largest
#: reward, and was significantly worse than log-EI on Hartmann-6 (2 of 20 seeds
#: better), while log-EI and UCB alone were worse nowhere significantly. PI stays
#: one option away: ``{"acquisitions": ["log_ei", "ucb", "pi"]}``.
HEDGE_ACQUISITIONS = ("log_ei", "ucb")
#: The Hedge learning rate when none is given (as scikit-optimize's ``gp_hedge``).
HEDGE_ETA = 1.0
_OPTION_KEYS = frozenset({"acquisitions", "eta", "options"})


def check_hedge_options(options: Mapping[str, Any] | None) -> dict:
    """Validate a portfolio's ``acquisition_options`` and fill in the defaults.

    Args:
        options: ``{"acquisitions": [names], "eta": eta, "options": {name:
            {option: value}}}``, every key optional.

    Returns:
        ``{"acquisitions": tuple, "eta": float, "options": dict}``.

    Raises:
        ValueError: for an unknown key, an unknown, repeated or portfolio arm,
            fewer than two arms, ``eta`` not finite and > 0, or options for an
            acquisition that is not an arm, each naming the field and value.

    Example:
        >>> check_hedge_options({"acquisitions": ["log_ei", "ucb"]})["eta"]
        1.0
    """
    from ppbo.campaign import registry

    options = dict(options or {})
    unknown = sorted(set(options) - _OPTION_KEYS)
    if unknown:
        raise ValueError(
            f"acquisition_options of 'gp_hedge' take {sorted(_OPTION_KEYS)}, got "
            f"unknown keys {unknown}"
        )
    arms = options.get("acquisitions", HEDGE_ACQUISITIONS)
    if isinstance(arms, str) or not isinstance(arms, Sequence):
        raise ValueError(
            "acquisition_options['acquisitions'] must be a list of acquisition "
            f"names, got {arms!r}"
        )
    arms = tuple(arms)
    names = [n for n in registry.acquisition_names() if n != "gp_hedge"]
    for arm in arms:
        if arm not in names:
            raise ValueError(
                f"acquisition_options['acquisitions'] must name acquisitions from "
                f"{names}, got {arm!r}"
            )
    if len(arms) < 2 or len(set(arms)) != len(arms):
        raise ValueError(
            "acquisition_options['acquisitions'] must name at least two distinct "
            f"acquisitions, got {list(arms)}"
        )
    eta = options.get("eta", HEDGE_ETA)
    if (
        isinstance(eta, bool)
        or not isinstance(eta, int | float)
        or not (math.isfinite(eta) and eta > 0)
    ):
        raise ValueError(f"acquisition_options['eta'] must be > 0, got {eta!r}")
    per_arm = options.get("options") or {}
    if not isinstance(per_arm, Mapping) or any(
        name not in arms or not isinstance(value, Mapping)
        for name, value in per_arm.items()
    ):
        raise ValueError(
            "acquisition_options['options'] must map arms of the portfolio "
            f"({list(arms)}) to option dicts, got {per_arm!r}"
        )
    return {
        "acquisitions": arms,
        "eta": float(eta),
        "options": {name: dict(value) for name, value in per_arm.items()},
    }


def latest_record(trials: Sequence[Any]) -> dict | None:
    """The portfolio record of the latest model-based trial that has one.

    Example:
        >>> latest_record([]) is None
        True
    """
    for trial in reversed(list(trials)):
        record = (trial.extra or {}).get("hedge")
        if record is not None:
            return record
    return None


def hedge_step(
    key: jax.Array,
    surrogate: Surrogate,
    inference: Any,
    data: Dataset,
    previous: Mapping[str, Any] | None,
    *,
    options: Mapping[str, Any] | None = None,
    init: Posterior | None = None,
    **step_options: Any,
) -> tuple[Step, dict]:
    """Fit once, let every arm nominate, reward the last step's arms and choose.

    Args:
        key: the step's PRNG key: the fit and every arm's optimiser use the keys
            :func:`ppbo.campaign.step.step` derives from it (the arms share raw
            candidates); the choice uses a key folded from it.
        surrogate, inference: as for :func:`~ppbo.campaign.step.step`.
        data: observations in model space.
        previous: the record of the previous portfolio step (None at the first).
        options: the portfolio's ``acquisition_options`` (see
            :func:`check_hedge_options`).
        init: the previous step's posterior, to warm-start the fit.
        **step_options: passed to every arm's :func:`~ppbo.campaign.step.step`
            (``q``, ``pending``, ``acquisition_samples``, ``optimizer_options``,
            ``snap``).

    Returns:
        ``(result, record)``: the chosen arm's :class:`~ppbo.campaign.step.Step`
        (its posterior the shared fit) and this step's record (JSON-ready), to
        store with the trials it suggests.

    Raises:
        ValueError: when ``previous`` names other arms than ``options``.

    Example:
        >>> result, record = hedge_step(
        ...     key, posterior.surrogate, ppbo.MAP(), data, None,
        ...     optimizer_options={"num_raw": 64},
        ... )
        >>> record["acquisitions"], len(record["nominees"])
        (['log_ei', 'ucb'], 2)
    """
    from ppbo import acquisition as module

    options = check_hedge_options(options)
    arms = options["acquisitions"]
    results: list[Step] = []
    for arm in arms:  # the first arm's step fits; the others reuse its posterior
        results.append(
            step(
                key,
                surrogate,
                inference,
                getattr(module, arm),
                data,
                init=init,
                fitted=results[0].posterior if results else None,
                acquisition_options=options["options"].get(arm),
                **step_options,
            )
        )
    state = hedge_init(arms, options["eta"])
    if previous is not None:
        if tuple(previous["acquisitions"]) != arms:
            raise ValueError(
                f"the stored portfolio has arms {previous['acquisitions']}, the "
                f"campaign's options {list(arms)}"
            )
        gains = jnp.asarray(previous["gains"], dtype=jnp.float64)
        state = hedge_update(
            HedgeState(arms, gains, state.eta),
            results[0].posterior,
            np.asarray(previous["nominees"], dtype=np.float64),
        )
    nominees = np.stack([result.X[0] for result in results])
    index, _ = hedge_choose(jax.random.fold_in(key, 1), state, nominees)
    index = int(index)
    record = {
        "acquisitions": list(arms),
        "gains": [float(g) for g in np.asarray(state.gains)],
        "nominees": nominees.tolist(),
        "chosen": arms[index],
    }
    return results[index], record
