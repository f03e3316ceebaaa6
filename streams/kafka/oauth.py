"""OAUTHBEARER tokens for the worker's aiokafka client (docs/design.md 7.3), from the
same settings librdkafka reads for its own OIDC support, so the CLI's clients
and the worker authenticate alike:

- ``sasl.oauthbearer.method=oidc``: the OAuth 2 client-credentials grant
  against ``sasl.oauthbearer.token.endpoint.url`` with
  ``sasl.oauthbearer.client.id``, the client secret
  (REDSTRING_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET) and, if set,
  ``sasl.oauthbearer.scope`` (RFC 6749, section 4.4: HTTP Basic client
  authentication, as librdkafka sends it);
- ``enable.sasl.oauthbearer.unsecure.jwt=true``: an unsigned JWT for the
  principal in ``sasl.oauthbearer.config`` (``principal=NAME``), which only a
  broker with Kafka's unsecured validator accepts: for tests.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from aiokafka.abc import AbstractTokenProvider

#: Fetch a new token this long before the one in hand expires.
REFRESH_MARGIN_S = 60.0


class TokenError(RuntimeError):
    """The token endpoint refused or answered something that is not a token;
    the message names the settings to fix."""


class OidcTokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    def __init__(
        self,
        endpoint: str,
        client_id: str,
        client_secret: str,
        scope: str | None = None,
        extensions: str | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.client_id = client_id
        self._secret = client_secret
        self.scope = scope
        #: SASL extensions, librdkafka's "key=value,key=value" form (Confluent
        #: Cloud's logicalCluster and identityPoolId).
        self._extensions = dict(
            item.split("=", 1) for item in (extensions or "").split(",") if "=" in item
        )
        self._token: str | None = None
        self._expires = 0.0
        self._lock = asyncio.Lock()

    def extensions(self) -> dict[str, str]:
        return dict(self._extensions)

    async def token(self) -> str:
        async with self._lock:
            token: str | None = self._token
            if token is None or time.time() > self._expires - REFRESH_MARGIN_S:
                fresh, self._expires = await asyncio.to_thread(self._fetch)
                self._token = token = fresh
            return token

    def _fetch(self) -> tuple[str, float]:
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        basic = base64.b64encode(f"{self.client_id}:{self._secret}".encode()).decode()
        request = urllib.request.Request(
            self.endpoint,
            data=urllib.parse.urlencode(form).encode(),
            headers={
                "Authorization": f"Basic {basic}",
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
            method="POST",
        )
        where = "REDSTRING_KAFKA__SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL"
        try:
            with urllib.request.urlopen(request, timeout=15) as response:
                body: Any = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise TokenError(
                f"the token endpoint {self.endpoint} answered {exc.code}: check "
                "REDSTRING_KAFKA__SASL_OAUTHBEARER_CLIENT_ID, "
                "REDSTRING_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET and "
                "REDSTRING_KAFKA__SASL_OAUTHBEARER_SCOPE"
            ) from None
        except (OSError, ValueError) as exc:
            raise TokenError(f"no token from {self.endpoint} ({where}): {exc}") from None
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise TokenError(f"{self.endpoint} ({where}) answered without an access_token")
        lifetime = body.get("expires_in")
        expires = time.time() + (float(lifetime) if isinstance(lifetime, int | float) else 300.0)
        return token, expires


def unsecured_jwt(principal: str, lifetime_s: float = 3600.0) -> str:
    """An unsigned JWT (``"alg": "none"``) for ``principal``."""

    def part(value: dict[str, Any]) -> str:
        raw = json.dumps(value, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    now = int(time.time())
    claims = {"sub": principal, "iat": now, "exp": now + int(lifetime_s)}
    return f"{part({'alg': 'none'})}.{part(claims)}."


class UnsecuredTokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    def __init__(self, principal: str) -> None:
        self.principal = principal

    async def token(self) -> str:
        return unsecured_jwt(self.principal)


def principal_of(config: str) -> str | None:
    """``principal`` of librdkafka's ``sasl.oauthbearer.config`` ("principal=a
    scope=b ...")."""
    for item in config.split():
        name, _, value = item.partition("=")
        if name == "principal" and value:
            return value
    return None
