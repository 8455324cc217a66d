"""Library code for preferential BO that is not a model: anchor management."""

from ppbo.preference.anchors import (
    STRATEGIES,
    add_anchor,
    maximiser_probability,
    observation_weights,
    replace_anchor,
)

__all__ = [
    "STRATEGIES",
    "add_anchor",
    "maximiser_probability",
    "observation_weights",
    "replace_anchor",
]
