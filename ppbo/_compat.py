"""Repairs for third-party import states that would otherwise break a fit.

``import arviz`` under ArviZ 1.x registers NumPyro as a lazily loaded module
(``lazy_loader`` on top of :class:`importlib.util.LazyLoader`). When a later
``import numpyro.distributions`` triggers that lazy load, Python 3.12 and 3.13
execute the ``numpyro.distributions`` package a second time, and the second
package object lacks the attributes that bind its submodules
(``numpyro.distributions.distribution``, ...), although the submodules
themselves sit in :data:`sys.modules`. NumPyro's own code then fails inside
every fit with transformed sites: ``numpyro.factor`` looks up
``numpyro.distributions.distribution.Unit`` and raises ``AttributeError``.
"""

from __future__ import annotations

import sys
import warnings


def bind_submodules(package: str = "numpyro") -> list[str]:
    """Binds every imported submodule of ``package`` as an attribute of its parent.

    Idempotent and cheap; ppbo calls it when it is imported, after its own NumPyro
    imports, so the order in which a user imports ArviZ, NumPyro and ppbo cannot
    break a fit.

    Args:
        package: the top-level package whose submodules are bound.

    Returns:
        The dotted names of the submodules that had to be bound (empty when the
        import state was already consistent).

    Example:
        >>> import numpyro.distributions
        >>> from ppbo._compat import bind_submodules
        >>> bind_submodules()
        []
    """
    repaired = []
    prefix = package + "."
    for name, module in sorted(sys.modules.items()):
        if module is None or not name.startswith(prefix):
            continue
        parent_name, _, child = name.rpartition(".")
        parent = sys.modules.get(parent_name)
        if parent is None:
            continue
        if child not in parent.__dict__:
            setattr(parent, child, module)
            repaired.append(name)
    return repaired


def import_arviz():
    """ArviZ, imported without the notice ArviZ 0.23 prints on import.

    ArviZ 0.23 announces its 1.x refactor with a ``FutureWarning`` when it is first
    imported; ppbo imports ArviZ lazily (diagnostics, netCDF output), so the notice
    would otherwise appear in the middle of a campaign's progress bar. Other
    warnings are untouched.

    Returns:
        The ``arviz`` module.

    Example:
        >>> from ppbo._compat import import_arviz
        >>> import_arviz().__name__
        'arviz'
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore",
            message=r"\s*ArviZ is undergoing a major refactor",
            category=FutureWarning,
        )
        import arviz
    return arviz
