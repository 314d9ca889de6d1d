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
* ``spotfleet_node_interruptions_total{pool,notice}``: nodes lost, by pool and the kind of
  notice that came first (``none`` without one), from the interruption timeline
  (``fleet.views.interruptions``), each node counted once;
* ``spotfleet_time_to_detect_seconds`` and ``spotfleet_time_to_replace_seconds``: histograms
  of those timelines (from the loss to the look that saw it; to the replacement's launch), and
  ``spotfleet_last_time_to_detect_seconds`` / ``..._replace_...``: the newest node's values;
* running spend: ``spotfleet_planned_per_hour_dollars`` (what the plan priced the running
  instances at), ``spotfleet_billed_per_hour_dollars`` (what their providers bill, for the
  ``spotfleet_billed_instances`` whose bill was read), ``spotfleet_cost_so_far_dollars``
  (this run, on the providers' clock) and ``spotfleet_bill_breaches`` (instances billed beyond
  the budget now);
* ``spotfleet_passes_total{result}`` (ok, short, busy, error),
  ``spotfleet_last_pass_timestamp_seconds``, ``spotfleet_last_pass_duration_seconds``,
  ``spotfleet_last_pass_ok`` (1 when the last pass ended at target).

Needs the ``metrics`` extra (``prometheus_client``).
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fleet.errors import FleetError
from fleet.rebalance.cycle import PassReport
from fleet.state import StateStore

#: Seconds: detection is a look's period away; a replacement a boot away.
DELAY_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 3600, 7200)


class Metrics:
    def __init__(self, fleet: str, *, stale_after: float = 3600.0):
        try:
            from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        except ImportError:
            raise FleetError("--metrics-port needs prometheus_client: pip install 'spotfleet[metrics]'") from None
        self.fleet = fleet
        self.stale_after = stale_after
        self.registry = CollectorRegistry()
        r = self.registry
        self.target = Gauge(
            "spotfleet_target_weighted_gpus", "Target capacity in weighted GPUs.", ["fleet"], registry=r
        )
        self.baseline = Gauge(
            "spotfleet_baseline_weighted_gpus", "On-demand baseline in weighted GPUs.", ["fleet"], registry=r
        )
        self.critical = Gauge(
            "spotfleet_critical_weighted_gpus", "On-demand fallback level in weighted GPUs.", ["fleet"], registry=r
        )
        self.running = Gauge(
            "spotfleet_running_weighted_gpus",
            "Weighted GPUs running after the last pass.",
            ["fleet", "provider", "market"],
            registry=r,
        )
        self.price = Gauge(
            "spotfleet_price_per_hour_dollars", "What the fleet costs per hour now.", ["fleet"], registry=r
        )
        self.interruptions = Counter("spotfleet_interruptions", "Spot instances lost.", ["fleet"], registry=r)
        self.actions = Counter(
            "spotfleet_actions", "Rebalancer actions.", ["fleet", "kind", "reason", "done"], registry=r
        )
        self.passes = Counter("spotfleet_passes", "Rebalancer passes by result.", ["fleet", "result"], registry=r)
        self.last_time = Gauge(
            "spotfleet_last_pass_timestamp_seconds", "When the last pass started.", ["fleet"], registry=r
        )
        self.last_duration = Gauge(
            "spotfleet_last_pass_duration_seconds", "How long the last pass took.", ["fleet"], registry=r
        )
        self.last_ok = Gauge("spotfleet_last_pass_ok", "1 when the last pass ended at target.", ["fleet"], registry=r)
        self.lost = Counter(
            "spotfleet_node_interruptions",
            "Nodes lost, by pool and the notice that came first.",
            ["fleet", "pool", "notice"],
            registry=r,
        )
        self.detect = Histogram(
            "spotfleet_time_to_detect_seconds",
            "From a node's loss to the look that saw it.",
            ["fleet"],
            buckets=DELAY_BUCKETS,
            registry=r,
        )
        self.replace = Histogram(
            "spotfleet_time_to_replace_seconds",
            "From a node's loss to its replacement's launch.",
            ["fleet"],
            buckets=DELAY_BUCKETS,
            registry=r,
        )
        self.last_detect = Gauge(
            "spotfleet_last_time_to_detect_seconds", "Time to detect of the newest lost node.", ["fleet"], registry=r
        )
        self.last_replace = Gauge(
            "spotfleet_last_time_to_replace_seconds",
            "Time to replace of the newest lost node replaced.",
            ["fleet"],
            registry=r,
        )
        self.planned = Gauge(
            "spotfleet_planned_per_hour_dollars",
            "What the plan priced the running instances at.",
            ["fleet"],
            registry=r,
        )
        self.billed = Gauge(
            "spotfleet_billed_per_hour_dollars",
            "What the providers bill for the running instances whose bill was read.",
            ["fleet"],
            registry=r,
        )
        self.billed_n = Gauge(
            "spotfleet_billed_instances", "Running instances whose bill was read.", ["fleet"], registry=r
        )
        self.cost = Gauge(
            "spotfleet_cost_so_far_dollars", "What this run of the fleet cost so far.", ["fleet"], registry=r
        )
        self.breaches = Gauge(
            "spotfleet_bill_breaches", "Running instances billed beyond the budget.", ["fleet"], registry=r
        )
        self._counted: set[str] = set()  # lost nodes counted
        self._detected: set[str] = set()
        self._replaced: set[str] = set()
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

    def observe_store(self, store: StateStore, report: PassReport) -> None:
        """After a pass: the interruption timeline and the running spend from the store (each
        lost node counted once, its delays observed once each, as they become known)."""
        from fleet.provisioning.accounting import summarize
        from fleet.views import history

        recs = history.records_of(store, self.fleet)
        timeline = history.interruptions(store, self.fleet, recs=recs)["interruptions"]
        self.record_timeline(timeline)
        alive = [r for r in recs.instances if r.alive]
        read = [r for r in alive if r.billed_per_hour is not None]
        f = self.fleet
        self.planned.labels(f).set(sum(r.price_per_hour for r in alive))
        self.billed.labels(f).set(sum(r.billed_per_hour or 0.0 for r in read))
        self.billed_n.labels(f).set(len(read))
        self.cost.labels(f).set(summarize(recs.instances, report.now).cost_so_far if report.now else 0.0)
        self.breaches.labels(f).set(len(report.bill_breaches))

    def record_timeline(self, items: list[dict[str, Any]]) -> None:
        """Count the nodes of ``items`` (``fleet.views.interruptions`` dicts) not counted yet."""
        f = self.fleet
        newest_detect = newest_replace = None
        for item in sorted(items, key=lambda i: i["lost_at"]):
            iid = item["instance_id"]
            if iid not in self._counted:
                self._counted.add(iid)
                self.lost.labels(f, item["pool"], item["notice_kind"] or "none").inc()
            if item["detect_seconds"] is not None and iid not in self._detected:
                self._detected.add(iid)
                self.detect.labels(f).observe(item["detect_seconds"])
                newest_detect = item["detect_seconds"]
            if item["replace_seconds"] is not None and iid not in self._replaced:
                self._replaced.add(iid)
                self.replace.labels(f).observe(item["replace_seconds"])
                newest_replace = item["replace_seconds"]
        if newest_detect is not None:
            self.last_detect.labels(f).set(newest_detect)
        if newest_replace is not None:
            self.last_replace.labels(f).set(newest_replace)

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
                    self._send(
                        200 if ok else 503,
                        b"ok\n" if ok else b"stale: no successful pass lately\n",
                        "text/plain; charset=utf-8",
                    )
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
