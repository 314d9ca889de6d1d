"""The dashboard's HTTP server: stdlib ``ThreadingHTTPServer``, GET only, read-only.

Routes (``?token=T`` on each when a token is set):

- ``/``: the fleets; ``/api/fleets``: the same as JSON (``rows`` and the page body as ``html``);
- ``/fleet/NAME``: one fleet; ``/api/fleet/NAME``: its data (``status`` is exactly what
  ``fleet status NAME --json`` prints, ``interruptions`` what ``fleet history NAME
  --interruptions --json`` prints, ``plan_diffs`` what changed between its applied plans) and
  the page body as ``html``;
- ``/fleet/NAME/offers``: the offers the fleet's recorded spec would weigh (what ``fleet offers
  --spec`` lists, through the same use case); ``/api/fleet/NAME/offers``: the same as JSON.

The providers are asked (and the record reconciled) at most once per ``look_seconds`` per
fleet, not on every poll: within that time a poll reuses the last look (``status`` then says
``looked_at``, on the local clock) while everything read from the store (timeline, actions,
plans, charts) is read afresh. ``?refresh=1`` looks again at once.

Bound to a loopback address no token is needed, and a request whose ``Host`` is not a
loopback name is refused (a DNS-rebinding page cannot read it). Bound elsewhere, a random
token (``secrets.token_urlsafe``) is required on every request and compared in constant time.
Pages carry a Content-Security-Policy that allows only their own inline script and style (by
hash) and requests to this server.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from fleet.cli.app import App
from fleet.cli.lifecycle import readable_store
from fleet.dashboard import pages
from fleet.errors import FleetError, FleetNotFoundError
from fleet.safetext import safe_data, scrub_known
from fleet.simulate import saved
from fleet.views import history, plans
from fleet.views import offers as offers_view
from fleet.views.status import overview, snapshot

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def _csp() -> str:
    def digest(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    return (
        f"default-src 'none'; script-src {digest(pages.SCRIPT)}; style-src {digest(pages.STYLE)}; "
        "img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


CSP = _csp()


def is_loopback(bind: str) -> bool:
    if bind in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(bind).is_loopback
    except ValueError:
        return False


@dataclass
class Source:
    """Where the pages' data comes from: the store at ``app.state_url``, through :mod:`fleet.views`
    (each call opens the store and closes it again, so every request sees the latest record)."""

    app: App
    instance_limit: int = 200
    log_nodes: int = 5
    log_lines: int = 30
    #: Seconds a look at the providers serves polls before the next one is taken.
    look_seconds: float = 30.0
    #: Serialises looks at one fleet: two polls at once would both reconcile it.
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _looks: dict[str, tuple[float, Any]] = field(default_factory=dict)  # key -> (monotonic time, look)

    def _cached(self, key: str, refresh: bool, take: Any) -> Any:
        """``take()``'s result, reused for ``look_seconds`` (under the lock: one look at a time)."""
        with self._lock:
            got = self._looks.get(key)
            if refresh or got is None or time.monotonic() - got[0] > self.look_seconds:
                got = (time.monotonic(), take())
                self._looks[key] = got
            return got[1]

    def fleets(self, refresh: bool = False) -> dict[str, Any]:
        rows, hidden = self._cached("", refresh, lambda: overview(self.app, include_down=True))
        return {"rows": rows, "hidden": hidden, "where": self.app.state_url}

    def fleet(self, name: str, refresh: bool = False) -> dict[str, Any]:
        store, _ = readable_store(self.app)  # a store that cannot be written is read, as `fleet status` does
        try:
            status, view = self._cached(f"fleet:{name}", refresh, lambda: snapshot(self.app, store, name))
            recs = history.records_of(store, name)
            now = max((view.clock(r.provider) for r in recs.instances), default=view.read_at)
            return {
                "status": {**status, "looked_at": view.read_at},
                "plan_diffs": plans.diffs(store.applied_plans(name)),
                "simulation": saved.load(self.app.home, name),
                "interruptions": safe_data(history.interruptions(store, name, recs=recs)),
                "series": history.series(recs.instances, now),
                "actions": safe_data(history.actions(recs.events)),
                "logs": self._logs(store, view.record),
                "instance_limit": self.instance_limit,
            }
        finally:
            store.close()

    def offers(self, name: str, refresh: bool = False) -> dict[str, Any]:
        """The offers ``name``'s spec weighs (``fleet.views.offers``), asked of the providers at most
        once per ``look_seconds``."""
        store, _ = readable_store(self.app)
        try:
            record = store.get_fleet(name)
        finally:
            store.close()
        return {"fleet": name, **self._cached(f"offers:{name}", refresh, lambda: offers_view.weighed(self.app, record))}

    def _logs(self, store: Any, record: Any) -> dict[str, Any]:
        """The newest node logs as ``fleet logs`` reads them (their last lines), or why there are none."""
        from fleet import nodelogs
        from fleet.checkpoint.stores import open_store as open_bucket
        from providers.registry import local_cloud_root

        try:
            bucket = open_bucket(nodelogs.fleet_bucket(store, record, local_cloud_root(self.app.home)))
            logs = sorted(nodelogs.list_logs(bucket), key=lambda n: n.updated_at, reverse=True)[: self.log_nodes]
            nodes = []
            for meta in logs:
                got = nodelogs.read_log(bucket, meta.instance)
                if got is not None:
                    text = nodelogs.decode(nodelogs.last_lines(got[1], self.log_lines))
                    nodes.append(
                        {
                            "instance": meta.instance,
                            "size": meta.size,
                            "updated_at": meta.updated_at,
                            "final": meta.final,
                            "tail": text,
                        }
                    )
            return {"error": "", "nodes": nodes}
        except (FleetError, OSError) as err:
            return {"error": f"no node logs: {err}", "nodes": []}


class Dashboard(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, source: Source, bind: str, port: int, *, token: str | None = None, interval: float = 5.0):
        self.source = source
        self.token = token if token is not None else ("" if is_loopback(bind) else secrets.token_urlsafe(24))
        self.interval = interval
        self.loopback = is_loopback(bind)
        super().__init__((bind, port), Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = f"[{host}]" if ":" in str(host) else host
        return f"http://{shown}:{port}/" + (f"?token={quote(self.token)}" if self.token else "")


class Handler(BaseHTTPRequestHandler):
    server: Dashboard
    server_version = "spotfleet-dashboard"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet: the page polls
        pass

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET(head=True)

    def do_POST(self) -> None:  # noqa: N802
        self._send(405, "text/plain", b"read-only: GET only\n", extra={"Allow": "GET, HEAD"})

    do_PUT = do_DELETE = do_PATCH = do_POST

    def do_GET(self, head: bool = False) -> None:  # noqa: N802
        url = urlsplit(self.path)
        if not self._allowed(parse_qs(url.query).get("token", [""])[0]):
            return
        token = self.server.token
        parts = [unquote(p) for p in url.path.split("/") if p]
        refresh = parse_qs(url.query).get("refresh", [""])[0] == "1"
        try:
            if parts == []:
                data = self.server.source.fleets(refresh)
                body = pages.fleets_body(data["rows"], data["hidden"], data["where"], token)
                self._page("spotfleet fleets", body, pages.link("/api/fleets", token), head)
            elif parts == ["api", "fleets"]:
                data = self.server.source.fleets(refresh)
                self._json(
                    {**data, "html": pages.fleets_body(data["rows"], data["hidden"], data["where"], token)}, head
                )
            elif len(parts) == 2 and parts[0] == "fleet":
                data = self.server.source.fleet(parts[1], refresh)
                self._page(
                    f"fleet {parts[1]}",
                    pages.fleet_body(data, token),
                    pages.link("/api/fleet/" + quote(parts[1], safe=""), token),
                    head,
                )
            elif len(parts) == 3 and parts[0] == "fleet" and parts[2] == "offers":
                data = self.server.source.offers(parts[1], refresh)
                self._page(
                    f"offers for {parts[1]}",
                    pages.offers_body(data, token),
                    pages.link("/api/fleet/" + quote(parts[1], safe="") + "/offers", token),
                    head,
                )
            elif len(parts) == 4 and parts[:2] == ["api", "fleet"] and parts[3] == "offers":
                data = self.server.source.offers(parts[2], refresh)
                self._json({**data, "html": pages.offers_body(data, token)}, head)
            elif len(parts) == 3 and parts[:2] == ["api", "fleet"]:
                data = self.server.source.fleet(parts[2], refresh)
                self._json({**data, "html": pages.fleet_body(data, token)}, head)
            else:
                self._send(404, "text/plain", b"not found\n", head=head)
        except FleetNotFoundError as err:
            self._send(404, "text/plain", (scrub_known(str(err)) + "\n").encode(), head=head)
        except FleetError as err:
            self._send(500, "text/plain", (scrub_known(str(err)) + "\n").encode(), head=head)

    def _allowed(self, given: str) -> bool:
        if self.server.token:
            if not hmac.compare_digest(given.encode(), self.server.token.encode()):
                self._send(403, "text/plain", b"a token is required: open the URL `fleet dashboard` printed\n")
                return False
            return True
        host = urlsplit("//" + (self.headers.get("Host") or "")).hostname or ""
        if self.server.loopback and host not in LOOPBACK_NAMES:
            self._send(403, "text/plain", b"this dashboard answers loopback names only (localhost, 127.0.0.1)\n")
            return False
        return True

    def _page(self, title: str, body: str, api: str, head: bool) -> None:
        text = pages.page(title, body, api=api, interval=self.server.interval, token=self.server.token)
        self._send(200, "text/html; charset=utf-8", scrub_known(text).encode(), head=head)

    def _json(self, data: Any, head: bool) -> None:
        self._send(200, "application/json", scrub_known(json.dumps(data, default=str)).encode(), head=head)

    def _send(
        self, code: int, kind: str, body: bytes, *, head: bool = False, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", CSP)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the browser left (a closed tab, a new poll)
                pass
