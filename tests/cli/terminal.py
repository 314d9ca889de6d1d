"""Run a command in a pseudo-terminal of a given size and read what a user would see.

``run_in_pty`` starts the command with its stdin, stdout and stderr on the slave side of a
pty whose window size is set (so rich sees a real terminal of ``cols`` x ``rows``, with no
``COLUMNS``/``LINES`` override), and returns every byte written until it exits. ``screen``
feeds those bytes to pyte's VT100 emulator: ``display`` is the screen at the end and
``history.top`` the lines that scrolled off it (the scrollback).
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import termios
import time
from collections.abc import Sequence

import pyte

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][AB0-2]|\x1b[=>]")


def run_in_pty(
    argv: Sequence[str], env: dict[str, str], *, cols: int = 80, rows: int = 24, timeout: float = 180
) -> tuple[int, bytes]:
    """Exit status and output of ``argv`` run on a ``cols`` x ``rows`` pseudo-terminal."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env.setdefault("TERM", "xterm-256color")
    proc = subprocess.Popen(
        list(argv), stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True, start_new_session=True
    )
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the slave side
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return code, bytes(out)


def plain(output: bytes) -> str:
    """The output as text without escape sequences or carriage returns."""
    return ANSI.sub("", output.decode("utf-8", "replace")).replace("\r", "")


def screen(output: bytes, *, cols: int = 80, rows: int = 24) -> pyte.HistoryScreen:
    """The terminal after ``output``: ``.display`` (rows of text), ``.history.top`` (scrollback)."""
    term = pyte.HistoryScreen(cols, rows, history=100_000)
    stream = pyte.ByteStream(term)
    stream.feed(output)
    return term
