#!/usr/bin/env python3
"""A small training job that survives preemption, built on ``fleet.checkpoint``.

It trains a two-layer network on synthetic regression data and prints ``step N loss X`` per step
(``X`` is the exact float repr, so two runs can be compared bit for bit). It

- resumes from the newest valid checkpoint (weights, optimizer momentum, LR schedule, step, data
  position and every RNG it uses), skipping partial or corrupt checkpoints;
- saves every ``--save-every`` steps asynchronously (training continues during the upload); a
  background save that failed is reported at once (the manager logs it, and the next
  ``save_async`` raises it: the job prints a warning and keeps training);
- on SIGTERM or SIGUSR1 (what ``fleet agent`` sends on an interruption notice) finishes the
  current step, writes a final synchronous checkpoint and exits 0.

Run it plainly (``^C``/``kill -9`` it and run it again: it continues where it left off)::

    python examples/train_resumable.py --uri file:///tmp/ckpt --steps 300

or under the node wrapper, which restarts it after crashes and forwards interruption notices::

    fleet run --cloud auto --checkpoint-uri s3://my-bucket/run1 -- python examples/train_resumable.py

``--backend torch`` trains the same network with PyTorch (``pip install 'spotfleet[torch]'``);
``auto`` (the default) picks PyTorch when it is installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import time
from typing import Any

import numpy as np

from fleet.checkpoint import (
    CheckpointError,
    CheckpointManager,
    DataPosition,
    capture_rng,
    install_signal_handler,
    restore_rng,
)

SAMPLES, FEATURES, HIDDEN, BATCH = 512, 8, 32, 32


def make_data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((SAMPLES, FEATURES))
    y = np.sin(x @ rng.standard_normal(FEATURES))[:, None] + 0.1 * rng.standard_normal((SAMPLES, 1))
    return x, y


def lr_at(step: int, base: float = 0.05) -> float:
    """Step decay: halve the learning rate every 100 steps."""
    return base * 0.5 ** (step // 100)


def augment(x: np.ndarray) -> np.ndarray:
    """Input noise whose scale comes from ``random`` and values from numpy's global RNG."""
    return x + np.random.standard_normal(x.shape) * (0.02 * random.random())


class NumpyTrainer:
    """MLP with dropout, SGD with momentum; state is plain numpy arrays."""

    def __init__(self, seed: int):
        init = np.random.default_rng(seed + 1)
        self.params = {
            "w1": init.standard_normal((FEATURES, HIDDEN)) * 0.3,
            "b1": np.zeros(HIDDEN),
            "w2": init.standard_normal((HIDDEN, 1)) * 0.3,
            "b2": np.zeros(1),
        }
        self.velocity = {k: np.zeros_like(v) for k, v in self.params.items()}
        self.dropout = np.random.default_rng(seed + 2)

    def step(self, x: np.ndarray, y: np.ndarray, step: int) -> float:
        p = self.params
        h = np.tanh(x @ p["w1"] + p["b1"])
        mask = (self.dropout.random(h.shape) > 0.1) / 0.9
        hd = h * mask
        err = hd @ p["w2"] + p["b2"] - y
        loss = float(np.mean(err**2))
        g_out = 2 * err / len(x)
        g_h = (g_out @ p["w2"].T) * mask * (1 - h**2)
        grads = {"w2": hd.T @ g_out, "b2": g_out.sum(0), "w1": x.T @ g_h, "b1": g_h.sum(0)}
        for k, g in grads.items():
            self.velocity[k] = 0.9 * self.velocity[k] + g
            p[k] -= lr_at(step) * self.velocity[k]
        return loss

    def state(self) -> dict[str, Any]:
        return {"params": self.params, "velocity": self.velocity, "rng": capture_rng({"dropout": self.dropout})}

    def load(self, state: dict[str, Any]) -> None:
        self.params, self.velocity = state["params"], state["velocity"]
        restore_rng(state["rng"], {"dropout": self.dropout})


class TorchTrainer:
    """The same network in PyTorch; state through fleet.checkpoint.torch."""

    def __init__(self, seed: int):
        import torch

        from fleet.checkpoint import torch as ckpt_torch

        self.torch, self.ckpt = torch, ckpt_torch
        torch.manual_seed(seed + 1)
        self.model = torch.nn.Sequential(
            torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(), torch.nn.Dropout(0.1), torch.nn.Linear(HIDDEN, 1)
        ).double()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=100, gamma=0.5)

    def step(self, x: np.ndarray, y: np.ndarray, step: int) -> float:
        torch = self.torch
        self.opt.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        self.opt.step()
        self.sched.step()
        return float(loss.item())

    def state(self) -> dict[str, Any]:
        return self.ckpt.capture(model=self.model, optimizer=self.opt, scheduler=self.sched)

    def load(self, state: dict[str, Any]) -> None:
        self.ckpt.restore(state, model=self.model, optimizer=self.opt, scheduler=self.sched)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--uri", default=None, help="checkpoint location (default $SPOTFLEET_CHECKPOINT_URI)")
    ap.add_argument("--steps", type=int, default=300, help="train until this step")
    ap.add_argument("--save-every", type=int, default=20, help="asynchronous checkpoint every N steps")
    ap.add_argument("--keep-last", type=int, default=3, help="checkpoints to keep")
    ap.add_argument("--backend", choices=["auto", "numpy", "torch"], default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--step-time", type=float, default=0.0, help="sleep per step (to watch it run)")
    args = ap.parse_args(argv)
    if args.backend == "auto":
        args.backend = "torch" if importlib.util.find_spec("torch") else "numpy"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop = install_signal_handler()  # SIGTERM/SIGUSR1 -> flag; no I/O in the handler
    try:
        mgr = CheckpointManager(args.uri, keep_last=args.keep_last)
    except CheckpointError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    x, y = make_data(args.seed)
    trainer = NumpyTrainer(args.seed) if args.backend == "numpy" else TorchTrainer(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)
    data = DataPosition(size=SAMPLES, batch_size=BATCH, seed=args.seed)

    def snapshot(step: int) -> dict[str, Any]:
        return {
            "step": step,
            "model": trainer.state(),
            "data": data.state_dict(),
            "rng": capture_rng(),
            "backend": args.backend,
        }

    step = 0
    resumed = mgr.load_latest()
    if resumed is not None:
        state, info = resumed
        if state["backend"] != args.backend:
            print(
                f"error: {mgr.uri} holds a {state['backend']} run; pass --backend {state['backend']}", file=sys.stderr
            )
            return 2
        trainer.load(state["model"])
        data.load_state_dict(state["data"])
        restore_rng(state["rng"])
        step = info.step
        print(f"resumed from step {step} ({mgr.uri})", flush=True)
    else:
        print(f"starting fresh ({mgr.uri}, backend {args.backend})", flush=True)

    while step < args.steps and not stop.requested:
        batch = data.next_batch()
        loss = trainer.step(augment(x[batch]), y[batch], step)
        step += 1
        print(f"step {step} loss {loss!r}", flush=True)
        if step % args.save_every == 0:
            try:
                mgr.save_async(snapshot(step), step)
            except CheckpointError as err:  # an earlier background save failed
                print(f"warning: checkpoints are not landing: {err}", file=sys.stderr, flush=True)
        if args.step_time:
            time.sleep(args.step_time)

    mgr.save(snapshot(step), step)  # waits for background saves; a no-op if step is saved
    mgr.close()
    why = f"stopped by {stop.signal_name}" if stop.requested else "finished"
    print(f"{why} at step {step}; checkpoint committed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
