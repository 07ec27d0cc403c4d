"""Fresh clones for the tests that run the README's commands: a git clone of this checkout with its
uncommitted edits laid over (tracked and untracked files, git-ignored ones left out), so code,
provenance (commit, local changes) and paths are a new user's; and the plain environment of a new
user's shell (nothing sourced, no venv on PATH)."""

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: A login shell's PATH and HOME; the venv locations pass through (CI and scratch venvs set them).
PLAIN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
             **{k: v for k, v in os.environ.items() if k in ("GENTAX_VENV", "GENTAX_SFT_VENV")}}


def copy_checkout(dest: Path) -> Path:
    """``dest``: a clone of this checkout's commit plus its working-tree files (no results/, no .snakemake/)."""
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(dest)], check=True, capture_output=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", "--detach",
                    subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, check=True, capture_output=True,
                                   text=True).stdout.strip()], check=True, capture_output=True)
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, check=True,
                           capture_output=True, text=True).stdout.split()
    for rel in files:
        if (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    for rel in set(subprocess.run(["git", "ls-files"], cwd=dest, check=True, capture_output=True,
                                  text=True).stdout.split()) - set(files):
        (dest / rel).unlink(missing_ok=True)  # deleted (or moved) in this checkout, not yet committed
    return dest
