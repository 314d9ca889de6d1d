"""An HTTP proxy in front of a moto server that makes EC2 Fleet fail the way real EC2 does.

moto never returns CreateFleet ``Errors`` and never throttles. This proxy forwards every
request to moto unchanged, except ``CreateFleet`` requests whose overrides match a rule:

* ``capacity``/``quota`` faults and capacity limits answer with an instant-fleet response whose
  ``errorSet`` carries the real EC2 codes (``InsufficientInstanceCapacity``,
  ``VcpuLimitExceeded``) for the overrides, launching only what the limit leaves (the request's
  target is lowered before it reaches moto);
* ``throttle``, ``server-error`` and ``auth`` faults answer the whole request with EC2's error
  XML (``RequestLimitExceeded`` 503, ``InternalError`` 500, ``AuthFailure`` 401).

It also sets spot prices (moto's are one constant): ``DescribeSpotPriceHistory`` answers get the
price set for their instance type and zone name, else the default price when one is set. It can
add a fixed latency to every request and counts requests per action. Control it over HTTP (JSON
bodies): ``POST /_proxy/fault`` ``{"instance_type", "subnets"?, "kind", "count"}``,
``POST /_proxy/capacity`` ``{"instance_type", "subnets"?, "limit"}``, ``POST /_proxy/prices``
``{"prices": {"<type> <zone name>": usd}, "default": usd?}``, ``POST /_proxy/latency``
``{"seconds"}``, ``POST /_proxy/interrupted`` ``{"ids": [...], "at": epoch}`` (instances already
terminated on moto are then described as AWS describes a spot interruption: ``StateReason``
``Server.SpotInstanceTermination`` and the time in ``StateTransitionReason``),
``POST /_proxy/on-demand`` ``{"prices": {"<region> <type>": usd}}`` (the Price List API's
``GetProducts``, which moto lacks, is then answered in its own JSON shape),
``POST /_proxy/malformed`` ``{"action": "DescribeInstances", "variant", "count"}`` (the "malformed
200" fault: the next ``count`` answers to that action are HTTP 200 with a broken body, ``variant``
truncated, html, empty (``{}``) or wrong-types (a reservation whose instance has a structure
where ``instanceId`` is text and text where ``instanceState`` is a structure), from
``tests/fakes/malformed.py``), ``POST /_proxy/reset``, ``GET /_proxy/stats``.

Placement groups, which moto lacks, are answered here from the EC2 API reference
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreatePlacementGroup.html,
API_DescribePlacementGroups.html, API_DeletePlacementGroup.html, the ``Placement`` of
API_FleetLaunchTemplateOverridesRequest.html, error codes in errors-overview.html), per region:
``CreatePlacementGroup`` (``GroupName``, ``Strategy``, ``TagSpecification``; a taken name is
``InvalidPlacementGroup.Duplicate``), ``DescribePlacementGroups`` (``GroupName.N``, filters
``group-name`` and ``tag:<key>``; a named group that does not exist is
``InvalidPlacementGroup.Unknown``), ``DeletePlacementGroup`` (``InvalidPlacementGroup.Unknown``
when missing, ``InvalidPlacementGroup.InUse`` while an instance launched into it is not
terminated, as moto reports it). A CreateFleet override naming a group that does not exist is
refused with ``InvalidPlacementGroup.Unknown``; a cluster group holds one Availability Zone, so
an override in a subnet other than those its first instances went to is refused
(``InvalidParameterCombination``). The instances a fleet
launched into a group are recorded (``GET /_proxy/placement-groups`` lists them). Run on its own::

    python tests/fakes/ec2_proxy.py --port 5001 --upstream http://127.0.0.1:5000 [--latency 0.05]
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode, urlsplit
from xml.etree import ElementTree as ET
from xml.sax.saxutils import escape

try:
    import malformed
except ImportError:  # imported as tests.fakes.ec2_proxy
    from . import malformed

NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
REQUEST_ERRORS = {
    "throttle": (503, "RequestLimitExceeded", "Request limit exceeded."),
    "server-error": (500, "InternalError", "An internal error has occurred."),
    "auth": (401, "AuthFailure", "AWS was not able to validate the provided access credentials"),
}
FLEET_ERRORS = {
    "capacity": (
        "InsufficientInstanceCapacity",
        "We currently do not have sufficient {type} capacity in the Availability Zone you "
        "requested. Our system will be working on provisioning additional capacity.",
    ),
    "quota": (
        "VcpuLimitExceeded",
        "You have requested more vCPU capacity than your current vCPU limit "
        "allows for the instance bucket that the specified instance type belongs to.",
    ),
}
#: The "wrong-types" malformed body of DescribeInstances (see the module doc).
WRONG_TYPES = (
    f'<?xml version="1.0" encoding="UTF-8"?>\n<DescribeInstancesResponse xmlns="{NS}">'
    "<requestId>4ba4c2f1-0000-4000-8000-000000000000</requestId><reservationSet><item>"
    "<reservationId>r-0123456789abcdef0</reservationId><instancesSet><item>"
    "<instanceId><value>i-0123456789abcdef0</value></instanceId><instanceState>running</instanceState>"
    "</item></instancesSet></item></reservationSet></DescribeInstancesResponse>"
).encode()


@dataclass
class Rule:
    instance_type: str
    subnets: frozenset[str] = frozenset()  # empty: any subnet
    kind: str = ""  # a fault kind, or "" for a capacity limit
    count: int = 0  # faults left
    limit: int | None = None  # instances that may still launch
    launched: int = 0

    def matches(self, overrides: list[dict[str, str]]) -> bool:
        return any(
            o.get("InstanceType") == self.instance_type and (not self.subnets or o.get("SubnetId") in self.subnets)
            for o in overrides
        )


@dataclass
class ProxyState:
    upstream: str
    latency: float = 0.0
    rules: list[Rule] = field(default_factory=list)
    spot_prices: dict[str, float] = field(default_factory=dict)  # "<type> <zone name>" -> USD/h
    default_price: float | None = None
    interrupted: dict[str, float] = field(default_factory=dict)  # instance id -> when AWS took it back
    broken: list[dict] = field(default_factory=list)  # "malformed 200" faults: {target (an action), ...}
    on_demand: dict[str, float] = field(default_factory=dict)  # "<region> <type>" -> USD/h
    stats: dict[str, int] = field(default_factory=dict)
    #: (region, name) -> {"id", "strategy", "tags": {k: v}, "instances": [ids], "subnets": set of subnet ids}
    groups: dict[tuple[str, str], dict] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_ITEM = re.compile(r"<item>(?:(?!<item>).)*?<spotPrice>.*?</item>", re.S)


def _clear(st: ProxyState) -> None:
    st.rules.clear()
    st.stats.clear()
    st.spot_prices.clear()
    st.default_price = None
    st.interrupted.clear()
    st.on_demand.clear()
    st.broken.clear()
    st.groups.clear()


_REGION = re.compile(r"Credential=[^/]+/\d+/([a-z0-9-]+)/ec2/")


def _overrides(params: dict[str, str]) -> list[dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for key, value in params.items():
        parts = key.split(".")
        if len(parts) >= 5 and parts[0] == "LaunchTemplateConfigs" and parts[2] == "Overrides":
            out.setdefault(f"{parts[1]}.{parts[3]}", {})[".".join(parts[4:])] = value
    return list(out.values())


def error_xml(code: str, message: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
        f"<Message>{escape(message)}</Message></Error></Errors><RequestID>{uuid.uuid4()}</RequestID>"
        "</Response>"
    ).encode()


def error_set(
    code: str, message: str, lifecycle: str, overrides: list[dict[str, str]], template: tuple[str, str]
) -> str:
    """EC2's ``errorSet`` of an instant fleet; ``template`` is (``launchTemplateId``|``launchTemplateName``, value)."""
    field_, value = template
    items = []
    for o in overrides:
        items.append(
            "<item><launchTemplateAndOverrides><launchTemplateSpecification>"
            f"<{field_}>{escape(value)}</{field_}><version>1</version>"
            "</launchTemplateSpecification><overrides>"
            f"<instanceType>{escape(o.get('InstanceType', ''))}</instanceType>"
            f"<subnetId>{escape(o.get('SubnetId', ''))}</subnetId>"
            f"<weightedCapacity>{escape(o.get('WeightedCapacity', '1'))}</weightedCapacity>"
            f"</overrides></launchTemplateAndOverrides><lifecycle>{lifecycle}</lifecycle>"
            f"<errorCode>{code}</errorCode><errorMessage>{escape(message)}</errorMessage></item>"
        )
    return "<errorSet>" + "".join(items) + "</errorSet>"


def _group_xml(name: str, group: dict) -> str:
    """A ``PlacementGroup`` structure as EC2's query API writes it."""
    tags = "".join(
        f"<item><key>{escape(k)}</key><value>{escape(v)}</value></item>" for k, v in sorted(group["tags"].items())
    )
    return (
        f"<groupName>{escape(name)}</groupName><state>available</state>"
        f"<strategy>{escape(group['strategy'])}</strategy><groupId>{group['id']}</groupId>"
        f"<tagSet>{tags}</tagSet>"
    )


class Handler(BaseHTTPRequestHandler):
    server_version = "ec2-proxy"
    protocol_version = "HTTP/1.1"
    state: ProxyState

    def log_message(self, *args) -> None:
        pass

    def _reply(self, status: int, body: bytes, ctype: str = "text/xml") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/_proxy/stats"):
            with self.state.lock:
                self._reply(200, json.dumps(self.state.stats).encode(), "application/json")
            return
        if self.path.startswith("/_proxy/placement-groups"):
            with self.state.lock:
                groups = {
                    f"{r}/{n}": {"strategy": g["strategy"], "tags": g["tags"], "instances": g["instances"]}
                    for (r, n), g in self.state.groups.items()
                }
            self._reply(200, json.dumps(groups).encode(), "application/json")
            return
        self._forward(b"")

    def do_DELETE(self) -> None:
        self._forward(self._body())

    def do_PUT(self) -> None:
        self._forward(self._body())

    def do_HEAD(self) -> None:
        self._forward(b"")

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_POST(self) -> None:
        body = self._body()
        if self.path.startswith("/_proxy/"):
            self._control(self.path.split("?")[0].rsplit("/", 1)[-1], json.loads(body or b"{}"))
            return
        target = self.headers.get("X-Amz-Target", "")
        if target == "AWSPriceListService.GetProducts" and self.state.on_demand:
            self._count("GetProducts")
            self._reply(200, json.dumps(self._products(json.loads(body))).encode(), "application/x-amz-json-1.1")
            return
        params = dict(parse_qsl(body.decode(errors="replace"), keep_blank_values=True))
        action = params.get("Action", "")
        if action:
            self._count(action)
        with self.state.lock:
            variant = malformed.take(self.state.broken, action) if action else None
        if variant is not None:
            status, headers, payload = self._upstream("POST", body)
            self._reply(200, *malformed.body(variant, payload, WRONG_TYPES, headers.get("Content-Type", "text/xml")))
            return
        if action == "CreateFleet":
            self._create_fleet(params)
            return
        if action in ("CreatePlacementGroup", "DescribePlacementGroups", "DeletePlacementGroup"):
            self._placement(action, params)
            return
        if action == "DescribeSpotPriceHistory" and (self.state.spot_prices or self.state.default_price is not None):
            status, headers, payload = self._upstream("POST", body)
            self._reply(status, _ITEM.sub(self._priced, payload.decode()).encode() if status == 200 else payload)
            return
        if action == "DescribeInstances" and self.state.interrupted:
            status, headers, payload = self._upstream("POST", body)
            self._reply(status, self._interruptions(payload.decode()).encode() if status == 200 else payload)
            return
        self._forward(body)

    def _interruptions(self, text: str) -> str:
        root = ET.fromstring(text)
        ns = root.tag[1:].split("}")[0] if root.tag.startswith("{") else ""
        q = (lambda tag: f"{{{ns}}}{tag}") if ns else (lambda tag: tag)
        for item in root.iter(q("item")):
            iid = item.find(q("instanceId"))
            with self.state.lock:
                at = self.state.interrupted.get(iid.text or "") if iid is not None else None
            if at is None or item.find(q("instanceState")) is None:
                continue
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))
            for old in [*item.findall(q("reason")), *item.findall(q("stateReason"))]:
                item.remove(old)
            ET.SubElement(item, q("reason")).text = f"Service initiated ({when} GMT)"
            reason = ET.SubElement(item, q("stateReason"))
            ET.SubElement(reason, q("code")).text = "Server.SpotInstanceTermination"
            ET.SubElement(reason, q("message")).text = "Server.SpotInstanceTermination: Spot instance termination"
        if ns:
            ET.register_namespace("", ns)
        return ET.tostring(root, encoding="unicode")

    def _priced(self, m: re.Match[str]) -> str:
        item = m.group(0)
        itype = re.search(r"<instanceType>([^<]*)</instanceType>", item)
        zone = re.search(r"<availabilityZone>([^<]*)</availabilityZone>", item)
        key = f"{itype.group(1) if itype else ''} {zone.group(1) if zone else ''}"
        with self.state.lock:
            price = self.state.spot_prices.get(key, self.state.default_price)
        return (
            item
            if price is None
            else re.sub(r"<spotPrice>[^<]*</spotPrice>", f"<spotPrice>{price:.6f}</spotPrice>", item)
        )

    def _count(self, action: str) -> None:
        with self.state.lock:
            self.state.stats[action] = self.state.stats.get(action, 0) + 1

    def _products(self, request: dict) -> dict:
        """A GetProducts answer: one Price List document per matching (region, type), as AWS shapes it."""
        want = {f["Field"]: f["Value"] for f in request.get("Filters", [])}
        types = set(want.get("instanceType", "").split(",")) - {""}
        docs = []
        with self.state.lock:
            prices = dict(self.state.on_demand)
        for key, usd in sorted(prices.items()):
            region, itype = key.split(" ")
            if want.get("regionCode", region) != region or (types and itype not in types):
                continue
            sku = uuid.uuid5(uuid.NAMESPACE_DNS, key).hex[:16].upper()
            docs.append(
                json.dumps(
                    {
                        "product": {
                            "productFamily": "Compute Instance",
                            "sku": sku,
                            "attributes": {
                                "instanceType": itype,
                                "regionCode": region,
                                "operatingSystem": "Linux",
                                "tenancy": "Shared",
                                "capacitystatus": "Used",
                                "preInstalledSw": "NA",
                            },
                        },
                        "serviceCode": "AmazonEC2",
                        "terms": {
                            "OnDemand": {
                                f"{sku}.JRTCKXETXF": {
                                    "priceDimensions": {
                                        f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                                            "unit": "Hrs",
                                            "pricePerUnit": {"USD": f"{usd:.10f}"},
                                            "description": f"${usd} per On Demand Linux {itype} Instance Hour",
                                        }
                                    }
                                }
                            }
                        },
                    }
                )
            )
        return {"FormatVersion": "aws_v1", "PriceList": docs}

    def _control(self, verb: str, data: dict) -> None:
        st = self.state
        with st.lock:
            if verb == "reset":
                _clear(st)
            elif verb == "fault":
                st.rules.append(
                    Rule(
                        data["instance_type"],
                        frozenset(data.get("subnets") or ()),
                        data["kind"],
                        int(data.get("count", 1)),
                    )
                )
            elif verb == "capacity":
                st.rules.append(
                    Rule(data["instance_type"], frozenset(data.get("subnets") or ()), limit=int(data["limit"]))
                )
            elif verb == "prices":
                st.spot_prices.update({k: float(v) for k, v in data.get("prices", {}).items()})
                if data.get("default") is not None:
                    st.default_price = float(data["default"])
            elif verb == "on-demand":
                st.on_demand.update({k: float(v) for k, v in data["prices"].items()})
            elif verb == "interrupted":
                st.interrupted.update({i: float(data["at"]) for i in data["ids"]})
            elif verb == "latency":
                st.latency = float(data["seconds"])
            elif verb == "malformed" and data.get("variant") in malformed.VARIANTS:
                st.broken.append(
                    {
                        "target": data.get("action", "DescribeInstances"),
                        "variant": data["variant"],
                        "count": int(data.get("count", 1)),
                    }
                )
            else:
                self._reply(404, b'{"error": "unknown control"}', "application/json")
                return
        self._reply(200, b"{}", "application/json")

    # ---- placement groups (moto has none) ---------------------------------------------------
    def _region(self) -> str:
        m = _REGION.search(self.headers.get("Authorization", ""))
        return m.group(1) if m else "us-east-1"

    def _placement(self, action: str, params: dict[str, str]) -> None:
        region = self._region()
        st = self.state
        if action == "CreatePlacementGroup":
            name = params.get("GroupName", "")
            tags = {}
            for key, value in params.items():
                m = re.fullmatch(r"TagSpecification\.(\d+)\.Tag\.(\d+)\.Key", key)
                if m and params.get(f"TagSpecification.{m.group(1)}.ResourceType") == "placement-group":
                    tags[value] = params.get(f"TagSpecification.{m.group(1)}.Tag.{m.group(2)}.Value", "")
            with st.lock:
                if (region, name) in st.groups:
                    self._reply(
                        400,
                        error_xml("InvalidPlacementGroup.Duplicate", f"The placement group '{name}' already exists."),
                    )
                    return
                group = {
                    "id": f"pg-{uuid.uuid4().hex[:17]}",
                    "strategy": params.get("Strategy", "cluster"),
                    "tags": tags,
                    "instances": [],
                    "subnets": set(),
                }
                st.groups[(region, name)] = group
                item = _group_xml(name, group)
            self._reply(
                200,
                (
                    f'<?xml version="1.0" encoding="UTF-8"?>\n<CreatePlacementGroupResponse xmlns="{NS}">'
                    f"<requestId>{uuid.uuid4()}</requestId><return>true</return>"
                    f"<placementGroup>{item}</placementGroup></CreatePlacementGroupResponse>"
                ).encode(),
            )
            return
        if action == "DescribePlacementGroups":
            names = [v for k, v in sorted(params.items()) if re.fullmatch(r"GroupName\.\d+", k)]
            filters: dict[str, set[str]] = {}
            for key, value in params.items():
                m = re.fullmatch(r"Filter\.(\d+)\.Name", key)
                if m:
                    filters[value] = {
                        v for k, v in params.items() if re.fullmatch(rf"Filter\.{m.group(1)}\.Value\.\d+", k)
                    }
            with st.lock:
                missing = [n for n in names if (region, n) not in st.groups]
                if missing:
                    self._reply(
                        400,
                        error_xml("InvalidPlacementGroup.Unknown", f"The Placement Group '{missing[0]}' is unknown."),
                    )
                    return
                items = []
                for (r, name), group in sorted(st.groups.items()):
                    if r != region or (names and name not in names):
                        continue
                    if "group-name" in filters and name not in filters["group-name"]:
                        continue
                    if any(
                        f.startswith("tag:") and group["tags"].get(f[4:]) not in values for f, values in filters.items()
                    ):
                        continue
                    items.append(f"<item>{_group_xml(name, group)}</item>")
            self._reply(
                200,
                (
                    f'<?xml version="1.0" encoding="UTF-8"?>\n<DescribePlacementGroupsResponse xmlns="{NS}">'
                    f"<requestId>{uuid.uuid4()}</requestId><placementGroupSet>{''.join(items)}"
                    "</placementGroupSet></DescribePlacementGroupsResponse>"
                ).encode(),
            )
            return
        name = params.get("GroupName", "")
        with st.lock:
            group = st.groups.get((region, name))
            ids = list(group["instances"]) if group else []
        if group is None:
            self._reply(400, error_xml("InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown."))
            return
        if self._live(ids):
            self._reply(
                400,
                error_xml(
                    "InvalidPlacementGroup.InUse", f"The placement group '{name}' is in use and may not be deleted."
                ),
            )
            return
        with st.lock:
            st.groups.pop((region, name), None)
        self._reply(
            200,
            (
                f'<?xml version="1.0" encoding="UTF-8"?>\n<DeletePlacementGroupResponse xmlns="{NS}">'
                f"<requestId>{uuid.uuid4()}</requestId><return>true</return>"
                "</DeletePlacementGroupResponse>"
            ).encode(),
        )

    def _live(self, ids: list[str]) -> bool:
        """Whether moto has any of ``ids`` in a state other than terminated."""
        if not ids:
            return False
        body = urlencode(
            {
                "Action": "DescribeInstances",
                "Version": "2016-11-15",
                **{f"InstanceId.{k + 1}": i for k, i in enumerate(ids)},
            }
        ).encode()
        status, _, payload = self._upstream("POST", body)
        states = re.findall(r"<instanceState>\s*<code>\d+</code>\s*<name>([a-z-]+)</name>", payload.decode())
        return status != 200 or any(s != "terminated" for s in states)

    def _group_check(self, overrides: list[dict[str, str]]) -> tuple[tuple[str, str] | None, bytes | None]:
        """The group a CreateFleet's overrides launch into (``None``: none) or EC2's refusal."""
        names = {o.get("Placement.GroupName") for o in overrides} - {None, ""}
        if not names:
            return None, None
        region = self._region()
        name = sorted(names)[0]
        with self.state.lock:
            group = self.state.groups.get((region, name))
            if group is None:
                return None, error_xml("InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown.")
            subnets = {o.get("SubnetId", "") for o in overrides}
            if group["subnets"] and not subnets <= group["subnets"]:
                return None, error_xml(
                    "InvalidParameterCombination", f"The placement group '{name}' holds instances of another zone."
                )
        return (region, name), None

    def _joined(self, key: tuple[str, str] | None, overrides: list[dict[str, str]], body: bytes) -> None:
        """Record the instances a CreateFleet answer launched into the group ``key``."""
        if key is None:
            return
        ids = re.findall(r"<item>(i-[0-9a-f]+)</item>", body.decode(errors="replace"))
        with self.state.lock:
            group = self.state.groups.get(key)
            if group is not None and ids:
                group["instances"].extend(ids)
                group["subnets"].update(o.get("SubnetId", "") for o in overrides)

    def _create_fleet(self, params: dict[str, str]) -> None:
        overrides = _overrides(params)
        joined, refusal = self._group_check(overrides)
        if refusal is not None:
            self._reply(400, refusal)
            return
        lifecycle = params.get("TargetCapacitySpecification.DefaultTargetCapacityType", "on-demand")
        spec = "LaunchTemplateConfigs.1.LaunchTemplateSpecification."
        template = (
            ("launchTemplateId", params[spec + "LaunchTemplateId"])
            if spec + "LaunchTemplateId" in params
            else ("launchTemplateName", params.get(spec + "LaunchTemplateName", ""))
        )
        total = int(params.get("TargetCapacitySpecification.TotalTargetCapacity", "0"))
        fault, limited = None, None
        with self.state.lock:
            for rule in self.state.rules:
                if not rule.matches(overrides):
                    continue
                if rule.kind and rule.count > 0 and fault is None:
                    rule.count -= 1
                    fault = rule.kind
                elif rule.limit is not None and limited is None:
                    limited = rule
            allowed = total
            if fault is None and limited is not None:
                allowed = max(0, min(total, limited.limit - limited.launched))
                limited.launched += allowed
        if fault in REQUEST_ERRORS:
            status, code, message = REQUEST_ERRORS[fault]
            time.sleep(self.state.latency)
            self._reply(status, error_xml(code, message))
            return
        if fault in FLEET_ERRORS:
            allowed = 0
            code, message = FLEET_ERRORS[fault]
        else:
            code, message = FLEET_ERRORS["capacity"]
        message = message.format(type=overrides[0].get("InstanceType", "") if overrides else "")
        if allowed == total:
            status, headers, body = self._upstream("POST", urlencode(params).encode())
            if status == 200:
                self._joined(joined, overrides, body)
            self._reply(status, body, headers.get("Content-Type", "text/xml"))
            return
        errors = error_set(code, message, "spot" if lifecycle == "spot" else "on-demand", overrides, template)
        if allowed == 0:
            time.sleep(self.state.latency)
            body = (
                f'<?xml version="1.0" encoding="UTF-8"?>\n<CreateFleetResponse xmlns="{NS}">'
                f"<requestId>{uuid.uuid4()}</requestId><fleetId>fleet-{uuid.uuid4()}</fleetId>"
                f"{errors}<fleetInstanceSet/></CreateFleetResponse>"
            ).encode()
            self._reply(200, body)
            return
        for key in ("TotalTargetCapacity", "SpotTargetCapacity", "OnDemandTargetCapacity"):
            if f"TargetCapacitySpecification.{key}" in params:
                params[f"TargetCapacitySpecification.{key}"] = str(allowed)
        status, headers, body = self._upstream("POST", urlencode(params).encode())
        if status == 200:
            self._joined(joined, overrides, body)
            body = body.replace(b"</CreateFleetResponse>", errors.encode() + b"</CreateFleetResponse>")
        self._reply(status, body, headers.get("Content-Type", "text/xml"))

    def _upstream(self, method: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        time.sleep(self.state.latency)
        url = urlsplit(self.state.upstream)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("content-length", "connection", "host")}
        headers["Host"] = f"{url.hostname}:{url.port}"
        headers["Content-Length"] = str(len(body))
        try:
            conn.request(method, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def _forward(self, body: bytes) -> None:
        status, headers, payload = self._upstream(self.command, body)
        self.send_response(status)
        for k, v in headers.items():
            if k.lower() not in ("content-length", "connection", "transfer-encoding", "server", "date"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)


class Ec2Proxy:
    """The proxy on ``127.0.0.1:port`` (0 = a free port) in a background thread."""

    def __init__(self, upstream: str, *, port: int = 0, latency: float = 0.0):
        self.state = ProxyState(upstream.rstrip("/"), latency)
        handler = type("BoundHandler", (Handler,), {"state": self.state})
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> Ec2Proxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # levers, in process (the HTTP control endpoints do the same)
    def fault(self, instance_type: str, kind: str, count: int, subnets: tuple[str, ...] = ()) -> None:
        with self.state.lock:
            self.state.rules.append(Rule(instance_type, frozenset(subnets), kind, count))

    def capacity(self, instance_type: str, limit: int, subnets: tuple[str, ...] = ()) -> None:
        with self.state.lock:
            self.state.rules.append(Rule(instance_type, frozenset(subnets), limit=limit))

    def prices(self, prices: dict[str, float], default: float | None = None) -> None:
        with self.state.lock:
            self.state.spot_prices.update(prices)
            if default is not None:
                self.state.default_price = default

    def on_demand_prices(self, prices: dict[str, float]) -> None:
        with self.state.lock:
            self.state.on_demand.update(prices)

    def interrupted(self, ids: list[str], at: float) -> None:
        with self.state.lock:
            self.state.interrupted.update({i: at for i in ids})

    def malformed(self, variant: str, count: int, action: str = "DescribeInstances") -> None:
        with self.state.lock:
            self.state.broken.append({"target": action, "variant": variant, "count": count})

    def reset_stats(self) -> None:
        with self.state.lock:
            self.state.stats.clear()

    def placement_groups(self) -> dict[str, dict]:
        """``"region/name"`` -> the group's strategy, tags and the instances launched into it."""
        with self.state.lock:
            return {
                f"{r}/{n}": {"strategy": g["strategy"], "tags": dict(g["tags"]), "instances": list(g["instances"])}
                for (r, n), g in self.state.groups.items()
            }

    def reset(self) -> None:
        with self.state.lock:
            _clear(self.state)

    def stats(self) -> dict[str, int]:
        with self.state.lock:
            return dict(self.state.stats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=5001)
    parser.add_argument("--upstream", required=True, help="the moto server, e.g. http://127.0.0.1:5000")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    args = parser.parse_args()
    proxy = Ec2Proxy(args.upstream, port=args.port, latency=args.latency)
    print(f"ec2 proxy on {proxy.url} -> {args.upstream}", flush=True)
    proxy.server.serve_forever()


if __name__ == "__main__":
    main()
