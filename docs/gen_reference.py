"""The reference pages generated from the code when the docs are built (an MkDocs hook, named in
``mkdocs.yml``; it also runs on its own: ``python docs/gen_reference.py`` prints the spec page).

* ``reference/spec.md`` is rendered from the JSON Schema that ``fleet spec schema`` prints
  (``fleet.spec.json_schema``): one table per object, every field with its type, default,
  constraints and description, so the page cannot drift from the spec the loader enforces.
* ``reference/cli.md`` is written by hand around a ``::: mkdocs-click`` block; ``fleet`` loads each
  command's module only when that command runs, so ``on_config`` loads them all first, and
  mkdocs-click then documents every command, not only those some import happened to load.
"""

from __future__ import annotations

import json
from typing import Any

SPEC_PAGE = "reference/spec.md"
ROOT_ANCHOR = "fleetspec"


def _text(description: str | None) -> str:
    """A schema description as one Markdown table cell: reST ``literals`` as `code`, no pipes or newlines."""
    text = " ".join((description or "").split())
    return text.replace("``", "`").replace("|", "\\|")


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _type(node: dict[str, Any]) -> str:
    """A field's type in words, with object types linked to their own table."""
    if "$ref" in node:
        name = _ref_name(node["$ref"])
        return f"[{name}](#{name.lower()})"
    if "anyOf" in node or "oneOf" in node:
        return " or ".join(_type(option) for option in node.get("anyOf", node.get("oneOf", [])))
    if "enum" in node:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    kind = node.get("type")
    if kind == "array":
        return f"list of {_type(node['items'])}" if "items" in node else "list"
    if kind == "object" and node.get("properties"):
        keys = ", ".join(f"`{key}` ({_type(value)})" for key, value in node["properties"].items())
        return f"object with keys {keys}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"mapping of string to {_type(node['additionalProperties'])}"
    if isinstance(kind, list):
        return " or ".join(f"`{k}`" for k in kind)
    return f"`{kind}`" if kind else "any"


CONSTRAINTS = (
    ("exclusiveMinimum", "> {}"),
    ("minimum", ">= {}"),
    ("exclusiveMaximum", "< {}"),
    ("maximum", "<= {}"),
    ("minLength", "length >= {}"),
    ("maxLength", "length <= {}"),
    ("minItems", "items >= {}"),
    ("maxItems", "items <= {}"),
    ("pattern", "matches `{}`"),
)


def _constraints(node: dict[str, Any]) -> list[str]:
    found = [
        template.format(node[key])
        for key, template in CONSTRAINTS
        if key in node and not (key in ("minLength", "minItems") and node[key] == 0)
    ]
    for option in node.get("anyOf", []):
        found += _constraints(option)
    return found


def _default(name: str, node: dict[str, Any], required: set[str]) -> str:
    if name in required:
        return "required"
    if "default" not in node:
        return ""
    return f"`{json.dumps(node['default'])}`".replace("|", "\\|")


def _description(node: dict[str, Any], defs: dict[str, Any]) -> str:
    """The field's own description, else that of the one definition it refers to."""
    if node.get("description"):
        return node["description"]
    refs = [option["$ref"] for option in [node, *node.get("anyOf", [])] if "$ref" in option]
    return defs.get(_ref_name(refs[0]), {}).get("description", "") if len(refs) == 1 else ""


def _object_table(definition: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    required = set(definition.get("required", []))
    rows = ["| field | type | default | description |", "|---|---|---|---|"]
    for name, node in definition.get("properties", {}).items():
        kind = _type(node)
        limits = _constraints(node)
        if limits:
            kind += " (" + ", ".join(limits).replace("|", "\\|") + ")"
        rows.append(f"| `{name}` | {kind} | {_default(name, node, required)} | {_text(_description(node, defs))} |")
    if definition.get("additionalProperties") is False:
        rows += ["", "No other keys are allowed."]
    return rows


def _section(name: str, definition: dict[str, Any], anchor: str, defs: dict[str, Any]) -> list[str]:
    lines = [f"## {name} {{ #{anchor} }}", ""]
    if definition.get("description"):
        lines += [_text(definition["description"]), ""]
    if "properties" in definition:
        lines += _object_table(definition, defs)
    else:
        lines += [f"Type: {_type(definition)}."]
    return lines + [""]


def render(schema: dict[str, Any]) -> str:
    """The spec reference page for SCHEMA (the root object first, then every definition by name)."""
    lines = [
        "# Spec reference",
        "",
        "Every field of a fleet spec, generated when these pages are built from the JSON Schema that",
        "`fleet spec schema` prints (point an editor's YAML support at that output to get completion",
        "and checks as you type). [The fleet spec](../spec.md) explains the fields with examples;",
        "`fleet spec check FILE` validates a spec.",
        "",
    ]
    defs = schema.get("$defs", {})
    lines += _section("Top level", schema, ROOT_ANCHOR, defs)
    for name, definition in sorted(defs.items()):
        lines += _section(name, definition, name.lower(), defs)
    return "\n".join(lines)


def spec_page() -> str:
    from fleet.spec import json_schema

    return render(json_schema())


def load_every_command() -> None:
    """Load every lazily registered ``fleet`` command into the group, so mkdocs-click sees them all."""
    import click

    from fleet.cli.main import cli

    ctx = click.Context(cli, info_name="fleet")
    for name in cli.list_commands(ctx):
        cli.get_command(ctx, name)


# -- MkDocs hooks ---------------------------------------------------------------------------------


def on_config(config):  # type: ignore[no-untyped-def]
    load_every_command()
    return config


def on_files(files, config):  # type: ignore[no-untyped-def]
    from mkdocs.structure.files import File

    files.append(File.generated(config, SPEC_PAGE, content=spec_page()))
    return files


if __name__ == "__main__":
    print(spec_page())
