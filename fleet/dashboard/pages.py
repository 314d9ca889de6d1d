"""HTML of the dashboard's pages, rendered from the read models' JSON-ready data (pure).

Every string that came from a provider, a node or a user (ids, pool names, reasons, log text,
the fleet's name) goes through :func:`h`: ``fleet.safetext.safe`` (one line, control characters
escaped, secrets masked) and then ``html.escape``. Numbers are formatted here, the same way
the CLI formats them (``money``, ``duration``).

A page is a shell (``page``) around a body; the body of each page is also what the JSON
endpoints return as ``html``, so the script the shell carries refreshes it in place.
"""

from __future__ import annotations

import html
import json
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from fleet.cli.lifecycle import duration, money
from fleet.dashboard.charts import line_chart
from fleet.nodelogs import printable
from fleet.safetext import safe

STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#111;background:#fafafa}
h1{font-size:1.4em;margin:0 0 .4em}h2{font-size:1.1em;margin:1.4em 0 .4em}
table{border-collapse:collapse;background:#fff}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.up{color:#15803d}.short,.unknown,.error{color:#b45309}.down{color:#555}
.chart{background:#fff;border:1px solid #ddd;margin:0 .6em .6em 0;font-size:11px}
.chart-title{font-weight:600}.muted{color:#666}pre{background:#111;color:#eee;padding:.6em;overflow:auto;max-height:16em}
.cards span{display:inline-block;background:#fff;border:1px solid #ddd;padding:.4em .8em;margin:0 .4em .4em 0}
"""

#: Polls the page's JSON endpoint and swaps in its ``html`` (no library, no build step).
SCRIPT = """
(function(){var m=document.body.dataset,u=m.api;if(!u)return;
function tick(){fetch(u,{cache:'no-store'}).then(function(r){return r.ok?r.json():null}).then(function(d){
if(d&&d.html!==undefined){document.getElementById('content').innerHTML=d.html;
document.getElementById('updated').textContent='updated '+new Date().toLocaleTimeString();}}).catch(function(){});}
tick();setInterval(tick,(+m.interval||5)*1000);})();
"""


def h(text: Any) -> str:
    """Untrusted text for HTML: one line, control characters escaped, secrets masked, escaped."""
    return html.escape(safe(text), quote=True)


def page(title: str, body: str, *, api: str, interval: float, token: str = "") -> str:
    """A whole page: ``body`` inside ``#content``, refreshed from ``api`` every ``interval`` s."""
    home = "/" + (f"?token={quote(token)}" if token else "")
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width'>"
        f"<title>{h(title)}</title><style>{STYLE}</style></head>"
        f"<body data-api='{html.escape(api, quote=True)}' data-interval='{interval:g}'>"
        f"<p class='muted'><a href='{html.escape(home, quote=True)}'>fleets</a> · read-only · "
        f"<span id='updated'>rendered on the server</span></p>"
        f"<div id='content'>{body}</div><script>{SCRIPT}</script></body></html>"
    )


def link(path: str, token: str) -> str:
    return path + (f"?token={quote(token)}" if token else "")


def fleets_body(rows: list[dict[str, Any]], hidden: int, where: str, token: str = "") -> str:
    """The fleets: state, target vs running, $/h planned (and billed when known), cost so far,
    savings against on-demand. ``rows``: ``fleet.views.status.overview``."""
    if not rows:
        more = f"; {hidden} down" if hidden else ""
        return f"<h1>fleets</h1><p>no fleets in {h(where)}{more}; create one with <code>fleet up SPEC</code></p>"
    head = (
        "<tr><th>fleet</th><th>status</th><th class=n>running</th><th class=n>planned</th><th class=n>GPUs</th>"
        "<th class=n>$/h now</th><th class=n>$/h planned</th><th class=n>$/h billed</th>"
        "<th class=n>cost so far</th><th class=n>saved vs on-demand</th></tr>"
    )
    body = []
    for r in rows:
        name = h(r["fleet"])
        saved = (
            "-"
            if r.get("savings") is None
            else (
                money(r["savings"]) + ("" if r.get("savings_fraction") is None else f" ({r['savings_fraction']:.0%})")
            )
        )
        body.append(
            f"<tr data-fleet='{name}'><td><a href='{html.escape(link('/fleet/' + quote(safe(r['fleet']), safe=''), token), quote=True)}'>"
            f"{name}</a></td><td class='{h(r['status'])}' data-field='status'>{h(r['status'])}</td>"
            f"<td class=n data-field='running'>{_count(r['running'])}</td>"
            f"<td class=n data-field='planned'>{_count(r['planned'])}</td>"
            f"<td class=n data-field='gpus'>{_count(r['gpus'])}</td>"
            f"<td class=n data-field='price_per_hour'>{money(r['price_per_hour'], True)}</td>"
            f"<td class=n data-field='planned_per_hour'>{money(r.get('planned_per_hour'), True)}</td>"
            f"<td class=n data-field='billed_per_hour'>{money(r.get('billed_per_hour'), True)}</td>"
            f"<td class=n data-field='cost_so_far'>{money(r['cost_so_far'])}</td>"
            f"<td class=n data-field='savings'>{saved}</td></tr>"
        )
        if r.get("error"):
            body.append(f"<tr><td colspan=10 class=error>{name}: {h(r['error'])}</td></tr>")
    note = f"<p class=muted>{hidden} fleet(s) down not shown</p>" if hidden else ""
    return (
        f"<h1>fleets</h1><table id='fleets'>{head}{''.join(body)}</table>{note}"
        "<p class=muted>$/h billed: what the providers charge for the running instances, read back after each "
        "launch (Vast's dph_total, RunPod's pod cost, EC2's spot price at launch or list price); "
        "- where not read yet</p>"
    )


def fleet_body(d: dict[str, Any], token: str = "") -> str:
    """One fleet: headline figures, charts, the interruption timeline, pools, instances by pool
    and market, rebalancer actions, node logs. ``d``: ``server.Source.fleet``."""
    s, cost = d["status"], d["status"]["cost"]
    saved = (
        "-"
        if cost["savings"] is None
        else money(cost["savings"]) + ("" if cost["savings_fraction"] is None else f" ({cost['savings_fraction']:.0%})")
    )
    planned = "-" if s["planned"] is None else str(s["planned"])
    cards = [
        ("status", f"<b class='{h(s['status'])}'>{h(s['status'])}</b>"),
        ("running", f"{s['running']} of {planned} planned"),
        ("GPUs", str(cost["running_gpus"])),
        ("$/h now", money(cost["rate_per_hour"], True)),
        ("$/h planned", money(s.get("planned_per_hour"), True)),
        ("$/h billed", money(s.get("billed_per_hour"), True)),
        ("cost so far", money(cost["cost_so_far"])),
        ("saved vs on-demand", saved),
        ("interruptions", str(cost["interruptions"])),
    ]
    offers = html.escape(link("/fleet/" + quote(safe(s["fleet"]), safe="") + "/offers", token), quote=True)
    out = [
        f"<h1>fleet {h(s['fleet'])}</h1><p><a id=offers-link href='{offers}'>offers its spec weighs</a></p>"
        "<div class=cards id=cards>"
        + "".join(f"<span data-field='{html.escape(k)}'>{html.escape(k)}: {v}</span>" for k, v in cards)
        + "</div>"
    ]
    for provider, error in sorted(s["provider_errors"].items()):
        out.append(f"<p class=error>{h(provider)} could not be read: {h(error)}</p>")
    out.append(_bill(s.get("bill")))
    out.append("<h2>capacity and cost over time</h2>" + _charts(d["series"]))
    out.append(_timeline(d["interruptions"]))
    out.append(_pools(s["pools"]))
    out.append(_instances(s["instances"], d["instance_limit"]))
    out.append(_actions(d["actions"]))
    out.append(_plan_diffs(d.get("plan_diffs") or []))
    out.append(_simulation(d.get("simulation")))
    out.append(node_logs(d["logs"]))
    return "".join(out)


def offers_body(d: dict[str, Any], token: str = "") -> str:
    """The offers a fleet's spec weighs, cheapest per GPU-hour first (``fleet.views.offers``)."""
    back = html.escape(link("/fleet/" + quote(safe(d["fleet"]), safe=""), token), quote=True)
    head = f"<h1>offers for <a href='{back}'>{h(d['fleet'])}</a></h1>"
    if d["error"]:
        return head + f"<p class=error id=offers>{h(d['error'])}</p>"
    rows = "".join(
        f"<tr><td>{h(o['pool']['provider'])}/{h(o['pool']['region'])}/{h(o['pool']['zone'] or '-')}/"
        f"{h(o['pool']['instance_type'])}</td><td>{h(o['pool']['market'])}</td>"
        f"<td>{o['gpus']}x{h(o['accelerator'])}</td><td class=n>{money(o['price_per_hour'], True)}</td>"
        f"<td class=n>${o['price_per_gpu_hour']:.3f}</td><td class=n>{o['interruptions_per_hour']:.3f}</td>"
        f"<td class=n>{'-' if o.get('capacity_hint') is None else o['capacity_hint']}</td></tr>"
        for o in d["offers"]
    )
    return (
        head + f"<p class=muted>{d['total']} offers from {h(d['source'])}: {h(d['detail'])}; the cheapest "
        f"{len(d['offers'])} per GPU-hour</p><table id=offers><tr><th>pool</th><th>market</th><th>node</th>"
        "<th class=n>$/h</th><th class=n>$/GPU-h</th><th class=n>int/h</th><th class=n>capacity</th></tr>"
        f"{rows}</table>"
    )


def _simulation(sim: dict[str, Any] | None) -> str:
    """The result ``fleet simulate SPEC --save`` kept for this fleet (``fleet.simulate.saved``)."""
    if sim is None:
        return "<h2>simulation</h2><p id=simulation class=muted>none saved: <code>fleet simulate SPEC --save</code></p>"
    if sim.get("error"):
        return f"<h2>simulation</h2><p id=simulation class=error>{h(sim['error'])}</p>"
    r = sim["result"]

    def pct(x: Any) -> str:
        return "-" if not isinstance(x, (int, float)) else f"{100 * x:.1f}%"

    rows = "".join(
        f"<tr><td>{h(p.get('policy'))}</td><td class=n>{pct(p.get('at_target'))}</td>"
        f"<td class=n>{pct(p.get('at_critical'))}</td><td class=n>{money(p.get('cost'))}</td>"
        f"<td class=n>{pct(p.get('cost_share_of_on_demand'))}</td><td class=n>{h(p.get('interruptions'))}</td></tr>"
        for p in r["policies"]
        if isinstance(p, dict)
    )
    return (
        f"<h2>simulation (saved {_when(sim['saved_at'])})</h2><p class=muted>{h(r.get('hours'))} h of traces, "
        f"a pass every {h(r.get('interval_ticks'))} ticks</p><table id=simulation><tr><th>policy</th>"
        "<th class=n>at target</th><th class=n>at critical</th><th class=n>cost</th><th class=n>of on-demand</th>"
        f"<th class=n>interruptions</th></tr>{rows}</table>"
    )


def _plan_diffs(diffs: list[dict[str, Any]], limit: int = 10) -> str:
    """What changed between consecutive applied plans, newest first (``fleet.views.plans.diffs``)."""
    if not diffs:
        return "<h2>plan changes</h2><p id=plandiffs>no change since the first plan</p>"
    items = []
    for d in diffs[:limit]:
        pools = "".join(f"<li>{h(c['pool'])}: {c['before']} &rarr; {c['after']}</li>" for c in d["changes"])
        items.append(
            f"<li><b>{_when(d['applied_at'])}</b> {h(d['strategy'])} plan {h(d['to'])}: "
            f"{money(d['price_before'], True)} &rarr; {money(d['price_after'], True)}, "
            f"{d['weighted_before']:g} &rarr; {d['weighted_after']:g} weighted GPUs<ul>{pools}</ul></li>"
        )
    more = f"<p class=muted>{len(diffs) - limit} older changes</p>" if len(diffs) > limit else ""
    return f"<h2>plan changes ({len(diffs)})</h2><ul id=plandiffs>{''.join(items)}</ul>{more}"


def _bill(bill: dict[str, Any] | None) -> str:
    """Planned against billed over the instances read (``fleet.views.bills.summary``), and each
    instance billed beyond the budget."""
    if not bill or not bill["instances"]:
        return ""
    ratio = "" if bill["ratio"] is None else f" ({bill['ratio']:.2f}x planned)"
    line = (
        f"<p id=bill>billed {money(bill['billed_per_hour'], True)} for {bill['read']} of {bill['instances']} "
        f"running instance(s), planned {money(bill['planned_per_hour'], True)}{ratio}</p>"
    )
    over = "".join(f"<li class=error>{h(b['message'])} ({h(bill['cap_action'])})</li>" for b in bill["breaches"])
    return line + (f"<ul id=breaches>{over}</ul>" if over else "")


def _count(n: int | None) -> str:
    return "?" if n is None else str(n)


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, timezone.utc).strftime("%m-%d %H:%M:%S")


def _charts(series: list[dict[str, float]]) -> str:
    cap = [("GPUs", [(p["t"], p["gpus"]) for p in series]), ("spot GPUs", [(p["t"], p["spot_gpus"]) for p in series])]
    cost = [("cost so far", [(p["t"], p["cost"]) for p in series])]
    rate = [("$/h", [(p["t"], p["rate_per_hour"]) for p in series])]
    return (
        line_chart("capacity (GPUs)", cap)
        + line_chart("cost so far ($)", cost, unit="$")
        + line_chart("price ($/h)", rate, unit="$")
    )


def _pools(pools: list[dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td>{h(p['pool'])}</td><td>{h(p['market'])}</td><td class=n>{_count(p['running'])}</td>"
        f"<td class=n>{'-' if p['planned'] is None else p['planned']}</td>"
        f"<td class=n>{money(p['price_per_hour'], True)}</td><td class=n>{p['interruptions']}</td></tr>"
        for p in pools
    )
    return (
        "<h2>pools</h2><table id=pools><tr><th>pool</th><th>market</th><th class=n>running</th>"
        f"<th class=n>planned</th><th class=n>$/h</th><th class=n>preempted</th></tr>{rows}</table>"
    )


def _instances(instances: list[dict[str, Any]], limit: int) -> str:
    """Instances grouped by pool and market (``limit`` rows at most, then how many more)."""
    listed = instances[:limit]
    rows = "".join(
        f"<tr><td>{h(i['id'])}</td><td>{h(i['pool'])}</td><td>{h(i['market'])}</td>"
        f"<td>{h(i['state'])}{' (notice)' if i['notice'] else ''}</td><td class=n>{i['gpus']}</td>"
        f"<td class=n>{money(i['price_per_hour'], True)}</td><td class=n>{money(i.get('billed_per_hour'), True)}</td>"
        f"<td>{h(i.get('rental') or '-')}</td><td class=n>{duration(i['age_seconds'])}</td></tr>"
        for i in listed
    )
    more = (
        f"<p class=muted>{len(instances) - len(listed)} more instances (<code>fleet status NAME --limit 0</code>)</p>"
        if len(listed) < len(instances)
        else ""
    )
    return (
        f"<h2>instances ({len(instances)})</h2><table id=instances><tr><th>id</th><th>pool</th><th>market</th>"
        "<th>state</th><th class=n>GPUs</th><th class=n>$/h planned</th><th class=n>$/h billed</th>"
        "<th>rental</th><th class=n>age</th></tr>"
        f"{rows}</table>{more}"
    )


def _timeline(data: dict[str, Any]) -> str:
    items, t = data["interruptions"], data["totals"]
    if not items:
        return "<h2>interruptions</h2><p id=timeline>no node lost in this run</p>"
    rows = []
    for i in items:
        notice = (
            "none"
            if i["notice_kind"] is None
            else h(i["notice_kind"]) + ("" if i["lead_seconds"] is None else f", {duration(i['lead_seconds'])} ahead")
        )
        ckpt = (
            "unknown"
            if i["checkpoint_committed"] is None
            else "not committed"
            if not i["checkpoint_committed"]
            else "committed"
            + (
                ""
                if i["committed_before_deadline_s"] is None
                else f" {duration(i['committed_before_deadline_s'])} before the deadline"
            )
        )
        rows.append(
            f"<tr data-instance='{h(i['instance_id'])}'><td>{_when(i['lost_at'])}</td><td>{h(i['instance_id'])}</td>"
            f"<td>{h(i['pool'])}</td><td>{h(i['reason'])}</td><td>{notice}</td>"
            f"<td class=n>{'?' if i['detect_seconds'] is None else duration(i['detect_seconds'])}</td>"
            f"<td class=n>{'not yet' if i['replace_seconds'] is None else duration(i['replace_seconds'])}</td>"
            f"<td>{h(i['replacement_pool'] or '-')}</td><td>{ckpt}</td>"
            f"<td class=n>{i['lost_gpu_hours']:.2f}</td><td class=n>{money(i['lost_dollars'])}</td></tr>"
        )
    return (
        "<h2>interruptions</h2><table id=timeline><tr><th>lost (UTC)</th><th>instance</th><th>pool</th>"
        "<th>why</th><th>notice</th><th class=n>detected after</th><th class=n>replaced after</th>"
        "<th>replacement pool</th><th>final checkpoint</th><th class=n>lost GPU-h</th><th class=n>lost $</th></tr>"
        f"{''.join(rows)}</table><p class=muted>{t['interruptions']} lost, {t['with_notice']} with a notice, "
        f"{t['replaced']} replaced; work lost {t['lost_gpu_hours']:.2f} GPU-h, {money(t['lost_dollars'])} "
        f"(per node: {h('; '.join(sorted({i['model'] for i in items})))})</p>"
    )


def _actions(actions: dict[str, Any]) -> str:
    listed = actions["recent"]
    if not listed:
        return "<h2>rebalancer actions and plans</h2><p class=muted>none recorded</p>"
    rows = "".join(
        f"<tr><td>{_when(a['ts'])}</td><td>{h(a['kind'])}</td><td>{h(a['instance_id'] or '-')}</td>"
        f"<td>{h(a['pool'] or '-')}</td><td>{h(_detail(a['detail']))}</td></tr>"
        for a in reversed(listed[-50:])
    )
    return (
        f"<h2>rebalancer actions and plans (newest {min(50, len(listed))} of {actions['count']})</h2>"
        "<table id=actions><tr><th>time (UTC)</th><th>event</th><th>instance</th><th>pool</th><th>detail</th></tr>"
        f"{rows}</table>"
    )


def _detail(detail: dict[str, Any]) -> str:
    keep = {k: v for k, v in (detail or {}).items() if k != "token" and v not in ("", None, {}, [])}
    return ", ".join(
        f"{k}={json.dumps(v, default=str) if isinstance(v, (dict, list)) else v}" for k, v in sorted(keep.items())
    )


def node_logs(logs: dict[str, Any]) -> str:
    if logs.get("error"):
        return f"<h2>node logs</h2><p class=muted>{h(logs['error'])}</p>"
    if not logs["nodes"]:
        return "<h2>node logs</h2><p class=muted>no node has uploaded a log yet</p>"
    parts = ["<h2>node logs</h2>"]
    for n in logs["nodes"]:
        text = html.escape(safe_lines(n["tail"]))
        parts.append(
            f"<h3>{h(n['instance'])} <span class=muted>({n['size']} bytes, updated {_when(n['updated_at'])}"
            f"{', final' if n['final'] else ''})</span></h3><pre>{text}</pre>"
        )
    return "".join(parts)


def safe_lines(text: str) -> str:
    """Log text kept as lines: each line made safe (control characters escaped, secrets masked)."""
    return "\n".join(safe(printable(line)) for line in text.splitlines())
