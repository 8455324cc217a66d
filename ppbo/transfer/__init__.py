"""Transfer learning: source tasks beside the target, and source selection.

:class:`Source` holds a source task's evaluations in the target's space
(:mod:`ppbo.transfer.source`); :mod:`ppbo.transfer.bandit` chooses one source per
iteration for single-source transfer models (Ramachandran et al. 2018). The
transfer surrogates themselves live in :mod:`ppbo.models`; a campaign gets its
sources with ``ppbo.Optimizer(..., sources=[...])``.
"""

from ppbo.transfer import bandit
from ppbo.transfer.source import (
    Source,
    read_source,
    source_arrays,
    sources_from_json,
    sources_to_json,
    validate_sources,
)

__all__ = [
    "Source",
    "bandit",
    "read_source",
    "source_arrays",
    "sources_from_json",
    "sources_to_json",
    "validate_sources",
]
