"""MCMC diagnostics and conversion of posteriors to ArviZ.

R-hat and effective sample sizes are ArviZ's rank-normalised split statistics
(Vehtari, Gelman, Simpson, Carpenter and Bürkner 2021, "Rank-normalization, folding,
and localization: an improved R-hat for assessing convergence of MCMC"). ArviZ 0.x
returns ``InferenceData`` and ArviZ 1.x returns ``xarray.DataTree``; both are
supported.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ppbo._compat import import_arviz

if TYPE_CHECKING:
    from ppbo.surrogate import Posterior

__all__ = [
    "Diagnostics",
    "DiagnosticWarning",
    "to_arviz",
    "diagnose",
    "arviz_major_version",
]


class DiagnosticWarning(UserWarning):
    """An MCMC diagnostic (R-hat, ESS, divergences, tree depth) looks poor."""


class Diagnostics(NamedTuple):
    """Convergence diagnostics of a posterior, per hyperparameter site.

    Built by :func:`diagnose` (``posterior.diagnostics()``).

    Attributes:
        rhat: site -> split R-hat (max over the site's elements), NaN if undefined.
        ess_bulk: site -> bulk effective sample size (min over elements).
        ess_tail: site -> tail effective sample size (min over elements).
        num_divergences: number of divergent transitions after warm-up.
        num_max_tree_depth: post-warm-up NUTS iterations that hit the depth limit.
        warnings: human-readable messages for everything that looks poor.

    Example:
        >>> report = Diagnostics({}, {}, {}, 0, 0, ())
        >>> report.num_divergences
        0
    """

    rhat: dict[str, float]
    ess_bulk: dict[str, float]
    ess_tail: dict[str, float]
    num_divergences: int
    num_max_tree_depth: int
    warnings: tuple[str, ...]


#: Thresholds above/below which a diagnostic is reported (Vehtari et al. 2021).
RHAT_MAX = 1.01
ESS_MIN_PER_CHAIN = 100

_STAT_NAMES = (
    "diverging",
    "tree_depth",
    "n_steps",
    "energy",
    "step_size",
    "acceptance_rate",
    "lp",
    "num_evals",
)


def arviz_major_version() -> int:
    """Major version of the installed ArviZ (0 or 1).

    Example:
        >>> arviz_major_version() in (0, 1)
        True
    """
    arviz = import_arviz()

    return int(arviz.__version__.split(".")[0])


def _by_chain(array: Any, num_chains: int) -> np.ndarray:
    array = np.asarray(array)
    return array.reshape((num_chains, array.shape[0] // num_chains) + array.shape[1:])


def to_arviz(posterior: Posterior) -> Any:
    """Convert a :class:`~ppbo.Posterior` to an ArviZ object.

    Args:
        posterior: the posterior to convert.

    Returns:
        ``arviz.InferenceData`` (ArviZ 0.x) or ``xarray.DataTree`` (ArviZ 1.x) with
        groups ``posterior``, ``sample_stats`` (when the sampler recorded any) and
        ``observed_data``.

    Example:
        >>> idata = to_arviz(posterior)  # then az.summary(idata), az.plot_trace(idata)
    """
    az = import_arviz()

    chains = posterior.num_chains
    samples = {
        name: _by_chain(value, chains)
        for name, value in posterior.samples.items()
        if not name.startswith("_")
    }
    stats = {
        name: _by_chain(value, chains)
        for name, value in posterior.sample_stats.items()
        if name in _STAT_NAMES
    }
    X, y, task = posterior.data.unpadded()
    observed = {"y": y}
    constant = {"X": X, "task": task}
    groups = {
        "posterior": samples,
        "observed_data": observed,
        "constant_data": constant,
    }
    if stats:
        groups["sample_stats"] = stats
    dims = {"X": ["observation", "input_dim"], "y": ["observation"]}
    dims["task"] = ["observation"]
    if arviz_major_version() >= 1:
        return az.from_dict(groups, dims=dims)
    return az.from_dict(
        posterior=samples,
        sample_stats=stats or None,
        observed_data=observed,
        constant_data=constant,
        dims=dims,
    )


def _site_stat(fn, draws: np.ndarray, reduce) -> float:
    """Apply an ArviZ statistic to every element of a (chain, draw, ...) array."""
    flat = draws.reshape(draws.shape[:2] + (-1,))
    values = []
    for j in range(flat.shape[-1]):
        x = flat[..., j]
        if not np.all(np.isfinite(x)) or np.ptp(x) == 0 or x.shape[1] < 4:
            values.append(math.nan)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                values.append(float(fn(x)))
            except Exception:  # noqa: BLE001 - diagnostics must never crash a fit
                values.append(math.nan)
    finite = [v for v in values if math.isfinite(v)]
    return reduce(finite) if finite else math.nan


def _split_rhat(x: np.ndarray) -> float:
    az = import_arviz()

    if x.shape[0] == 1:
        # ArviZ needs two chains; a single chain is split in halves, which is what
        # split R-hat does to each chain anyway.
        half = x.shape[1] // 2
        x = np.stack([x[0, :half], x[0, half : 2 * half]])
    return float(az.rhat(x))


def diagnose(posterior: Posterior) -> Diagnostics:
    """Compute convergence diagnostics of a posterior without ever raising.

    Args:
        posterior: the posterior to check.

    Returns:
        A :class:`~ppbo.surrogate.Diagnostics` with per-site R-hat (max over
        elements), bulk and tail ESS (min over elements), the number of divergences
        and of max-tree-depth hits, and warning messages for values past
        ``RHAT_MAX`` = 1.01 or below ``ESS_MIN_PER_CHAIN`` = 100 per chain.

    Example:
        >>> diagnose(posterior).num_max_tree_depth
        0
    """
    az = import_arviz()

    chains = posterior.num_chains
    rhat, ess_bulk, ess_tail = {}, {}, {}
    messages = []
    sampled = posterior.num_samples > 1 and posterior.method not in ("MAP", "Fixed")
    if sampled:
        for name, value in posterior.samples.items():
            if name.startswith("_"):
                continue
            draws = _by_chain(value, chains)
            rhat[name] = _site_stat(_split_rhat, draws, max)
            ess_bulk[name] = _site_stat(lambda x: az.ess(x, method="bulk"), draws, min)
            ess_tail[name] = _site_stat(
                lambda x: az.ess(x, method="tail", prob=(0.05, 0.95)), draws, min
            )
            if rhat[name] > RHAT_MAX:
                messages.append(
                    f"R-hat of {name!r} is {rhat[name]:.3f} > {RHAT_MAX}: chains have "
                    "not mixed; run more warm-up or samples"
                )
            low = ESS_MIN_PER_CHAIN * chains
            for label, ess in (("bulk", ess_bulk[name]), ("tail", ess_tail[name])):
                if ess < low:
                    messages.append(
                        f"{label} ESS of {name!r} is {ess:.0f} < {low}: estimates of "
                        "posterior expectations are noisy; draw more samples"
                    )
    stats = posterior.sample_stats
    divergences = (
        int(np.sum(np.asarray(stats["diverging"]))) if "diverging" in stats else 0
    )
    depth_hits = 0
    if "tree_depth" in stats and "max_tree_depth" in stats:
        depth = np.asarray(stats["tree_depth"])
        depth_hits = int(np.sum(depth >= np.asarray(stats["max_tree_depth"])))
    if divergences:
        messages.append(
            f"{divergences} divergent transitions after warm-up: the posterior may be "
            "biased; raise target_accept_prob or reparameterise"
        )
    if depth_hits:
        messages.append(
            f"{depth_hits} NUTS iterations hit the maximum tree depth: raise "
            "max_tree_depth or use dense_mass=True"
        )
    return Diagnostics(
        rhat=rhat,
        ess_bulk=ess_bulk,
        ess_tail=ess_tail,
        num_divergences=divergences,
        num_max_tree_depth=depth_hits,
        warnings=tuple(messages),
    )
