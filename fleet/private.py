"""Private files and folders for what spotfleet keeps on disk (state, local cloud node files).

``private_dir(path)`` creates ``path`` (and parents) and makes it 0700 when this user owns it
and it is not a shared folder (sticky like /tmp, or the user's home itself);
``private_file(path)`` creates ``path`` if missing and makes it 0600 when this user owns it.
``write_private(path, text)`` writes a file that is never readable by others, not even briefly.
Failures to tighten (another owner, a filesystem without modes) are left alone: the files
still work, and nothing here raises for them.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def _ours(st: os.stat_result) -> bool:
    return not hasattr(os, "getuid") or st.st_uid == os.getuid()


def private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        st = path.stat()
        shared = bool(st.st_mode & stat.S_ISVTX) or path.resolve() in (Path.home().resolve(), Path("/"))
        if _ours(st) and not shared and stat.S_IMODE(st.st_mode) & 0o077:
            path.chmod(stat.S_IMODE(st.st_mode) & 0o700)
    except OSError:
        pass
    return path


def private_file(path: Path) -> Path:
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600))
        st = path.stat()
        if _ours(st) and stat.S_IMODE(st.st_mode) & 0o077:
            path.chmod(0o600)
    except OSError:
        pass
    return path


def write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
    with os.fdopen(fd, "w") as f:
        if os.name == "posix":
            os.fchmod(f.fileno(), 0o600)
        f.write(text)
