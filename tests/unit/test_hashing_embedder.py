"""The deterministic hashing embedder used by tests and the demo."""

from __future__ import annotations

import math

from adapters.embedding import HashingEmbedder
from contracts.ports.embedder import Embedder


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_it_is_an_embedder_with_its_identity() -> None:
    embedder = HashingEmbedder()
    assert isinstance(embedder, Embedder)
    identity = embedder.identity
    assert (identity.model, identity.dimension) == ("redstring-hashing-v1", 384)
    assert (identity.document_prefix, identity.query_prefix) == ("passage: ", "query: ")


async def test_vectors_have_the_dimension_and_unit_length() -> None:
    embedder = HashingEmbedder(dimension=64)
    for vector in [
        *await embedder.embed_documents(["a", "Ada Lovelace"]),
        await embedder.embed_query("x"),
    ]:
        assert len(vector) == 64
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0)


async def test_it_is_deterministic_across_instances() -> None:
    first, second = HashingEmbedder(), HashingEmbedder()
    assert await first.embed_documents(["Ada Lovelace"]) == await second.embed_documents(
        ["Ada Lovelace"]
    )
    assert await first.embed_query("ada") == await second.embed_query("ada")


async def test_documents_and_queries_are_embedded_differently() -> None:
    embedder = HashingEmbedder()
    (document,) = await embedder.embed_documents(["Ada Lovelace"])
    assert document != await embedder.embed_query("Ada Lovelace")


async def test_similar_texts_land_near_each_other() -> None:
    embedder = HashingEmbedder()
    ada, babbage = await embedder.embed_documents(["Ada Lovelace", "Charles Babbage"])
    query = await embedder.embed_query("ada lovelace")
    assert cosine(ada, query) > cosine(babbage, query)
    assert cosine(ada, query) > 0.5


async def test_the_model_name_keys_the_hash() -> None:
    (one,) = await HashingEmbedder(model="one").embed_documents(["Ada Lovelace"])
    (two,) = await HashingEmbedder(model="two").embed_documents(["Ada Lovelace"])
    assert one != two


async def test_a_text_with_no_words_and_no_prefix_is_the_zero_vector() -> None:
    embedder = HashingEmbedder(dimension=8, document_prefix="", query_prefix="")
    assert await embedder.embed_query(" -- ") == [0.0] * 8
