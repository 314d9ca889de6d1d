"""Run a Pulumi program under Pulumi's unit-test mocks and record what it declares.

``declare(build)`` sets the mocks, calls ``build()`` (which declares resources), waits until
every resource is registered and returns one :class:`Declared` per resource: its type, logical
name, the inputs the engine received (camelCase, as the engine sees them) and the options that
matter here (``ignore_changes``, ``protect``, ``retain_on_delete``, parent type). Nothing of
ours is mocked: the mocks stand in for the Pulumi engine only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulumi


@dataclass
class Declared:
    type: str
    name: str
    inputs: dict[str, Any] = field(default_factory=dict)
    ignore_changes: list[str] = field(default_factory=list)
    protect: bool = False
    retain_on_delete: bool = False
    parent_type: str = ""


class EngineMocks(pulumi.runtime.Mocks):
    """Answers the engine's calls; echoes inputs and adds the outputs the program reads."""

    def __init__(self) -> None:
        self.inputs: dict[tuple[str, str], dict[str, Any]] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.inputs[(args.typ, args.name)] = dict(args.inputs)
        # echo the inputs as outputs, in the output's shape where the two differ
        # (azure-native takes identity ids as a list and reports them as a map)
        echoed = dict(args.inputs)
        identity = echoed.get("identity")
        if isinstance(identity, dict) and isinstance(identity.get("userAssignedIdentities"), list):
            echoed["identity"] = {
                **identity,
                "userAssignedIdentities": {i: {} for i in identity["userAssignedIdentities"]},
            }
        outs = {
            **echoed,
            "arn": f"arn:mock:{args.name}",
            "email": f"{args.name}@mock.iam",
            "latestVersion": 1,
            "selfLinkUnique": f"https://mock/{args.name}",
            "principalId": f"pid-{args.name}",
        }
        if args.typ == "pulumi-python:dynamic:Resource":
            outs["instance_ids"] = []
        return f"{args.name}-id", outs

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


def declare(build: Callable[[], Any]) -> tuple[list[Declared], Any]:
    """Run ``build`` under the mocks; returns (declared resources, what ``build`` returned)."""
    mocks = EngineMocks()
    pulumi.runtime.set_mocks(mocks, preview=False)
    seen: list[tuple[Declared, pulumi.Resource]] = []

    def record(args: pulumi.ResourceTransformationArgs):
        opts = args.opts
        parent = opts.parent
        seen.append(
            (
                Declared(
                    type=args.type_,
                    name=args.name,
                    ignore_changes=list(opts.ignore_changes or []),
                    protect=bool(opts.protect),
                    retain_on_delete=bool(opts.retain_on_delete),
                    parent_type=getattr(parent, "_type", "") if parent is not None else "",
                ),
                args.resource,
            )
        )
        return None

    result: dict[str, Any] = {}

    @pulumi.runtime.test
    def run():
        pulumi.runtime.register_stack_transformation(record)
        result["value"] = build()
        return pulumi.Output.all(*[resource.urn for _, resource in seen])

    run()
    out = []
    for declared, _ in seen:
        declared.inputs = mocks.inputs.get((declared.type, declared.name), {})
        out.append(declared)
    return out, result.get("value")


def of_type(declared: list[Declared], type_: str) -> list[Declared]:
    return [d for d in declared if d.type == type_]


def one(declared: list[Declared], type_: str, name: str | None = None) -> Declared:
    found = [d for d in declared if d.type == type_ and (name is None or d.name == name)]
    assert len(found) == 1, f"expected one {type_} {name or ''}, found {[d.name for d in found]}"
    return found[0]


#: How the engine marks a secret value in inputs (Pulumi's special signature key and value).
SECRET_SIG = ("4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270")


def reveal(value: Any) -> tuple[Any, bool]:
    """(plain value, whether the engine received it as a secret)."""
    if isinstance(value, dict) and value.get(SECRET_SIG[0]) == SECRET_SIG[1]:
        return value["value"], True
    return value, False
