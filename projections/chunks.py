"""Bounded store calls (docs/design.md 5.3): the folds embed and write a run of
extractions in chunks of at most ``chunk`` items, in order, inside the same
unit of work, so that a run of maximum-size events never becomes one
embedding call or one statement of a hundred thousand rows. Chunking changes
no result: the calls are the same writes, made in the same order."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TypeVar

T = TypeVar("T")

#: Entities (or ids, or edges) per embedding call and per store write.
DEFAULT_CHUNK = 1000


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive non-empty lists of at most ``size`` items of ``items``."""
    iterator = iter(items)
    while part := list(islice(iterator, max(1, size))):
        yield part
