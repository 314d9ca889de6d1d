"""Printing and saving a benchmark's figures (``benchmarks/results/<name>.json``) the same way
every script does: one aligned line per figure, then the JSON with the machine it ran on."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path


def print_and_save(figures: dict[str, float], path: Path) -> None:
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:.3f}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "python": platform.python_version(),
                "cores": os.cpu_count(),
                "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "figures": figures,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"saved {path}")
