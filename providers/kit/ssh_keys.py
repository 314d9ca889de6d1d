"""SSH public keys for nodes: the spec's own (checked), or one key pair per fleet kept in the state folder.

Some clouds refuse a Linux VM that has neither a password nor a key (Azure: password sign-in
off and no key is ``InvalidParameter``). When ``node.ssh_key`` is empty, :func:`fleet_public_key`
gives the fleet's own key: an RSA key pair (3072 bits; Azure takes SSH-2 RSA of at least 2048
bits, https://learn.microsoft.com/azure/virtual-machines/linux/create-ssh-keys-detailed)
made once with ``cryptography`` (a dependency of azure-identity) under
``<home>/keys/<fleet>/``: ``id_rsa`` (OpenSSH private key, 0600, in a 0700 folder) and
``id_rsa.pub``. Every later call, in any process, reads the same pair: the private key is
written under a temporary name and linked into place, so two processes racing keep one key,
and the public half is always derived from the private key that won.
``ssh -i <home>/keys/<fleet>/id_rsa spotfleet@<node>`` signs in where the network allows it. The
public key is read once per process and folder. :func:`node_public_key` picks the spec's key or
the fleet's.

:func:`check_public_key` says what is wrong with a key text a spec gives (one line naming
``node.ssh_key``), or "" when it is an ``ssh-rsa`` (2048 bits or more) or ``ssh-ed25519`` key.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import struct
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path

from fleet.home import spotfleet_home
from fleet.private import private_dir, write_private

KEY_BITS = 3072
PRIVATE = "id_rsa"
_lock = threading.Lock()
_known: dict[Path, str] = {}  # key folder -> its public key line, once read in this process


def default_home(environ: Mapping[str, str]) -> Path:
    """Where spotfleet keeps its state: ``$SPOTFLEET_HOME`` or ``~/.spotfleet``."""
    return spotfleet_home(environ)


def key_dir(home: Path, fleet: str) -> Path:
    """The folder of ``fleet``'s key pair under ``home``."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", fleet):
        raise ValueError(f"fleet name {fleet!r} cannot name a key folder")
    return home / "keys" / fleet


def fleet_public_key(home: Path, fleet: str) -> str:
    """``fleet``'s public key in OpenSSH form (``ssh-rsa AAAA... spotfleet-<fleet>``), making the
    pair on first use. Needs the ``cryptography`` package (installed with ``spotfleet[azure-vm]``)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    folder = key_dir(home, fleet)
    path = folder / PRIVATE
    with _lock:
        if folder in _known and path.exists():
            return _known[folder]
        if not path.exists():
            private_dir(folder)
            fresh = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
            text = fresh.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
            ).decode()
            tmp = folder / f".{PRIVATE}.{uuid.uuid4().hex}"
            write_private(tmp, text)
            try:
                os.link(tmp, path)  # fails when another process linked its key first: keep that one
            except FileExistsError:
                pass
            finally:
                tmp.unlink()
        key = serialization.load_ssh_private_key(path.read_bytes(), password=None)
        public = (
            key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
        )
        line = f"{public} spotfleet-{fleet}"
        pub = folder / f"{PRIVATE}.pub"
        if not pub.exists() or pub.read_text().strip() != line:
            tmp = folder / f".{PRIVATE}.pub.{uuid.uuid4().hex}"
            tmp.write_text(line + "\n")
            os.replace(tmp, pub)
        _known[folder] = line
        return line


def node_public_key(home: Path, fleet: str, given: str) -> str:
    """The public key a fleet's nodes get: ``given`` (the spec's ``node.ssh_key``) when set, else the
    fleet's own pair (:func:`fleet_public_key`). ValueError with :func:`check_public_key`'s line
    when ``given`` is not a key clouds take."""
    given = given.strip()
    if not given:
        return fleet_public_key(home, fleet)
    problem = check_public_key(given)
    if problem:
        raise ValueError(problem)
    return given


def check_public_key(text: str) -> str:
    """What is wrong with ``text`` as an SSH public key for a Linux VM, "" when nothing is."""
    parts = text.split()
    fix = (
        "set node.ssh_key to the one-line public key (the contents of ~/.ssh/id_ed25519.pub), or leave it "
        "empty for a key pair made for the fleet"
    )
    if len(parts) < 2 or parts[0] not in ("ssh-rsa", "ssh-ed25519"):
        return f"node.ssh_key is not an ssh-rsa or ssh-ed25519 public key; {fix}"
    try:
        blob = base64.b64decode(parts[1], validate=True)
        fields = _fields(blob)
    except (binascii.Error, ValueError, struct.error):
        return f"node.ssh_key holds an unreadable key; {fix}"
    if not fields or fields[0] != parts[0].encode():
        return f"node.ssh_key names {parts[0]} but holds another kind of key; {fix}"
    if parts[0] == "ssh-rsa" and (len(fields) != 3 or _bits(fields[2]) < 2048):
        return f"node.ssh_key is an RSA key shorter than 2048 bits, which clouds refuse; {fix}"
    if parts[0] == "ssh-ed25519" and (len(fields) != 2 or len(fields[1]) != 32):
        return f"node.ssh_key holds an unreadable key; {fix}"
    return ""


def _fields(blob: bytes) -> list[bytes]:
    """The length-prefixed strings of an SSH wire-format key blob."""
    out, i = [], 0
    while i < len(blob):
        (n,) = struct.unpack(">I", blob[i : i + 4])
        if i + 4 + n > len(blob):
            raise ValueError("truncated key")
        out.append(blob[i + 4 : i + 4 + n])
        i += 4 + n
    return out


def _bits(mpint: bytes) -> int:
    return int.from_bytes(mpint, "big").bit_length()
