"""Spec texts the spec tests share."""

#: The smallest valid spec: a name, a backend and the capacity.
MINIMAL = """\
name: quickstart
backend: local
capacity:
  gpus: 8
  accelerators: [H100]
"""
