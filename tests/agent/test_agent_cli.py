"""``fleet agent`` end to end: a real training job, a fake cloud's notice, the final checkpoint.

For every cloud: the agent (a real ``fleet`` subprocess) watches the fake, the fake publishes a
notice, the agent signals the job, the job commits its final checkpoint before the deadline and
exits, and the agent exits 0 reporting it (and records it in a real state store).
"""

from __future__ import annotations

import signal
import time

import pytest
from agent_support import FLEET, env, finish, job_argv, last_step, start, trailing_json, wait_until

from fleet.checkpoint import CheckpointManager
from fleet.state import open_store

DEADLINE_S = 60


def publish(cloud: str, fakes: dict, notice_file) -> tuple[list[str], object]:
    """(agent CLI args, action that publishes the notice) for ``cloud``."""
    if cloud == "aws":
        return ["--metadata-url", fakes["aws"].url], lambda: fakes["aws"].schedule_action("terminate", DEADLINE_S)
    if cloud == "gcp":
        return ["--metadata-url", fakes["gcp"].url], fakes["gcp"].preempt
    if cloud == "azure":
        azure = fakes["azure"]
        return ["--metadata-url", azure.url], lambda: azure.schedule("Preempt", not_before_in=DEADLINE_S)
    if cloud == "vast":
        fakes["vast"].add_instance("31337")
        return ["--metadata-url", fakes["vast"].url], lambda: fakes["vast"].outbid("31337")
    return (
        ["--notice-file", str(notice_file)],
        lambda: notice_file.write_text(f'{{"action": "terminate", "time": {time.time() + DEADLINE_S}}}'),
    )


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure", "vast", "local"])
def test_notice_fires_hook_and_final_checkpoint_commits_before_deadline(cloud, tmp_path, imds, gce, azure, vast):
    fakes = {"aws": imds, "gcp": gce, "azure": azure, "vast": vast}
    uri = f"file://{tmp_path / 'ckpt'}"
    state = tmp_path / "state.db"
    environ = env(tmp_path / "home", VAST_API_KEY=vast.api_key)
    job_log, agent_log = tmp_path / "job.log", tmp_path / "agent.log"
    # Only the final save: a standalone agent cannot see the exit status of a job it did not start,
    # so it needs a checkpoint newer than the notice (fleet run also accepts a clean exit).
    job = start(job_argv(uri, save_every=100_000), job_log, environ)
    wait_until(lambda: last_step(job_log) >= 12, what="training to start")

    args, notify = publish(cloud, fakes, tmp_path / "notice.json")
    # the instance id is also how the Azure watcher finds its VM's events and the Vast one its instance
    node = {"azure": azure.vm_name, "vast": "31337"}.get(cloud, f"{cloud}-node-1")
    agent = start(
        [
            *FLEET,
            "agent",
            "--cloud",
            cloud,
            *args,
            "--poll-interval",
            "0.1",
            "--hook-signal",
            "SIGTERM",
            "--pid",
            str(job.pid),
            "--checkpoint-uri",
            uri,
            "--state",
            str(state),
            "--fleet",
            "f1",
            "--instance-id",
            node,
            "--json",
        ],
        agent_log,
        environ,
    )
    wait_until(lambda: "watching" in agent_log.read_text(), what="the agent to start watching")
    time.sleep(0.3)
    assert agent.poll() is None and job.poll() is None  # no notice yet: both keep running
    notify()

    assert finish(agent) == 0, agent_log.read_text()
    assert finish(job) == 0, job_log.read_text()
    outcome = trailing_json(agent_log)
    final_step = last_step(job_log)
    assert "stopped by SIGTERM" in job_log.read_text()
    assert (outcome["cloud"], outcome["hook_ok"], outcome["job_finished"]) == (cloud, True, True)
    assert outcome["checkpoint_committed"] is outcome["checkpoint_new"] is True
    assert outcome["checkpoint_step"] == final_step
    latest = CheckpointManager(uri).latest()
    assert latest.step == final_step and latest.committed_at < outcome["deadline"]
    assert outcome["reported"] is True
    events = open_store(str(state)).events("f1", kinds=["interruption-notice"])
    assert [(e.instance_id, e.detail["kind"], e.detail["checkpoint_step"]) for e in events] == [
        (node, outcome["kind"], final_step)
    ]
    if cloud == "azure":
        assert outcome["acknowledged"] is True and azure.acks == [azure.events[0]["EventId"]]


def test_agent_stops_cleanly_without_a_notice(tmp_path, imds):
    log = tmp_path / "agent.log"
    agent = start(
        [*FLEET, "agent", "--cloud", "aws", "--metadata-url", imds.url, "--poll-interval", "0.1"], log, env(tmp_path)
    )
    wait_until(lambda: len(imds.seen("GET", "spot/instance-action")) >= 2, what="polling")
    agent.send_signal(signal.SIGTERM)
    assert finish(agent) == 0
    assert "stopped before any interruption notice" in log.read_text()


def test_agent_hook_command_runs_on_notice(tmp_path, gce):
    marker = tmp_path / "drained"
    log = tmp_path / "agent.log"
    agent = start(
        [*FLEET, "agent", "--cloud", "gcp", "--metadata-url", gce.url, "--hook", f"echo drained > {marker}"],
        log,
        env(tmp_path),
    )
    wait_until(lambda: any(r.query.get("wait_for_change") for r in gce.requests), what="long poll")
    gce.preempt()
    assert finish(agent) == 0, log.read_text()
    assert marker.read_text() == "drained\n"
    assert "gcp preempt notice: started 'echo drained" in log.read_text()
    assert "no checkpoint storage to watch" in log.read_text()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--hook-signal", "SIGTERM"], "--hook-signal needs --pid"),
        (["--hook-signal", "SIGNOPE", "--pid", "1"], "unknown signal 'SIGNOPE'"),
        (["--hook", "true", "--pid", "1"], "either --hook COMMAND or --hook-signal"),
        (["--cloud", "vast", "--instance-id", ""], "vast: no instance id"),
    ],
)
def test_bad_agent_options_are_one_line_errors(tmp_path, args, message):
    log = tmp_path / "agent.log"
    proc = start([*FLEET, "agent", *args], log, env(tmp_path))
    assert finish(proc) != 0
    text = log.read_text()
    assert message in text and "Traceback" not in text


def test_azure_report_uses_the_vm_name_learned_from_metadata(tmp_path, azure):
    state, log = tmp_path / "state.db", tmp_path / "agent.log"
    agent = start(
        [
            *FLEET,
            "agent",
            "--cloud",
            "azure",
            "--metadata-url",
            azure.url,
            "--poll-interval",
            "0.1",
            "--hook",
            "true",
            "--state",
            str(state),
            "--fleet",
            "f2",
        ],
        log,
        env(tmp_path),
    )
    wait_until(lambda: azure.seen("GET", "/metadata/scheduledevents"), what="polling")
    event_id = azure.schedule("Preempt")
    assert finish(agent) == 0, log.read_text()
    [event] = open_store(str(state)).events("f2", kinds=["interruption-notice"])
    assert (event.instance_id, event.detail["kind"], event.detail["detail"]["EventId"]) == (
        azure.vm_name,
        "preempt",
        event_id,
    )
    assert azure.acks == [event_id]
