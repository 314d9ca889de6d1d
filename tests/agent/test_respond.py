"""The notice response on its edges: a job that ignores the signal, dies without saving, is
already gone; a state store or an acknowledgement that fails. Always bounded, never raising."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from fleet.agent.azure import AzureWatcher
from fleet.agent.checkpoints import CheckpointProbe
from fleet.agent.hooks import CommandHook, SignalHook
from fleet.agent.notice import Notice
from fleet.agent.report import report_notice
from fleet.agent.runner import respond
from fleet.errors import FleetError


@pytest.fixture
def probe(tmp_path):
    return CheckpointProbe(f"file://{tmp_path / 'ckpt'}")


def sleeper(ignore_term: bool = False) -> subprocess.Popen[bytes]:
    code = "import signal, sys, time\n"
    if ignore_term:
        code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    code += "print('ready', flush=True)\ntime.sleep(60)\n"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"ready\n"
    return proc


def notice(seconds: float, **detail) -> Notice:
    return Notice(kind="terminate", cloud="test", deadline=time.time() + seconds, detail=detail)


def test_a_job_ignoring_the_signal_cannot_hold_the_agent_past_the_deadline(probe):
    job = sleeper(ignore_term=True)
    try:
        outcome = respond(notice(1.5), SignalHook(signal.SIGTERM, job.pid), probe=probe, margin=0.5)
        assert outcome.hook_ok and not outcome.checkpoint_committed and not outcome.job_finished
        assert outcome.checkpoint_step is None and job.poll() is None
        assert "NO checkpoint committed since the notice (none at all)" in outcome.summary()
    finally:
        job.kill()
        job.wait()


def test_a_job_that_dies_without_saving_ends_the_wait_early(probe):
    job = sleeper()
    outcome = respond(notice(120), SignalHook(signal.SIGTERM, lambda: job.pid), probe=probe, settle=0.2)
    job.wait()  # unreaped until here: a zombie counts as exited
    assert outcome.hook_ok and outcome.job_finished and not outcome.checkpoint_committed
    assert outcome.seconds_left > 60  # it did not sit out the deadline


def test_an_existing_checkpoint_older_than_the_notice_does_not_count(probe):
    probe.manager.save({"w": 1}, 10)
    job = sleeper()
    outcome = respond(notice(120), SignalHook(signal.SIGTERM, job.pid), probe=probe, settle=0.2)
    job.wait()
    assert not outcome.checkpoint_committed and outcome.checkpoint_step == 10
    assert "newest is step 10" in outcome.summary()


@pytest.mark.parametrize("code, current", [(0, True), (1, False)])
def test_a_job_of_ours_exiting_cleanly_keeps_its_newest_checkpoint_as_final(probe, code, current):
    probe.manager.save({"w": 1}, 20)  # the job's newest step was saved just before the notice
    job = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import signal, sys, time\n"
            f"signal.signal(signal.SIGTERM, lambda *_: sys.exit({code}))\n"
            "print('ready', flush=True)\ntime.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
    )
    assert job.stdout.readline() == b"ready\n"
    outcome = respond(notice(120), SignalHook(signal.SIGTERM, job.pid, lambda pid: job.poll()), probe=probe, settle=0.5)
    assert job.returncode == code
    assert (outcome.checkpoint_committed, outcome.checkpoint_new, outcome.checkpoint_step) == (current, False, 20)
    assert ("already current" in outcome.summary()) is current


def test_signalling_a_process_that_is_gone_is_reported_not_raised():
    job = subprocess.Popen(["true"])
    job.wait()
    outcome = respond(notice(30), SignalHook(signal.SIGUSR1, job.pid))
    assert not outcome.hook_ok and "is not running" in outcome.hook_detail
    assert outcome.summary().startswith("test terminate notice: hook failed")


def test_command_hook_is_waited_for(tmp_path):
    marker = tmp_path / "drained"
    outcome = respond(notice(30), CommandHook(f"sleep 0.3; echo ok > {marker}"))
    assert outcome.hook_ok and outcome.job_finished and marker.read_text() == "ok\n"


def test_report_into_a_store_that_cannot_open_returns_false(tmp_path):
    (tmp_path / "not-a-db").mkdir()
    assert report_notice(str(tmp_path / "not-a-db"), "f1", "i-1", notice(30)) is False
    assert report_notice(str(tmp_path / "s.db"), "", "i-1", notice(30)) is False  # no fleet name


def test_acknowledgement_retries_a_hiccup_and_survives_an_outage(azure):
    watcher = AzureWatcher(azure.url, vm_name=azure.vm_name, interval=0.05)
    event_id = azure.schedule("Preempt")
    found = watcher.wait_for_notice()
    azure.fail_next(1, 500)
    assert respond(found, None, watcher=watcher).acknowledged is True
    assert azure.acks == [event_id]
    azure.fail_next(3, 503)
    assert respond(found, None, watcher=watcher).acknowledged is False
    assert azure.acks == [event_id]


def test_checkpoint_probe_needs_a_uri(monkeypatch):
    monkeypatch.delenv("SPOTFLEET_CHECKPOINT_URI", raising=False)
    with pytest.raises(FleetError, match="--checkpoint-uri"):
        CheckpointProbe()
