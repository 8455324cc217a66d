"""ppbo inside other tools: an Optuna sampler and a Ray Tune searcher.

- :mod:`ppbo.integrations.optuna`: :class:`~ppbo.integrations.optuna.PPBOSampler`,
  an Optuna ``BaseSampler`` whose relative sampling is one ppbo BO step on the
  study's trials (install the ``optuna`` extra);
- :mod:`ppbo.integrations.ray_tune`: :class:`~ppbo.integrations.ray_tune.PPBOSearch`,
  a Ray Tune ``Searcher`` backed by a stored :class:`ppbo.Optimizer` campaign
  (install the ``ray`` extra).

The benchmark runner sends its runs to Ray with
``ppbo.benchmarks.run(..., executor="ray")``.

Importing this package imports neither Optuna nor Ray; import the submodule you
need.
"""

__all__: list[str] = []
