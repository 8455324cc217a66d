"""Compatibility names: the campaign layer now lives in :mod:`ppbo.campaign`.

Example:
    >>> from ppbo.loop import Optimizer
    >>> Optimizer is ppbo.Optimizer
    True
"""

from ppbo.campaign import (
    DEFAULT_ACQUISITION,
    DEFAULT_INFERENCE,
    CampaignWarning,
    Optimizer,
    Recommended,
    Result,
    Suggestion,
    maximize,
    minimize,
    standardize,
    suggest,
)

__all__ = [
    "Suggestion",
    "suggest",
    "standardize",
    "Optimizer",
    "Recommended",
    "Result",
    "CampaignWarning",
    "minimize",
    "maximize",
    "DEFAULT_ACQUISITION",
    "DEFAULT_INFERENCE",
]
