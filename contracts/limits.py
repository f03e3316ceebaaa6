"""Configurable caps on what one event may hold and on what the stores keep
(docs/design.md 3). The event contract (``contracts.events``) has fixed
ceilings; these caps can only be set at or below them, and ``streams.worker.decode``
applies them after parsing, so a value over a cap is dead-lettered with a
reason, in both stores alike.

The blocking key's cap (``contracts.events.MAX_BLOCKING_KEY_BYTES``) is not
among them: it comes from Neo4j's index key limit, a property of the store and
not a policy, so it is fixed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from contracts.errors import InvalidEventError
from contracts.events import (
    MAX_ENTITIES_PER_DOCUMENT,
    MAX_RELATIONSHIPS_PER_DOCUMENT,
    DocumentExtracted,
    EntitiesMerged,
    EntitiesUnmerged,
    Event,
)

#: Keys per property map (an entity's or a relationship's), by default.
DEFAULT_MAX_PROPERTY_KEYS = 256
#: Alias hops from any id to its canonical, by default, and the ceiling.
DEFAULT_MAX_ALIAS_DEPTH = 32
MAX_ALIAS_DEPTH = 1000


@dataclass(frozen=True, slots=True)
class EventLimits:
    max_entities: int = MAX_ENTITIES_PER_DOCUMENT
    max_relationships: int = MAX_RELATIONSHIPS_PER_DOCUMENT
    max_property_keys: int = DEFAULT_MAX_PROPERTY_KEYS


DEFAULT_LIMITS = EventLimits()


def _check_keys(properties: Mapping[str, object], what: str, limit: int) -> None:
    if len(properties) > limit:
        raise InvalidEventError(
            f"{what} has {len(properties)} property keys; the limit is {limit} "
            "(REDSTRING_MAX_PROPERTY_KEYS)"
        )


def check_event_limits(event: Event, limits: EventLimits = DEFAULT_LIMITS) -> None:
    """Raise ``InvalidEventError`` if ``event`` holds more than ``limits`` allow."""
    payload = event.payload
    if isinstance(payload, DocumentExtracted):
        if len(payload.entities) > limits.max_entities:
            raise InvalidEventError(
                f"{len(payload.entities)} entities in one event; the limit is "
                f"{limits.max_entities} (REDSTRING_MAX_ENTITIES_PER_EVENT)"
            )
        if len(payload.relationships) > limits.max_relationships:
            raise InvalidEventError(
                f"{len(payload.relationships)} relationships in one event; the limit is "
                f"{limits.max_relationships} (REDSTRING_MAX_RELATIONSHIPS_PER_EVENT)"
            )
        for index, entity in enumerate(payload.entities):
            _check_keys(entity.properties, f"entities.{index}", limits.max_property_keys)
        rels = payload.relationships
    elif isinstance(payload, EntitiesMerged | EntitiesUnmerged):
        rels = (
            payload.edges_to_add
            if isinstance(payload, EntitiesMerged)
            else payload.edges_to_restore
        )
        for name, edges in (("added or restored", rels), ("removed", payload.edges_to_remove)):
            if len(edges) > limits.max_relationships:
                raise InvalidEventError(
                    f"{len(edges)} edges {name} in one event; the limit is "
                    f"{limits.max_relationships} (REDSTRING_MAX_RELATIONSHIPS_PER_EVENT)"
                )
    else:
        return
    for index, rel in enumerate(rels):
        _check_keys(rel.properties, f"relationship {index}", limits.max_property_keys)
