"""Keep a long-lived process below the kernel's limit on memory maps.

JAX keeps every executable it compiles for the life of the process, and each one
holds a few memory maps; a campaign compiles its programs again for every
capacity bucket (about a thousand maps a bucket for a GP campaign on this
project's measurements). Linux caps the number of maps of a process at
``vm.max_map_count`` (65,530 by default); past it, the next compilation fails
with "LLVM compilation error: Cannot allocate memory". One campaign up to
n = 1000 stays well below the cap, but a process that runs many campaigns (a
notebook, a sweep, a worker of a tuning service) does not, so :func:`ppbo.fit`
calls :func:`release_compiled_code_if_crowded` first: when the process holds more
than half the cap it clears JAX's caches (:func:`jax.clear_caches`), which frees
the executables of buckets and campaigns that are done at the price of compiling
the current ones once more. Where ``/proc`` is absent (macOS, Windows) it does
nothing.
"""

from __future__ import annotations

from pathlib import Path

import jax

__all__ = ["memory_map_count", "memory_map_limit", "release_compiled_code_if_crowded"]

#: Share of ``vm.max_map_count`` above which :func:`release_compiled_code_if_crowded`
#: clears JAX's caches.
CROWDED_FRACTION = 0.5

_MAPS = Path("/proc/self/maps")
_LIMIT = Path("/proc/sys/vm/max_map_count")


def memory_map_count() -> int | None:
    """The number of memory maps this process holds; None without ``/proc``.

    Example:
        >>> count = memory_map_count()
        >>> count is None or count > 0
        True
    """
    try:
        with _MAPS.open("rb") as maps:
            return sum(1 for _ in maps)
    except OSError:
        return None


def memory_map_limit() -> int | None:
    """The kernel's ``vm.max_map_count``; None where it cannot be read.

    Example:
        >>> limit = memory_map_limit()
        >>> limit is None or limit > 0
        True
    """
    try:
        return int(_LIMIT.read_text().strip())
    except (OSError, ValueError):
        return None


def release_compiled_code_if_crowded(fraction: float = CROWDED_FRACTION) -> bool:
    """Clear JAX's caches when the process holds over ``fraction`` of its map cap.

    Args:
        fraction: share of ``vm.max_map_count`` that counts as crowded.

    Returns:
        Whether the caches were cleared.

    Example:
        >>> release_compiled_code_if_crowded(fraction=1.0)  # never crowded at 100%
        False
    """
    count, limit = memory_map_count(), memory_map_limit()
    if count is None or limit is None or count <= fraction * limit:
        return False
    jax.clear_caches()
    return True
