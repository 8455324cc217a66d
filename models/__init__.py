"""NumPyro generative models for ppbo, one family per module.

Installed as ``ppbo.models``; every module exports a ``surrogate(...)`` builder.
"""

__all__ = [
    "gp",
    "multitask_gp",
    "kernels",
    "gaussian",
    "blr",
    "dngo",
    "ablr",
    "forest",
    "bnn",
    "preference_gp",
    "heteroscedastic",
    "bhgp",
    "nn_task_gp",
    "rgpe",
    "metabo",
    "env_gp",
    "diff_gp",
    "miso_gp",
    "sources",
]
