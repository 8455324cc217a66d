"""Acquisition functions, each averaged over the posterior's hyperparameter samples.

``evaluate(acquisition, posterior, X, **options)`` returns one value per candidate
(shape (m,)), already marginalised over samples. All acquisitions are maximised.
"""

from ppbo.acquisition.base import (
    Acquisition,
    Bound,
    Sample,
    best_observed_mean,
    bind,
    evaluate,
    per_sample,
    reduce_samples,
)

__all__ = [
    "Acquisition",
    "Bound",
    "Sample",
    "best_observed_mean",
    "bind",
    "evaluate",
    "per_sample",
    "reduce_samples",
]
