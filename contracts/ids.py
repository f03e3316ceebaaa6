"""Identifier types.

NewTypes over ``str`` so that mypy keeps a tenant id from being passed where an
entity id is expected, at no runtime cost.
"""

from __future__ import annotations

import re
from typing import NewType

TenantId = NewType("TenantId", str)
EntityId = NewType("EntityId", str)
DocumentId = NewType("DocumentId", str)
EventId = NewType("EventId", str)

# Tenant ids become Kafka keys, Neo4j and SQL parameters and file names in
# exports, so they are kept to a conservative alphabet.
TENANT_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
MAX_ID_LENGTH = 256
#: What an entity, document or edge id may not contain: C0 controls (NUL
#: included), DEL and lone surrogates. One C-level search instead of a Python
#: loop per character: ids are checked several times per entity per event.
FORBIDDEN_ID_CHARACTER = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


def tenant_id(value: str) -> TenantId:
    """Validate and brand a tenant id; raises ``ValueError`` with the rule it broke."""
    if not isinstance(value, str) or not TENANT_ID_PATTERN.fullmatch(value):
        raise ValueError(
            f"invalid tenant id {value!r}: use 1-63 characters of lowercase letters, "
            "digits, '-' and '_', starting with a letter or digit"
        )
    return TenantId(value)


def check_id_text(value: str, what: str) -> str:
    """Entity, document and edge-type ids: non-empty, bounded, no control characters."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(f"{what} is longer than {MAX_ID_LENGTH} characters")
    # isprintable() is a faster C scan that is true for most ids, and a printable
    # string holds none of the forbidden characters (they are Cc or Cs).
    if not str.isprintable(value) and FORBIDDEN_ID_CHARACTER.search(value):
        raise ValueError(f"{what} contains a NUL, control character or lone surrogate")
    return value


def entity_id(value: str) -> EntityId:
    return EntityId(check_id_text(value, "entity id"))
