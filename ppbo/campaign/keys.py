"""Named PRNG key streams of a campaign.

Every random choice of a campaign draws its key from the campaign's root seed,
the iteration (the number of trials asked before it) and a stream *name*:
``fold_in(fold_in(key(seed), iteration), id(name))`` with ``id`` a fixed hash of
the name (CRC-32). The key therefore depends only on stored quantities, so a
campaign resumed from its storage continues exactly; and streams cannot collide
by someone picking the same small number twice.
"""

from __future__ import annotations

import zlib

import jax

__all__ = ["STREAMS", "stream_id", "campaign_key"]

#: The streams a campaign uses: the BO step (fit and acquisition optimiser), the
#: uniform points asked before any value is known, the recommendation, and the
#: fits of the single-source GPs of bandit source selection.
STREAMS = ("step", "random", "recommend", "source_fit")


def stream_id(name: str) -> int:
    """The fixed 31-bit number of a stream name (CRC-32; stable across processes).

    Example:
        >>> stream_id("step") == stream_id("step") != stream_id("random")
        True
    """
    return zlib.crc32(name.encode("utf-8")) & 0x7FFFFFFF


def campaign_key(seed: int, iteration: int, stream: str) -> jax.Array:
    """The key of ``stream`` at ``iteration`` of the campaign with root ``seed``.

    Args:
        seed: the campaign's root seed.
        iteration: the number of trials asked before this draw.
        stream: one of :data:`STREAMS`.

    Raises:
        ValueError: for an unknown stream.

    Example:
        >>> a = campaign_key(0, 3, "step")
        >>> bool((jax.random.key_data(a) == jax.random.key_data(
        ...     campaign_key(0, 3, "step"))).all())
        True
    """
    if stream not in STREAMS:
        raise ValueError(f"stream must be one of {STREAMS}, got {stream!r}")
    root = jax.random.fold_in(jax.random.key(int(seed)), int(iteration))
    return jax.random.fold_in(root, stream_id(stream))
