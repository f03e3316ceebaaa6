"""An OAuth 2 token endpoint (client-credentials grant) served in the test
process, for the OAUTHBEARER tests: it checks the client's HTTP Basic
credentials and answers with the token ``issue(n)`` makes for the n-th grant."""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class TokenEndpoint:
    def __init__(
        self,
        client_id: str = "projector",
        client_secret: str = "s3cret",
        issue: Callable[[int], str] = lambda n: f"token-{n}",
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        self.expires_in = 3600
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"])).decode()
                basic = self.headers.get("Authorization", "").removeprefix("Basic ")
                client = base64.b64decode(basic).decode() if basic else ""
                endpoint.requests.append({"form": urllib.parse.parse_qs(body), "client": client})
                if client != f"{client_id}:{client_secret}":
                    self.send_response(401)
                    self.end_headers()
                    return
                token = {
                    "access_token": issue(len(endpoint.requests)),
                    "token_type": "bearer",
                    "expires_in": endpoint.expires_in,
                }
                payload = json.dumps(token).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/token"


@contextmanager
def serving(endpoint: TokenEndpoint) -> Iterator[TokenEndpoint]:
    thread = threading.Thread(target=endpoint.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        endpoint.server.shutdown()
        endpoint.server.server_close()
