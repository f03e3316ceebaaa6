"""Hypothesis strategies for the vector compliance suite.

``metadata_dicts`` is the one that matters. The port interprets exactly one
metadata key, ``entity_type``, so a generator that cannot draw that key leaves
every property over stored metadata green and silent (the slice 5 blind spot
of docs/adr/0012-compliance-suites-and-coverage-gates.md: keys from
``st.text(max_size=6)`` can never spell an eleven-letter key).
``tests/unit/test_vector_compliance_coverage.py`` pins what this draws.

Two traps, both of which make a suite weaker rather than red:

* The NUL filter runs on the *finished* mapping. Filtering the base draw and
  then adding the reserved key lets a NUL in through the added value (a nested
  dict's keys are drawn text too), and no store can hold one.
* The base draw is copied, never written into. Hypothesis reuses drawn objects
  while shrinking, so adding a key to one leaks it into an unrelated example and
  makes a failure irreproducible.
"""

from __future__ import annotations

import string
from typing import Any

from hypothesis import strategies as st

from contracts.domain import ENTITY_TYPE_KEY

#: Type names the suite searches for; drawn stored values come from these too,
#: so that a filter on one of them both matches and misses.
TYPE_NAMES = ("person", "org", "place")

# A fixed alphabet: ASCII, a two-byte and a four-byte character, and NUL, rare
# enough that the filter below rejects few draws. An open alphabet adds nothing
# the port reads and makes hypothesis build its Unicode tables on a cold start,
# slowly enough to fail its too_slow health check.
_text = st.text(
    alphabet=string.ascii_letters + string.digits + " _-\u00e9\U0001f600\x00", max_size=6
)

_json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text

_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)

_base_metadata = st.dictionaries(_text, _json_values, max_size=4)

# Values on both sides of the filter, including the unhashable shapes that once
# made an in-memory adapter raise TypeError where pgvector answered [].
_entity_type_values = st.one_of(
    st.sampled_from(TYPE_NAMES),
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.lists(st.sampled_from(TYPE_NAMES) | _text, max_size=2),
    st.dictionaries(_text, st.sampled_from(TYPE_NAMES), max_size=2),
)


def _holds_no_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" not in value
    if isinstance(value, list):
        return all(_holds_no_nul(item) for item in value)
    if isinstance(value, dict):
        return all(_holds_no_nul(k) and _holds_no_nul(v) for k, v in value.items())
    return True


@st.composite
def _metadata_candidates(draw: st.DrawFn) -> dict[str, Any]:
    metadata = dict(draw(_base_metadata))
    if draw(st.booleans()):
        metadata[ENTITY_TYPE_KEY] = draw(_entity_type_values)
    return metadata


def metadata_dicts() -> st.SearchStrategy[dict[str, Any]]:
    """Record metadata; about half the draws carry ``entity_type``."""
    return _metadata_candidates().filter(_holds_no_nul)


def entity_types() -> st.SearchStrategy[str | None]:
    """What a search filters on: nothing, or one of the type names."""
    return st.none() | st.sampled_from(TYPE_NAMES)


def vectors(dimension: int) -> st.SearchStrategy[tuple[float, ...]]:
    """Small integer components: exact in float32 as in float64, so an adapter
    storing either agrees with the model, and ties (equal directions) occur."""
    return st.tuples(*[st.integers(-3, 3).map(float) for _ in range(dimension)])


#: A record before it has a tenant: (id, vector, metadata). Ids come from a
#: small alphabet so that replacements and aliases between them occur.
RECORD_IDS = tuple(f"e{i}" for i in range(8))


def record_specs(
    dimension: int,
) -> st.SearchStrategy[tuple[str, tuple[float, ...], dict[str, Any]]]:
    return st.tuples(st.sampled_from(RECORD_IDS), vectors(dimension), metadata_dicts())


@st.composite
def acyclic_aliases(draw: st.DrawFn) -> dict[str, str]:
    """Alias facts absorbed id -> canonical id, each pointing at a later id in
    ``RECORD_IDS``, so chains occur and cycles cannot."""
    aliases: dict[str, str] = {}
    for index, alias in enumerate(RECORD_IDS[:-1]):
        if draw(st.integers(0, 3)) == 0:
            aliases[alias] = draw(st.sampled_from(RECORD_IDS[index + 1 :]))
    return aliases
