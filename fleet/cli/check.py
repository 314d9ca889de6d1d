"""``fleet check [PROVIDER|SPEC]...``: can this machine use each cloud? A short block per provider.

Like ``sky check``: for every adapter it reports whether credentials were found (and whose),
whether prices can be read, whether instances can be launched, GPU quotas where the API tells
them, and the one thing to do when something is missing; and a line for the embedded local
cloud (``backend: local``, no account). A provider with no credentials at all (or no adapter
installed) reads ``not configured``, not ``FAIL``. Credentials themselves are never printed.

What decides the exit status (0 usable, 1 not):

- ``fleet check aws gcp``: the providers named must be usable;
- ``fleet check SPEC...``: what those specs need — the local cloud for ``backend: local``, each
  enabled provider of a cloud spec (any one usable provider when the spec allows every one);
- ``fleet check``: the providers that are configured (none configured is fine: the local cloud).

Every line fits 80 columns (less on a narrower terminal): details wrap between words.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import click

from fleet.cli.app import App, json_option, pass_app
from fleet.distribution import install_command
from fleet.errors import FleetError
from fleet.spec import Backend, FleetSpec, ProviderSettings, load_spec
from providers.base import CheckResult
from providers.registry import adapter_extras, cloud_check, local_cloud_root, record

LOCAL = "local"
MAX_WIDTH = 80
INDENT = " " * 7


def run_checks(names: list[str], settings: dict[str, ProviderSettings]) -> list[CheckResult]:
    """One CheckResult per provider name; a provider whose check itself fails is reported, not raised."""
    results = []
    for name in names:
        try:
            check = cloud_check(name)
        except FleetError as err:
            results.append(
                CheckResult(
                    provider=name, ok=False, configured=False, detail=str(err), fix=install_command(record(name).extra)
                )
            )
            continue
        if check is None:
            results.append(CheckResult(provider=name, ok=False, configured=False, detail="no adapter in this version"))
            continue
        try:
            results.append(check(settings.get(name) or record(name).settings()))
        except FleetError as err:
            results.append(CheckResult(provider=name, ok=False, detail=str(err)))
    return results


def check_local(home: Path) -> CheckResult:
    """The embedded local cloud: usable when its folder exists and opens, or can be created."""
    root = local_cloud_root(home)
    if (root / "cloud.db").exists():
        from providers.local import LocalCloud

        try:
            cloud = LocalCloud.open(root)
        except FleetError as err:
            return CheckResult(
                provider=LOCAL,
                ok=False,
                detail=str(err),
                fix=f"`fleet local reset` starts it afresh (or move {root} aside)",
            )
        alive = len(cloud.all_instances(alive_only=True))
        return CheckResult(
            provider=LOCAL,
            ok=True,
            identity=f"simulated cloud at {root}",
            can_price=True,
            can_launch=True,
            detail=f"{alive} instance(s) alive; no account needed",
        )
    parent = next((p for p in (root, *root.parents) if p.exists()), None)
    if parent is None or not os.access(parent, os.W_OK):
        return CheckResult(
            provider=LOCAL,
            ok=False,
            detail=f"cannot create {root}: {parent} is not writable",
            fix="set SPOTFLEET_LOCAL_CLOUD or --home to a writable folder",
        )
    return CheckResult(
        provider=LOCAL,
        ok=True,
        identity=f"simulated cloud at {root}",
        can_price=True,
        can_launch=True,
        detail="created on first use; no account needed",
    )


def needed(specs: list[FleetSpec]) -> tuple[set[str], list[set[str]]]:
    """What ``specs`` need: providers that must each be usable, and groups of which one must be."""
    every: set[str] = set()
    any_of: list[set[str]] = []
    for spec in specs:
        if spec.backend is Backend.LOCAL:
            every.add(LOCAL)
        elif spec.providers:
            every |= {n for n in adapter_extras() if spec.provider_settings(n) is not None}
        else:
            any_of.append(set(adapter_extras()))
    return every, any_of


def _split(args: tuple[str, ...]) -> tuple[list[str], list[Path]]:
    """Arguments that name a provider (or ``local``), and the others as spec paths."""
    names, paths = [], []
    for arg in args:
        if arg in adapter_extras() or arg == LOCAL:
            names.append(arg)
        elif Path(arg).is_file():
            paths.append(Path(arg))
        else:
            known = ", ".join([*sorted(adapter_extras()), LOCAL])
            raise click.BadParameter(f"{arg!r} is neither a provider ({known}) nor a spec file", param_hint="ARG")
    return names, paths


def _mark(value: bool | None) -> str:
    return {True: "yes", False: "no", None: "?"}[value]


def _state(r: CheckResult) -> str:
    return "ok" if r.ok else ("not configured" if not r.configured else "FAIL")


def lines(r: CheckResult, width: int) -> list[str]:
    """``r`` for people: a head line, then the detail, quotas and fix, wrapped between words."""
    facts = [] if not r.configured else [f"price {_mark(r.can_price)}", f"launch {_mark(r.can_launch)}"]
    out = ["  ".join([f"{r.provider:<6} {_state(r)}", *facts])]

    def wrap(text: str) -> list[str]:
        return textwrap.wrap(
            text,
            width=width,
            initial_indent=INDENT,
            subsequent_indent=INDENT + "  ",
            break_long_words=False,
            break_on_hyphens=False,
        )

    if r.identity:
        out += wrap(r.identity)
    if r.detail:
        out += wrap(r.detail)
    for quota, value in sorted(r.quotas.items()):
        out += wrap(f"quota {quota}: {value}")
    if r.fix and not r.ok:
        out += wrap(f"fix: {r.fix}")
    return out


@click.command("check")
@click.argument("args", nargs=-1, metavar="[PROVIDER|SPEC]...")
@click.option(
    "--spec",
    "spec_paths",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="A spec whose needs decide the exit status and whose provider settings are used "
    "(project, subscription, regions); also given as an argument.",
)
@json_option
@pass_app
def command(app: App, args: tuple[str, ...], spec_paths: tuple[Path, ...], as_json: bool) -> None:
    """Check credentials, pricing, launch rights and GPU quotas per cloud, and the local cloud.

    PROVIDER (aws, gcp, azure, vast, local) checks only those; SPEC checks what those specs need.
    Exit 0 when what is needed is usable: the named providers, else the specs' needs, else
    every configured provider.
    """
    names, paths = _split(args)
    specs = [load_spec(p) for p in (*spec_paths, *paths)]
    settings: dict[str, ProviderSettings] = {}
    for spec in specs:
        settings.update(
            {n: s for n in adapter_extras() if (s := spec.provider_settings(n)) is not None and n not in settings}
        )
    every, any_of = needed(specs)
    if names:
        every, any_of = set(names), []
    wanted = every.union(*any_of)
    shown = names or (
        [n for n in [*sorted(adapter_extras()), LOCAL] if n in wanted] if specs else [*sorted(adapter_extras()), LOCAL]
    )
    results = run_checks([n for n in shown if n != LOCAL], settings)
    if LOCAL in shown:
        results.append(check_local(app.home))
    by_name = {r.provider: r for r in results}
    if names or specs:
        ok = all(by_name[n].ok for n in every if n in by_name) and all(
            any(by_name[n].ok for n in group if n in by_name) for group in any_of
        )
    else:
        ok = all(r.ok for r in results if r.configured)
    if as_json:
        app.emit_json([r.model_dump() for r in results])
    else:
        width = min(MAX_WIDTH, app.console.width)
        for r in results:
            for line in lines(r, width):
                click.echo(line)
        if not (names or specs):
            click.echo("exit status: configured providers only; `fleet check SPEC` checks a spec's needs")
    if not ok:
        raise SystemExit(1)
