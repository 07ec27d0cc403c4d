"""Each clone runs its own code: the shared venvs hold third-party packages only (scripts/setup.sh),
so whatever starts gentax puts its clone first. ``use_this_clone(root)`` does it for the processes
this one starts (the Snakefile calls it: every job, local or SLURM, whose sbatch exports this
environment, runs the clone's ``bin/gentax`` and imports the clone's package)."""

from __future__ import annotations

import os
from pathlib import Path


def use_this_clone(root: str | os.PathLike) -> None:
    """Put ``root/bin`` first on PATH and ``root`` first on PYTHONPATH of this process's environment."""
    root = str(Path(root).resolve())
    for var, entry in (("PATH", os.path.join(root, "bin")), ("PYTHONPATH", root)):
        rest = [p for p in os.environ.get(var, "").split(os.pathsep) if p and p != entry]
        os.environ[var] = os.pathsep.join([entry, *rest])
