"""Names of surrogates, inferences and acquisitions, and their JSON specs.

One table from names to components, used by :class:`ppbo.Optimizer` (and so
:func:`ppbo.minimize`), the ``ppbo`` command, the storage codec of campaign
configurations and the benchmark methods. Adding an acquisition or a surrogate is
one entry in :data:`ACQUISITIONS` or :data:`SURROGATES`; the defaults of the named
inferences (e.g. the slice sampler's warm-up) live in :data:`INFERENCES` only.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ppbo.acquisition.base import Acquisition
from ppbo.surrogate import Surrogate

__all__ = [
    "DEFAULT_ACQUISITION",
    "DEFAULT_INFERENCE",
    "ACQUISITIONS",
    "INFERENCES",
    "SURROGATES",
    "SURROGATE_INFERENCES",
    "acquisition_names",
    "make_inference",
    "resolve_surrogate",
    "resolve_inference",
    "resolve_acquisition",
    "resolve_components",
]

#: Acquisition used when none is given: log-EI, the acquisition with the best
#: measured regret of the best evaluated point (benchmarks/README.md); it needs only
#: the surrogate's predictive mean and variance, so it applies to every surrogate.
DEFAULT_ACQUISITION = "log_ei"
#: Inference used when none is given: MAP hyperparameters; NUTS's median best value
#: after 30 evaluations was at or below MAP's on one of the six problems of
#: benchmarks/README.md (20 seeds), at five to ten times the time per step; NUTS is
#: ``inference="nuts"``.
DEFAULT_INFERENCE = "MAP"

#: Acquisition name -> attribute of :mod:`ppbo.acquisition`.
ACQUISITIONS = (
    "pes", "es", "ei", "log_ei", "log_aei", "log_nei", "log_jei", "pi", "ucb", "kg",
    "thompson", "mes", "gp_hedge", "variance",
)  # fmt: skip


def _gp(
    kernel: str = "matern52",
    mean: str = "constant",
    lengthscale_prior: str = "light",
    noise_prior: str = "default",
) -> Surrogate:
    from ppbo.models import gp

    return gp.surrogate(
        kernel=kernel,
        mean=mean,
        lengthscale_prior=lengthscale_prior,
        noise_prior=noise_prior,
    )


def _multitask_gp(num_tasks: int = 2, kernel: str = "matern52") -> Surrogate:
    from ppbo.models import multitask_gp

    return multitask_gp.surrogate(num_tasks=int(num_tasks), kernel=kernel)


def _dngo(
    width: int = 50,
    depth: int = 3,
    num_steps: int = 1000,
    precisions: str = "evidence",
    ensemble: int = 1,
) -> Surrogate:
    from ppbo.models import dngo

    return dngo.surrogate(
        hidden=(int(width),) * int(depth),
        num_steps=int(num_steps),
        precisions=precisions,
        ensemble=int(ensemble),
    )


def _ablr(
    num_tasks: int = 1,
    width: int = 50,
    depth: int = 3,
    num_steps: int = 1000,
    num_sources: int = 0,
) -> Surrogate:
    from ppbo.models import ablr

    return ablr.surrogate(
        num_tasks=int(num_tasks),
        hidden=(int(width),) * int(depth),
        num_steps=int(num_steps),
        num_sources=int(num_sources),
    )


def _forest(
    num_trees: int = 32, kind: str = "random_forest", columns: Any = None
) -> Surrogate:
    from ppbo.models import forest

    return forest.surrogate(num_trees=int(num_trees), kind=kind, columns=columns)


def _env_gp(
    num_sources: int = 1,
    variant: str = "mode",
    kernel: str = "matern52",
    likelihood: str | None = None,
) -> Surrogate:
    from ppbo.models import env_gp

    return env_gp.surrogate(
        num_sources=int(num_sources),
        variant=variant,
        kernel=kernel,
        likelihood=likelihood,
    )


def _diff_gp(
    num_sources: int = 1,
    prediction: str = "augmented",
    kernel: str = "matern52",
    corrections: str = "diagonal",
) -> Surrogate:
    from ppbo.models import diff_gp

    return diff_gp.surrogate(
        num_sources=int(num_sources),
        prediction=prediction,
        kernel=kernel,
        corrections=corrections,
    )


def _miso_gp(
    num_sources: int = 1, kernel: str = "matern52", likelihood: str = "conditional"
) -> Surrogate:
    from ppbo.models import miso_gp

    return miso_gp.surrogate(
        num_sources=int(num_sources), kernel=kernel, likelihood=likelihood
    )


#: Surrogate name -> (builder, default options). ``"gp-<kernel>"`` is the GP with
#: that kernel; the GP's ``lengthscale_prior`` names one of
#: :data:`ppbo.models.gp.LENGTHSCALE_PRIORS` or ``"saas"`` (its default is
#: ``gp.DEFAULT_LENGTHSCALE_PRIOR``, written out here so that every stored spec
#: names the prior it ran with), and its ``noise_prior`` one of
#: :data:`ppbo.models.gp.NOISE_PRIORS` (``"low"`` for deterministic objectives).
#: The network surrogates take ``depth`` tanh
#: layers of ``width`` units (scalars, so that specs stay JSON and hashable).
SURROGATES: dict[str, tuple[Callable[..., Surrogate], dict]] = {
    "gp": (
        _gp,
        {
            "kernel": "matern52",
            "mean": "constant",
            "lengthscale_prior": "light",
            "noise_prior": "default",
        },
    ),
    "multitask_gp": (_multitask_gp, {"num_tasks": 2, "kernel": "matern52"}),
    "dngo": (
        _dngo,
        {
            "width": 50,
            "depth": 3,
            "num_steps": 1000,
            "precisions": "evidence",
            "ensemble": 1,
        },
    ),
    "ablr": (
        _ablr,
        {"num_tasks": 1, "width": 50, "depth": 3, "num_steps": 1000, "num_sources": 0},
    ),
    "forest": (_forest, {"num_trees": 32, "kind": "random_forest", "columns": None}),
    "env_gp": (
        _env_gp,
        {"num_sources": 1, "variant": "mode", "kernel": "matern52", "likelihood": None},
    ),
    "diff_gp": (
        _diff_gp,
        {
            "num_sources": 1,
            "prediction": "augmented",
            "kernel": "matern52",
            "corrections": "diagonal",
        },
    ),
    "miso_gp": (
        _miso_gp,
        {"num_sources": 1, "kernel": "matern52", "likelihood": "conditional"},
    ),
}


def _bhgp(num_sources: int = 1, kernel: str = "matern52") -> Surrogate:
    from ppbo.models import bhgp

    return bhgp.surrogate(num_sources=int(num_sources), kernel=kernel)


def _nn_task_gp(
    num_sources: int = 1,
    meta_features: Any = None,
    num_neighbours: int = 3,
    kernel: str = "rbf",
    likelihood: str = "joint",
) -> Surrogate:
    from ppbo.models import nn_task_gp

    return nn_task_gp.surrogate(
        num_sources=int(num_sources),
        meta_features=meta_features,
        num_neighbours=int(num_neighbours),
        kernel=kernel,
        likelihood=likelihood,
    )


def _rgpe(num_sources: int = 1, num_bootstrap: int = 256, num_steps: int = 200):
    from ppbo.models import rgpe

    return rgpe.surrogate(
        num_sources=int(num_sources),
        num_bootstrap=int(num_bootstrap),
        num_steps=int(num_steps),
    )


def _metabo_gp(
    num_sources: int = 2,
    basis: str = "fourier",
    num_features: int = 64,
    basis_lengthscale: float = 0.2,
) -> Surrogate:
    from ppbo.models import metabo

    return metabo.surrogate(
        num_sources=int(num_sources),
        basis=basis,
        num_features=int(num_features),
        basis_lengthscale=float(basis_lengthscale),
    )


# Transfer models (issue 12): the campaign fills ``num_sources`` (and
# ``meta_features``, one row per source then the target's) from its sources.
SURROGATES["bhgp"] = (_bhgp, {"num_sources": 1, "kernel": "matern52"})
SURROGATES["nn_task_gp"] = (
    _nn_task_gp,
    {
        "num_sources": 1,
        "meta_features": None,
        "num_neighbours": 3,
        "kernel": "rbf",
        "likelihood": "joint",
    },
)
SURROGATES["rgpe"] = (
    _rgpe,
    {"num_sources": 1, "num_bootstrap": 256, "num_steps": 200},
)
SURROGATES["metabo_gp"] = (
    _metabo_gp,
    {
        "num_sources": 2,
        "basis": "fourier",
        "num_features": 64,
        "basis_lengthscale": 0.2,
    },
)


def _bnn(width: int = 10, depth: int = 1) -> Surrogate:
    from ppbo.models import bnn

    return bnn.surrogate(hidden=(int(width),) * int(depth))


# The NUTS-sampled Bayesian neural net (issue 13): ``depth`` tanh layers of
# ``width`` units; small by default, as NUTS needs (Neal 1996 used one layer).
SURROGATES["bnn"] = (_bnn, {"width": 10, "depth": 1})

#: Inference (a name of :data:`INFERENCES`) used when none is given, for the
#: surrogates whose NumPyro model is not meant for :data:`DEFAULT_INFERENCE`: a
#: network's weights are sampled (a MAP network has no predictive variance).
SURROGATE_INFERENCES: dict[str, str] = {"bnn": "nuts"}


def _mcmc_counts(warmup_fraction: float) -> Callable[[int | None], dict]:
    def counts(samples: int | None) -> dict:
        if samples is None:
            return {}
        return {
            "num_warmup": max(int(samples * warmup_fraction), 1),
            "num_samples": int(samples),
        }

    return counts


@dataclasses.dataclass(frozen=True)
class _InferenceEntry:
    cls_name: str
    counts: Callable[[int | None], dict]
    by_name: bool = True

    @property
    def cls(self) -> type:
        from ppbo import inference

        return getattr(inference, self.cls_name)


#: Inference name (lower case) -> class and the warm-up/sample counts for a given
#: number of samples (the ``ppbo`` command's ``--samples``). The slice sampler
#: needs half as much warm-up as NUTS (its own default: 128 of 256).
INFERENCES: dict[str, _InferenceEntry] = {
    "map": _InferenceEntry("MAP", lambda samples: {}),
    "nuts": _InferenceEntry("NUTS", _mcmc_counts(1.0)),
    "slice": _InferenceEntry("Slice", _mcmc_counts(0.5)),
    "sghmc": _InferenceEntry("SGHMC", _mcmc_counts(0.5)),
    "fixed": _InferenceEntry("Fixed", lambda samples: {}, by_name=False),
    "train": _InferenceEntry("Train", lambda samples: {}, by_name=False),
}


def acquisition_names() -> list[str]:
    """The names :func:`resolve_acquisition` accepts.

    Example:
        >>> "log_ei" in acquisition_names()
        True
    """
    return sorted(ACQUISITIONS)


def make_inference(name: str, samples: int | None = None, **options: Any) -> Any:
    """The named inference with the table's defaults.

    Args:
        name: ``"map"``, ``"nuts"``, ``"slice"`` or ``"sghmc"`` (any case).
        samples: number of MCMC samples; the warm-up follows from the table.
        **options: further fields of the inference class (override the counts).

    Raises:
        ValueError: for an unknown name.

    Example:
        >>> make_inference("slice", 64)
        Slice(num_warmup=32, num_samples=64, ...)
    """
    entry = INFERENCES.get(str(name).lower())
    if entry is None or not entry.by_name:
        names = ", ".join(repr(k) for k, e in INFERENCES.items() if e.by_name)
        raise ValueError(
            f"inference must be one of {names} or an inference object, got {name!r}"
        )
    return entry.cls(**(entry.counts(samples) | options))


@functools.cache
def _build_surrogate(name: str, options: tuple) -> Surrogate:
    # one object per configuration and process: compiled fits and acquisitions are
    # cached per surrogate object, so campaigns in one process share them
    builder, _ = SURROGATES[name]
    return builder(**{k: _thawed(v) for k, v in options})


def _frozen(value: Any) -> Any:
    # list options (e.g. transfer meta-features) as tuples, for the cache key
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def _thawed(value: Any) -> Any:
    # builders get plain lists back, as the spec (JSON) has them
    if isinstance(value, tuple):
        return [_thawed(v) for v in value]
    return value


def resolve_surrogate(surrogate: Any, space: Any = None) -> tuple[Surrogate, dict]:
    """A surrogate and its JSON spec from a name, a spec or a :class:`Surrogate`.

    Args:
        surrogate: None (``"gp"``), ``"gp"``, ``"gp-<kernel>"``,
            ``"multitask_gp"``, ``"dngo"``, ``"ablr"``, ``"forest"``, a spec
            ``{"name": "gp", "kernel": ...}``, or a :class:`ppbo.Surrogate`
            (spec ``{"name": "custom"}``).
        space: the campaign's :class:`ppbo.Space`, or None. A surrogate whose
            options contain ``columns`` (the forest, for its native integer and
            categorical inputs) gets the space's description
            (:func:`ppbo.models.forest.columns_of`) when that option is None; the
            filled spec is what the campaign stores, so a loaded campaign
            rebuilds the same surrogate.

    Raises:
        ValueError: for an unknown name or option.

    Example:
        >>> resolve_surrogate("gp-rbf")[1]  # doctest: +NORMALIZE_WHITESPACE
        {'name': 'gp', 'kernel': 'rbf', 'mean': 'constant',
         'lengthscale_prior': 'light', 'noise_prior': 'default'}
        >>> spec = {"name": "gp", "lengthscale_prior": "dimension_scaled"}
        >>> resolve_surrogate(spec)[1]  # doctest: +NORMALIZE_WHITESPACE
        {'name': 'gp', 'kernel': 'matern52', 'mean': 'constant',
         'lengthscale_prior': 'dimension_scaled', 'noise_prior': 'default'}
        >>> import ppbo
        >>> space = ppbo.Space({"n": ppbo.Integer(1, 3), "x": ppbo.Real(0.0, 1.0)})
        >>> resolve_surrogate("forest", space)[1]["columns"]
        [['integer', 1, 3, False], ['real']]
    """
    if surrogate is None:
        surrogate = "gp"
    if isinstance(surrogate, Surrogate):
        return surrogate, {"name": "custom", "repr": surrogate.name}
    if isinstance(surrogate, str):
        name, _, kernel = surrogate.partition("-")
        surrogate = {"name": name} | ({"kernel": kernel} if kernel else {})
    if not isinstance(surrogate, Mapping) or surrogate.get("name") not in SURROGATES:
        raise ValueError(
            f"surrogate must be a ppbo.Surrogate or one of {sorted(SURROGATES)} "
            f"(e.g. 'gp-matern52', 'gp-rbf'), got {surrogate!r}"
        )
    spec = dict(surrogate)
    name = spec.pop("name")
    defaults = SURROGATES[name][1]
    unknown = set(spec) - set(defaults)
    if unknown:
        raise ValueError(
            f"surrogate {name!r} has no option {sorted(unknown)[0]!r}; its options "
            f"are {sorted(defaults)}"
        )
    options = defaults | spec
    if space is not None and "columns" in defaults and options["columns"] is None:
        from ppbo.models.forest import columns_of

        options["columns"] = columns_of(space)
    try:
        built = _build_surrogate(
            name, tuple(sorted((k, _frozen(v)) for k, v in options.items()))
        )
    except (TypeError, KeyError) as error:
        raise ValueError(f"surrogate {surrogate!r}: {error}") from None
    return built, {"name": name} | options


def resolve_inference(inference: Any) -> tuple[Any, dict]:
    """An inference object and its JSON spec from a name, a spec or an object.

    Example:
        >>> resolve_inference("nuts")[1]["name"]
        'NUTS'
    """
    if inference is None:
        inference = DEFAULT_INFERENCE
    if isinstance(inference, str):
        inference = make_inference(inference)
    if isinstance(inference, Mapping):
        spec = dict(inference)
        by_class = {e.cls_name: e for e in INFERENCES.values()}
        if spec.get("name") not in by_class:
            raise ValueError(f"unknown inference spec {spec!r}")
        inference = by_class[spec["name"]].cls(**spec.get("options", {}))
    for entry in INFERENCES.values():
        if type(inference) is entry.cls:
            return inference, {"name": entry.cls_name, "options": _options(inference)}
    if not callable(getattr(inference, "fit", None)):
        raise ValueError(
            f"inference must be ppbo.NUTS/Slice/MAP/Fixed or have a fit(key, "
            f"surrogate, data) method, got {inference!r}"
        )
    return inference, {"name": "custom", "repr": repr(inference)}


def _options(inference: Any) -> dict:
    options = {
        f.name: getattr(inference, f.name) for f in dataclasses.fields(inference)
    }
    if "params" in options:  # Fixed: arrays as JSON lists
        options["params"] = {
            k: np.asarray(v, dtype=np.float64).tolist()
            for k, v in options["params"].items()
        }
    return options


def resolve_acquisition(acquisition: Any) -> tuple[Acquisition, dict]:
    """An acquisition and its JSON spec from a name or an :class:`Acquisition`.

    Example:
        >>> resolve_acquisition(None)[1]
        {'name': 'log_ei'}
    """
    from ppbo import acquisition as module

    if acquisition is None:
        acquisition = DEFAULT_ACQUISITION
    if isinstance(acquisition, str):
        if acquisition not in ACQUISITIONS:
            raise ValueError(
                f"acquisition must be one of {acquisition_names()} or an "
                f"Acquisition, got {acquisition!r}"
            )
        return getattr(module, acquisition), {"name": acquisition}
    if isinstance(acquisition, Acquisition):
        if getattr(module, acquisition.name, None) is acquisition:
            return acquisition, {"name": acquisition.name}
        return acquisition, {"name": "custom", "repr": acquisition.name}
    raise ValueError(
        f"acquisition must be an Acquisition or a name, got {acquisition!r}"
    )


def resolve_components(
    surrogate: Any = None,
    inference: Any = None,
    acquisition: Any = None,
    space: Any = None,
) -> tuple[dict, dict]:
    """A campaign's surrogate, inference and acquisition, and their JSON specs.

    ``space`` (the campaign's :class:`ppbo.Space`) fills the surrogate options
    that describe it (see :func:`resolve_surrogate`).

    Defaults: the ``"gp"`` surrogate; :data:`DEFAULT_INFERENCE`, or
    :class:`ppbo.Train` for a surrogate with its own trainer, or the
    surrogate's entry of :data:`SURROGATE_INFERENCES` (NUTS for ``"bnn"``); the
    acquisition its capabilities allow
    (:func:`ppbo.acquisition.base.default_acquisition`).

    Returns:
        ``(components, specs)``: dicts with keys ``surrogate``, ``inference`` and
        ``acquisition``.

    Example:
        >>> components, specs = resolve_components()
        >>> specs["acquisition"]["name"], type(components["inference"]).__name__
        ('log_ei', 'MAP')
    """
    from ppbo.acquisition.base import default_acquisition

    surrogate, surrogate_spec = resolve_surrogate(surrogate, space)
    if inference is None and surrogate.trainer is not None:
        from ppbo.inference import Train

        inference = Train()
    if inference is None and surrogate_spec["name"] in SURROGATE_INFERENCES:
        inference = SURROGATE_INFERENCES[surrogate_spec["name"]]
    inference, inference_spec = resolve_inference(inference)
    if acquisition is None:
        acquisition = default_acquisition(surrogate)
    acquisition, acquisition_spec = resolve_acquisition(acquisition)
    components = {
        "surrogate": surrogate,
        "inference": inference,
        "acquisition": acquisition,
    }
    specs = {
        "surrogate": surrogate_spec,
        "inference": inference_spec,
        "acquisition": acquisition_spec,
    }
    return components, specs
