"""The worker's OAUTHBEARER tokens (streams.kafka.oauth) against a token endpoint
served here: the client-credentials grant as librdkafka sends it, a token
reused until it nears its expiry, and a refusal that names the settings."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from streams.kafka.oauth import OidcTokenProvider, TokenError, principal_of, unsecured_jwt
from tests.oidc import TokenEndpoint as Endpoint
from tests.oidc import serving


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    with serving(Endpoint()) as served:
        yield served


async def test_a_token_is_fetched_once_and_reused(endpoint: Endpoint) -> None:
    provider = OidcTokenProvider(
        endpoint.url, "projector", "s3cret", "kafka", "logicalCluster=lkc-1,identityPoolId=p-2"
    )
    assert provider.extensions() == {"logicalCluster": "lkc-1", "identityPoolId": "p-2"}
    assert await provider.token() == "token-1"
    assert await provider.token() == "token-1"
    assert len(endpoint.requests) == 1
    form = endpoint.requests[0]["form"]
    assert form == {"grant_type": ["client_credentials"], "scope": ["kafka"]}


async def test_a_token_near_its_expiry_is_fetched_again(endpoint: Endpoint) -> None:
    endpoint.expires_in = 30  # inside the refresh margin: never reused
    provider = OidcTokenProvider(endpoint.url, "projector", "s3cret")
    assert await provider.token() == "token-1"
    assert await provider.token() == "token-2"
    assert "scope" not in endpoint.requests[0]["form"]


async def test_a_refused_client_names_the_settings(endpoint: Endpoint) -> None:
    provider = OidcTokenProvider(endpoint.url, "projector", "wrong")
    with pytest.raises(TokenError, match="REDSTRING_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET"):
        await provider.token()


def test_an_unsecured_jwt_carries_the_principal_and_an_expiry() -> None:
    header, claims, signature = unsecured_jwt("redstring", lifetime_s=60).split(".")

    def decoded(part: str) -> Any:
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))

    assert decoded(header) == {"alg": "none"} and signature == ""
    body = decoded(claims)
    assert body["sub"] == "redstring" and body["exp"] - body["iat"] == 60
    assert principal_of("scope=a principal=redstring") == "redstring"
    assert principal_of("scope=a") is None
