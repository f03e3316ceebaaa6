"""Bearer tokens of the read API: a JWT names the one tenant its holder may
read (docs/readers.md, "The HTTP API").

A token is verified against one configured key (an HS256 secret or a PEM
public key) or the keys of a JWKS URL, with its exp/nbf/iat, and its issuer
and audience when configured. The tenant is a claim
(``REDSTRING_SERVE_TENANT_CLAIM``), validated as a tenant id; comparing it
with the tenant a request names is the caller's part (``streams.serve.app``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import jwt
from jwt.algorithms import get_default_algorithms

from contracts.ids import TENANT_ID_PATTERN, TenantId
from streams.settings import Settings

#: Accepted when the key is asymmetric (a PEM public key or a JWKS), unless
#: REDSTRING_SERVE_JWT_ALGORITHMS narrows it.
ASYMMETRIC = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
SYMMETRIC = ("HS256", "HS384", "HS512")
MIN_SECRET_BYTES = 32


class AuthConfigError(ValueError):
    """The read API's token settings cannot work (named in the message)."""


class InvalidTokenError(Exception):
    """A request's token is missing or not acceptable; ``reason`` is a short
    label for the metric and the response (never the token itself)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        super().__init__(detail or reason)


class KeySourceUnavailableError(Exception):
    """The JWKS URL could not be read: no token can be checked just now."""


class TokenVerifier:
    """Verifies a bearer token and returns the tenant it is bound to."""

    def __init__(
        self,
        *,
        key: str = "",
        jwks_url: str | None = None,
        algorithms: Sequence[str] = (),
        issuer: str | None = None,
        audience: str | None = None,
        tenant_claim: str = "tenant_id",
        leeway_s: float = 30.0,
    ) -> None:
        if bool(key) == bool(jwks_url):
            raise AuthConfigError(
                "the read API needs exactly one of REDSTRING_SERVE_JWT_KEY (an HS256 secret "
                "or a PEM public key) and REDSTRING_SERVE_JWKS_URL"
            )
        asymmetric = bool(jwks_url) or key.lstrip().startswith("-----BEGIN")
        allowed = tuple(algorithms) or (ASYMMETRIC if asymmetric else ("HS256",))
        # An HMAC algorithm with a public key would let anyone who has the
        # public key sign tokens (the classic algorithm confusion); an
        # asymmetric one with a secret can verify nothing.
        wrong = [a for a in allowed if a not in (ASYMMETRIC if asymmetric else SYMMETRIC)]
        if wrong:
            kind = "a PEM public key or JWKS" if asymmetric else "a shared secret"
            raise AuthConfigError(
                f"REDSTRING_SERVE_JWT_ALGORITHMS: {', '.join(wrong)} cannot be used with "
                f"{kind}; allowed: {', '.join(ASYMMETRIC if asymmetric else SYMMETRIC)}"
            )
        if key and not asymmetric and len(key.encode()) < MIN_SECRET_BYTES:
            # RFC 7518 3.2: an HMAC key at least as long as the hash; a short
            # secret can be found by brute force from any one token.
            raise AuthConfigError(
                f"REDSTRING_SERVE_JWT_KEY: an HMAC secret needs at least {MIN_SECRET_BYTES} bytes"
            )
        if not tenant_claim:
            raise AuthConfigError("REDSTRING_SERVE_TENANT_CLAIM must name a claim")
        self._algorithms = allowed
        self._issuer = issuer
        self._audience = audience
        self._claim = tenant_claim
        self._leeway = leeway_s
        self._jwks = jwt.PyJWKClient(jwks_url, cache_keys=True, lifespan=300) if jwks_url else None
        # A PEM key is parsed once per algorithm, not on every request.
        self._keys: dict[str, Any] = {}
        if key and not asymmetric:
            self._keys = dict.fromkeys(allowed, key)
        elif key:
            for name in allowed:
                try:
                    self._keys[name] = get_default_algorithms()[name].prepare_key(key)
                except (jwt.InvalidKeyError, ValueError, TypeError):
                    continue  # e.g. an RSA key for ES256: tokens signed so are refused
            if not self._keys:
                raise AuthConfigError(
                    "REDSTRING_SERVE_JWT_KEY is not a PEM public key usable with "
                    f"{', '.join(allowed)}"
                )

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenVerifier:
        algorithms = [a.strip() for a in settings.serve_jwt_algorithms.split(",") if a.strip()]
        return cls(
            key=settings.serve_jwt_key.get_secret_value(),
            jwks_url=settings.serve_jwks_url,
            algorithms=algorithms,
            issuer=settings.serve_jwt_issuer,
            audience=settings.serve_jwt_audience,
            tenant_claim=settings.serve_tenant_claim,
            leeway_s=settings.serve_jwt_leeway_s,
        )

    async def tenant_of(self, authorization: str | None) -> TenantId:
        """The tenant of the ``Authorization`` header's bearer token.

        Raises:
            InvalidTokenError: no bearer token, or one that does not verify.
            KeySourceUnavailableError: the JWKS URL did not answer.
        """
        if not authorization:
            raise InvalidTokenError("missing", "no bearer token")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise InvalidTokenError("malformed", "the Authorization header is not 'Bearer <token>'")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            raise InvalidTokenError("malformed", "the token is not a JWT") from None
        algorithm = header.get("alg")
        if algorithm not in self._algorithms:
            raise InvalidTokenError("algorithm", "the token's algorithm is not accepted")
        key = await self._key_for(token, algorithm)
        claims = self._decode(token, key, algorithm)
        tenant = claims.get(self._claim)
        if not isinstance(tenant, str) or not TENANT_ID_PATTERN.fullmatch(tenant):
            raise InvalidTokenError("tenant", f"the token has no valid {self._claim!r} claim")
        return TenantId(tenant)

    async def _key_for(self, token: str, algorithm: str) -> Any:
        if self._jwks is None:
            key = self._keys.get(algorithm)
            if key is None:
                raise InvalidTokenError("algorithm", "the token's algorithm does not fit the key")
            return key
        try:
            # PyJWKClient reads the URL with blocking urllib; its cache makes
            # that rare, but it must never stall the event loop.
            signing = await asyncio.to_thread(self._jwks.get_signing_key_from_jwt, token)
        except jwt.PyJWKClientConnectionError as exc:
            raise KeySourceUnavailableError(str(exc)) from None
        except (jwt.PyJWKClientError, jwt.DecodeError):
            raise InvalidTokenError("key", "no published key matches the token") from None
        return signing.key

    def _decode(self, token: str, key: Any, algorithm: str) -> dict[str, Any]:
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                issuer=self._issuer,
                audience=self._audience,
                leeway=self._leeway,
                options={"require": ["exp"]},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidTokenError("expired", "the token has expired") from None
        except jwt.InvalidIssuerError:
            raise InvalidTokenError("issuer", "the token's issuer is not accepted") from None
        except jwt.InvalidAudienceError:
            raise InvalidTokenError("audience", "the token's audience is not accepted") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidTokenError("claims", f"the token lacks the {exc.claim!r} claim") from None
        except jwt.InvalidSignatureError:
            raise InvalidTokenError("signature", "the token's signature does not verify") from None
        except (jwt.InvalidTokenError, jwt.InvalidKeyError, ValueError, TypeError):
            raise InvalidTokenError("invalid", "the token is not valid") from None
        return claims
