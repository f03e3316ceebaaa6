"""Identifier types.

NewTypes over ``str`` so that mypy keeps a tenant id from being passed where an
entity id is expected, at no runtime cost.
"""

from __future__ import annotations

import re
from typing import NewType

TenantId = NewType("TenantId", str)
EntityId = NewType("EntityId", str)
EventId = NewType("EventId", str)

# Tenant ids become Kafka keys, Neo4j and SQL parameters and file names in
# exports, so they are kept to a conservative alphabet.
TENANT_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


def tenant_id(value: str) -> TenantId:
    """Validate and brand a tenant id; raises ``ValueError`` with the rule it broke."""
    if not isinstance(value, str) or not TENANT_ID_PATTERN.fullmatch(value):
        raise ValueError(
            f"invalid tenant id {value!r}: use 1-63 characters of lowercase letters, "
            "digits, '-' and '_', starting with a letter or digit"
        )
    return TenantId(value)
