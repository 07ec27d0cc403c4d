"""Reading Snakemake's plan: the "Job stats" table of a dry-run (shared by the workflow tests)."""

import functools
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def job_counts(text: str) -> dict[str, int]:
    """{rule: planned jobs} from a dry-run's output; {} when there is nothing to do."""
    if "Nothing to be done" in text:
        return {}
    block = text.split("Job stats:", 1)[1]
    counts = {}
    for line in block.splitlines()[3:]:
        m = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if not m:
            break
        if m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


def extra_jobs(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """{rule: jobs} that plan ``after`` has more than plan ``before``; only rules whose count changes."""
    extra = {rule: after.get(rule, 0) - before.get(rule, 0) for rule in set(after) | set(before)}
    return {rule: n for rule, n in extra.items() if n}


@functools.lru_cache(maxsize=None)
def dry_run_text(*args: str) -> str:
    """The output of ``snakemake -n ARGS`` in the repository (the run must succeed). Cached for the
    test session: the repository does not change while the tests run, and the paper grid's
    dry-run (~20 s) is read by several test modules."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def dry_run_counts(*args: str) -> dict[str, int]:
    """{rule: planned jobs} of ``snakemake -n ARGS`` in the repository (the run must succeed)."""
    return job_counts(dry_run_text(*args))


def planned_jobs(*args: str) -> list[tuple[str, dict]]:
    """(verb, spec) of every job of ``snakemake -n -p ARGS``, read from the command it prints."""
    out = []
    for line in dry_run_text("-p", *args).splitlines():
        if not line.startswith("Shell command: gentax "):
            continue
        words = shlex.split(line.removeprefix("Shell command: "))
        at = words.index("--job")
        out.append((" ".join(words[1:at]), json.loads(words[at + 1])))
    return out
