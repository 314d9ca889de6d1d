"""Accelerator names: the canonical ones the catalog uses, and the spellings people type.

``canonical(name)`` maps a spelling to the catalog's name or returns ``None``. Case, spaces,
dashes and underscores do not matter, a vendor prefix (``NVIDIA``, ``Tesla``, ``GeForce``,
``AMD``) and a form factor (``SXM``, ``SXM4``, ``SXM5``, ``PCIe``) are ignored, and memory may
be written ``80G``: ``h100``, ``H100-SXM``, ``"H100 SXM"`` (Vast.ai), ``"RTX 4090"``,
``"NVIDIA A100-SXM4-80GB"`` and ``"RTX 6000 Ada"`` all resolve.

``suggest(name)`` says what an unknown name may have meant, naming every family member
when the name is a family (``A100`` -> ``A100-40GB``, ``A100-80GB``), else the closest names.
"""

from __future__ import annotations

import difflib
import re

#: Relative training throughput per GPU (H100 = 1.0): rough dense BF16 ratios. Specs give
#: weights explicitly (a mapping); this table is a starting point for writing one.
REFERENCE_WEIGHTS: dict[str, float] = {
    "B200": 2.2,
    "H200": 1.3,
    "GH200": 1.15,
    "H100": 1.0,
    "H100-MEGA": 1.0,
    "H100-NVL": 0.95,
    "MI300X": 1.0,
    "A100-80GB": 0.6,
    "A100-40GB": 0.55,
    "L40S": 0.45,
    "L40": 0.35,
    "RTX6000-ADA": 0.4,
    "RTX5090": 0.4,
    "RTX4090": 0.3,
    "RTX4080": 0.2,
    "A6000": 0.25,
    "A5000": 0.18,
    "A4500": 0.15,
    "A4000": 0.12,
    "A40": 0.25,
    "A10G": 0.15,
    "A10": 0.15,
    "L4": 0.15,
    "RTX4000-ADA": 0.1,
    "RTX3090": 0.18,
    "RTX3060": 0.06,
    "RTX6000": 0.1,
    "V100-32GB": 0.2,
    "V100": 0.18,
    "T4": 0.06,
    "T4G": 0.05,
    "P100": 0.08,
    "P4": 0.03,
    "K80": 0.02,
    "M60": 0.02,
    "V520": 0.03,
    "MI25": 0.04,
}
KNOWN = frozenset(REFERENCE_WEIGHTS)

_VENDOR = re.compile(r"^(NVIDIA|TESLA|GEFORCE|AMD|INSTINCT)+")
_FORM = re.compile(r"(SXM[2-5]?|PCIE)")


def _key(name: str) -> str:
    """``"NVIDIA A100-SXM4-80G"`` -> ``"A10080GB"``: the spelling-free form names are compared in."""
    key = re.sub(r"[^A-Z0-9]", "", name.upper())
    key = _FORM.sub("", _VENDOR.sub("", key))
    return re.sub(r"(\d)G$", r"\1GB", key)


_BY_KEY = {_key(n): n for n in KNOWN}


def canonical(name: str) -> str | None:
    """The catalog's name for ``name``, or ``None`` when it names no known accelerator."""
    if name in KNOWN:
        return name
    return _BY_KEY.get(_key(name))


def suggest(name: str) -> list[str]:
    """Known names ``name`` may have meant: its family members when it names a family (every known
    name that extends it, such as ``A100`` -> ``A100-40GB``, ``A100-80GB``), else up to three close ones."""
    key = _key(name)
    if key:
        family = sorted(
            n
            for k, n in _BY_KEY.items()
            if k.startswith(key) and len(k) > len(key) and (k.endswith("GB") or k[len(key)].isalpha())
        )
        if family:
            return family
    close = difflib.get_close_matches(key, list(_BY_KEY), n=3, cutoff=0.6)
    return [_BY_KEY[k] for k in close]


def unknown_message(name: str) -> str:
    """One line for an unknown accelerator name, with what it may have meant."""
    hints = suggest(name)
    if len(hints) > 1 and all(_key(h).startswith(_key(name)) for h in hints):
        return f"unknown accelerator {name!r}: name one of {', '.join(hints)}"
    if hints:
        return f"unknown accelerator {name!r}; did you mean {' or '.join(repr(h) for h in hints)}?"
    return f"unknown accelerator {name!r}; known: {', '.join(sorted(KNOWN))}"
