"""``fleet check``: can this machine use each cloud? One line per provider, with the fix.

Like ``sky check``: for every adapter it reports whether credentials were found (and whose),
whether prices can be read, whether instances can be launched, GPU quotas where the API tells
them, and the one thing to do when something is missing. Exit 0 when every checked provider
is usable, 1 otherwise. Credentials themselves are never printed.
"""

from __future__ import annotations

from pathlib import Path

import click

from fleet.cli.app import App, json_option, pass_app
from fleet.distribution import install_command
from fleet.errors import FleetError
from fleet.spec import ProviderSettings, load_spec
from providers.base import CheckResult
from providers.registry import ADAPTER_EXTRAS, cloud_check


def run_checks(names: list[str], settings: dict[str, ProviderSettings]) -> list[CheckResult]:
    """One CheckResult per provider name; a provider whose check itself fails is reported, not raised."""
    results = []
    for name in names:
        try:
            check = cloud_check(name)
        except FleetError as err:
            results.append(CheckResult(provider=name, ok=False, detail=str(err),
                                       fix=install_command(ADAPTER_EXTRAS[name])))
            continue
        if check is None:
            results.append(CheckResult(provider=name, ok=False, detail="no adapter in this version"))
            continue
        try:
            results.append(check(settings.get(name) or ProviderSettings()))
        except FleetError as err:
            results.append(CheckResult(provider=name, ok=False, detail=str(err)))
    return results


def _mark(value: bool | None) -> str:
    return {True: "yes", False: "no", None: "?"}[value]


@click.command("check")
@click.argument("providers", nargs=-1, type=click.Choice(sorted(ADAPTER_EXTRAS)))
@click.option("--spec", "spec_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Use this spec's provider settings (project, subscription, regions).")
@json_option
@pass_app
def command(app: App, providers: tuple[str, ...], spec_path: Path | None, as_json: bool) -> None:
    """Check credentials, pricing, launch rights and GPU quotas per cloud (default: all)."""
    settings: dict[str, ProviderSettings] = {}
    names = list(providers) or sorted(ADAPTER_EXTRAS)
    if spec_path is not None:
        spec = load_spec(spec_path)
        settings = {n: s for n in ADAPTER_EXTRAS if (s := spec.provider_settings(n)) is not None}
        names = [n for n in names if n in settings]
    results = run_checks(names, settings)
    if as_json:
        app.emit_json([r.model_dump() for r in results])
    else:
        for r in results:
            head = f"{r.provider:<6} {'ok  ' if r.ok else 'FAIL'}"
            facts = [f"identity {r.identity}" if r.identity else "",
                     f"price {_mark(r.can_price)}", f"launch {_mark(r.can_launch)}"]
            click.echo("  ".join(x for x in [head, *facts] if x) + (f"  ({r.detail})" if r.detail else ""))
            for quota, value in sorted(r.quotas.items()):
                click.echo(f"         quota {quota}: {value}")
            if r.fix and not r.ok:
                click.echo(f"         fix: {r.fix}")
    if not all(r.ok for r in results):
        raise SystemExit(1)
