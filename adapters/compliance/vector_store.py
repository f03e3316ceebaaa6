"""The vector store compliance suite: what ``VectorStore`` means.

Written once; each adapter runs it through a subclass that provides an async
fixture ``store`` yielding a ``ProjectedVectorStore`` whose dimension is the
``dimension`` fixture below (8 for speed; one test asks for 384 by
parametrizing it). Every test and every hypothesis example uses fresh tenant
ids and topic names, so the suite can run against one long-lived database.

Search is exact (docs/adr/0005-pgvector-exact-search.md): these assertions
are about the k nearest, not about recall. Vectors here have small integer
components, exact in float32 and float64 alike, so an adapter storing either
agrees with the brute-force model.

``tests/unit/test_vector_compliance_coverage.py`` requires, for every read
method of the port, ``test_{method}_returns_copies`` and
``test_{method}_never_crosses_tenants`` here. Write tests of writes under other
names: that gate treats every name of that shape as naming a read method.
"""

from __future__ import annotations

import itertools
import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.compliance.vector_strategies import (
    RECORD_IDS,
    acyclic_aliases,
    entity_types,
    record_specs,
    vectors,
)
from adapters.embedding import HashingEmbedder
from contracts.domain import ENTITY_TYPE_KEY, StreamPartition, VectorMatch, VectorRecord
from contracts.errors import (
    AliasChainTooDeepError,
    AliasCycleError,
    DimensionMismatchError,
    TenantIsolationError,
)
from contracts.ids import EntityId, TenantId
from contracts.limits import DEFAULT_MAX_ALIAS_DEPTH
from contracts.ports.ledger import NO_CHECKPOINT
from contracts.ports.vector import ProjectedVectorStore, VectorUnitOfWork

DIMENSION = 8

# The store fixture is per test, not per example: every example takes fresh
# tenants instead, which is what keeps examples apart on a shared database.
# One class per adapter runs the same test functions (the point of the suite),
# so hypothesis sees one function called from several classes in a run that
# covers more than one adapter; the examples depend only on the store fixture.
_per_example = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors]
)


def new_tenant() -> TenantId:
    return TenantId(f"t-{uuid.uuid4().hex[:8]}")


def new_partition() -> StreamPartition:
    return StreamPartition(topic=f"vec-{uuid.uuid4().hex[:8]}", partition=0)


def e(name: str) -> EntityId:
    return EntityId(name)


def v(*components: float, dimension: int = DIMENSION) -> tuple[float, ...]:
    """A vector of ``dimension`` with the given leading components, zeros after."""
    return tuple(float(x) for x in components) + (0.0,) * (dimension - len(components))


def rec(
    tenant: TenantId,
    name: str,
    vector: tuple[float, ...],
    metadata: dict[str, Any] | None = None,
) -> VectorRecord:
    return VectorRecord(tenant_id=tenant, id=e(name), vector=vector, metadata=metadata or {})


def ids(matches: Sequence[VectorMatch]) -> list[str]:
    return [m.record.id for m in matches]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


def type_matches(record: VectorRecord, entity_type: str | None) -> bool:
    if entity_type is None:
        return True
    stored = record.metadata.get(ENTITY_TYPE_KEY)
    return isinstance(stored, str) and stored == entity_type


def typed(value: Any) -> Any:
    """``value`` with the type of every leaf made explicit: 1 == 1.0 == True in
    Python, and a store that turns one into another has changed the metadata."""
    if isinstance(value, dict):
        return {key: typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [typed(item) for item in value]
    return (type(value).__name__, value)


class Boom(Exception):
    """Raised inside a unit of work to prove it rolls back."""


class VectorStoreCompliance:
    """Subclasses provide the async fixture ``store`` (a ProjectedVectorStore of
    ``dimension``)."""

    @pytest.fixture
    def dimension(self) -> int:
        return DIMENSION

    # -- identity and dimension ---------------------------------------------

    async def test_the_store_is_a_projected_vector_store(
        self, store: ProjectedVectorStore, dimension: int
    ) -> None:
        assert isinstance(store, ProjectedVectorStore)
        assert store.dimension == store.identity.dimension == dimension

    @pytest.mark.parametrize("length", [DIMENSION - 1, DIMENSION + 1, 1])
    async def test_upsert_refuses_a_vector_of_the_wrong_dimension(
        self, store: ProjectedVectorStore, length: int
    ) -> None:
        tenant = new_tenant()
        with pytest.raises(DimensionMismatchError) as raised:
            await store.upsert(tenant, rec(tenant, "a", (1.0,) * length))
        assert (raised.value.expected, raised.value.got) == (DIMENSION, length)
        assert await store.get(tenant, e("a")) is None

    async def test_upsert_many_writes_nothing_if_any_dimension_is_wrong(
        self, store: ProjectedVectorStore
    ) -> None:
        tenant = new_tenant()
        batch = [rec(tenant, "a", v(1)), rec(tenant, "b", (1.0,) * 3), rec(tenant, "c", v(0, 1))]
        with pytest.raises(DimensionMismatchError):
            await store.upsert_many(tenant, batch)
        for name in ("a", "b", "c"):
            assert await store.get(tenant, e(name)) is None

    @pytest.mark.parametrize("length", [DIMENSION - 1, DIMENSION + 1])
    async def test_search_refuses_a_query_of_the_wrong_dimension(
        self, store: ProjectedVectorStore, length: int
    ) -> None:
        tenant = new_tenant()
        await store.upsert(tenant, rec(tenant, "a", v(1)))
        with pytest.raises(DimensionMismatchError):
            await store.search(tenant, (1.0,) * length, k=3)
        with pytest.raises(DimensionMismatchError):
            await store.search(tenant, (1.0,) * length, k=0)

    async def test_dimension_errors_inside_a_unit_of_work_roll_it_back(
        self, store: ProjectedVectorStore
    ) -> None:
        tenant = new_tenant()
        with pytest.raises(DimensionMismatchError):
            async with store.unit_of_work(new_partition()) as uow:
                await uow.upsert(tenant, rec(tenant, "a", v(1)))
                await uow.search(tenant, (1.0,), k=1)
        assert await store.get(tenant, e("a")) is None

    async def test_search_refuses_a_non_finite_query(self, store: ProjectedVectorStore) -> None:
        tenant = new_tenant()
        with pytest.raises(ValueError):
            await store.search(tenant, v(math.nan), k=1)
        with pytest.raises(ValueError):
            await store.search(tenant, v(math.inf), k=1)

    @pytest.mark.parametrize("dimension", [384])
    async def test_a_full_size_embedding_round_trips_and_ranks(
        self, store: ProjectedVectorStore, dimension: int
    ) -> None:
        tenant = new_tenant()
        embedder = HashingEmbedder(dimension=dimension)
        names = ["Ada Lovelace", "Charles Babbage", "Analytical Engine"]
        embedded = await embedder.embed_documents(names)
        await store.upsert_many(
            tenant,
            [
                rec(tenant, f"n{i}", tuple(x), {"name": n})
                for i, (n, x) in enumerate(zip(names, embedded, strict=True))
            ],
        )
        stored = await store.get(tenant, e("n0"))
        assert stored is not None and len(stored.vector) == 384
        assert stored.vector == pytest.approx(embedded[0], abs=1e-6)
        found = await store.search(tenant, await embedder.embed_query("ada lovelace"), k=3)
        assert ids(found)[0] == "n0"

    # -- upsert --------------------------------------------------------------

    async def test_upsert_replaces_vector_and_metadata(self, store: ProjectedVectorStore) -> None:
        tenant = new_tenant()
        await store.upsert(tenant, rec(tenant, "a", v(1), {"x": 1, ENTITY_TYPE_KEY: "person"}))
        await store.upsert(tenant, rec(tenant, "a", v(0, 2), {"y": [1, 2]}))
        # Replaced, not merged: the old key and old type are gone.
        assert await store.get(tenant, e("a")) == rec(tenant, "a", v(0, 2), {"y": [1, 2]})
        assert await store.search(tenant, v(1), k=5, entity_type="person") == []
        assert ids(await store.search(tenant, v(1), k=5)) == ["a"]

    async def test_upsert_many_applies_in_order_so_the_last_of_an_id_wins(
        self, store: ProjectedVectorStore
    ) -> None:
        tenant = new_tenant()
        await store.upsert_many(
            tenant,
            [
                rec(tenant, "a", v(1), {"n": 1}),
                rec(tenant, "b", v(0, 1)),
                rec(tenant, "a", v(2), {"n": 2}),
            ],
        )
        assert await store.get(tenant, e("a")) == rec(tenant, "a", v(2), {"n": 2})
        assert await store.get(tenant, e("b")) == rec(tenant, "b", v(0, 1))

    async def test_upsert_many_of_nothing_is_a_no_op(self, store: ProjectedVectorStore) -> None:
        tenant = new_tenant()
        await store.upsert_many(tenant, [])
        assert await store.search(tenant, v(1), k=5) == []

    async def test_get_of_an_unknown_id_is_none(self, store: ProjectedVectorStore) -> None:
        assert await store.get(new_tenant(), e("nobody")) is None

    async def test_upsert_keeps_its_own_copy_of_the_metadata(
        self, store: ProjectedVectorStore
    ) -> None:
        tenant = new_tenant()
        metadata: dict[str, Any] = {"tags": ["x"], "nested": {"k": 1}}
        await store.upsert(tenant, rec(tenant, "a", v(1), metadata))
        metadata["tags"].append("y")
        metadata["nested"]["k"] = 2
        metadata["new"] = True
        stored = await store.get(tenant, e("a"))
        assert stored is not None
        assert stored.metadata == {"tags": ["x"], "nested": {"k": 1}}

    async def test_metadata_numbers_read_back_with_their_type_and_value(
        self, store: ProjectedVectorStore
    ) -> None:
        """Stored JSON may keep numbers as decimals (Postgres jsonb does): a float
        in exponent form such as 1e+23 must not come back as the integer 10**23,
        nor 1e16 as an int. The strategies draw no floats, so this is pinned here."""
        tenant = new_tenant()
        floats = [1e23, 1e16, 1.7976931348623157e308, 0.1, 1e-7, 5e-324, -2.5, 3.0]
        ints = [0, -1, 2**53 + 1, 2**70, -(2**64)]
        metadata: dict[str, Any] = {
            "floats": floats,
            "ints": ints,
            "nested": {"f": 1e300, "i": 10**300, "mixed": [1, 1.0, True, None, "1e+23"]},
        }
        await store.upsert(tenant, rec(tenant, "a", v(1), metadata))
        for read in (
            await store.get(tenant, e("a")),
            (await store.search(tenant, v(1), k=1))[0].record,
        ):
            assert read is not None
            assert typed(read.metadata) == typed(metadata)

    # -- entity_type filter --------------------------------------------------

    async def test_search_filters_on_entity_type_and_tolerates_any_stored_value(
        self, store: ProjectedVectorStore
    ) -> None:
        """Stored metadata is arbitrary JSON. A value that is unhashable (list,
        dict) or not a string (None, bool, int) simply does not match; it never
        raises (the slice 5 divergence, docs/adr/0012-compliance-suites-and-coverage-gates.md)."""
        tenant = new_tenant()
        stored_types: dict[str, Any] = {
            "str": "person",
            "other": "org",
            "case": "Person",
            "list": ["person"],
            "dict": {"person": "person"},
            "none": None,
            "true": True,
            "int": 1,
            "zero": 0,
        }
        records = [
            rec(tenant, name, v(1, i), {ENTITY_TYPE_KEY: value})
            for i, (name, value) in enumerate(stored_types.items())
        ]
        records.append(rec(tenant, "untyped", v(1), {"kind": "person"}))
        await store.upsert_many(tenant, records)
        assert ids(await store.search(tenant, v(1), k=20, entity_type="person")) == ["str"]
        assert ids(await store.search(tenant, v(1), k=20, entity_type="org")) == ["other"]
        assert await store.search(tenant, v(1), k=20, entity_type="True") == []
        assert await store.search(tenant, v(1), k=20, entity_type="1") == []
        assert len(await store.search(tenant, v(1), k=20)) == len(records)

    async def test_search_pre_filters_by_entity_type(self, store: ProjectedVectorStore) -> None:
        """Many nearer records of another type must not crowd out k of the type
        asked for: the filter is applied before ranking, never after."""
        tenant = new_tenant()
        nearer = [rec(tenant, f"org{i}", v(10, i), {ENTITY_TYPE_KEY: "org"}) for i in range(12)]
        farther = [rec(tenant, f"p{i}", v(1, 5 + i), {ENTITY_TYPE_KEY: "person"}) for i in range(4)]
        await store.upsert_many(tenant, nearer + farther)
        found = await store.search(tenant, v(1), k=3, entity_type="person")
        assert ids(found) == ["p0", "p1", "p2"]

    # -- ordering and k ------------------------------------------------------

    async def test_search_orders_by_exact_cosine_then_id(self, store: ProjectedVectorStore) -> None:
        tenant = new_tenant()
        expected = {
            "a": (v(1), 1.0),
            "big": (v(5), 1.0),  # magnitude does not count: ties with a, after it by id
            "b": (v(1, 1), math.sqrt(0.5)),
            "c": (v(1, 2), 1 / math.sqrt(5)),
            "d": (v(0, 1), 0.0),
            "f": (v(-1, 3), -1 / math.sqrt(10)),
            "g": (v(-1), -1.0),
        }
        shuffled = ["d", "g", "big", "c", "a", "f", "b"]
        await store.upsert_many(tenant, [rec(tenant, n, expected[n][0]) for n in shuffled])
        found = await store.search(tenant, v(1), k=10)
        assert ids(found) == ["a", "big", "b", "c", "d", "f", "g"]
        for match in found:
            assert match.score == pytest.approx(expected[match.record.id][1], abs=1e-6)
            assert match.record == rec(tenant, match.record.id, expected[match.record.id][0])

    async def test_ties_are_broken_by_id_ascending(self, store: ProjectedVectorStore) -> None:
        tenant = new_tenant()
        names = ["t2", "t10", "t1", "t3", "s9"]
        for name in names:
            await store.upsert(tenant, rec(tenant, name, v(1, 1)))
        found = await store.search(tenant, v(1, 1), k=3)
        assert ids(found) == sorted(names)[:3]

    @pytest.mark.parametrize("k", [0, -1, -100])
    async def test_a_non_positive_k_finds_nothing(
        self, store: ProjectedVectorStore, k: int
    ) -> None:
        tenant = new_tenant()
        await store.upsert(tenant, rec(tenant, "a", v(1)))
        assert await store.search(tenant, v(1), k=k) == []

    async def test_k_bounds_the_result_and_a_large_k_returns_everything(
        self, store: ProjectedVectorStore
    ) -> None:
        tenant = new_tenant()
        await store.upsert_many(tenant, [rec(tenant, f"n{i}", v(1, i)) for i in range(5)])
        assert ids(await store.search(tenant, v(1), k=1)) == ["n0"]
        assert len(await store.search(tenant, v(1), k=4)) == 4
        assert len(await store.search(tenant, v(1), k=1000)) == 5

    async def test_a_zero_query_scores_zero_against_everything(
        self, store: ProjectedVectorStore
    ) -> None:
        """A zero vector has no direction: cosine with it is defined as 0.0, so
        every record ties and the order is by id."""
        tenant = new_tenant()
        await store.upsert_many(tenant, [rec(tenant, "b", v(1)), rec(tenant, "a", v(0, -2))])
        found = await store.search(tenant, v(), k=5)
        assert ids(found) == ["a", "b"]
        assert [m.score for m in found] == [0.0, 0.0]

    async def test_a_zero_record_scores_zero(self, store: ProjectedVectorStore) -> None:
        tenant = new_tenant()
        await store.upsert_many(
            tenant,
            [rec(tenant, "zero", v()), rec(tenant, "away", v(-1)), rec(tenant, "near", v(1))],
        )
        found = await store.search(tenant, v(1), k=5)
        assert ids(found) == ["near", "zero", "away"]
        assert found[1].score == 0.0

    # -- visibility under merges -------------------------------------------

    async def test_a_merged_id_leaves_search_but_not_get(self, store: ProjectedVectorStore) -> None:
        tenant = new_tenant()
        await store.upsert_many(tenant, [rec(tenant, "x", v(1)), rec(tenant, "y", v(1, 1))])
        await store.hide_merged(tenant, e("x"), e("y"))
        assert ids(await store.search(tenant, v(1), k=5)) == ["y"]
        assert await store.get(tenant, e("x")) == rec(tenant, "x", v(1))

    async def test_unhide_restores_visibility_and_says_whether_there_was_an_alias(
        self, store: ProjectedVectorStore
    ) -> None:
        tenant = new_tenant()
        await store.upsert_many(tenant, [rec(tenant, "x", v(1)), rec(tenant, "y", v(1, 1))])
        await store.hide_merged(tenant, e("x"), e("y"))
        assert await store.unhide(tenant, e("x")) is True
        assert await store.unhide(tenant, e("x")) is False
        assert ids(await store.search(tenant, v(1), k=5)) == ["x", "y"]
        assert await store.resolve_entity_ids(tenant, [e("x")]) == {"x": "x"}

    async def test_re_upserting_a_hidden_id_keeps_it_hidden(
        self, store: ProjectedVectorStore
    ) -> None:
        tenant = new_tenant()
        await store.upsert_many(tenant, [rec(tenant, "x", v(1)), rec(tenant, "y", v(0, 1))])
        await store.hide_merged(tenant, e("x"), e("y"))
        await store.upsert(tenant, rec(tenant, "x", v(2), {"again": True}))
        await store.upsert_many(tenant, [rec(tenant, "x", v(3), {"again": 2})])
        assert ids(await store.search(tenant, v(1), k=5)) == ["y"]
        assert await store.get(tenant, e("x")) == rec(tenant, "x", v(3), {"again": 2})

    async def test_an_id_hidden_before_its_vector_arrives_stays_hidden(
        self, store: ProjectedVectorStore
    ) -> None:
        """Neither endpoint needs to exist: a merge may be folded before the
        extraction that carries the absorbed entity's vector."""
        tenant = new_tenant()
        await store.hide_merged(tenant, e("x"), e("y"))
        await store.upsert(tenant, rec(tenant, "x", v(1)))
        assert await store.search(tenant, v(1), k=5) == []
        assert await store.get(tenant, e("x")) is not None

    async def test_hide_merged_is_keyed_by_the_absorbed_id(
        self, store: ProjectedVectorStore
    ) -> None:
        tenant = new_tenant()
        await store.hide_merged(tenant, e("x"), e("y"))
        await store.hide_merged(tenant, e("x"), e("y"))  # idempotent
        await store.hide_merged(tenant, e("x"), e("z"))  # last write wins
        assert await store.resolve_entity_ids(tenant, [e("x")]) == {"x": "z"}
        # One fact, not two: a single unhide removes it.
        assert await store.unhide(tenant, e("x")) is True
        assert await store.unhide(tenant, e("x")) is False

    async def test_hide_merged_refuses_an_id_merged_into_itself(
        self, store: ProjectedVectorStore
    ) -> None:
        tenant = new_tenant()
        with pytest.raises(ValueError):
            await store.hide_merged(tenant, e("x"), e("x"))
        assert await store.resolve_entity_ids(tenant, [e("x")]) == {"x": "x"}

    async def test_the_canonical_stays_visible(self, store: ProjectedVectorStore) -> None:
        tenant = new_tenant()
        await store.upsert_many(tenant, [rec(tenant, "x", v(1)), rec(tenant, "y", v(1, 1))])
        await store.hide_merged(tenant, e("x"), e("y"))
        assert ids(await store.search(tenant, v(0, 1), k=5)) == ["y"]

    async def test_resolution_is_total(self, store: ProjectedVectorStore) -> None:
        tenant = new_tenant()
        await store.upsert(tenant, rec(tenant, "known", v(1)))
        await store.hide_merged(tenant, e("x"), e("known"))
        resolved = await store.resolve_entity_ids(tenant, [e("known"), e("never-seen"), e("x")])
        assert resolved == {"known": "known", "never-seen": "never-seen", "x": "known"}
        assert await store.resolve_entity_ids(tenant, []) == {}

    async def test_resolution_follows_a_chain_to_the_end(self, store: ProjectedVectorStore) -> None:
        """Three hops, because at two "follow one hop" and "follow to the end"
        are the same function."""
        tenant = new_tenant()
        await store.hide_merged(tenant, e("d"), e("c"))
        await store.hide_merged(tenant, e("c"), e("b"))
        await store.hide_merged(tenant, e("b"), e("a"))
        resolved = await store.resolve_entity_ids(tenant, [e("d"), e("c"), e("b"), e("a")])
        assert resolved == {"d": "a", "c": "a", "b": "a", "a": "a"}

    async def test_the_longest_legal_chain_still_resolves(
        self, store: ProjectedVectorStore
    ) -> None:
        """Every alias of the tenant in one chain: the bound is aliases + 1, and
        a bound of aliases alone would call this worst legal history a cycle."""
        tenant = new_tenant()
        chain = [e(f"n{i}") for i in range(6)]
        for absorbed, canonical in itertools.pairwise(chain):
            await store.hide_merged(tenant, absorbed, canonical)
        assert await store.resolve_entity_ids(tenant, [chain[0]]) == {chain[0]: chain[-1]}

    @pytest.mark.timeout(30)
    @pytest.mark.parametrize("length", [2, 3])
    async def test_an_alias_cycle_raises_rather_than_hanging(
        self, store: ProjectedVectorStore, length: int
    ) -> None:
        """Two lengths: comparing each hop with the starting id catches a
        two-cycle and hangs on a three-cycle."""
        tenant = new_tenant()
        ring = [e(f"c{i}") for i in range(length)]
        for i, absorbed in enumerate(ring):
            await store.hide_merged(tenant, absorbed, ring[(i + 1) % length])
        await store.hide_merged(tenant, e("tail"), ring[0])
        for start in (ring[0], e("tail")):
            with pytest.raises(AliasCycleError) as raised:
                await store.resolve_entity_ids(tenant, [start])
            assert raised.value.tenant_id == tenant

    async def test_an_alias_making_a_chain_longer_than_the_limit_is_refused(
        self, store: ProjectedVectorStore
    ) -> None:
        """A chain of the limit's length is written and resolves; one more hop,
        at either end, raises and writes nothing (adapters.alias_depth)."""
        tenant = new_tenant()
        chain = [e(f"n{i}") for i in range(DEFAULT_MAX_ALIAS_DEPTH + 1)]
        for absorbed, canonical in itertools.pairwise(chain):
            await store.hide_merged(tenant, absorbed, canonical)
        assert await store.resolve_entity_ids(tenant, [chain[0]]) == {chain[0]: chain[-1]}
        for absorbed, canonical in ((e("below"), chain[0]), (chain[-1], e("above"))):
            with pytest.raises(AliasChainTooDeepError) as raised:
                await store.hide_merged(tenant, absorbed, canonical)
            assert raised.value.tenant_id == tenant
        assert await store.resolve_entity_ids(tenant, [e("below"), chain[0]]) == {
            "below": "below",
            chain[0]: chain[-1],
        }

    @pytest.mark.parametrize("extra", [0, 1])
    async def test_joining_two_chains_counts_the_hops_of_both(
        self, store: ProjectedVectorStore, extra: int
    ) -> None:
        """``a_k -> b_0`` joins a chain of k hops below to one of m above: k + 1 + m
        hops, allowed up to the limit and refused past it."""
        tenant = new_tenant()
        below = DEFAULT_MAX_ALIAS_DEPTH // 2
        above = DEFAULT_MAX_ALIAS_DEPTH - 1 - below + extra
        a = [e(f"a{i}") for i in range(below + 1)]
        b = [e(f"b{i}") for i in range(above + 1)]
        for chain in (a, b):
            for absorbed, canonical in itertools.pairwise(chain):
                await store.hide_merged(tenant, absorbed, canonical)
        if extra:
            with pytest.raises(AliasChainTooDeepError):
                await store.hide_merged(tenant, a[-1], b[0])
            assert await store.resolve_entity_ids(tenant, [a[0]]) == {a[0]: a[-1]}
        else:
            await store.hide_merged(tenant, a[-1], b[0])
            assert await store.resolve_entity_ids(tenant, [a[0]]) == {a[0]: b[-1]}

    # -- copies ---------------------------------------------------------------

    async def test_get_returns_copies(self, store: ProjectedVectorStore) -> None:
        tenant = new_tenant()
        metadata = {ENTITY_TYPE_KEY: "person", "tags": ["a"], "nested": {"k": [1]}}
        await store.upsert(tenant, rec(tenant, "a", v(1), metadata))
        first = await store.get(tenant, e("a"))
        assert first is not None
        first.metadata["tags"].append("b")
        first.metadata["nested"]["k"].append(2)
        first.metadata[ENTITY_TYPE_KEY] = "org"
        first.metadata["extra"] = 1
        assert await store.get(tenant, e("a")) == rec(
            tenant, "a", v(1), {ENTITY_TYPE_KEY: "person", "tags": ["a"], "nested": {"k": [1]}}
        )

    async def test_search_returns_copies(self, store: ProjectedVectorStore) -> None:
        tenant = new_tenant()
        metadata = {ENTITY_TYPE_KEY: "person", "tags": ["a"], "nested": {"k": [1]}}
        await store.upsert(tenant, rec(tenant, "a", v(1), metadata))
        (first,) = await store.search(tenant, v(1), k=1)
        first.record.metadata["tags"].append("b")
        first.record.metadata["nested"]["k"].clear()
        del first.record.metadata[ENTITY_TYPE_KEY]
        (again,) = await store.search(tenant, v(1), k=1, entity_type="person")
        assert again.record == rec(tenant, "a", v(1), metadata)
        assert await store.get(tenant, e("a")) == rec(tenant, "a", v(1), metadata)

    async def test_resolve_entity_ids_returns_copies(self, store: ProjectedVectorStore) -> None:
        tenant = new_tenant()
        await store.hide_merged(tenant, e("x"), e("y"))
        first = await store.resolve_entity_ids(tenant, [e("x"), e("z")])
        first[e("x")] = e("z")
        first[e("new")] = e("y")
        del first[e("z")]
        assert await store.resolve_entity_ids(tenant, [e("x"), e("z")]) == {"x": "y", "z": "z"}
        assert await store.resolve_entity_ids(tenant, [e("new")]) == {"new": "new"}

    # -- tenant isolation -------------------------------------------------------

    async def test_get_never_crosses_tenants(self, store: ProjectedVectorStore) -> None:
        mine, theirs = new_tenant(), new_tenant()
        await store.upsert(theirs, rec(theirs, "a", v(1), {"owner": "theirs"}))
        assert await store.get(mine, e("a")) is None
        await store.upsert(mine, rec(mine, "a", v(0, 1), {"owner": "mine"}))
        assert await store.get(mine, e("a")) == rec(mine, "a", v(0, 1), {"owner": "mine"})
        assert await store.get(theirs, e("a")) == rec(theirs, "a", v(1), {"owner": "theirs"})

    async def test_search_never_crosses_tenants(self, store: ProjectedVectorStore) -> None:
        """Pre-filtered, not post-filtered: another tenant's nearer vectors do not
        cost this tenant any of its k."""
        mine, theirs = new_tenant(), new_tenant()
        await store.upsert_many(
            theirs,
            [rec(theirs, f"n{i}", v(1, 0.0), {ENTITY_TYPE_KEY: "person"}) for i in range(10)],
        )
        assert await store.search(mine, v(1), k=5) == []
        assert await store.search(mine, v(1), k=5, entity_type="person") == []
        await store.upsert_many(
            mine, [rec(mine, f"m{i}", v(1, 3 + i), {ENTITY_TYPE_KEY: "person"}) for i in range(4)]
        )
        for entity_type in (None, "person"):
            found = await store.search(mine, v(1), k=3, entity_type=entity_type)
            assert ids(found) == ["m0", "m1", "m2"]
            assert all(m.record.tenant_id == mine for m in found)

    async def test_resolve_entity_ids_never_crosses_tenants(
        self, store: ProjectedVectorStore
    ) -> None:
        """The dangerous direction: a leak here would re-point one tenant's ids at
        an entity it has never heard of. Negative and positive in one test, so a
        store that resolves nothing cannot pass."""
        mine, theirs = new_tenant(), new_tenant()
        await store.hide_merged(theirs, e("x"), e("y"))
        assert await store.resolve_entity_ids(mine, [e("x")]) == {"x": "x"}
        assert await store.resolve_entity_ids(theirs, [e("x")]) == {"x": "y"}
        await store.hide_merged(mine, e("x"), e("z"))
        assert await store.resolve_entity_ids(mine, [e("x")]) == {"x": "z"}
        assert await store.resolve_entity_ids(theirs, [e("x")]) == {"x": "y"}

    async def test_a_merge_in_one_tenant_hides_nothing_in_another(
        self, store: ProjectedVectorStore
    ) -> None:
        mine, theirs = new_tenant(), new_tenant()
        await store.upsert(mine, rec(mine, "x", v(1)))
        await store.hide_merged(theirs, e("x"), e("y"))
        assert ids(await store.search(mine, v(1), k=5)) == ["x"]
        assert await store.unhide(mine, e("x")) is False
        assert await store.resolve_entity_ids(theirs, [e("x")]) == {"x": "y"}

    async def test_upsert_refuses_a_record_of_another_tenant(
        self, store: ProjectedVectorStore
    ) -> None:
        mine, theirs = new_tenant(), new_tenant()
        with pytest.raises(TenantIsolationError):
            await store.upsert(mine, rec(theirs, "a", v(1)))
        assert await store.get(mine, e("a")) is None
        assert await store.get(theirs, e("a")) is None

    async def test_upsert_many_refuses_a_batch_holding_another_tenants_record(
        self, store: ProjectedVectorStore
    ) -> None:
        mine, theirs = new_tenant(), new_tenant()
        batch = [rec(mine, "a", v(1)), rec(theirs, "b", v(1)), rec(mine, "c", v(1))]
        with pytest.raises(TenantIsolationError):
            await store.upsert_many(mine, batch)
        for tenant in (mine, theirs):
            for name in ("a", "b", "c"):
                assert await store.get(tenant, e(name)) is None

    @pytest.mark.parametrize("bad", ["", "Upper", "has space", "x" * 64, "ü"])
    async def test_every_method_refuses_an_invalid_tenant_id(
        self, store: ProjectedVectorStore, bad: str
    ) -> None:
        tenant = TenantId(bad)
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: store.get(tenant, e("a")),
            lambda: store.search(tenant, v(1), k=1),
            lambda: store.resolve_entity_ids(tenant, [e("a")]),
            lambda: store.upsert(tenant, rec(tenant, "a", v(1))),
            lambda: store.upsert_many(tenant, [rec(tenant, "a", v(1))]),
            lambda: store.hide_merged(tenant, e("a"), e("b")),
            lambda: store.unhide(tenant, e("a")),
            lambda: store.delete_by_tenant(tenant),
        ]
        for call in calls:
            with pytest.raises(ValueError):
                await call()

    # -- delete_by_tenant --------------------------------------------------------

    async def test_delete_by_tenant_takes_vectors_and_aliases_and_sweeps_clean(
        self, store: ProjectedVectorStore
    ) -> None:
        tenant = new_tenant()
        await store.upsert_many(tenant, [rec(tenant, f"n{i}", v(1, i)) for i in range(5)])
        await store.hide_merged(tenant, e("n0"), e("n1"))
        sweep = await store.delete_by_tenant(tenant)
        assert sweep.tenant_id == tenant
        assert {"vectors", "aliases"} <= set(sweep.remaining)
        assert sweep.complete and sweep.outstanding == {}
        assert await store.get(tenant, e("n1")) is None
        assert await store.search(tenant, v(1), k=10) == []
        # Aliases surviving a wipe would hide what a replay writes back.
        assert await store.resolve_entity_ids(tenant, [e("n0")]) == {"n0": "n0"}
        await store.upsert(tenant, rec(tenant, "n0", v(1)))
        assert ids(await store.search(tenant, v(1), k=10)) == ["n0"]

    async def test_delete_by_tenant_leaves_other_tenants_intact(
        self, store: ProjectedVectorStore
    ) -> None:
        doomed, other = new_tenant(), new_tenant()
        for tenant in (doomed, other):
            await store.upsert_many(tenant, [rec(tenant, "a", v(1)), rec(tenant, "b", v(0, 1))])
            await store.hide_merged(tenant, e("b"), e("a"))
        await store.delete_by_tenant(doomed)
        assert await store.get(other, e("a")) == rec(other, "a", v(1))
        assert await store.get(other, e("b")) == rec(other, "b", v(0, 1))
        assert ids(await store.search(other, v(1), k=5)) == ["a"]
        assert await store.resolve_entity_ids(other, [e("b")]) == {"b": "a"}

    async def test_delete_by_tenant_of_an_empty_tenant_is_a_complete_sweep(
        self, store: ProjectedVectorStore
    ) -> None:
        sweep = await store.delete_by_tenant(new_tenant())
        assert sweep.complete and {"vectors", "aliases"} <= set(sweep.remaining)

    # -- unit of work -------------------------------------------------------------

    async def test_a_unit_of_work_is_a_vector_unit_of_work(
        self, store: ProjectedVectorStore
    ) -> None:
        async with store.unit_of_work(new_partition()) as uow:
            assert isinstance(uow, VectorUnitOfWork)
            assert uow.dimension == store.dimension

    async def test_reads_inside_a_unit_of_work_see_its_writes(
        self, store: ProjectedVectorStore
    ) -> None:
        tenant = new_tenant()
        async with store.unit_of_work(new_partition()) as uow:
            await uow.upsert_many(tenant, [rec(tenant, "x", v(1)), rec(tenant, "y", v(1, 1))])
            assert await uow.get(tenant, e("x")) == rec(tenant, "x", v(1))
            await uow.hide_merged(tenant, e("x"), e("y"))
            assert ids(await uow.search(tenant, v(1), k=5)) == ["y"]
            assert await uow.resolve_entity_ids(tenant, [e("x")]) == {"x": "y"}
            # Not committed yet: the store outside the transaction sees nothing.
            assert await store.get(tenant, e("x")) is None
        assert ids(await store.search(tenant, v(1), k=5)) == ["y"]

    async def test_a_unit_of_work_commits_writes_and_checkpoint_together(
        self, store: ProjectedVectorStore
    ) -> None:
        tenant, partition = new_tenant(), new_partition()
        async with store.unit_of_work(partition) as uow:
            await uow.upsert(tenant, rec(tenant, "x", v(1)))
            await uow.hide_merged(tenant, e("y"), e("x"))
            await uow.advance_checkpoint(partition, 41)
        assert await store.get(tenant, e("x")) == rec(tenant, "x", v(1))
        assert await store.resolve_entity_ids(tenant, [e("y")]) == {"y": "x"}
        assert await store.checkpoint(partition) == 41

    async def test_a_failed_unit_of_work_leaves_nothing(self, store: ProjectedVectorStore) -> None:
        tenant, partition = new_tenant(), new_partition()
        await store.upsert_many(tenant, [rec(tenant, "kept", v(1)), rec(tenant, "gone", v(0, 1))])
        await store.hide_merged(tenant, e("gone"), e("kept"))
        await store.advance_checkpoint(partition, 10)
        with pytest.raises(Boom):
            async with store.unit_of_work(partition) as uow:
                await uow.upsert(tenant, rec(tenant, "kept", v(5), {"changed": True}))
                await uow.upsert_many(tenant, [rec(tenant, "new", v(1))])
                assert await uow.unhide(tenant, e("gone")) is True
                await uow.hide_merged(tenant, e("kept"), e("new"))
                await uow.delete_by_tenant(tenant)
                await uow.advance_checkpoint(partition, 20)
                raise Boom
        assert await store.get(tenant, e("kept")) == rec(tenant, "kept", v(1))
        assert await store.get(tenant, e("new")) is None
        assert ids(await store.search(tenant, v(1), k=5)) == ["kept"]
        assert await store.resolve_entity_ids(tenant, [e("gone"), e("kept")]) == {
            "gone": "kept",
            "kept": "kept",
        }
        assert await store.checkpoint(partition) == 10

    async def test_a_failed_first_unit_of_work_leaves_no_checkpoint(
        self, store: ProjectedVectorStore
    ) -> None:
        tenant, partition = new_tenant(), new_partition()
        with pytest.raises(Boom):
            async with store.unit_of_work(partition) as uow:
                await uow.upsert(tenant, rec(tenant, "a", v(1)))
                await uow.advance_checkpoint(partition, 0)
                raise Boom
        assert await store.checkpoint(partition) == NO_CHECKPOINT
        assert await store.get(tenant, e("a")) is None

    async def test_a_unit_of_work_holds_several_tenants(self, store: ProjectedVectorStore) -> None:
        first, second = new_tenant(), new_tenant()
        async with store.unit_of_work(new_partition()) as uow:
            await uow.upsert(first, rec(first, "a", v(1)))
            await uow.upsert(second, rec(second, "a", v(0, 1)))
            with pytest.raises(TenantIsolationError):
                await uow.upsert(first, rec(second, "b", v(1)))
        assert await store.get(first, e("a")) == rec(first, "a", v(1))
        assert await store.get(second, e("a")) == rec(second, "a", v(0, 1))
        assert await store.get(second, e("b")) is None

    # -- properties ----------------------------------------------------------------

    @_per_example
    @given(
        specs=st.lists(record_specs(DIMENSION), max_size=12),
        aliases=acyclic_aliases(),
        query=vectors(DIMENSION),
        k=st.integers(-1, 10),
        entity_type=entity_types(),
    )
    async def test_search_equals_a_brute_force_model(
        self,
        store: ProjectedVectorStore,
        specs: list[tuple[str, tuple[float, ...], dict[str, Any]]],
        aliases: dict[str, str],
        query: tuple[float, ...],
        k: int,
        entity_type: str | None,
    ) -> None:
        tenant, neighbour = new_tenant(), new_tenant()
        model: dict[str, VectorRecord] = {}
        for name, vector, metadata in specs:
            model[name] = rec(tenant, name, vector, metadata)
            await store.upsert(tenant, rec(tenant, name, vector, metadata))
            # A neighbour holding the same ids, nearer to everything, and unmerged.
            await store.upsert(neighbour, rec(neighbour, name, query, metadata))
        for absorbed, canonical in aliases.items():
            await store.hide_merged(tenant, e(absorbed), e(canonical))

        candidates = {
            name: cosine(query, record.vector)
            for name, record in model.items()
            if name not in aliases and type_matches(record, entity_type)
        }
        found = await store.search(tenant, query, k, entity_type)

        assert len(found) == max(0, min(k, len(candidates)))
        names = ids(found)
        assert len(set(names)) == len(names) and set(names) <= set(candidates)
        for match in found:
            assert match.record == model[match.record.id]
            assert match.score == pytest.approx(candidates[match.record.id], abs=1e-6)
        assert found == sorted(found, key=lambda m: (-m.score, m.record.id))
        if found:
            boundary = min(candidates[name] for name in names)
            assert all(
                score <= boundary + 1e-6 for name, score in candidates.items() if name not in names
            )
        for absorbed in aliases:
            chain_end = absorbed
            while chain_end in aliases:
                chain_end = aliases[chain_end]
            assert await store.resolve_entity_ids(tenant, [e(absorbed)]) == {absorbed: chain_end}

    @_per_example
    @given(
        specs=st.lists(record_specs(DIMENSION), max_size=10),
        query=vectors(DIMENSION),
        entity_type=entity_types(),
    )
    async def test_upsert_many_equals_sequential_upserts(
        self,
        store: ProjectedVectorStore,
        specs: list[tuple[str, tuple[float, ...], dict[str, Any]]],
        query: tuple[float, ...],
        entity_type: str | None,
    ) -> None:
        batched, one_by_one = new_tenant(), new_tenant()
        await store.upsert_many(batched, [rec(batched, n, x, md) for n, x, md in specs])
        for name, vector, metadata in specs:
            await store.upsert(one_by_one, rec(one_by_one, name, vector, metadata))
        for name in RECORD_IDS:
            left = await store.get(batched, e(name))
            right = await store.get(one_by_one, e(name))
            assert (left is None) == (right is None)
            if left is not None and right is not None:
                assert (left.id, left.vector, left.metadata) == (
                    right.id,
                    right.vector,
                    right.metadata,
                )
        left_found = await store.search(batched, query, 20, entity_type)
        right_found = await store.search(one_by_one, query, 20, entity_type)
        assert [(m.record.id, m.score) for m in left_found] == [
            (m.record.id, m.score) for m in right_found
        ]
