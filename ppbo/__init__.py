"""ppbo: probabilistic-programming Bayesian optimisation on NumPyro and JAX.

Surrogates are NumPyro models; their hyperparameters are inferred with NUTS, slice
sampling or MAP; acquisitions average over the posterior samples. Importing ppbo
changes no JAX configuration: enable float64 with
``jax.config.update("jax_enable_x64", True)`` before use.
"""

from ppbo import _compat, acquisition, storage
from ppbo.campaign import (
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
from ppbo.data import Dataset, bucket_capacity
from ppbo.inference import MAP, NUTS, SGHMC, Fixed, Inference, Slice, Train, fit
from ppbo.inference.diagnostics import Diagnostics, DiagnosticWarning
from ppbo.linalg import CholeskyError
from ppbo.optimize import Recommendation, optimize_acquisition, recommend
from ppbo.preference.campaign import PreferenceOptimizer
from ppbo.space import Categorical, Integer, Real, Space
from ppbo.surrogate import (
    Capability,
    GPParts,
    MissingCapabilityError,
    Posterior,
    Surrogate,
)
from ppbo.transfer import Source

__all__ = [
    "Dataset",
    "bucket_capacity",
    "Surrogate",
    "Posterior",
    "Capability",
    "GPParts",
    "MissingCapabilityError",
    "Diagnostics",
    "DiagnosticWarning",
    "CholeskyError",
    "Inference",
    "fit",
    "NUTS",
    "Slice",
    "SGHMC",
    "MAP",
    "Fixed",
    "Train",
    "acquisition",
    "optimize_acquisition",
    "recommend",
    "Recommendation",
    "suggest",
    "Suggestion",
    "standardize",
    "Space",
    "Real",
    "Integer",
    "Categorical",
    "Optimizer",
    "Recommended",
    "Result",
    "CampaignWarning",
    "minimize",
    "maximize",
    "storage",
    "PreferenceOptimizer",
    "Source",
]

__version__ = "0.1.0"

_compat.bind_submodules()
