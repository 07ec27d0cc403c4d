"""Run the SLURM smoke's reduced grid (tests/smoke_config.yaml, a tiny seeded model) from two
commits of this repository on this machine and compare what they computed.

    python benchmarks/equivalence.py OLD_COMMIT [NEW_COMMIT=HEAD] [--out RECORD]

Each commit is checked out into a scratch folder and run with the same Snakemake command (the
embedded profile's threads: ``profiles/default`` before it became ``profiles/embedded``); then
every RL run's metrics (timings left out), every checkpoint's weights, every evaluation's
outcomes (its summary less timings and provenance, its episodes and steps: each response sampled) and
every table are compared; a differing episodes or steps file says how many rows differ and in which columns. It prints one
line per artifact kind and a verdict; ``--out`` also writes that as a record (commit, machine,
date). A restructuring that changes no job's computation gives "identical".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS = ["results/tables/table2_success.csv", "results/tables/table5_augmentation.csv",
           "results/tables/table3_ranking.csv"]
TIMING_KEYS = {"seconds", "time", "timing", "created", "provenance", "elapsed", "tokens_per_s"}


def _timing(key: str) -> bool:
    """A key whose value is a wall time (or provenance, which names the machine and commit)."""
    return key in TIMING_KEYS or key.endswith(("_s", "_seconds", "/seconds"))


def _sh(*args, cwd=None) -> str:
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _checkout(commit: str, where: Path) -> Path:
    subprocess.run(["git", "worktree", "add", "--detach", "-f", str(where), commit], cwd=REPO, check=True,
                   capture_output=True)
    return where


def _run(tree: Path, model: Path, scratch: Path) -> float:
    profile = ["--profile", "profiles/embedded"] if (tree / "profiles" / "embedded").is_dir() else []
    override = scratch / f"model_{tree.name}.yaml"
    override.write_text(f"model: {{base: {model}}}\n")
    # the study's config where that commit keeps it (config/config.yaml since #41 item 5; the root before)
    study = "config/config.yaml" if (tree / "config" / "config.yaml").is_file() else "config.yaml"
    cmd = [sys.executable, "-m", "snakemake", *TARGETS, "--cores", "2", *profile, "--configfile", study,
           "tests/smoke_config.yaml", str(override)]
    env = {"PATH": f"{tree / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONPATH": str(tree),
           "HOME": str(Path.home())}
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{tree}: snakemake failed:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return time.monotonic() - started


def _strip(obj):
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if not _timing(k)}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def compare(a: Path, b: Path) -> list[str]:
    """One line per artifact kind: how many compared, which differ."""
    import pandas as pd

    lines = []
    ra, rb = a / "results", b / "results"
    def untimed(frame):
        return frame.drop(columns=[c for c in frame.columns if _timing(c)])

    kinds = {
        "RL metrics (timings left out)": ("**/metrics.csv",  # the study's runs and the V1 warm start's
                                          lambda p, q: untimed(pd.read_csv(p)).equals(untimed(pd.read_csv(q)))),
        # every model the workflow trains: the embedded base, V2's SFT model, each RL checkpoint
        "weights": ("**/*.safetensors", lambda p, q: _digest(p) == _digest(q)),
        "training data (the embedded base's and V2's SFT data)": ("**/*_data/**/*", lambda p, q: _digest(p) == _digest(q)),
        "evaluation summaries (timings, provenance left out)": ("eval/**/*.json", lambda p, q: _strip(
            json.loads(p.read_text())) == _strip(json.loads(q.read_text()))),
        "evaluation episodes": ("eval/**/*.episodes.parquet",
                                lambda p, q: untimed(pd.read_parquet(p)).equals(untimed(pd.read_parquet(q)))),
        "evaluation steps (each response: the tokens sampled)": (
            "eval/**/*.steps.parquet", lambda p, q: untimed(pd.read_parquet(p)).equals(untimed(pd.read_parquet(q)))),
        "tables": ("tables/*.csv", lambda p, q: p.read_text() == q.read_text()),
    }
    for name, (pattern, same) in kinds.items():
        files = sorted(p.relative_to(ra) for p in ra.glob(pattern) if p.is_file())
        missing = [str(f) for f in files if not (rb / f).exists()]
        differ = [f for f in files if (rb / f).exists() and not same(ra / f, rb / f)]
        lines.append(f"{name}: {len(files)} compared, {len(differ)} differ"
                     f"{'; missing in the second: ' + ', '.join(missing[:5]) if missing else ''}")
        lines += [f"  {f}: {_what_differs(ra / f, rb / f)}" for f in differ[:3]]
    return lines


def _what_differs(a: Path, b: Path) -> str:
    """Which keys (JSON) or columns (CSV) differ, and which the second adds or drops."""
    import pandas as pd

    if a.suffix == ".json":
        x, y = _strip(json.loads(a.read_text())), _strip(json.loads(b.read_text()))
    elif a.suffix == ".csv":
        fx, fy = pd.read_csv(a), pd.read_csv(b)
        if len(fx) != len(fy):
            return f"{len(fx)} rows, then {len(fy)}"
        x, y = {c: fx[c] for c in fx.columns}, {c: fy[c] for c in fy.columns}
        added, dropped = sorted(set(y) - set(x)), sorted(set(x) - set(y))
        changed = sorted(c for c in set(x) & set(y) if not x[c].equals(y[c]))  # NaN equals NaN here
        return f"changed {changed or 'none'}; added {added or 'none'}; dropped {dropped or 'none'}"
    elif a.suffix == ".parquet":  # episodes or steps: how many rows differ, and in what
        fx, fy = (f.drop(columns=[c for c in f.columns if _timing(c)]) for f in (pd.read_parquet(a), pd.read_parquet(b)))
        if len(fx) != len(fy) or list(fx.columns) != list(fy.columns):
            return f"{len(fx)} rows, then {len(fy)}; columns {'same' if list(fx.columns) == list(fy.columns) else 'differ'}"
        unequal = ~((fx == fy) | (fx.isna() & fy.isna()))
        rows = int(unequal.any(axis=1).sum())
        return f"{rows} of {len(fx)} rows differ, in {sorted(unequal.columns[unequal.any(axis=0)]) or 'none'}"
    else:
        return "bytes differ"
    added, dropped = sorted(set(y) - set(x)), sorted(set(x) - set(y))
    changed = sorted(k for k in set(x) & set(y) if x[k] != y[k])
    return f"changed {changed or 'none'}; added {added or 'none'}; dropped {dropped or 'none'}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new", nargs="?", default="HEAD")
    parser.add_argument("--out", default=None, help="also write the report here (a record)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO / "tests"))
    from test_slurm_smoke import tiny_model  # the smoke's own tiny seeded model

    scratch = Path(tempfile.mkdtemp(prefix="gentax-equiv-"))
    model = tiny_model(scratch / "tiny_model")
    commits = [_sh("git", "rev-parse", c, cwd=REPO) for c in (args.old, args.new)]
    trees = [_checkout(c, scratch / f"tree{i}") for i, c in enumerate(commits)]
    walls = [_run(t, model, scratch) for t in trees]
    report = [f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
              f"{_sh('nproc')} cores; python benchmarks/equivalence.py {args.old} {args.new}",
              f"old {commits[0][:12]}: {walls[0]:.0f} s; new {commits[1][:12]}: {walls[1]:.0f} s (the reduced grid, --cores 2)",
              *compare(*trees)]
    verdict = "identical" if all(" 0 differ" in line and "missing" not in line
                                 for line in report[2:] if not line.startswith("  ")) else "DIFFERENT"
    report.append(f"verdict: {verdict}")
    print("\n".join(report))
    if args.out:
        Path(args.out).write_text("\n".join(report) + "\n")
    for t in trees:
        subprocess.run(["git", "worktree", "remove", "--force", str(t)], cwd=REPO, capture_output=True)
    return 0 if verdict == "identical" else 1


if __name__ == "__main__":
    sys.exit(main())
