"""A wheel of the spotfleet that runs this process, assembled from its own files (no build backend).

Nodes install exactly the code that launched them, whether spotfleet was installed from an index,
from a wheel or as an editable checkout. :func:`build` writes the files of the ``fleet``,
``providers`` and ``stacks`` packages next to the running ``fleet`` package (``fleet/data``
included; ``__pycache__`` and compiled files left out) into a standard wheel (PEP 427: METADATA,
WHEEL, entry points, RECORD) and needs neither network nor setuptools.

Contract:

* the wheel's version is ``<fleet.__version__>+g<content hash>``: the hash covers every file and
  the metadata, so an edited checkout gets a new wheel name and an unchanged one the same name;
* the bytes are deterministic for the same content (fixed zip timestamps and modes), so the cache
  (``<cache_dir>/<wheel file>``) and the copies in buckets are keyed by file name alone;
* a rerun with nothing changed reads the files to hash them and writes nothing.

The metadata (dependencies, extras, ``Requires-Python``, the ``fleet`` command) comes from the
``pyproject.toml`` beside the packages when there is one (a checkout), else from the installed
distribution's own metadata.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import zipfile
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path

import fleet
from fleet.home import spotfleet_home

DIST = "spotfleet"
PACKAGES = ("fleet", "providers", "stacks")
_SKIP_DIRS = {"__pycache__"}
_SKIP_SUFFIXES = (".pyc", ".pyo")
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Wheel:
    """A built wheel: where it lies, its file name, size and sha256 (hex) of its bytes."""

    path: Path
    version: str

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def size(self) -> int:
        return self.path.stat().st_size

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class Meta:
    """What a wheel's METADATA says beyond name and version."""

    requires_python: str
    requires_dist: tuple[str, ...]
    extras: tuple[str, ...]
    scripts: tuple[tuple[str, str], ...]


def package_root() -> Path:
    """The directory holding the running ``fleet`` package (a checkout or site-packages)."""
    return Path(fleet.__file__).resolve().parent.parent


def default_cache() -> Path:
    """``$SPOTFLEET_HOME/wheels`` (``~/.spotfleet/wheels``)."""
    return spotfleet_home() / "wheels"


def build(cache_dir: Path | None = None, root: Path | None = None) -> Wheel:
    """The wheel of the running spotfleet, from the cache when this content was built before."""
    root = root or package_root()
    cache_dir = cache_dir or default_cache()
    files = _files(root)
    meta = read_meta(root)
    digest = hashlib.sha256(_meta_text(meta).encode())
    for arcname, path in files:
        data = path.read_bytes()
        digest.update(f"{arcname}\0{len(data)}\0".encode())
        digest.update(data)
    version = f"{fleet.__version__}+g{digest.hexdigest()[:12]}"
    target = cache_dir / f"{DIST}-{version}-py3-none-any.whl"
    if not target.is_file():
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_bytes(_assemble(files, meta, version))
        os.replace(tmp, target)
    return Wheel(path=target, version=version)


def _files(root: Path) -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    for package in PACKAGES:
        base = root / package
        if not (base / "__init__.py").is_file():
            raise FileNotFoundError(
                f"{base}: the {package} package is missing beside fleet; "
                "spotfleet's wheel cannot be built from this installation"
            )
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
            for filename in sorted(filenames):
                if filename.endswith(_SKIP_SUFFIXES):
                    continue
                path = Path(dirpath) / filename
                if path.is_file():
                    out.append((path.relative_to(root).as_posix(), path))
    return sorted(out)


def read_meta(root: Path) -> Meta:
    """Dependencies, extras and scripts from ``root/pyproject.toml``, else from the installed metadata."""
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10: read the installed metadata instead
            tomllib = None  # type: ignore[assignment]
        if tomllib is not None:
            project = tomllib.loads(pyproject.read_text()).get("project", {})
            if project.get("name") == DIST:
                deps = list(project.get("dependencies", []))
                extras = project.get("optional-dependencies", {})
                for extra, reqs in sorted(extras.items()):
                    deps += [f'{req}; extra == "{extra}"' for req in reqs]
                return Meta(
                    requires_python=project.get("requires-python", ""),
                    requires_dist=tuple(deps),
                    extras=tuple(sorted(extras)),
                    scripts=tuple(sorted(project.get("scripts", {}).items())),
                )
    dist = importlib_metadata.distribution(DIST)
    scripts = tuple(sorted((ep.name, ep.value) for ep in dist.entry_points if ep.group == "console_scripts"))
    return Meta(
        requires_python=dist.metadata.get("Requires-Python", "") or "",
        requires_dist=tuple(dist.requires or ()),
        extras=tuple(sorted(dist.metadata.get_all("Provides-Extra") or ())),
        scripts=scripts,
    )


def _meta_text(meta: Meta, version: str = "") -> str:
    """The METADATA file (with ``version`` empty: what the content hash covers)."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {DIST}",
        f"Version: {version}",
        "Summary: Provision and keep alive diversified spot GPU fleets across clouds",
    ]
    if meta.requires_python:
        lines.append(f"Requires-Python: {meta.requires_python}")
    lines += [f"Provides-Extra: {extra}" for extra in meta.extras]
    lines += [f"Requires-Dist: {req}" for req in meta.requires_dist]
    return "\n".join(lines) + "\n"


def _assemble(files: list[tuple[str, Path]], meta: Meta, version: str) -> bytes:
    info = f"{DIST}-{version}.dist-info"
    extra = {
        f"{info}/METADATA": _meta_text(meta, version).encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: spotfleet\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": (
            "[console_scripts]\n" + "".join(f"{name} = {target}\n" for name, target in meta.scripts)
        ).encode(),
        f"{info}/top_level.txt": "".join(f"{p}\n" for p in PACKAGES).encode(),
    }
    record: list[str] = []
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        entries = [(name, path.read_bytes()) for name, path in files] + sorted(extra.items())
        for name, data in entries:
            _write(zf, name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        _write(zf, f"{info}/RECORD", ("\n".join(record) + "\n").encode())
    return buf.getvalue()


def _write(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    zinfo = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
    zinfo.external_attr = 0o644 << 16
    zinfo.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(zinfo, data)
