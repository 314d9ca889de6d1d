"""Glue between :mod:`fleet.checkpoint` and the training frameworks ML teams already use.

Each module imports its framework on import and names the extra to install when it is absent:

- :mod:`.lightning` — PyTorch Lightning (``spotfleet[lightning]``): a ``CheckpointIO`` plugin and
  a ``Callback`` that save through a :class:`~fleet.checkpoint.CheckpointManager`, resume on
  restart and take the interruption notice's final save.
- :mod:`.hf` — Hugging Face ``Trainer`` (``spotfleet[hf]``): a ``TrainerCallback`` doing the same.
- :mod:`.data` — the position in the data (``spotfleet[data]`` for torchdata's
  ``StatefulDataLoader``): loader state that is exact with worker processes, and a
  ``DistributedSampler`` whose position carries across ranks and world sizes.

How a notice reaches the job: ``fleet run`` / ``fleet agent`` send it a signal (SIGTERM by
default, ``--hook-signal``) and wait until a new checkpoint is committed in the store or the
deadline nears. The glue turns that signal into one last save at the next step boundary.
"""
