"""NumPyro generative models for ppbo, one family per module.

Installed as ``ppbo.models``; every module exports a ``surrogate(...)`` builder.
"""

__all__ = [
    "gp",
    "multitask_gp",
    "preference_gp",
    "heteroscedastic",
    "kernels",
    "gaussian",
]
