"""Reading Snakemake's plan: the "Job stats" table of a dry-run (shared by the workflow tests)."""

import fcntl
import functools
import hashlib
import json
import os
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


#: Set by tests/conftest.py for the test run: a folder that every worker of it shares (see dry_run_text).
SHARED_DIR_ENV = "GENTAX_TEST_DRY_RUNS"


def _dry_run(args: tuple[str, ...]) -> str:
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


@functools.lru_cache(maxsize=None)
def dry_run_text(*args: str) -> str:
    """The output of ``snakemake -n ARGS`` in the repository (the run must succeed). Cached for the
    test run: the repository does not change while the tests run, and the paper grid's dry-run
    (~20 s) is read by several test modules, on either pytest-xdist worker. The workers share one
    copy of each through the test run's folder (``$GENTAX_TEST_DRY_RUNS``, made and removed by
    tests/conftest.py), one file per ARGS: the first worker to ask runs it under the file's lock,
    a worker asking meanwhile waits for it and reads it. Only a successful dry-run is kept."""
    shared = os.environ.get(SHARED_DIR_ENV)
    if not shared:  # not under the test command's conftest (a helper imported elsewhere): no sharing
        return _dry_run(args)
    key = hashlib.sha256(json.dumps([str(REPO), *args]).encode()).hexdigest()[:24]
    path = Path(shared) / f"{key}.txt"
    with open(Path(shared) / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not path.is_file():
            text = _dry_run(args)
            partial = path.with_suffix(".partial")
            partial.write_text(text)
            partial.replace(path)
        return path.read_text()


def dry_run_counts(*args: str) -> dict[str, int]:
    """{rule: planned jobs} of ``snakemake -n ARGS`` in the repository (the run must succeed)."""
    return job_counts(dry_run_text(*args))


@functools.lru_cache(maxsize=None)
def planned_work(*args: str) -> tuple:
    """Each job's work (``gentax.study.preview.cost.work``) of the DAG of ``snakemake -n ARGS``, every
    job forced (``gentax.study.dag.build``), as ``gentax plan --cost`` prices it.
    Cached for the test run: the repository does not change while the tests run (a test that changes
    a registry in this process builds its own)."""
    from gentax.study import dag
    from gentax.study.preview import cost

    return tuple(cost.work(dag.build(list(args))))


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
