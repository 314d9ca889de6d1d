"""Prometheus metrics and a health endpoint for the looping rebalancer (``--metrics-port``).

Served on one port by a small threaded HTTP server: ``/metrics`` (Prometheus text format,
from a registry of its own) and ``/healthz`` (200 ``ok`` while passes succeed; 503 once no
pass has succeeded for ``stale_after`` seconds, so a Kubernetes liveness probe restarts a
stuck rebalancer). Metrics, all labelled with ``fleet``:

* ``spotfleet_target_weighted_gpus``, ``spotfleet_baseline_weighted_gpus``,
  ``spotfleet_critical_weighted_gpus``: what the spec asks for;
* ``spotfleet_running_weighted_gpus{provider,market}``: what runs after the last pass;
* ``spotfleet_price_per_hour_dollars``: the fleet's $/h now;
* ``spotfleet_interruptions_total``: spot instances lost, as the passes recorded them;
* ``spotfleet_actions_total{kind,reason,done}``: actions taken;
* ``spotfleet_passes_total{result}`` (ok, short, busy, error),
  ``spotfleet_last_pass_timestamp_seconds``, ``spotfleet_last_pass_duration_seconds``,
  ``spotfleet_last_pass_ok`` (1 when the last pass ended at target).

Needs the ``metrics`` extra (``prometheus_client``).
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from fleet.errors import FleetError
from fleet.rebalance.cycle import PassReport


class Metrics:
    def __init__(self, fleet: str, *, stale_after: float = 3600.0):
        try:
            from prometheus_client import CollectorRegistry, Counter, Gauge
        except ImportError:
            raise FleetError("--metrics-port needs prometheus_client: pip install 'spotfleet[metrics]'") from None
        self.fleet = fleet
        self.stale_after = stale_after
        self.registry = CollectorRegistry()
        r = self.registry
        self.target = Gauge("spotfleet_target_weighted_gpus", "Target capacity in weighted GPUs.", ["fleet"], registry=r)
        self.baseline = Gauge("spotfleet_baseline_weighted_gpus", "On-demand baseline in weighted GPUs.", ["fleet"],
                              registry=r)
        self.critical = Gauge("spotfleet_critical_weighted_gpus", "On-demand fallback level in weighted GPUs.",
                              ["fleet"], registry=r)
        self.running = Gauge("spotfleet_running_weighted_gpus", "Weighted GPUs running after the last pass.",
                             ["fleet", "provider", "market"], registry=r)
        self.price = Gauge("spotfleet_price_per_hour_dollars", "What the fleet costs per hour now.", ["fleet"],
                           registry=r)
        self.interruptions = Counter("spotfleet_interruptions", "Spot instances lost.", ["fleet"], registry=r)
        self.actions = Counter("spotfleet_actions", "Rebalancer actions.", ["fleet", "kind", "reason", "done"],
                               registry=r)
        self.passes = Counter("spotfleet_passes", "Rebalancer passes by result.", ["fleet", "result"], registry=r)
        self.last_time = Gauge("spotfleet_last_pass_timestamp_seconds", "When the last pass started.", ["fleet"],
                               registry=r)
        self.last_duration = Gauge("spotfleet_last_pass_duration_seconds", "How long the last pass took.", ["fleet"],
                                   registry=r)
        self.last_ok = Gauge("spotfleet_last_pass_ok", "1 when the last pass ended at target.", ["fleet"], registry=r)
        self._server: ThreadingHTTPServer | None = None
        self._last_success: float | None = None
        self._started = time.time()

    # ---- recording -------------------------------------------------------------------
    def observe(self, report: PassReport, started: float) -> None:
        """Record a pass that ran (``started``: its start, epoch seconds)."""
        f = self.fleet
        self.target.labels(f).set(report.decision.target_weighted_gpus)
        self.baseline.labels(f).set(report.baseline_weighted_gpus)
        self.critical.labels(f).set(report.critical_weighted_gpus)
        self.running.clear()
        for (provider, market), weighted in report.running.items():
            self.running.labels(f, provider, market).set(weighted)
        self.price.labels(f).set(report.price_per_hour)
        self.interruptions.labels(f).inc(report.interruptions)
        for r in report.results:
            self.actions.labels(f, r.action.kind, getattr(r.action, "reason", "raise-bid"), str(r.done).lower()).inc()
        result = "ok" if report.at_target else "short"
        self._finish(result, started)
        self._last_success = time.time()

    def failed(self, result: str, started: float) -> None:
        """A pass that did not run (``busy``) or failed (``error``)."""
        self._finish(result, started)

    def _finish(self, result: str, started: float) -> None:
        self.passes.labels(self.fleet, result).inc()
        self.last_time.labels(self.fleet).set(started)
        self.last_duration.labels(self.fleet).set(time.time() - started)
        self.last_ok.labels(self.fleet).set(1 if result == "ok" else 0)

    def healthy(self) -> bool:
        last = self._last_success if self._last_success is not None else self._started
        return time.time() - last <= self.stale_after

    # ---- serving ---------------------------------------------------------------------
    def serve(self, port: int, host: str = "0.0.0.0") -> int:
        """Start serving in a daemon thread; returns the port (useful with 0)."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        metrics = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/health"):
                    ok = metrics.healthy()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"stale: no successful pass lately\n",
                               "text/plain; charset=utf-8")
                else:
                    self._send(404, b"not found; try /metrics or /healthz\n", "text/plain; charset=utf-8")

            def _send(self, code: int, body: bytes, kind: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
        except OSError as err:
            raise FleetError(f"--metrics-port {port}: cannot listen ({err.strerror}); pick another port") from None
        threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True).start()
        return self._server.server_address[1]

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
