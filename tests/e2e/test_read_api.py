"""`redstring serve` against the real stores, over real HTTP: two tenants'
data written through the ports, every route tried with each tenant's token,
the other tenant's (403), and no, bad or expired tokens (401); a fuzz of the
OpenAPI document's paths and queries never fails and never shows another
tenant's data; read-your-writes waits for the stores' checkpoints; the
process logs JSON (docs/readers.md, "The HTTP API")."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts.domain import StreamPartition
from contracts.ids import TenantId
from streams.kafka.partitioning import partition_for
from streams.settings import Settings
from streams.wiring import open_stores
from tests.e2e.conftest import TENANT_PREFIX, TOPIC_PREFIX, settings_for
from tests.serve_support import SECRET, bearer, calls, seed, tenants_in, token

pytestmark = pytest.mark.services

PARTITIONS = 3


@dataclass
class Server:
    url: str
    settings: Settings
    tenants: tuple[TenantId, TenantId]
    dimension: int
    log: Path

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def _seed(settings: Settings, tenants: tuple[TenantId, ...]) -> int:
    stores = await open_stores(settings)
    try:
        for tenant in tenants:
            await seed(tenant, stores.graph, stores.vector, stores.embedder)
        return stores.vector.dimension
    finally:
        await stores.aclose()


@pytest.fixture(scope="module")
def server(e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    name = uuid.uuid4().hex[:6]
    env = {
        **e2e_env,
        "REDSTRING_TOPIC": f"{TOPIC_PREFIX}serve-{name}",
        "REDSTRING_PARTITIONS": str(PARTITIONS),
        "REDSTRING_SERVE_HOST": "127.0.0.1",
        "REDSTRING_SERVE_PORT": str(_free_port()),
        "REDSTRING_SERVE_JWT_KEY": SECRET,
        # Bounds the fuzz's read-your-writes waits too.
        "REDSTRING_SERVE_MAX_WAIT_S": "3",
    }
    settings = settings_for(env, partitions=PARTITIONS)
    tenants = (
        TenantId(f"{TENANT_PREFIX}serve-a-{name}"),
        TenantId(f"{TENANT_PREFIX}serve-b-{name}"),
    )
    dimension = asyncio.run(_seed(settings, tenants))
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "streams", "serve"],
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{env['REDSTRING_SERVE_PORT']}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield Server(url, settings, tenants, dimension, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _send(client: httpx.Client, call: Any, tenant: str, **kw: Any) -> httpx.Response:
    return client.request(call.method, call.url(tenant), params=call.params, json=call.json, **kw)


def test_every_route_answers_its_own_tenant_only(server: Server) -> None:
    with server.client() as client:
        for tenant in server.tenants:
            for call in calls(server.dimension):
                response = _send(client, call, tenant, headers=bearer(token(tenant)))
                assert response.status_code == 200, (call, response.text)
                assert tenants_in(response.json()) <= {tenant}, call
        a = server.tenants[0]
        ada = client.get(f"/v1/tenants/{a}/entities/ada", headers=bearer(token(a))).json()
        assert (ada["name"], ada["properties"]) == ("Ada Lovelace", {"marker": a})
        near = client.get(
            f"/v1/tenants/{a}/neighbors/ada-old",
            params={"resolve": "true"},
            headers=bearer(token(a)),
        ).json()
        assert [e["id"] for e in near["items"]] == ["babbage", "engine é 1"]
        hits = client.post(
            f"/v1/tenants/{a}/search",
            json={"text": "Ada Lovelace", "limit": 10},
            headers=bearer(token(a)),
        ).json()
        ids = [h["id"] for h in hits["items"]]
        assert ids[0] == "ada" and "ada-old" not in ids and len(ids) == 4


def test_every_route_refuses_the_other_tenants_token_and_counts_it(server: Server) -> None:
    a, b = server.tenants
    with server.client() as client:
        before = _metric(client, "redstring_serve_forbidden_total")
        refused = 0
        for mine, theirs in ((a, b), (b, a)):
            for call in calls(server.dimension):
                response = _send(client, call, theirs, headers=bearer(token(mine)))
                assert response.status_code == 403, (call, response.text)
                assert response.json()["error"]["code"] == "forbidden"
                assert "marker" not in response.text
                refused += 1
        assert _metric(client, "redstring_serve_forbidden_total") == before + refused


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer"}, bearer("not.a.jwt"), "expired", "wrong-secret"],
    ids=["none", "empty", "garbage", "expired", "wrong-secret"],
)
def test_every_route_refuses_a_missing_or_invalid_token(server: Server, headers: Any) -> None:
    with server.client() as client:
        for tenant in server.tenants:
            if headers == "expired":
                sent = bearer(token(tenant, expires_in=-120))
            elif headers == "wrong-secret":
                sent = bearer(token(tenant, secret="not-the-servers-secret-32-bytes!!"))
            else:
                sent = headers
            for call in calls(server.dimension):
                response = _send(client, call, tenant, headers=sent)
                assert response.status_code == 401, (call, response.text)
                assert "marker" not in response.text


def test_read_your_writes_waits_for_both_stores(server: Server) -> None:
    a = server.tenants[0]
    partition = partition_for(a, PARTITIONS)
    stream = StreamPartition(server.settings.topic, partition)

    async def advance(offset: int) -> None:
        stores = await open_stores(server.settings)
        try:
            await stores.graph.advance_checkpoint(stream, offset)
            await stores.vector.advance_checkpoint(stream, offset)
        finally:
            await stores.aclose()

    with server.client() as client:
        url, auth = f"/v1/tenants/{a}/position", bearer(token(a))
        before = client.get(url, params={"offset": 41}, headers=auth).json()
        assert before["partition"] == partition and before["projected"] is False
        # The stores reach offset 41 while the request waits.
        timer = threading.Timer(0.5, lambda: asyncio.run(advance(41)))
        timer.start()
        started = time.monotonic()
        after = client.get(url, params={"offset": 41, "wait_s": 20}, headers=auth).json()
        timer.join()
        assert after["projected"] is True, after
        assert (after["graph_checkpoint"], after["vector_checkpoint"]) == (41, 41)
        assert 0.4 < time.monotonic() - started < 20
        capped = client.get(url, params={"offset": 99, "wait_s": 0.3}, headers=auth).json()
        assert capped["projected"] is False


_ODD = st.sampled_from(["", "0", "-1", "1001", "1e9", "true", "%00", "..", "a/b", "ada", "é"])
_VALUE = _ODD | st.text(max_size=30) | st.integers(-(2**63), 2**63).map(str)


@st.composite
def _requests(draw: st.DrawFn, document: dict[str, Any], tenants: list[str]) -> Any:
    path, item = draw(st.sampled_from(sorted(document["paths"].items())))
    method = draw(st.sampled_from(sorted(item)))
    url, params = path, []
    for parameter in item[method].get("parameters", []):
        name = parameter["name"]
        if parameter["in"] == "path":
            value = draw(st.sampled_from(tenants) | _VALUE) if name == "tenant" else draw(_VALUE)
            url = url.replace(f"{{{name}}}", quote(value, safe="" if name == "tenant" else "/"))
        elif draw(st.booleans()):
            params.append((name, draw(_VALUE)))
    body = None
    if "requestBody" in item[method]:
        body = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "text": _VALUE,
                    "vector": st.lists(st.sampled_from([0.0, 1.0, -0.5]), max_size=400),
                    "limit": st.integers(-2, 1200),
                    "offset": st.integers(-2, 1200),
                    "entity_type": _VALUE,
                },
            )
        )
    return method.upper(), url, params, body


def test_fuzzed_paths_and_queries_never_fail_or_cross_tenants(server: Server) -> None:
    a, b = server.tenants
    with server.client() as client:
        document = client.get("/openapi.json").json()
        auth = bearer(token(a))

        # Several requests per example: the services profile runs few examples.
        @settings(suppress_health_check=list(HealthCheck))
        @given(batch=st.lists(_requests(document, [a, b, a]), min_size=8, max_size=8))
        def fuzz(batch: list[Any]) -> None:
            for method, url, params, body in batch:
                response = client.request(method, url, params=params, json=body, headers=auth)
                assert response.status_code < 500, (method, url, params, body, response.text)
                assert tenants_in(response.json()) <= {a}, (url, response.text)
                if not url.startswith(f"/v1/tenants/{a}/"):
                    assert response.status_code in (403, 404), url

        fuzz()


def test_health_metrics_and_json_logs(server: Server) -> None:
    with server.client() as client:
        assert client.get("/livez").json() == {"live": True}
        assert client.get("/readyz").json() == {"ready": True, "reasons": []}
        assert "redstring_serve_requests_total" in client.get("/metrics").text
    lines = [line for line in server.log.read_text().splitlines() if line.startswith("{")]
    records = [json.loads(line) for line in lines]
    requests = [r for r in records if r.get("msg") == "request"]
    assert requests and {"method", "route", "status", "ms", "ts", "level"} <= set(requests[-1])


def _metric(client: httpx.Client, name: str) -> float:
    total = 0.0
    for line in client.get("/metrics").text.splitlines():
        if line.startswith((name + "{", name + " ")):
            total += float(line.rsplit(" ", 1)[1])
    return total
