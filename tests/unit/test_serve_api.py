"""The read API over the in-memory stores (no servers): every route answers
its tenant, refuses another tenant's token (403, counted) and a missing or
bad token (401), maps the ports' errors, and no fuzzed path or query makes it
fail or show another tenant's data (docs/readers.md, "The HTTP API")."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import quote

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from adapters.embedding import HashingEmbedder
from adapters.memory.graph import InMemoryGraphStore
from adapters.memory.vector import InMemoryVectorStore
from contracts.errors import TenantIsolationError, TransientStoreError
from contracts.ids import TenantId
from streams.serve.app import Readers, create_app
from streams.serve.auth import AuthConfigError, InvalidTokenError, TokenVerifier
from streams.settings import Settings
from tests.serve_support import SECRET, bearer, calls, seed, tenants_in, token

A, B = TenantId("acme"), TenantId("globex")
DIMENSION = 16


def settings(**overrides: Any) -> Settings:
    return Settings(serve_jwt_key=SECRET, topic="events", partitions=3, **overrides)


@pytest.fixture
async def readers() -> AsyncIterator[Readers]:
    graph = InMemoryGraphStore()
    embedder = HashingEmbedder(dimension=DIMENSION)
    vector = InMemoryVectorStore(embedder.identity)
    for tenant in (A, B):
        await seed(tenant, graph, vector, embedder)

    async def close() -> None:
        await graph.aclose()
        await vector.aclose()

    yield Readers(graph, vector, embedder, close)  # type: ignore[arg-type]
    await close()


@pytest.fixture
async def client(readers: Readers) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings(), readers=readers)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        yield client


async def send(client: httpx.AsyncClient, call: Any, tenant: str, **kw: Any) -> httpx.Response:
    return await client.request(
        call.method, call.url(tenant), params=call.params, json=call.json, **kw
    )


def metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


# -- each route answers its tenant -------------------------------------------------


async def test_every_route_of_the_openapi_document_is_tried(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    routes = {
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if path.startswith("/v1/tenants/")
    }
    tried = set()
    for call in calls(DIMENSION):
        first = call.path.split("/")[1]
        for method, path in routes:
            under = path.removeprefix("/v1/tenants/{tenant}")
            if method == call.method and under.split("/")[1] == first:
                tried.add((method, path))
    assert tried == routes


@pytest.mark.parametrize("call", calls(DIMENSION), ids=lambda c: f"{c.method} {c.path}")
async def test_each_route_answers_only_its_tenant(client: httpx.AsyncClient, call: Any) -> None:
    for tenant in (A, B):
        response = await send(client, call, tenant, headers=bearer(token(tenant)))
        assert response.status_code == 200, response.text
        assert tenants_in(response.json()) <= {tenant}


async def test_answers(client: httpx.AsyncClient) -> None:
    auth = bearer(token(A))
    ada = (await client.get("/v1/tenants/acme/entities/ada", headers=auth)).json()
    assert ada == {
        "tenant_id": "acme",
        "id": "ada",
        "name": "Ada Lovelace",
        "type": "Person",
        "properties": {"marker": "acme"},
    }
    slash = await client.get("/v1/tenants/acme/entities/org/royal-society", headers=auth)
    assert slash.json()["name"] == "Royal Society"
    batch = await client.get(
        "/v1/tenants/acme/entities", params=[("id", "babbage"), ("id", "x")], headers=auth
    )
    assert [e["id"] for e in batch.json()["items"]] == ["babbage"]
    assert batch.json()["missing"] == ["x"]
    people = await client.get(
        "/v1/tenants/acme/entities", params={"type": "Person", "limit": 2}, headers=auth
    )
    assert [e["id"] for e in people.json()["items"]] == ["ada", "ada-old"]
    assert people.json()["next_offset"] == 2
    rest = await client.get(
        "/v1/tenants/acme/entities", params={"type": "Person", "offset": 2}, headers=auth
    )
    assert [e["id"] for e in rest.json()["items"]] == ["babbage"]
    assert rest.json()["next_offset"] is None
    resolved = await client.get("/v1/tenants/acme/resolve", params={"id": "ada-old"}, headers=auth)
    assert resolved.json() == {"ids": {"ada-old": "ada"}}
    aliases = await client.get("/v1/tenants/acme/aliases/ada", headers=auth)
    assert [(a["alias_id"], a["reason"]) for a in aliases.json()["items"]] == [("ada-old", "same")]
    near = await client.get(
        "/v1/tenants/acme/neighbors/ada-old", params={"resolve": "true"}, headers=auth
    )
    assert [e["id"] for e in near.json()["items"]] == ["babbage", "engine é 1"]
    engine = quote("engine é 1", safe="")
    into = await client.get(
        f"/v1/tenants/acme/relationships/{engine}", params={"direction": "in"}, headers=auth
    )
    assert [(r["source_id"], r["type"]) for r in into.json()["items"]] == [
        ("ada", "WROTE_ABOUT"),
        ("babbage", "DESIGNED"),
    ]
    out = await client.get(
        "/v1/tenants/acme/relationships/babbage",
        params={"direction": "out", "type": "MEMBER_OF"},
        headers=auth,
    )
    assert [r["target_id"] for r in out.json()["items"]] == ["org/royal-society"]
    hits = await client.post(
        "/v1/tenants/acme/search", json={"text": "Ada Lovelace", "limit": 10}, headers=auth
    )
    ids = [h["id"] for h in hits.json()["items"]]
    assert ids[0] == "ada" and "ada-old" not in ids  # merged away: hidden from search
    assert hits.json()["next_offset"] is None


async def test_search_pages_and_vectors(client: httpx.AsyncClient) -> None:
    auth = bearer(token(A))
    url = "/v1/tenants/acme/search"
    whole = (await client.post(url, json={"text": "engine", "limit": 4}, headers=auth)).json()
    first = (await client.post(url, json={"text": "engine", "limit": 2}, headers=auth)).json()
    second = (
        await client.post(url, json={"text": "engine", "limit": 2, "offset": 2}, headers=auth)
    ).json()
    assert first["next_offset"] == 2 and second["next_offset"] is None
    assert [h["id"] for h in first["items"] + second["items"]] == [h["id"] for h in whole["items"]]
    with_vectors = await client.post(
        url, json={"vector": [1.0] * DIMENSION, "include_vectors": True}, headers=auth
    )
    assert all(len(h["vector"]) == DIMENSION for h in with_vectors.json()["items"])
    wrong = await client.post(url, json={"vector": [1.0, 2.0]}, headers=auth)
    assert wrong.status_code == 400 and "dimension" in wrong.json()["error"]["message"]
    both = await client.post(url, json={"vector": [1.0], "text": "x"}, headers=auth)
    assert both.status_code == 422 and both.json()["error"]["code"] == "invalid_request"


async def test_position_and_read_your_writes(client: httpx.AsyncClient, readers: Readers) -> None:
    from contracts.domain import StreamPartition
    from streams.kafka.partitioning import partition_for

    auth = bearer(token(A))
    mine = partition_for(A, 3)
    at = await client.get("/v1/tenants/acme/position", headers=auth)
    assert at.json() == {
        "topic": "events",
        "partition": mine,
        "graph_checkpoint": -1,
        "vector_checkpoint": -1,
        "offset": None,
        "projected": None,
        "rebuilding": False,
    }
    stream = StreamPartition("events", mine)
    await readers.graph.advance_checkpoint(stream, 7)  # type: ignore[attr-defined]
    started = time.monotonic()
    waiting = await client.get(
        "/v1/tenants/acme/position", params={"offset": 7, "wait_s": 0.2}, headers=auth
    )
    assert waiting.json()["projected"] is False  # the vector store is behind
    assert time.monotonic() - started >= 0.2
    await readers.vector.advance_checkpoint(stream, 9)  # type: ignore[attr-defined]
    done = await client.get(
        "/v1/tenants/acme/position", params={"offset": 7, "wait_s": 5}, headers=auth
    )
    assert done.json()["projected"] is True
    assert (done.json()["graph_checkpoint"], done.json()["vector_checkpoint"]) == (7, 9)


async def test_errors_have_one_shape(client: httpx.AsyncClient) -> None:
    auth = bearer(token(A))
    missing = await client.get("/v1/tenants/acme/entities/nobody", headers=auth)
    assert missing.status_code == 404
    assert missing.json() == {"error": {"code": "not_found", "message": "no such entity"}}
    deep = await client.get(
        "/v1/tenants/acme/entities", params={"offset": 9999, "limit": 2}, headers=auth
    )
    assert deep.status_code == 400
    both = await client.get(
        "/v1/tenants/acme/entities", params={"id": "ada", "type": "Person"}, headers=auth
    )
    assert both.status_code == 400
    for params in ({"limit": 0}, {"limit": 1001}, {"offset": -1}, {"type": "1bad"}):
        bad = await client.get("/v1/tenants/acme/entities", params=params, headers=auth)
        assert bad.status_code == 422, params
        assert bad.json()["error"]["code"] == "invalid_request"


# -- the token decides the tenant ----------------------------------------------------


@pytest.mark.parametrize("call", calls(DIMENSION), ids=lambda c: f"{c.method} {c.path}")
async def test_another_tenants_token_is_refused_and_counted(
    client: httpx.AsyncClient, call: Any
) -> None:
    before = metric((await client.get("/metrics")).text, "redstring_serve_forbidden_total")
    response = await send(client, call, A, headers=bearer(token(B)))
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert "acme" not in response.text and "globex" not in response.text
    after = metric((await client.get("/metrics")).text, "redstring_serve_forbidden_total")
    assert after == before + 1


def bad_tokens() -> dict[str, dict[str, str]]:
    none = jwt.encode({"tenant_id": A, "exp": int(time.time()) + 60}, None, algorithm="none")
    return {
        "none": {},
        "empty": {"Authorization": ""},
        "basic": {"Authorization": "Basic YWNtZTpwdw=="},
        "garbage": bearer("not.a.jwt"),
        "wrong secret": bearer(token(A, secret="another-secret-of-32-bytes-or-more!")),
        "expired": bearer(token(A, expires_in=-120)),
        "no tenant claim": bearer(token(A, tenant_id=None)),
        "invalid tenant claim": bearer(token(A, tenant_id="ACME")),
        "alg none": bearer(none),
        "no exp": bearer(jwt.encode({"tenant_id": A}, SECRET, algorithm="HS256")),
        "audience": bearer(token(A, aud="someone")),
    }


@pytest.mark.parametrize("name", bad_tokens())
async def test_a_missing_or_invalid_token_is_401_on_every_route(
    client: httpx.AsyncClient, name: str
) -> None:
    headers = bad_tokens()[name]
    for call in calls(DIMENSION):
        for tenant in (A, "NOT A TENANT"):
            response = await send(client, call, tenant, headers=headers)
            assert response.status_code == 401, (call, response.text)
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert response.json()["error"]["code"] == "unauthorized"


async def test_operations_need_no_token(client: httpx.AsyncClient) -> None:
    assert (await client.get("/livez")).json() == {"live": True}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"ready": True, "reasons": []}
    await client.get("/v1/tenants/acme/entities/ada", headers=bearer(token(A)))
    text = (await client.get("/metrics")).text
    assert (
        'redstring_serve_requests_total{method="GET",route="/v1/tenants/{tenant}/entities/'
        '{entity_id:path}",status="200"} 1.0'
    ) in text


async def test_store_errors_map_to_status(
    client: httpx.AsyncClient, readers: Readers, monkeypatch: pytest.MonkeyPatch
) -> None:
    auth = bearer(token(A))

    async def unavailable(*args: Any) -> None:
        raise TransientStoreError("down")

    async def leaked(*args: Any) -> None:
        raise TenantIsolationError("acme", "globex", "get_entity")

    monkeypatch.setattr(readers.graph, "get_entity", unavailable)
    down = await client.get("/v1/tenants/acme/entities/ada", headers=auth)
    assert down.status_code == 503 and down.headers["retry-after"]
    monkeypatch.setattr(readers.graph, "get_entity", leaked)
    leak = await client.get("/v1/tenants/acme/entities/ada", headers=auth)
    assert leak.status_code == 500 and "globex" not in leak.text
    monkeypatch.setattr(readers.graph, "checkpoint", unavailable)
    ready = await client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["reasons"] == ["graph store: TransientStoreError"]


# -- fuzzed paths and queries ---------------------------------------------------------

_ODD = st.sampled_from(
    ["", "0", "-1", "1001", "10000", "1e9", "true", "nan", "%00", "..", "a/b", "acme", "globex"]
)
_VALUE = _ODD | st.text(max_size=40) | st.integers(-(2**63), 2**63).map(str)


@st.composite
def fuzzed_requests(draw: st.DrawFn, document: dict[str, Any]) -> tuple[str, str, Any, Any]:
    """A request of a route of the OpenAPI document, its path and query
    parameters drawn from odd values (the tenant is acme's most of the time,
    so that the route's own validation is reached)."""
    path, item = draw(st.sampled_from(sorted(document["paths"].items())))
    method = draw(st.sampled_from(sorted(item)))
    params: list[tuple[str, str]] = []
    url = path
    for parameter in item[method].get("parameters", []):
        name = parameter["name"]
        if parameter["in"] == "path":
            value = "acme" if name == "tenant" and draw(st.booleans()) else draw(_VALUE)
            url = url.replace(f"{{{name}}}", quote(value, safe="/" if name != "tenant" else ""))
        elif parameter["in"] == "query" and draw(st.booleans()):
            params.extend((name, draw(_VALUE)) for _ in range(draw(st.integers(1, 3))))
    body = None
    if "requestBody" in item[method]:
        body = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "text": st.text(max_size=20) | st.integers(),
                    "vector": st.lists(
                        st.floats(allow_nan=False, allow_infinity=False, width=32), max_size=20
                    ),
                    "limit": st.integers(-5, 2000),
                    "offset": st.integers(-5, 2000),
                    "entity_type": _VALUE,
                },
            )
        )
    return method.upper(), url, params, body


_DOCUMENT = create_app(settings()).openapi()


@pytest.mark.parametrize(
    "url", ["/v1/tenants/acme/aliases/", "/v1/tenants/acme/aliases/.", "/v1/tenants/acme/"]
)
async def test_a_stray_trailing_slash_is_an_error_in_the_apis_shape(
    client: httpx.AsyncClient, url: str
) -> None:
    """Found by the fuzzed requests below: Starlette answered 307 with an
    empty body, which a client reading JSON cannot parse."""
    response = await client.get(url, headers=bearer(token(A)))
    assert response.status_code in (404, 422)  # no such route, or an empty id
    assert set(response.json()) == {"error"}


# Several requests per example, through the whole ASGI stack: no deadline, which
# a loaded shared machine would make flaky without making the check stronger.
@hypothesis_settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(fuzzed_requests(_DOCUMENT), min_size=3, max_size=3))
async def test_fuzzed_requests_never_fail_and_never_cross_tenants(
    client: httpx.AsyncClient, batch: list[tuple[str, str, Any, Any]]
) -> None:
    for method, url, params, body in batch:
        response = await client.request(
            method, url, params=params, json=body, headers=bearer(token(A))
        )
        assert response.status_code < 500, response.text
        if response.status_code == 200:
            assert tenants_in(response.json()) <= {A}
        else:
            assert set(response.json()) == {"error"}
        if not url.startswith("/v1/tenants/acme/"):
            assert response.status_code in (403, 404), url


# -- token verification --------------------------------------------------------------


async def test_a_pem_public_key_verifies_asymmetric_tokens_only() -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    verifier = TokenVerifier(key=public, issuer="https://issuer", audience="redstring")
    claims = {"tenant_id": "acme", "exp": int(time.time()) + 60}
    good = jwt.encode({**claims, "iss": "https://issuer", "aud": "redstring"}, private, "RS256")
    assert await verifier.tenant_of(f"Bearer {good}") == "acme"
    for bad, reason in [
        (
            jwt.encode({**claims, "iss": "https://other", "aud": "redstring"}, private, "RS256"),
            "issuer",
        ),
        (
            jwt.encode({**claims, "iss": "https://issuer", "aud": "other"}, private, "RS256"),
            "audience",
        ),
        (jwt.encode({**claims, "iss": "https://issuer"}, private, "RS256"), "claims"),
        # Signed with the public key as an HMAC secret: the algorithm confusion.
        (jwt.encode(claims, "x" * 32, "HS256"), "algorithm"),
    ]:
        with pytest.raises(InvalidTokenError) as caught:
            await verifier.tenant_of(f"Bearer {bad}")
        assert caught.value.reason == reason
    other = ec.generate_private_key(ec.SECP256R1())
    with pytest.raises(InvalidTokenError) as caught:
        await verifier.tenant_of(f"Bearer {jwt.encode(claims, other, 'ES256')}")
    assert caught.value.reason == "algorithm"  # an RSA key verifies no ES256 token
    with pytest.raises(AuthConfigError, match="HS256"):
        TokenVerifier(key=public, algorithms=["HS256"])
    with pytest.raises(AuthConfigError, match="exactly one"):
        TokenVerifier()
    with pytest.raises(AuthConfigError, match="RS256"):
        TokenVerifier(key="a secret", algorithms=["RS256"])
    with pytest.raises(AuthConfigError, match="at least 32 bytes"):
        TokenVerifier(key="a short secret")


@pytest.fixture
def jwks_server() -> Iterator[tuple[str, Any]]:
    private = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(private.public_key()))
    body = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "ES256"}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/jwks.json", private
    finally:
        server.shutdown()
        server.server_close()


async def test_jwks_keys_verify_tokens_by_kid(jwks_server: tuple[str, Any]) -> None:
    url, private = jwks_server
    verifier = TokenVerifier(jwks_url=url)
    claims = {"tenant_id": "globex", "exp": int(time.time()) + 60}
    good = jwt.encode(claims, private, "ES256", headers={"kid": "k1"})
    assert await verifier.tenant_of(f"Bearer {good}") == "globex"
    unknown = jwt.encode(claims, private, "ES256", headers={"kid": "k2"})
    with pytest.raises(InvalidTokenError) as caught:
        await verifier.tenant_of(f"Bearer {unknown}")
    assert caught.value.reason == "key"
    forged = jwt.encode(
        claims, ec.generate_private_key(ec.SECP256R1()), "ES256", headers={"kid": "k1"}
    )
    with pytest.raises(InvalidTokenError) as caught:
        await verifier.tenant_of(f"Bearer {forged}")
    assert caught.value.reason == "signature"


async def test_position_refuses_a_partition_that_is_not_the_tenants(
    client: httpx.AsyncClient,
) -> None:
    from streams.kafka.partitioning import partition_for

    auth = bearer(token(A))
    mine = partition_for(A, 3)
    other = (mine + 1) % 3
    refused = await client.get(
        "/v1/tenants/acme/position", params={"partition": other}, headers=auth
    )
    assert refused.status_code == 400
    assert f"partition {mine}" in refused.json()["error"]["message"]
    same = await client.get("/v1/tenants/acme/position", params={"partition": mine}, headers=auth)
    assert same.status_code == 200 and same.json()["partition"] == mine


async def test_an_answer_the_api_cannot_build_is_a_500_not_a_400(
    client: httpx.AsyncClient, readers: Readers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store's value that the response model refuses is the server's fault:
    pydantic's ValidationError is a ValueError, which would otherwise answer
    400 as if the request were wrong."""
    from pydantic import BaseModel

    class Strict(BaseModel):
        n: int

    async def odd(*args: Any) -> None:
        Strict.model_validate({"n": "not a number"})

    monkeypatch.setattr(readers.graph, "get_entity", odd)
    answer = await client.get("/v1/tenants/acme/entities/ada", headers=auth_for_a())
    assert answer.status_code == 500
    assert answer.json()["error"]["code"] == "internal"


def auth_for_a() -> dict[str, str]:
    return bearer(token(A))
