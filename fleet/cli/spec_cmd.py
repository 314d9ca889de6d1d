"""``fleet spec check|schema``: validate a spec, export its JSON Schema."""

from __future__ import annotations

import json

import click

from fleet.cli.app import App, json_option, pass_app
from fleet.spec import json_schema, load_spec


@click.group("spec")
def command() -> None:
    """Validate fleet specs and export their JSON Schema."""


@command.command("check")
@click.argument("path", type=click.Path(dir_okay=False))
@json_option
@pass_app
def check(app: App, path: str, as_json: bool) -> None:
    """Validate PATH; exit 2 with every problem listed if it is invalid."""
    spec = load_spec(path)
    if as_json:
        app.emit_json(
            {"valid": True, "name": spec.name, "spec_hash": spec.spec_hash(), "spec": spec.model_dump(mode="json")}
        )
    else:
        app.console.print(
            f"[green]ok[/] {path}: fleet [bold]{spec.name}[/], "
            f"{spec.capacity.gpus} weighted GPUs ({', '.join(spec.capacity.accelerators)}), "
            f"backend {spec.backend.value}"
        )


@command.command("schema")
def schema() -> None:
    """Print the JSON Schema of the spec (point your editor at it)."""
    click.echo(json.dumps(json_schema(), indent=2))
