"""``redstring serve``: run the tenant-scoped read API."""

from __future__ import annotations

import click

from streams.settings import Settings


@click.command("serve")
def serve_command() -> None:
    """Serve the tenant-scoped read API over HTTP (docs/readers.md).

    Every /v1/tenants/{tenant}/... route needs a bearer token (a JWT) whose
    tenant claim is that tenant, verified with REDSTRING_SERVE_JWT_KEY or the
    keys at REDSTRING_SERVE_JWKS_URL. The OpenAPI document is at
    /openapi.json; health at /livez and /readyz; metrics at /metrics (port
    REDSTRING_SERVE_PORT, default 8080). Logs are JSON lines on stderr.
    """
    import logging.config

    import uvicorn

    from streams.serve.app import create_app
    from streams.serve.auth import AuthConfigError
    from streams.worker.logs import configure

    settings = Settings()
    try:
        app = create_app(settings)
    except AuthConfigError as exc:
        raise click.ClickException(str(exc)) from None
    config = configure(settings.log_level)
    logging.config.dictConfig(config)
    uvicorn.run(
        app,
        host=settings.serve_host,
        port=settings.serve_port,
        log_config=config,
        # The app logs each request itself, as JSON with its route.
        access_log=False,
        proxy_headers=False,
    )
