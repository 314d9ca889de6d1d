"""A local fake of the Vast.ai REST API, written from the documented wire format.

Runs on its own (``python tests/fakes/vast_server.py --port 8790 [--latency 0.05]``) or in a
test (``VastServer(port=0).start()``). It speaks what the official client sends and reads:

- ``POST /api/v0/bundles/``                 search: ``{field: {op: value}}`` filters (eq neq gt gte
  lt lte in notin), ``order``, ``type`` (``bid`` lists only machines that take bids), ``limit``,
  ``allocated_storage`` -> ``{"offers": [...]}``; no key needed.
- ``PUT /api/v0/asks/{id}/``                create; ``price`` makes a bid. A bid under ``min_bid``
  still creates a STOPPED instance and answers ``success: false`` with its ``new_contract``
  (with ``cancel_unavail`` it creates nothing, unless a ``failed-bid`` fault says it slipped).
- ``GET /api/v1/instances/``                ``select_filters``, ``order_by``, ``limit`` (at most 25),
  ``after_token`` -> ``{"instances": [...], "next_token": ..., "total_instances": n}``.
- ``GET /api/v0/instances/{id}/?owner=me``  ``{"instances": {...}}``.
- ``PUT /api/v0/instances/bid_price/{id}/`` change a bid; at or above ``min_bid`` an outbid
  instance runs again.
- ``DELETE /api/v0/instances/{id}/``        destroy (404 ``no_such_instance`` when gone).

Errors are ``{"success": false, "error": code, "msg": text}``; 429 carries ``Retry-After``;
every API answer can be delayed by a fixed ``latency``. Each ask is one machine's bundle with
``capacity`` rentals (default 1). Instances boot ``loading`` -> ``running`` after ``boot_seconds``.

Control API for tests (no auth): ``POST /_control/reset``, ``POST /_control/asks`` (add or
replace asks), ``POST /_control/asks/{id}`` (change fields: capacity, min_bid, ...; two change what a
create bills: ``bill_markup`` adds that many USD/h to the new instance's ``dph_total`` (a host that
repriced between the search and the rental), ``drops_bid: true`` rents on-demand whatever the
create's ``price`` (``is_bid`` false, ``dph_total`` the on-demand price), as vast-cli #403 saw when
a bid did not reach the API),
``POST /_control/faults`` (``{"target": "ask:<id>"|"search"|"list"|"create"|"*", "kind":
"throttle"|"search-quota"|"server-error"|"auth"|"quota"|"capacity"|"failed-bid"|"hostile", "count": n}``;
``hostile`` answers 400 with a message echoing the request's ``Authorization`` header, terminal
escape sequences and a forged line;
the "malformed 200" fault is ``{"target": "list"|"search", "kind": "malformed", "variant":
"truncated"|"html"|"empty"|"wrong-types", "count": n}``: the next n instance listings or offer
searches answer 200 with that body instead (``tests/fakes/malformed.py``; wrong types: a mapping
where the ``instances`` or ``offers`` list belongs); ``POST /_control/faults/clear`` drops every
pending fault),
``POST /_control/outbid`` (``{"ids": [...]}``: a higher bid takes the machine), ``POST
/_control/foreign`` (instances without a spotfleet label), ``POST /_control/config``
(``latency``, ``boot_seconds``, ``retry_after``), ``GET /_control/instances`` (all, destroyed
too, with their create bodies) and ``GET /_control/calls`` (API calls per route).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

try:
    import malformed
    from serving import BackgroundServer, JsonHandler, serve_main
except ImportError:  # imported as tests.fakes.vast_server
    from . import malformed
    from .serving import BackgroundServer, JsonHandler, serve_main

API_KEY = "fake-vast-key"
HOURS_PER_MONTH = 730.0

#: Asks served when none are configured: a spread of GPUs, hosts and prices.
SEED_ASKS: list[dict[str, Any]] = [
    {
        "id": 1001,
        "machine_id": 501,
        "num_gpus": 1,
        "gpu_name": "H100 SXM",
        "gpu_ram": 81559,
        "dph_base": 2.20,
        "min_bid": 1.10,
        "reliability2": 0.995,
        "geolocation": "Texas, US",
    },
    {
        "id": 1002,
        "machine_id": 502,
        "num_gpus": 2,
        "gpu_name": "H100 SXM",
        "gpu_ram": 81559,
        "dph_base": 4.30,
        "min_bid": 2.00,
        "reliability2": 0.99,
        "geolocation": "Quebec, CA",
    },
    {
        "id": 1003,
        "machine_id": 503,
        "num_gpus": 8,
        "gpu_name": "H100 SXM",
        "gpu_ram": 81559,
        "dph_base": 17.0,
        "min_bid": 8.50,
        "reliability2": 0.985,
        "geolocation": "Oregon, US",
    },
    {
        "id": 1004,
        "machine_id": 504,
        "num_gpus": 1,
        "gpu_name": "RTX 4090",
        "gpu_ram": 24564,
        "dph_base": 0.40,
        "min_bid": 0.18,
        "reliability2": 0.97,
        "geolocation": "Bavaria, DE",
    },
    {
        "id": 1005,
        "machine_id": 505,
        "num_gpus": 4,
        "gpu_name": "RTX 4090",
        "gpu_ram": 24564,
        "dph_base": 1.55,
        "min_bid": 0.70,
        "reliability2": 0.98,
        "geolocation": "Ontario, CA",
    },
    {
        "id": 1006,
        "machine_id": 506,
        "num_gpus": 2,
        "gpu_name": "A100 SXM4",
        "gpu_ram": 81920,
        "dph_base": 2.40,
        "min_bid": 1.05,
        "reliability2": 0.99,
        "geolocation": "Texas, US",
    },
    {
        "id": 1007,
        "machine_id": 507,
        "num_gpus": 1,
        "gpu_name": "H200",
        "gpu_ram": 143771,
        "dph_base": 3.10,
        "min_bid": None,
        "reliability2": 0.995,
        "geolocation": "Utah, US",
    },
    {
        "id": 1008,
        "machine_id": 508,
        "num_gpus": 1,
        "gpu_name": "RTX 4090",
        "gpu_ram": 24564,
        "dph_base": 0.35,
        "min_bid": 0.15,
        "reliability2": 0.80,
        "geolocation": "Guangdong, CN",
    },
]

ASK_DEFAULTS: dict[str, Any] = {
    "capacity": 1,
    "storage_cost": 0.15,
    "inet_down": 800.0,
    "inet_up": 500.0,
    "cuda_max_good": 12.4,
    "verification": "verified",
    "verified": True,
    "external": False,
    "disk_space": 500.0,
    "cpu_cores_effective": 16.0,
    "cpu_ram": 128_000,
    "min_bid": None,
    "reliability2": 0.99,
}

FAULTS = {
    "throttle": (429, "rate_limit_exceeded", "API requests too frequent"),
    "search-quota": (429, "search_quota_exceeded", "search quota exceeded; resets in 60 s"),
    "server-error": (500, "server_error", "internal server error"),
    "auth": (401, "auth_error", "Invalid user key"),
    "quota": (402, "insufficient_credit", "Your account lacks credit; see the billing page"),
    "capacity": (404, "no_such_ask", "Instance type no longer available"),
    # a hostile or careless gateway: it echoes the request's Authorization header and the key,
    # sets the terminal title, clears the screen and forges a line of spotfleet's own output
    "hostile": (
        400,
        "invalid_args",
        "rejected request with Authorization: {authorization} (key {key})"
        "\x1b]0;pwned\x07\x1b[2J\r\nfake line: fleet is up",
    ),
}

#: The "wrong-types" malformed body per target: a mapping where the answer's list belongs.
WRONG_TYPES = {
    "list": b'{"instances": {"id": 9000001, "label": "spotfleet"}, "next_token": null}',
    "search": b'{"offers": {"id": 1001, "num_gpus": "one"}}',
}


class State:
    """Everything the fake knows; every method runs under ``lock``."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.reset()

    def reset(self, asks: list[dict[str, Any]] | None = None) -> None:
        with self.lock:
            self.asks: dict[int, dict[str, Any]] = {}
            for ask in SEED_ASKS if asks is None else asks:
                self.put_ask(ask)
            self.instances: dict[int, dict[str, Any]] = {}
            self.faults: list[dict[str, Any]] = []
            self.calls: dict[str, int] = {}
            self.next_id = 9_000_001
            self.latency = getattr(self, "latency", 0.0)
            self.boot_seconds = getattr(self, "boot_seconds", 0.0)
            self.retry_after = 0

    def put_ask(self, ask: dict[str, Any]) -> None:
        row = {**ASK_DEFAULTS, **ask}
        row.setdefault("machine_id", row["id"])
        self.asks[int(row["id"])] = row

    def live_on(self, ask_id: int) -> int:
        return sum(
            1
            for i in self.instances.values()
            if i["_ask"] == ask_id and not i["_destroyed"] and i["cur_state"] == "running"
        )

    def rentable(self, ask: dict[str, Any]) -> bool:
        return self.live_on(int(ask["id"])) < int(ask["capacity"])

    def take_fault(self, targets: tuple[str, ...]) -> dict[str, Any] | None:
        for fault in self.faults:
            if fault["count"] > 0 and fault["target"] in targets:
                fault["count"] -= 1
                return fault
        return None

    def offer_row(self, ask: dict[str, Any], storage_gb: float) -> dict[str, Any]:
        storage = float(ask["storage_cost"]) * storage_gb / HOURS_PER_MONTH
        row = {k: v for k, v in ask.items() if k not in ("capacity", "drops_bid", "bill_markup")}
        row.update(
            ask_contract_id=ask["id"],
            dph_total=round(float(ask["dph_base"]) + storage, 6),
            rentable=self.rentable(ask),
            rented=False,
            storage_total_cost=round(storage, 6),
        )
        return row

    def instance_row(self, inst: dict[str, Any]) -> dict[str, Any]:
        row = {k: v for k, v in inst.items() if not k.startswith("_")}
        ask = self.asks.get(inst["_ask"])
        if ask is not None:  # the machine's current price to beat
            row["min_bid"] = ask.get("min_bid")
        if row["actual_status"] == "loading" and time.time() - row["start_date"] >= self.boot_seconds:
            inst["actual_status"] = row["actual_status"] = "running"
        return row


def _match(value: Any, cond: Any) -> bool:
    if not isinstance(cond, dict):
        return value == cond
    for op, want in cond.items():
        try:
            ok = {
                "eq": lambda: value == want,
                "neq": lambda: value != want,
                "gt": lambda: value is not None and value > want,
                "gte": lambda: value is not None and value >= want,
                "lt": lambda: value is not None and value < want,
                "lte": lambda: value is not None and value <= want,
                "in": lambda: value in want,
                "notin": lambda: value not in want,
            }[op]()
        except (KeyError, TypeError):
            return False
        if not ok:
            return False
    return True


class Handler(JsonHandler):
    server_version = "fake-vast/1"
    WRONG_TYPES = WRONG_TYPES
    state: State

    # ---- plumbing ---------------------------------------------------------------------------
    def _error(self, status: int, code: str, msg: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, {"success": False, "error": code, "msg": msg}, headers)

    def _fault(self, fault: dict[str, Any]) -> None:
        status, code, msg = FAULTS[fault["kind"]]
        if fault["kind"] == "hostile":
            auth = self.headers.get("Authorization") or ""
            msg = msg.format(authorization=auth, key=auth.removeprefix("Bearer "))
        headers = {"Retry-After": str(fault.get("retry_after", self.state.retry_after))} if status == 429 else None
        self._error(status, code, msg, headers)

    def _authed(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {API_KEY}":
            return True
        self._error(401, "auth_error", "Invalid user key")
        return False

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        path = url.path if url.path.endswith("/") else url.path + "/"
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = self._body() if method in ("POST", "PUT", "DELETE", "PATCH") else {}
        if body is None:
            return self._error(400, "invalid_args", "body is not JSON")
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["_control"]:
            return self._control(method, parts[1:], body)
        with self.state.lock:
            latency = self.state.latency
            route = f"{method} /{'/'.join(p if not p.isdigit() else '{id}' for p in parts)}/"
            self.state.calls[route] = self.state.calls.get(route, 0) + 1
        if latency:
            time.sleep(latency)
        with self.state.lock:
            fault = self.state.take_fault(("*",))
            if fault is not None:
                return self._fault(fault)
            if method == "POST" and parts == ["api", "v0", "bundles"]:
                return self._search(body)
            if method == "PUT" and parts[:3] == ["api", "v0", "asks"] and len(parts) == 4:
                return self._create(int(parts[3]), body) if self._authed() else None
            if method == "GET" and parts == ["api", "v1", "instances"]:
                return self._list(query) if self._authed() else None
            if parts[:4] == ["api", "v0", "instances", "bid_price"] and method == "PUT" and len(parts) == 5:
                return self._bid(int(parts[4]), body) if self._authed() else None
            if parts[:3] == ["api", "v0", "instances"] and len(parts) == 4 and parts[3].isdigit():
                if not self._authed():
                    return None
                if method == "GET":
                    return self._show(int(parts[3]))
                if method == "DELETE":
                    return self._destroy(int(parts[3]))
            return self._error(404, "not_found", f"no route {method} {url.path}")

    # ---- the API ----------------------------------------------------------------------------
    def _search(self, body: dict[str, Any]) -> None:
        st = self.state
        fault = st.take_fault(("search",))
        if fault is not None and fault["kind"] != "malformed":
            return self._fault(fault)
        kind = body.get("type", "on-demand")
        storage_gb = float(body.get("allocated_storage") or 10)
        rows = []
        for ask in st.asks.values():
            if kind == "bid" and ask.get("min_bid") is None:
                continue
            row = st.offer_row(ask, storage_gb)
            special = {"order", "type", "limit", "allocated_storage"}
            if all(_match(row.get(k), v) for k, v in body.items() if k not in special):
                rows.append(row)
        for col, direction in reversed(body.get("order") or []):
            rows.sort(key=lambda r: (r.get(col) is None, r.get(col) or 0), reverse=direction == "desc")
        self._send(200, {"offers": rows[: int(body.get("limit") or 64)]}, broken=fault)

    def _create(self, ask_id: int, body: dict[str, Any]) -> None:
        st = self.state
        fault = st.take_fault((f"ask:{ask_id}", "create"))
        if fault is not None and fault["kind"] != "failed-bid":
            return self._fault(fault)
        ask = st.asks.get(ask_id)
        if ask is None or not st.rentable(ask):
            return self._error(404, "no_such_ask", "Instance type no longer available")
        if not isinstance(body.get("image"), str) or not body.get("image"):
            return self._error(400, "invalid_args", "image is required")
        price = None if ask.get("drops_bid") else body.get("price")
        is_bid = price is not None
        if is_bid and ask.get("min_bid") is None:
            return self._error(400, "invalid_args", "this machine does not take interruptible bids")
        forced = fault is not None and fault["kind"] == "failed-bid"
        below = is_bid and (float(price) < float(ask["min_bid"]) or forced)
        if below and body.get("cancel_unavail") and not forced:
            return self._send(
                200,
                {
                    "success": False,
                    "error": "invalid_price",
                    "msg": f"bid {price} is below the minimum {ask['min_bid']}",
                },
            )
        iid = st.next_id
        st.next_id += 1
        disk = float(body.get("disk") or 10)
        env = body.get("env") or {}
        st.instances[iid] = {
            "id": iid,
            "machine_id": ask["machine_id"],
            "num_gpus": ask["num_gpus"],
            "gpu_name": ask["gpu_name"],
            "gpu_ram": ask["gpu_ram"],
            "label": body.get("label"),
            "is_bid": is_bid,
            "min_bid": ask.get("min_bid"),
            "reliability2": ask["reliability2"],
            "dph_base": ask["dph_base"],
            "dph_total": round(float(price) if is_bid else float(ask["dph_base"]), 6)
            + round(float(ask["storage_cost"]) * disk / HOURS_PER_MONTH, 6)
            + float(ask.get("bill_markup") or 0),
            "storage_cost": ask["storage_cost"],
            "disk_space": disk,
            "geolocation": ask["geolocation"],
            "image_uuid": body.get("image"),
            "actual_status": "stopped" if below else "loading",
            "intended_status": "stopped" if below else "running",
            "cur_state": "stopped" if below else "running",
            "next_state": "stopped" if below else "running",
            "status_msg": "bid below minimum" if below else "",
            "start_date": time.time(),
            "extra_env": [[k, v] for k, v in env.items()],
            "ports": {},
            "_ask": ask_id,
            "_bid": price,
            "_destroyed": False,
            "_body": body,
        }
        if below:
            return self._send(
                200,
                {
                    "success": False,
                    "new_contract": iid,
                    "error": "invalid_price",
                    "msg": f"bid {price} is below the minimum {ask['min_bid']}",
                },
            )
        self._send(200, {"success": True, "new_contract": iid})

    def _mine(self) -> list[dict[str, Any]]:
        return [i for i in self.state.instances.values() if not i["_destroyed"]]

    def _list(self, query: dict[str, str]) -> None:
        fault = self.state.take_fault(("list",))
        if fault is not None and fault["kind"] != "malformed":
            return self._fault(fault)
        try:
            filters = json.loads(query.get("select_filters") or "{}")
            limit = max(1, min(25, int(json.loads(query.get("limit") or "25"))))
        except ValueError:
            return self._error(400, "invalid_args", "select_filters and limit must be JSON")
        after = 0
        if query.get("after_token"):
            try:
                after = int(base64.urlsafe_b64decode(query["after_token"].encode()).decode())
            except ValueError:
                return self._error(400, "invalid_args", "bad after_token")
        rows = [self.state.instance_row(i) for i in sorted(self._mine(), key=lambda i: i["id"])]
        rows = [r for r in rows if all(_match(r.get(k), v) for k, v in filters.items())]
        total = len(rows)
        rows = [r for r in rows if r["id"] > after]
        page = rows[:limit]
        token = base64.urlsafe_b64encode(str(page[-1]["id"]).encode()).decode() if len(rows) > limit else None
        self._send(200, {"instances": page, "next_token": token, "total_instances": total}, broken=fault)

    def _show(self, iid: int) -> None:
        inst = self.state.instances.get(iid)
        if inst is None or inst["_destroyed"]:
            return self._error(404, "no_such_instance", f"no instance {iid}")
        self._send(200, {"instances": self.state.instance_row(inst)})

    def _bid(self, iid: int, body: dict[str, Any]) -> None:
        inst = self.state.instances.get(iid)
        if inst is None or inst["_destroyed"]:
            return self._error(404, "no_such_instance", f"no instance {iid}")
        try:
            price = float(body["price"])
        except (KeyError, TypeError, ValueError):
            return self._error(400, "invalid_args", "price is required")
        ask = self.state.asks.get(inst["_ask"], {})
        inst["_bid"] = price
        inst["dph_total"] = round(price + float(inst["storage_cost"]) * inst["disk_space"] / HOURS_PER_MONTH, 6)
        if ask.get("min_bid") is not None and price >= float(ask["min_bid"]):
            inst.update(
                cur_state="running",
                intended_status="running",
                next_state="running",
                actual_status="running",
                status_msg="",
            )
        self._send(200, {"success": True})

    def _destroy(self, iid: int) -> None:
        inst = self.state.instances.get(iid)
        if inst is None or inst["_destroyed"]:
            return self._error(404, "no_such_instance", f"no instance {iid}")
        inst["_destroyed"] = True
        inst["_destroyed_at"] = time.time()
        self._send(200, {"success": True})

    # ---- control ----------------------------------------------------------------------------
    def _control(self, method: str, parts: list[str], body: Any) -> None:
        st = self.state
        with st.lock:
            if parts == ["reset"]:
                st.reset(body.get("asks") if isinstance(body, dict) else None)
                return self._send(200, {"ok": True})
            if parts == ["asks"] and method == "POST":
                for ask in body.get("asks", []):
                    st.put_ask(ask)
                return self._send(200, {"ok": True})
            if parts == ["asks"] and method == "GET":
                return self._send(200, {"asks": [{**a, "live": st.live_on(a["id"])} for a in st.asks.values()]})
            if len(parts) == 2 and parts[0] == "asks":
                ask = st.asks.get(int(parts[1]))
                if ask is None:
                    return self._error(404, "no_such_ask", "no such ask")
                ask.update(body)
                return self._send(200, {"ok": True})
            if parts == ["faults", "clear"]:
                st.faults.clear()
                return self._send(200, {"ok": True})
            if parts == ["faults"]:
                fault = {"target": "*", "count": 1, **body}
                if fault["kind"] == "malformed":
                    if fault["target"] not in WRONG_TYPES or fault.get("variant") not in malformed.VARIANTS:
                        return self._error(
                            400,
                            "invalid_args",
                            "a malformed fault needs target list|search and a "
                            f"variant of {', '.join(malformed.VARIANTS)}",
                        )
                elif fault["kind"] not in FAULTS and fault["kind"] != "failed-bid":
                    return self._error(400, "invalid_args", f"unknown fault {fault['kind']}")
                st.faults.append(fault)
                return self._send(200, {"ok": True})
            if parts == ["outbid"]:
                for iid in body.get("ids", []):
                    inst = st.instances[int(iid)]
                    inst.update(
                        cur_state="stopped",
                        intended_status="stopped",
                        next_state="stopped",
                        actual_status="stopped",
                        status_msg="outbid by a higher bid",
                    )
                    ask = st.asks.get(inst["_ask"])
                    if ask is not None and body.get("min_bid") is not None:
                        ask["min_bid"] = body["min_bid"]
                return self._send(200, {"ok": True})
            if parts == ["foreign"]:
                made = []
                for _ in range(int(body.get("count", 1))):
                    ask = st.asks[int(body["ask"])]
                    iid = st.next_id
                    st.next_id += 1
                    st.instances[iid] = {
                        "id": iid,
                        "machine_id": ask["machine_id"],
                        "num_gpus": ask["num_gpus"],
                        "gpu_name": ask["gpu_name"],
                        "gpu_ram": ask["gpu_ram"],
                        "label": body.get("label", "my-notebook"),
                        "is_bid": False,
                        "min_bid": ask.get("min_bid"),
                        "dph_base": ask["dph_base"],
                        "dph_total": ask["dph_base"],
                        "storage_cost": ask["storage_cost"],
                        "disk_space": 20.0,
                        "geolocation": ask["geolocation"],
                        "actual_status": "running",
                        "intended_status": "running",
                        "cur_state": "running",
                        "next_state": "running",
                        "status_msg": "",
                        "start_date": time.time(),
                        "extra_env": [],
                        "ports": {},
                        "_ask": -1,
                        "_bid": None,
                        "_destroyed": False,
                        "_body": {},
                    }
                    made.append(iid)
                return self._send(200, {"ids": made})
            if parts == ["config"]:
                for key in ("latency", "boot_seconds", "retry_after"):
                    if key in body:
                        setattr(st, key, body[key])
                return self._send(200, {"ok": True})
            if parts == ["instances"]:
                rows = [
                    {
                        **st.instance_row(i),
                        "destroyed": i["_destroyed"],
                        "ask": i["_ask"],
                        "bid": i["_bid"],
                        "create_body": i["_body"],
                    }
                    for i in st.instances.values()
                ]
                return self._send(200, {"instances": rows})
            if parts == ["calls"]:
                return self._send(200, {"calls": dict(st.calls), "total": sum(st.calls.values())})
        return self._error(404, "not_found", f"no control route {'/'.join(parts)}")


class VastServer(BackgroundServer):
    """The fake on a background thread: ``url`` once started; ``state`` for in-process tests."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", latency: float = 0.0):
        super().__init__(Handler, State(), port, host)
        self.state.latency = latency


def main() -> None:
    serve_main(VastServer, what="Vast.ai REST API", port=8790, key=API_KEY)


if __name__ == "__main__":
    main()
