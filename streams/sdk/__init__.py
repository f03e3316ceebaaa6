"""The SDK for producers and readers (docs/producers.md, docs/readers.md):
publish validated events keyed by tenant, wait until the stores hold them,
and open the stores to read them."""

from streams.sdk.publisher import Publisher, PublishError
from streams.sdk.read_your_writes import NotProjectedError, wait_until_projected
from streams.wiring import Stores, make_embedder, open_readers, open_stores

__all__ = [
    "NotProjectedError",
    "PublishError",
    "Publisher",
    "Stores",
    "make_embedder",
    "open_readers",
    "open_stores",
    "wait_until_projected",
]
