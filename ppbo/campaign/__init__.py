"""The campaign layer: one BO step and the parts of an ask/tell campaign.

- :mod:`~ppbo.campaign.step`: ``step.step``, THE Bayesian-optimisation step
  (``from ppbo.campaign.step import step``; the package attribute ``step`` is
  the module), and the functional :func:`suggest`;
- :mod:`~ppbo.campaign.registry`: names <-> surrogates, inferences, acquisitions;
- :mod:`~ppbo.campaign.transforms`: the output standardisation, model-space data;
- :mod:`~ppbo.campaign.designs`: initial designs;
- :mod:`~ppbo.campaign.keys`: named key streams;
- :mod:`~ppbo.campaign.codec`: configurations and posteriors in storage;
- :mod:`~ppbo.campaign.validation`: checks of user input, naming field and value;
- :mod:`~ppbo.campaign.trials`: trials as a table, as model-space data, told outcomes;
- :mod:`~ppbo.campaign.ask`: design, random or model-based rows of the next trials;
- :mod:`~ppbo.campaign.recommendation`: the posterior-mean optimiser in user units;
- :mod:`~ppbo.campaign.optimizer`: the ask/tell :class:`Optimizer`, a façade;
- :mod:`~ppbo.campaign.run`: the objective loop, :func:`minimize`, :func:`maximize`.
"""

from ppbo.campaign.optimizer import CampaignWarning, Optimizer, Recommended
from ppbo.campaign.registry import DEFAULT_ACQUISITION, DEFAULT_INFERENCE
from ppbo.campaign.run import Result, maximize, minimize, run
from ppbo.campaign.step import Step, Suggestion, suggest
from ppbo.campaign.transforms import model_data, standardize, standardize_outputs

__all__ = [
    "Step",
    "suggest",
    "Suggestion",
    "standardize",
    "standardize_outputs",
    "model_data",
    "Optimizer",
    "Recommended",
    "CampaignWarning",
    "run",
    "minimize",
    "maximize",
    "Result",
    "DEFAULT_ACQUISITION",
    "DEFAULT_INFERENCE",
]
