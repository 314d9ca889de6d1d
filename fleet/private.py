"""Private files and folders for what spotfleet keeps on disk (state, local cloud node files).

``private_dir(path)`` creates ``path`` and every missing parent 0700 (the parents it makes are
spotfleet's too: ``~/.spotfleet`` on a first command), and tightens an existing ``path`` to 0700
when this user owns it and it is not a shared folder (sticky like /tmp, or the user's home itself);
``private_file(path)`` creates ``path`` if missing (0600) and tightens it to 0600 when this user
owns it. ``write_private(path, text)`` writes a file that is never readable by others, not even
briefly.

Modes are only ever changed on the very file or folder named, never through a link: a
symbolic link (``state.db -> /etc/passwd``) is opened with ``O_NOFOLLOW`` and left alone, and a
file with more than one hard link (its inode lives elsewhere too) is not touched either.
Failures to tighten (another owner, a filesystem without modes) are left alone: the files
still work, and nothing here raises for them (``write_private`` raises for a link: it would
write through it).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _ours(st: os.stat_result) -> bool:
    return not hasattr(os, "getuid") or st.st_uid == os.getuid()


def _tighten(fd: int, keep: int) -> None:
    """``fchmod`` the open folder to its mode & ``keep`` when it is ours and looser."""
    st = os.fstat(fd)
    if _ours(st) and stat.S_IMODE(st.st_mode) & ~keep & 0o777:
        os.fchmod(fd, stat.S_IMODE(st.st_mode) & keep)


def private_dir(path: Path) -> Path:
    missing = [p for p in [path, *path.parents] if not os.path.lexists(p)]
    for made in reversed(missing):
        try:
            made.mkdir(mode=0o700)
            os.chmod(made, 0o700)  # mkdir's mode is masked by the umask
        except FileExistsError:
            pass  # made meanwhile by another process: tightened below if it is ours
    if os.path.islink(path) or os.name != "posix":
        return path  # a link's target is not ours to change
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except OSError:
        return path
    try:
        st = os.fstat(fd)
        shared = bool(st.st_mode & stat.S_ISVTX) or path.resolve() in (Path.home().resolve(), Path("/"))
        if not shared:
            _tighten(fd, 0o700)
    except OSError:
        pass
    finally:
        os.close(fd)
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` 0600 if missing, else tighten it to 0600 (see the module's rules).

    An existing file is never opened: closing any descriptor of an SQLite file drops every lock
    this process holds on it, which lets another connection reset the WAL under an open one."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600))
        os.chmod(path, 0o600)  # the umask may have taken bits away; a new file has no lock
        return path
    except FileExistsError:
        pass
    except OSError:
        return path
    try:
        st = os.lstat(path)
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and _ours(st) and mode & 0o077:
            os.chmod(path, mode & 0o600)  # not a link (lstat), so this names the file itself
    except OSError:
        pass
    return path


def write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | _CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        if os.name == "posix":
            os.fchmod(f.fileno(), 0o600)
        f.write(text)
