"""``VectorRecord`` refuses exactly what the plain checks refuse, and
``from_floats`` makes what the constructor makes. The rules themselves, and
their fast paths, are held to their plain forms in
tests/unit/test_validation.py."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from contracts.domain import VectorRecord
from contracts.ids import EntityId, TenantId
from contracts.validation import check_id_text, check_metadata_value
from tests.unit.test_validation import (
    FLOAT_OVERFLOW,
    Text,
    components,
    metadata,
    old_finite_numbers,
    outcome,
    texts,
)


def old_vector_record_checks(id: str, vector: tuple[Any, ...], metadata: Any) -> None:
    check_id_text(id, "vector id")
    if not vector:
        raise ValueError("a vector must have at least one component")
    if not old_finite_numbers(vector):
        raise ValueError(f"vector {id!r} has a non-finite or non-numeric component")
    check_metadata_value(metadata, f"vector {id!r} metadata")


@given(
    id=st.sampled_from(["e", "", "e\x00", "e\udc80", "x" * 257]) | texts,
    vector=st.lists(components, max_size=4) | st.lists(st.floats(), min_size=1, max_size=4),
    metadata=metadata,
)
@example(id="e", vector=[0.5], metadata={"name": "a\x00"})
@example(id="e", vector=[0.5], metadata={"name": "\ud800"})
@example(id="e", vector=[0.5], metadata={"na\x00me": "a"})
@example(id="e", vector=[0.5], metadata={Text("name"): "a\x00"})
@example(id="e", vector=[0.5], metadata={"name": Text("a")})
@example(id="e", vector=[0.5], metadata={"n": ["a\x00"]})
@example(id="e\x00", vector=[math.nan], metadata={"n": "\x00"})
@example(id="e", vector=[math.nan], metadata={"n": "\x00"})
def test_vector_records_refuse_what_they_refused(id: str, vector: list[Any], metadata: Any) -> None:
    values = tuple(vector)
    made = outcome(VectorRecord, TenantId("t"), EntityId(id), values, metadata)
    expected = outcome(old_vector_record_checks, id, values, metadata)
    assert made[0] == expected[0]
    if made[0] == "error":
        assert made == expected


def record_outcome(call: Any, *args: Any) -> tuple[object, ...]:
    try:
        record = call(*args)
    except Exception as exc:  # any error is an outcome to compare
        return ("error", type(exc), str(exc))
    assert type(record) is VectorRecord
    return (
        "ok",
        record.tenant_id,
        record.id,
        [(type(x), repr(x)) for x in record.vector],
        type(record.vector),
        repr(record.metadata),
    )


@given(
    id=st.sampled_from(["e", "", "e\x7f"]) | texts,
    floats=st.lists(st.floats() | st.sampled_from([1e308, -0.0, math.nan]), max_size=4),
    metadata=metadata,
)
@example(id="e", floats=[1e308, 1e308], metadata={})
@example(id="e\x00", floats=[math.inf], metadata={})
@example(id="e", floats=[], metadata={"n": "\x00"})
def test_from_floats_makes_what_the_constructor_makes(
    id: str, floats: list[float], metadata: Any
) -> None:
    made = record_outcome(VectorRecord.from_floats, TenantId("t"), EntityId(id), floats, metadata)
    assert made == record_outcome(
        VectorRecord, TenantId("t"), EntityId(id), tuple(floats), metadata
    )


@pytest.mark.parametrize(
    "vector",
    [["0.5"], [None], [0.5, "x"], [FLOAT_OVERFLOW, 1.0], [FLOAT_OVERFLOW, -FLOAT_OVERFLOW], [1, 2]],
)
def test_from_floats_given_other_than_floats_still_refuses_as_the_constructor(
    vector: list[Any],
) -> None:
    """Not what its callers pass, but anything that does not sum to a finite
    number goes to the constructor, with its error."""
    made = record_outcome(VectorRecord.from_floats, TenantId("t"), EntityId("e"), vector, {})
    assert made == record_outcome(VectorRecord, TenantId("t"), EntityId("e"), tuple(vector), {})


def test_from_floats_does_not_convert() -> None:
    record = VectorRecord.from_floats(TenantId("t"), EntityId("e"), [0.5, -0.0], {"a": "b"})
    assert record.vector == (0.5, -0.0) and math.copysign(1, record.vector[1]) == -1
    assert record == VectorRecord(TenantId("t"), EntityId("e"), (0.5, -0.0), {"a": "b"})
    with pytest.raises(AttributeError):
        record.id = EntityId("f")  # type: ignore[misc]
