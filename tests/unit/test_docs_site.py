"""The documentation site (``mkdocs.yml``, ``docs/``) holds together: every page is in the nav and
every nav entry is a page, relative links between pages and from the README resolve (so they work
on GitHub too), the generated references cover the spec and every command, and, where MkDocs is
installed (the ``docs`` extra; CI installs it), ``mkdocs build --strict`` passes: a broken link,
unknown anchor or missing page fails it."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: Pages made by the build (``docs/gen_reference.py``), not files in the tree.
GENERATED = {"reference/spec.md"}
#: Markdown links and images: ``[text](target)`` / ``![alt](target)``, outside code.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _load_reference_hook():
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _nav_pages(entries) -> list[str]:
    pages = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def _config() -> dict:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)  # mkdocs' !ENV and kin
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)


def _prose(text: str) -> str:
    """TEXT without fenced code blocks and inline code, where link syntax is not a link."""
    text = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def _local_targets(page: Path) -> list[tuple[str, Path]]:
    found = []
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        found.append((target, (page.parent / target.split("#", 1)[0]).resolve()))
    return found


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    nav = _nav_pages(_config()["nav"])
    assert len(nav) == len(set(nav)), "a page is listed twice in mkdocs.yml's nav"
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert set(nav) - GENERATED == on_disk, "mkdocs.yml's nav and the pages in docs/ differ"


def test_links_between_pages_and_from_the_readme_resolve():
    pages = [ROOT / "README.md", *DOCS.rglob("*.md")]
    broken = [
        f"{page.relative_to(ROOT)}: {target}"
        for page in pages
        for target, path in _local_targets(page)
        if not path.exists() and path.relative_to(DOCS.resolve()).as_posix() not in GENERATED
    ]
    assert not broken, broken


def test_the_readme_links_every_top_level_page_of_the_docs():
    linked = {path for _, path in _local_targets(ROOT / "README.md")}
    wanted = {(DOCS / p).resolve() for p in _nav_pages(_config()["nav"]) if "/" not in p or p == "providers/index.md"}
    assert wanted <= linked, sorted(p.name for p in wanted - linked)


def test_the_dashboard_screenshot_is_shown():
    shown = {path for page in DOCS.rglob("*.md") for _, path in _local_targets(page)}
    for image in (DOCS / "images").iterdir():
        assert image.resolve() in shown, f"docs/images/{image.name} is on no page"


def test_the_spec_reference_documents_every_field_of_the_schema():
    from fleet.spec import json_schema

    schema, hook = json_schema(), _load_reference_hook()
    page = hook.render(schema)
    sections = re.split(r"^## ", page, flags=re.M)[1:]
    by_anchor = {re.search(r"\{ #([\w-]+) \}", s).group(1): s for s in sections}
    objects = {hook.ROOT_ANCHOR: schema, **{name.lower(): d for name, d in schema["$defs"].items()}}
    assert set(by_anchor) == set(objects)
    for anchor, definition in objects.items():
        for field in definition.get("properties", {}):
            assert f"| `{field}` |" in by_anchor[anchor], f"{anchor}.{field} is not documented"
    targets = set(re.findall(r"\]\(#([\w-]+)\)", page))
    assert targets <= set(by_anchor), targets - set(by_anchor)


def test_the_cli_reference_sees_every_lazily_loaded_command():
    from fleet.cli.main import COMMAND_MODULES, cli, command_name

    _load_reference_hook().load_every_command()
    assert {command_name(m) for m in COMMAND_MODULES} <= set(cli.commands)
    page = (DOCS / "reference" / "cli.md").read_text()
    assert ":module: fleet.cli.main" in page and ":command: cli" in page


def test_the_site_builds_in_strict_mode(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocs_click") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("MkDocs is not installed: pip install -e '.[docs]'")
        pytest.skip("MkDocs is not installed (pip install -e '.[docs]')")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "NO_MKDOCS_2_WARNING": "1",
    }
    site = tmp_path / "site"
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    cli_page = (site / "reference" / "cli" / "index.html").read_text()
    for command in ("up", "simulate", "local-preempt", "spec-schema", "export-pulumi"):
        assert f'id="fleet-{command}"' in cli_page, command
    spec_page = (site / "reference" / "spec" / "index.html").read_text()
    assert 'id="fleetspec"' in spec_page and "max_pool_share" in spec_page
    assert (site / "images" / "dashboard.png").is_file()


def test_each_provider_guide_states_its_row_of_the_node_image_table():
    """docs/node.md compares the providers' default images; each provider's guide states its own row."""
    table = (DOCS / "node.md").read_text().split("| Provider | Default image", 1)[1].split("\n\n", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    assert len(rows) >= 6
    for provider, image, python in rows:
        page = (DOCS / "providers" / f"{provider.lower()}.md").read_text()
        section = page.split("## What a node needs and gets", 1)[1]
        assert " ".join(image.split()) in " ".join(section.split()), f"{provider}: the image differs from docs/node.md"
        assert f"Python on it: {python}" in section, f"{provider}: the Python differs from docs/node.md"
