"""Acquisition functions, each averaged over the posterior's hyperparameter samples.

``evaluate(acquisition, posterior, X, **options)`` returns one value per candidate
(shape (m,)), already marginalised over samples. All acquisitions are maximised.
"""

from ppbo.acquisition import rff
from ppbo.acquisition.analytic import ei, log_aei, log_ei, pi, ucb, ucb_beta, variance
from ppbo.acquisition.base import (
    Acquisition,
    Bound,
    Sample,
    best_observed_mean,
    bind,
    default_acquisition,
    evaluate,
    per_sample,
    reduce_samples,
)
from ppbo.acquisition.es import es, monte_carlo_information_gain
from ppbo.acquisition.hedge import HedgeState, gp_hedge, hedge
from ppbo.acquisition.kg import kg
from ppbo.acquisition.mes import mes, sample_max_values
from ppbo.acquisition.nei import log_jei, log_nei
from ppbo.acquisition.pes import pes, pes_nb_posterior
from ppbo.acquisition.preferential import anpei, dueling_thompson, eubo
from ppbo.acquisition.thompson import thompson, thompson_point

__all__ = [
    "pi",
    "ei",
    "log_ei",
    "log_aei",
    "log_nei",
    "log_jei",
    "ucb",
    "ucb_beta",
    "variance",
    "kg",
    "es",
    "monte_carlo_information_gain",
    "thompson",
    "thompson_point",
    "mes",
    "sample_max_values",
    "pes",
    "pes_nb_posterior",
    "eubo",
    "anpei",
    "dueling_thompson",
    "hedge",
    "gp_hedge",
    "HedgeState",
    "rff",
    "Acquisition",
    "Bound",
    "Sample",
    "best_observed_mean",
    "bind",
    "default_acquisition",
    "evaluate",
    "per_sample",
    "reduce_samples",
]
