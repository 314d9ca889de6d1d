"""A saved ``fleet simulate`` result (``fleet.simulate.saved``): kept private, read back as
written, and a damaged or foreign file is an error to show, never a traceback."""

from __future__ import annotations

import stat

from fleet.dashboard import pages
from fleet.simulate import saved


def test_a_saved_result_reads_back_as_written_and_privately(tmp_path):
    result = {"policies": [{"policy": "ours", "at_target": 0.99, "cost": 12.5}], "hours": 6.0}
    path = saved.save(tmp_path, "f1", result)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    got = saved.load(tmp_path, "f1")
    assert got is not None and got["result"] == result and got["saved_at"] > 0
    assert saved.load(tmp_path, "other") is None
    assert "ours" in pages._simulation(got) and "99.0%" in pages._simulation(got)


def test_a_damaged_or_foreign_file_is_an_error_shown_escaped(tmp_path):
    path = saved.path_of(tmp_path, "f2")
    path.parent.mkdir()
    for text in ("{not json", '{"result": {"policies": "<script>"}}', "[]"):
        path.write_text(text)
        got = saved.load(tmp_path, "f2")
        assert got is not None and "fleet simulate SPEC --save" in got["error"]
        assert "<script>" not in pages._simulation(got)
