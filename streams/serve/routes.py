"""The read API's tenant routes: each one call (or two) on a read port, its
answer paged (docs/readers.md, "The HTTP API").

Entity ids are the last path segment and may hold any character, '/'
included (``{entity_id:path}``); ``GET .../entities?id=`` takes ids as query
values too. Lists are paged by ``limit`` and ``offset``: the ports answer a
list from its start, so a page reaches at most ``MAX_WINDOW`` items in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, StringConstraints

from contracts.domain import Position, StreamPartition
from contracts.ids import EntityId
from contracts.ports.ledger import ProjectionLedger
from contracts.validation import MAX_ID_LENGTH, TYPE_PATTERN
from streams.kafka.partitioning import partition_for
from streams.sdk.read_your_writes import NotProjectedError, wait_until_projected
from streams.serve.app import ApiError, Tenant, context_of
from streams.serve.models import (
    DEFAULT_LIMIT,
    MAX_IDS,
    MAX_LIMIT,
    MAX_SEARCH_WINDOW,
    MAX_WINDOW,
    AliasOut,
    Direction,
    EntityBatch,
    EntityOut,
    ErrorOut,
    Page,
    ProjectionPosition,
    RelationshipOut,
    Resolved,
    SearchHit,
    SearchRequest,
)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

router = APIRouter(
    prefix="/v1/tenants/{tenant}",
    responses={
        401: {"model": ErrorOut, "description": "No bearer token, or one that does not verify."},
        403: {"model": ErrorOut, "description": "The token is for another tenant."},
        503: {"model": ErrorOut, "description": "A store is unavailable; retry."},
    },
)

EntityPath = Annotated[
    str, Path(min_length=1, max_length=MAX_ID_LENGTH, description="An entity id.")
]
IdList = list[Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_LENGTH)]]
Ids = Annotated[
    IdList | None, Query(alias="id", max_length=MAX_IDS, description="Entity ids (repeat).")
]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Items per page.")]
Offset = Annotated[int, Query(ge=0, le=MAX_WINDOW, description="Items to skip.")]
TypeName = Annotated[str | None, Query(pattern=TYPE_PATTERN.pattern, description="A type.")]


def _window(limit: int, offset: int, most: int = MAX_WINDOW) -> None:
    if offset + limit > most:
        raise ApiError(400, "invalid_request", f"offset + limit may be at most {most}")


def _page(items: Sequence[T], limit: int, offset: int) -> tuple[list[T], int | None]:
    """The page, and the next page's offset when the list goes on."""
    end = offset + limit
    return list(items[offset:end]), end if len(items) > end else None


def _paged(model: type[M], found: Sequence[Any], limit: int, offset: int) -> Page[M]:
    items, next_offset = _page(found, limit, offset)
    return Page[M](
        items=[model.model_validate(item) for item in items],
        limit=limit,
        offset=offset,
        next_offset=next_offset,
    )


@router.get(
    "/entities/{entity_id:path}",
    response_model=EntityOut,
    responses={404: {"model": ErrorOut, "description": "No such entity."}},
    summary="Get an entity",
)
async def get_entity(request: Request, tenant: Tenant, entity_id: EntityPath) -> EntityOut:
    """An entity by id. A merged-away entity still exists (see ``/resolve``)."""
    entity = await context_of(request).stores().graph.get_entity(tenant, EntityId(entity_id))
    if entity is None:
        raise ApiError(404, "not_found", "no such entity")
    return EntityOut.model_validate(entity)


@router.get("/entities", response_model=EntityBatch, summary="Get entities by id or by type")
async def list_entities(
    request: Request,
    tenant: Tenant,
    ids: Ids = None,
    type: TypeName = None,
    limit: Limit = DEFAULT_LIMIT,
    offset: Offset = 0,
) -> EntityBatch:
    """With ``id``: those entities (``missing`` names the ids that are none).
    Otherwise the tenant's entities, of one ``type`` if given. Ordered by id."""
    _window(limit, offset)
    graph = context_of(request).stores().graph
    if ids is not None:
        if type is not None:
            raise ApiError(400, "invalid_request", "give 'id' or 'type', not both")
        wanted = sorted(set(ids))
        found = await graph.get_entities(tenant, [EntityId(i) for i in wanted])
        present = {e.id for e in found}
        items, next_offset = _page(found, limit, offset)
        missing = [i for i in wanted if i not in present]
    else:
        # One more than the page, to know whether another follows.
        found = await graph.find_entities(tenant, type, limit=offset + limit + 1)
        items, next_offset = _page(found, limit, offset)
        missing = []
    return EntityBatch(
        items=[EntityOut.model_validate(e) for e in items],
        limit=limit,
        offset=offset,
        next_offset=next_offset,
        missing=missing,
    )


@router.get("/resolve", response_model=Resolved, summary="Resolve ids to canonical ids")
async def resolve(
    request: Request,
    tenant: Tenant,
    ids: Annotated[
        IdList, Query(alias="id", min_length=1, max_length=MAX_IDS, description="Ids (repeat).")
    ],
) -> Resolved:
    """Each id's canonical id through merge chains; an id with no alias (known
    or not) maps to itself."""
    graph = context_of(request).stores().graph
    resolved = await graph.resolve_entity_ids(tenant, [EntityId(i) for i in ids])
    return Resolved(ids={str(k): str(v) for k, v in resolved.items()})


@router.get(
    "/aliases/{entity_id:path}", response_model=Page[AliasOut], summary="Aliases of an entity"
)
async def aliases(
    request: Request,
    tenant: Tenant,
    entity_id: EntityPath,
    limit: Limit = DEFAULT_LIMIT,
    offset: Offset = 0,
) -> Page[AliasOut]:
    """The ids merged directly into ``entity_id``, with the merge reason, ordered by id."""
    _window(limit, offset)
    found = await context_of(request).stores().graph.find_aliases(tenant, EntityId(entity_id))
    return _paged(AliasOut, found, limit, offset)


@router.get("/neighbors/{entity_id:path}", response_model=Page[EntityOut], summary="Neighbours")
async def neighbors(
    request: Request,
    tenant: Tenant,
    entity_id: EntityPath,
    resolve: Annotated[
        bool, Query(description="Resolve the id to its canonical id first.")
    ] = False,
    limit: Limit = DEFAULT_LIMIT,
    offset: Offset = 0,
) -> Page[EntityOut]:
    """Entities one edge away, either direction, ordered by id. Edges join
    canonical ids: pass ``resolve=true`` for an id from an older document."""
    _window(limit, offset)
    graph = context_of(request).stores().graph
    target = EntityId(entity_id)
    if resolve:
        target = (await graph.resolve_entity_ids(tenant, [target]))[target]
    found = await graph.neighbors(tenant, target)
    return _paged(EntityOut, found, limit, offset)


@router.get(
    "/relationships/{entity_id:path}",
    response_model=Page[RelationshipOut],
    summary="Relationships of an entity",
)
async def relationships(
    request: Request,
    tenant: Tenant,
    entity_id: EntityPath,
    direction: Annotated[
        Direction, Query(description="out: from the entity; in: to it; both.")
    ] = "both",
    type: TypeName = None,
    limit: Limit = DEFAULT_LIMIT,
    offset: Offset = 0,
) -> Page[RelationshipOut]:
    """The entity's edges (of one ``type`` if given), ordered by (source, target, type)."""
    _window(limit, offset)
    graph = context_of(request).stores().graph
    node = EntityId(entity_id)
    if direction == "out":
        found = await graph.get_relationships(tenant, source_id=node, rel_type=type)
    elif direction == "in":
        found = await graph.get_relationships(tenant, target_id=node, rel_type=type)
    else:
        found = await graph.get_relationships_for(tenant, [node])
        if type is not None:
            found = [edge for edge in found if edge.type == type]
    return _paged(RelationshipOut, found, limit, offset)


@router.post("/search", response_model=Page[SearchHit], summary="Vector search")
async def search(request: Request, tenant: Tenant, query: SearchRequest) -> Page[SearchHit]:
    """The nearest visible entities by cosine similarity (exact; the tenant and
    ``entity_type`` filtered before ranking), by ``vector`` or by ``text``
    embedded on the query side of the workers' model. Paged up to
    ``MAX_SEARCH_WINDOW`` hits."""
    stores = context_of(request).stores()
    vector = query.vector
    if vector is None:
        assert query.text is not None  # the model requires one of them
        vector = await stores.embedder.embed_query(query.text)
    # One more than the page, to know whether another follows.
    matches = await stores.vector.search(
        tenant, vector, query.offset + query.limit + 1, entity_type=query.entity_type
    )
    items, next_offset = _page(matches, query.limit, query.offset)
    if next_offset is not None and next_offset >= MAX_SEARCH_WINDOW:
        next_offset = None
    return Page[SearchHit](
        items=[SearchHit.of(m, query.include_vectors) for m in items],
        limit=query.limit,
        offset=query.offset,
        next_offset=next_offset,
    )


@router.get(
    "/position", response_model=ProjectionPosition, summary="Projection position (read-your-writes)"
)
async def position(
    request: Request,
    tenant: Tenant,
    offset: Annotated[
        int | None,
        Query(ge=0, description="An offset the producer's publish returned for this tenant."),
    ] = None,
    partition: Annotated[
        int | None,
        Query(
            ge=0,
            lt=100_000,
            description="The partition of that position (default: the tenant's, by the "
            "producers' partitioner and REDSTRING_PARTITIONS).",
        ),
    ] = None,
    wait_s: Annotated[
        float,
        Query(
            ge=0,
            le=300,
            description="Wait up to this long (capped by REDSTRING_SERVE_MAX_WAIT_S) for both "
            "stores to hold ``offset``.",
        ),
    ] = 0.0,
) -> ProjectionPosition:
    """Each store's checkpoint on the tenant's partition; with ``offset``,
    whether both hold it, waiting up to ``wait_s`` for them to (a 200 with
    ``projected: false`` when they do not by then)."""
    context = context_of(request)
    stores = context.stores()
    settings = context.settings
    own = partition_for(tenant, settings.partitions)
    if partition is None:
        partition = own
    elif partition != own:
        # Another partition's checkpoints are other tenants' progress, and
        # none of this tenant's events is there to wait for.
        raise ApiError(
            400,
            "invalid_request",
            f"this tenant's events are on partition {own} of {settings.topic}, "
            f"not {partition} (REDSTRING_PARTITIONS is {settings.partitions})",
        )
    stream = StreamPartition(settings.topic, partition)
    ledgers: list[ProjectionLedger] = [stores.graph, stores.vector]
    if offset is not None:
        try:
            await wait_until_projected(
                Position(settings.topic, partition, offset),
                ledgers,
                within=min(wait_s, settings.serve_max_wait_s),
            )
        except NotProjectedError:
            pass  # answered below: projected is false
    graph_at, vector_at = [await ledger.checkpoint(stream) for ledger in ledgers]
    projected = None if offset is None else graph_at >= offset and vector_at >= offset
    return ProjectionPosition(
        topic=settings.topic,
        partition=partition,
        graph_checkpoint=graph_at,
        vector_checkpoint=vector_at,
        offset=offset,
        projected=projected,
        rebuilding=await stores.graph.is_rebuilding(tenant),
    )
