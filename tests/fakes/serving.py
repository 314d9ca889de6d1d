"""What every HTTP fake in tests/fakes shares: a JSON request handler and a background server.

:class:`JsonHandler` reads a JSON body (``None`` when it is not JSON), sends a JSON answer (or a
"malformed 200" body from ``tests/fakes/malformed.py`` instead, when a fault asks for one) and
sends every verb to ``_route(method)``. :class:`BackgroundServer` serves a handler class bound to
one ``state`` object on a daemon thread: ``url`` once started, ``stop()`` to end it;
:func:`serve_main` is the command line every fake runs on its own with.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

try:
    import malformed
except ImportError:  # imported as tests.fakes.serving
    from . import malformed


class JsonHandler(BaseHTTPRequestHandler):
    """Subclasses set ``server_version``, ``WRONG_TYPES`` (malformed target -> body) and ``_route``;
    ``_headers`` adds what every answer of a vendor carries (request ids, rate limits)."""

    protocol_version = "HTTP/1.1"
    WRONG_TYPES: dict[str, bytes] = {}
    state: Any

    def log_message(self, fmt: str, *args: Any) -> None:
        pass

    def _raw_body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _body(self) -> Any:
        raw = self._raw_body()
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return None

    def _headers(self) -> dict[str, str]:
        return {}

    def _send(
        self,
        status: int,
        data: Any = None,
        headers: dict[str, str] | None = None,
        broken: dict[str, Any] | None = None,
        ctype: str = "application/json",
    ) -> None:
        """``data`` as JSON (``None``: no body, as for a 204), with ``headers`` after ``_headers()``."""
        raw = json.dumps(data).encode() if data is not None else b""
        if broken is not None:  # a "malformed" fault: this body instead of the real one
            raw, ctype = malformed.body(broken["variant"], raw, self.WRONG_TYPES[broken["target"]], ctype)
        self.send_response(status)
        if raw:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(raw)))
        for k, v in {**self._headers(), **(headers or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)

    def _route(self, method: str) -> None:
        raise NotImplementedError

    def do_GET(self) -> None:  # noqa: N802
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._route("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._route("DELETE")

    def do_PATCH(self) -> None:  # noqa: N802
        self._route("PATCH")


class BackgroundServer:
    """``handler`` bound to ``state``, served on a daemon thread."""

    def __init__(self, handler: type[JsonHandler], state: Any, port: int = 0, host: str = "127.0.0.1"):
        self.state = state
        bound = type("BoundHandler", (handler,), {"state": state})
        self.httpd = ThreadingHTTPServer((host, port), bound)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self):
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def serve_main(make: Callable[[int, str, float], BackgroundServer], *, what: str, port: int, key: str) -> None:
    """The command line of a fake (``--port``, ``--host``, ``--latency``): serve until interrupted."""
    parser = argparse.ArgumentParser(description=f"A fake {what} for tests and benchmarks.")
    parser.add_argument("--port", type=int, default=port)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every API answer")
    args = parser.parse_args()
    server = make(args.port, args.host, args.latency)
    print(f"fake {what} on {server.url} (key {key!r}); control API under /_control/", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
