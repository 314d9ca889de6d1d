"""What GPUs the node's driver sees, for the node agent's first log lines.

:func:`gpu_lines` asks ``nvidia-smi`` for one CSV row per GPU (index, name, driver version,
memory) and returns the lines to log: one per GPU, or one saying that ``nvidia-smi`` is not
installed, failed, timed out or listed no GPU, so a node without a working driver shows at once in
its log (``fleet logs``). It never raises.
"""

from __future__ import annotations

import shutil
import subprocess

QUERY = ["--query-gpu=index,name,driver_version,memory.total", "--format=csv,noheader"]
TIMEOUT_SECONDS = 20.0


def gpu_lines(binary: str = "nvidia-smi", timeout: float = TIMEOUT_SECONDS) -> list[str]:
    """Log lines about the GPUs ``binary`` reports (see the module doc)."""
    path = shutil.which(binary)
    if path is None:
        return ["gpus: nvidia-smi is not installed: no NVIDIA driver on this image (set node.image to a GPU image)"]
    try:
        done = subprocess.run([path, *QUERY], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [f"gpus: nvidia-smi did not answer within {timeout:g}s"]
    except OSError as err:
        return [f"gpus: nvidia-smi could not run: {err}"]
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        return [f"gpus: nvidia-smi failed (exit {done.returncode}): {why[0][:200] if why else 'no output'}"]
    rows = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if not rows:
        return ["gpus: nvidia-smi answered but lists no GPU"]
    return [f"gpus: {len(rows)} seen by nvidia-smi"] + [f"gpu {row[:200]}" for row in rows]
