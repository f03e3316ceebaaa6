"""Hypothesis strategies for the graph compliance suite.

A generator that cannot draw the interesting value does not fail; the
properties over it go quiet
(docs/adr/0012-compliance-suites-and-coverage-gates.md). So ``property_dicts`` draws
every value kind both stores must hold, the 64-bit integer edges and non-ASCII text
included, and ``names`` draws the whitespace, case and compatibility forms the
blocking key folds together. ``tests/unit/test_graph_compliance_coverage.py``
pins what they reach.

Strategies draw values under :data:`DRAW_TENANT`; a test re-homes them under
the fresh tenant it makes inside each example (:func:`under`), so examples never
share state even on one long-lived database.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TypeVar

from hypothesis import strategies as st

from contracts.domain import Alias, Entity, Properties, PropertyValue, Relationship
from contracts.ids import EntityId, TenantId

DRAW_TENANT = TenantId("t-draw")

Homed = TypeVar("Homed", Entity, Relationship, Alias)


def under(value: Homed, tenant: TenantId) -> Homed:
    return replace(value, tenant_id=tenant)


# Text a store must round-trip: anything but NUL and lone surrogates, which
# neither Neo4j nor Postgres can hold and the contract refuses.
_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)

_int64_edges = st.sampled_from([-(2**63), -(2**63) + 1, -1, 0, 1, 2**63 - 2, 2**63 - 1])
_ints = _int64_edges | st.integers(-(2**63), 2**63 - 1)
_floats = st.floats(allow_nan=False, allow_infinity=False)
_scalars: list[st.SearchStrategy[PropertyValue]] = [
    _text,
    _ints,
    _floats,
    st.booleans(),
]

property_values: st.SearchStrategy[PropertyValue] = st.one_of(
    *_scalars,
    # Lists are homogeneous by contract; empty lists are drawn by each of these.
    st.lists(_text, max_size=4),
    st.lists(_ints, max_size=4),
    st.lists(_floats, max_size=4),
    st.lists(st.booleans(), max_size=4),
)

# A few keys recur so that upserts overwrite and merge; the regex covers the
# rest of the legal key space.
property_keys = st.sampled_from(["name_", "score", "tags", "flag", "_x"]) | st.from_regex(
    r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True
)

property_dicts: st.SearchStrategy[Properties] = st.dictionaries(
    property_keys, property_values, max_size=5
)

# Words whose blocking keys collide: case, ß/SS, ligatures and fullwidth forms
# fold together under NFKC + casefold.
_words = st.sampled_from(
    [
        "Alice",
        "ALICE",
        "alice",
        "Ärger",
        "ÄRGER",
        "straße",
        "STRASSE",
        "ﬁle",
        "\uff26\uff49\uff4c\uff45",  # fullwidth "File"
        "日本",
        "Zoë",
    ]
) | st.text(st.characters(categories=("L", "N")), min_size=1, max_size=6)
_gaps = st.sampled_from([" ", "  ", "\t", "\n", "\u00a0", "\u3000", " \t "])
_edges = st.sampled_from(["", " ", "\t", "\u00a0"])


@st.composite
def names(draw: st.DrawFn) -> str:
    words = draw(st.lists(_words, min_size=1, max_size=3))
    name = words[0]
    for word in words[1:]:
        name += draw(_gaps) + word
    return draw(_edges) + name + draw(_edges)


# A small pool so that upserts collide, plus non-ASCII and astral ids so that
# "ordered by id" is checked beyond ASCII (code point order).
entity_ids: st.SearchStrategy[EntityId] = st.builds(
    EntityId,
    st.sampled_from(["a", "b", "c", "B", "é", "ß", "日", "😀", "a-1", "a 1"])
    | st.text(st.characters(categories=("L", "N", "Pd", "So")), min_size=1, max_size=6),
)

entity_types = st.sampled_from(["Person", "Org", "Place"])
relationship_types = st.sampled_from(["KNOWS", "WORKS_AT", "LIKES"])


def entities(ids: st.SearchStrategy[EntityId] = entity_ids) -> st.SearchStrategy[Entity]:
    return st.builds(
        Entity,
        tenant_id=st.just(DRAW_TENANT),
        id=ids,
        name=names(),
        type=entity_types,
        properties=property_dicts,
    )


@st.composite
def relationships(draw: st.DrawFn, ids: st.SearchStrategy[EntityId]) -> Relationship:
    source = draw(ids)
    # Drawn apart rather than filtered: a small pool would reject too often.
    target = draw(ids.filter(lambda i: i != source))
    return Relationship(
        tenant_id=DRAW_TENANT,
        source_id=source,
        target_id=target,
        type=draw(relationship_types),
        confidence=draw(st.floats(0.0, 1.0)),
        properties=draw(property_dicts),
    )


def pooled_ids(size: int) -> list[EntityId]:
    return [EntityId(f"e{i:02d}") for i in range(size)]


@st.composite
def alias_forests(draw: st.DrawFn, size: int = 8) -> list[tuple[EntityId, EntityId]]:
    """Merges (absorbed, canonical) in order, never closing a cycle: an id only
    ever points at a higher-numbered one. Later merges of the same absorbed id
    overwrite earlier ones, as redelivery and re-merges do."""
    ids = pooled_ids(size)
    pairs = draw(
        st.lists(
            st.tuples(st.integers(0, size - 2), st.integers(1, size - 1)).filter(
                lambda p: p[0] < p[1]
            ),
            max_size=2 * size,
        )
    )
    return [(ids[a], ids[c]) for a, c in pairs]
