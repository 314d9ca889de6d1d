"""Hostile spec input: every case is exit 2 with one short line, fast and in bounded memory.

Cases from the hardening review: YAML alias bombs, FIFOs and devices as the spec path,
endless or oversized files, non-UTF-8 bytes, deep nesting, duplicate keys; plus a property
test that random and hostile specs give a SpecError or a valid spec, never another exception.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.spec_texts import MINIMAL

from fleet.errors import SpecError
from fleet.spec import FleetSpec, load_spec, parse_spec
from fleet.spec_input import MAX_SPEC_BYTES

FLEET_BIN = str(Path(sys.executable).with_name("fleet"))


def fleet(*args: str, timeout: float = 30, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPOTFLEET_STATE", "SPOTFLEET_LOCAL_CLOUD")}
    env.update(COLUMNS="200", NO_COLOR="1")
    if home is not None:
        env["SPOTFLEET_HOME"] = str(home)
    return subprocess.run(
        [FLEET_BIN, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env
    )


def one_line_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-500:])
    err = proc.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1 and len(err) < 400, err[:1000]
    for fragment in fragments:
        assert fragment in err, err
    return err


def spec_file(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "hostile.yaml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def bomb(levels: int = 9) -> str:
    """A billion-laughs document whose last anchor is used as the legal field ``node.env``."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, levels)]
    return "\n".join(lines) + "\n"


# ---- alias bombs, nesting, duplicate keys ---------------------------------------------------


def test_an_alias_bomb_in_a_legal_field_is_refused_before_validation(tmp_path):
    text = bomb() + MINIMAL + f"node:\n  env: *l{8}\n"
    assert len(text.encode()) < 1024
    err = one_line_error(fleet("spec", "check", str(spec_file(tmp_path, text))), "expands to more than")
    assert "lol" not in err


def test_a_small_alias_graph_is_still_fine():
    spec = parse_spec(MINIMAL + "providers:\n  aws: &p {regions: [us-east-1]}\n  gcp: *p\n")
    assert spec.providers["gcp"].regions == ["us-east-1"]


def test_an_alias_inside_itself_is_refused():
    with pytest.raises(SpecError, match="contains itself"):
        parse_spec(MINIMAL + "node:\n  env: &e {a: *e}\n")


@pytest.mark.parametrize("depth", [40, 100_000])
def test_deep_nesting_is_a_bad_spec_not_a_recursion_error(tmp_path, depth):
    text = MINIMAL + "node:\n  env: " + "[" * depth + "]" * depth + "\n"
    one_line_error(fleet("spec", "check", str(spec_file(tmp_path, text))), "nested more than")


def test_errors_quote_a_bounded_value():
    big = "x" * 100_000
    with pytest.raises(SpecError) as info:
        parse_spec(MINIMAL.replace("gpus: 8", f"gpus: {big}"))
    assert len(str(info.value)) < 400 and "got 'xxxx" in str(info.value)


def test_a_thousand_bad_items_list_twenty_and_count_the_rest():
    with pytest.raises(SpecError) as info:
        parse_spec(MINIMAL + "providers:\n  aws:\n    regions: [" + ", ".join(["[1]"] * 1000) + "]\n")
    assert len(info.value.problems) == 21 and "980 more" in info.value.problems[-1][1]


@pytest.mark.parametrize(
    "text, key, lines",
    [
        (MINIMAL + "name: other\n", "'name'", "lines 1 and 6"),
        (MINIMAL + "capacity:\n  gpus: 64\n  accelerators: [H100]\n", "'capacity'", "lines 3 and 6"),
        (MINIMAL.replace("gpus: 8", "gpus: 8\n  gpus: 64"), "'gpus'", "lines 4 and 5"),
        ("{name: a, name: b}\n", "'name'", "twice on line 1"),
    ],
)
def test_duplicate_keys_are_refused_naming_both_lines(text, key, lines):
    with pytest.raises(SpecError) as info:
        parse_spec(text)
    assert f"duplicate key {key}" in str(info.value) and lines in str(info.value)


def test_merge_keys_may_override_what_they_merge():
    spec = parse_spec(
        MINIMAL + "providers:\n  aws: &p {regions: [us-east-1], spot: false}\n  gcp:\n    <<: *p\n    spot: true\n"
    )
    assert spec.providers["gcp"].spot is True and spec.providers["gcp"].regions == ["us-east-1"]


def test_duplicate_keys_never_reach_up(tmp_path):
    one_line_error(
        fleet("up", str(spec_file(tmp_path, MINIMAL + "name: other\n")), "--yes", home=tmp_path / "home"),
        "duplicate key 'name'",
    )
    assert not (tmp_path / "home" / "state.db").exists()


# ---- what is read -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["spec", "check"], ["plan"], ["up", "--yes"]])
def test_a_fifo_is_refused_without_blocking(tmp_path, command):
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)
    proc = fleet(*command, str(fifo), home=tmp_path / "home", timeout=20)
    one_line_error(proc, "not a regular file")


def test_dev_zero_is_refused():
    one_line_error(fleet("spec", "check", "/dev/zero", timeout=20), "not a regular file")


def test_an_oversized_file_is_refused_with_bounded_reading(tmp_path):
    path = spec_file(tmp_path, MINIMAL + "#" * (MAX_SPEC_BYTES + 10) + "\n")
    one_line_error(fleet("spec", "check", str(path)), "larger than 256 KiB")


def test_non_utf8_bytes_name_the_line(tmp_path):
    path = spec_file(tmp_path, MINIMAL.encode() + b"node:\n  image: \xff\xfe\n")
    one_line_error(fleet("spec", "check", str(path)), "not UTF-8", "line 7")


def test_an_endless_writer_cannot_make_load_spec_grow(tmp_path):
    """A file that keeps growing while it is read: reading stops at the cap."""
    path = tmp_path / "growing.yaml"
    path.write_text(MINIMAL)
    stop = threading.Event()

    def grow() -> None:
        with path.open("a") as f:
            while not stop.is_set():
                f.write("#" * 65536 + "\n")
                f.flush()

    writer = threading.Thread(target=grow, daemon=True)
    writer.start()
    try:
        while path.stat().st_size <= MAX_SPEC_BYTES:
            pass
        with pytest.raises(SpecError, match="larger than"):
            load_spec(path)
    finally:
        stop.set()
        writer.join()


# ---- property: SpecError or a valid spec, never another exception -----------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(["H100", "aws", "local", "spot", "us-east-1", "-1", "1e400", "~", ".nan"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.text(max_size=12)
            | st.sampled_from(
                ["name", "capacity", "gpus", "accelerators", "providers", "node", "env", "regions", "budget"]
            ),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=20,
)
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.sampled_from(["quickstart", "a", "ok-fleet"]), VALUES),
        "backend": st.one_of(st.sampled_from(["local", "cloud"]), VALUES),
        "capacity": st.one_of(
            st.fixed_dictionaries(
                {"gpus": st.one_of(st.integers(-5, 200), VALUES), "accelerators": st.one_of(st.just(["H100"]), VALUES)}
            ),
            VALUES,
        ),
        "providers": VALUES,
        "budget": VALUES,
        "node": VALUES,
        "diversification": VALUES,
        "workload": VALUES,
        "checkpoint": VALUES,
        "strategy": VALUES,
        "local": VALUES,
    },
)
HOSTILE = st.sampled_from(
    [
        bomb(4),
        "&a [*a]",
        "[" * 300,
        "{" * 50 + "}" * 50,
        "a: !!python/object:os.system x",
        "- !!binary ###",
        "name: 1\nname: 2",
        "? [a, b]\n: c",
        "x: " + "9" * 5000,
        "a: &x 1\nb: *y",
        "%YAML 9.9\n---\na",
        "\x00",
        "\ufeff:",
        "!!set {a, b}",
        "<<: [1, 2]",
        "a: !!timestamp 2020-99-99",
        "key: '\\x'",
        '"\\ud800"',
        "---\n---\n",
    ]
)


def assert_spec_or_spec_error(text: str) -> None:
    try:
        spec = parse_spec(text)
    except SpecError as err:
        assert len(str(err)) < 21 * 450
        return
    assert isinstance(spec, FleetSpec)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FIELDS)
def test_random_specs_give_a_spec_error_or_a_valid_spec(fields):
    assert_spec_or_spec_error(yaml.safe_dump(fields, allow_unicode=True))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.text(max_size=200),
        st.lists(st.one_of(HOSTILE, st.text(max_size=30)), max_size=4).map("\n".join),
        st.builds(lambda a, b: MINIMAL[:a] + b + MINIMAL[a:], st.integers(0, len(MINIMAL)), HOSTILE),
    )
)
def test_hostile_text_gives_a_spec_error_or_a_valid_spec(text):
    assert_spec_or_spec_error(text)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    st.binary(max_size=300)
    | st.one_of(HOSTILE, st.text(max_size=100)).map(lambda t: t.encode("utf-8", "surrogatepass"))
)
def test_hostile_bytes_through_load_spec(tmp_path, raw):
    path = tmp_path / "prop.yaml"
    path.write_bytes(raw)
    try:
        load_spec(path)
    except SpecError:
        pass


@pytest.mark.parametrize("text", [bomb(9), "[" * 5000, "\xff", MINIMAL + "name: x\n", "a: " + "9" * 5000, "&a [*a]"])
def test_hostile_text_through_the_cli_is_exit_2(tmp_path, text):
    raw = text.encode("latin-1") if text == "\xff" else text.encode()
    one_line_error(fleet("spec", "check", str(spec_file(tmp_path, raw))))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.one_of(FIELDS.map(lambda f: yaml.safe_dump(f, allow_unicode=True)), HOSTILE, st.text(max_size=100)))
def test_random_specs_through_the_cli_exit_0_or_2(tmp_path, text):
    from click.testing import CliRunner

    from fleet.cli.main import cli

    path = tmp_path / "cli.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    result = CliRunner().invoke(cli, ["spec", "check", str(path), "--json"])
    assert result.exit_code in (0, 2) and isinstance(result.exception, (SystemExit, type(None))), result.output
