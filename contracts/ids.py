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


#: What an id in an *event* (docs/events.md) may not contain: every
#: character that renders as nothing or reorders text, so that two ids that
#: look the same are the same. That is the categories Cc (controls, C1
#: included), Cf (format: zero-width characters, bidi embeddings, overrides
#: and isolates, soft hyphen, BOM, tags), Cs (lone surrogates), Zl and Zp
#: (line and paragraph separators), and the Default_Ignorable_Code_Point
#: property (Hangul fillers, combining grapheme joiner, variation selectors,
#: and the code points Unicode reserves as ignorable). Written out rather than
#: computed, so importing costs nothing; tests/unit/test_event_parsing.py
#: recomputes it from unicodedata and fails when Python's Unicode database
#: adds a character to one of them.
INVISIBLE_ID_CHARACTER = re.compile(
    r"[\x00-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891"
    r"\u08e2\u115f-\u1160\u17b4-\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e"
    r"\u2060-\u206f\u3164\ud800-\udfff\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb"
    r"\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3"
    r"\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


def check_event_id_text(value: str, what: str) -> str:
    """The ids an event carries (entity, document, edge endpoint, canonical,
    absorbed and restored ids): :func:`check_id_text`, and no invisible
    character (:data:`INVISIBLE_ID_CHARACTER`) and no whitespace at either
    end, so that ``acme`` and ``acme\\u200b`` or ``acme `` are never two
    entities that look like one. Stricter than the domain values, which keep
    accepting what the stores already hold."""
    check_id_text(value, what)
    # Printable ASCII holds none of them: most ids end here, in two C scans.
    if value.isascii() and value.isprintable():
        if value[0] == " " or value[-1] == " ":
            raise ValueError(f"{what} starts or ends with whitespace")
        return value
    found = INVISIBLE_ID_CHARACTER.search(value)
    if found:
        raise ValueError(
            f"{what} contains the invisible or format character "
            f"U+{ord(found.group()):04X}; ids must be visible text"
        )
    if value[0].isspace() or value[-1].isspace():
        raise ValueError(f"{what} starts or ends with whitespace")
    return value


def entity_id(value: str) -> EntityId:
    return EntityId(check_id_text(value, "entity id"))
