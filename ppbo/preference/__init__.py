"""Library code for preferential BO that is not a model: anchor management and
the preference campaign (:class:`PreferenceOptimizer`)."""

from ppbo.preference.anchors import (
    STRATEGIES,
    add_anchor,
    maximiser_probability,
    observation_weights,
    replace_anchor,
)
from ppbo.preference.campaign import AnchorRecord, PreferenceOptimizer

__all__ = [
    "STRATEGIES",
    "add_anchor",
    "maximiser_probability",
    "observation_weights",
    "replace_anchor",
    "PreferenceOptimizer",
    "AnchorRecord",
]
