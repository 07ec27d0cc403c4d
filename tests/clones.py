"""Fresh clones for the tests that run the README's commands: a copy of this checkout's files
(tracked and untracked, git-ignored ones left out, as a clone plus your uncommitted edits), and the
plain environment of a new user's shell (nothing sourced, no venv on PATH)."""

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: A login shell's PATH and HOME; the venv locations pass through (CI and scratch venvs set them).
PLAIN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
             **{k: v for k, v in os.environ.items() if k in ("GENTAX_VENV", "GENTAX_SFT_VENV")}}


def copy_checkout(dest: Path) -> Path:
    """``dest`` holding this checkout's files as a fresh clone would (no results/, no .snakemake/)."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, check=True,
                           capture_output=True, text=True).stdout.split()
    for rel in files:
        if (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    return dest
