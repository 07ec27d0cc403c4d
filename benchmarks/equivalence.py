"""Do two runs compute the same? Two commits on the reduced grid, or two results folders.

    python benchmarks/equivalence.py OLD_COMMIT [NEW_COMMIT=HEAD] [--write]
    python benchmarks/equivalence.py --folders FIRST SECOND [--out FILE.json]

Commits: each checked out into a scratch folder runs the SLURM smoke's reduced grid
(tests/smoke_config.yaml, a tiny seeded model); then all they made is compared ("identical" when no
job's computation changed; ``--write``: the record benchmarks/records/equivalence.txt). Folders: the
second's files, each against the first's. Compared (``compare``): RL metrics, weights, training data,
evaluations, tables; timings and provenance left out. Standard library and pandas only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, untimed, untimed_frame

#: what names the commit and the machine an output was made on, left out with the timings
PROVENANCE = frozenset({"provenance"})

TARGETS = ["results/tables/table2_success.csv", "results/tables/table5_augmentation.csv",
           "results/tables/table3_ranking.csv"]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def summary(path: Path):
    """An evaluation's summary (JSON) without its timings and provenance."""
    return untimed(json.loads(path.read_text()), PROVENANCE)


def what_differs(a: Path, b: Path) -> str:
    """Which keys (JSON), columns (CSV) or rows (Parquet) differ."""
    if a.suffix == ".json":
        x, y = summary(a), summary(b)
    elif a.suffix in (".csv", ".parquet"):
        fx, fy = untimed_frame(a), untimed_frame(b)
        if len(fx) != len(fy) or list(fx.columns) != list(fy.columns):
            return f"{len(fx)} rows, then {len(fy)}; columns {'same' if list(fx.columns) == list(fy.columns) else 'differ'}"
        unequal = ~((fx == fy) | (fx.isna() & fy.isna()))
        return (f"{int(unequal.any(axis=1).sum())} of {len(fx)} rows differ, "
                f"in {sorted(unequal.columns[unequal.any(axis=0)]) or 'none'}")
    else:
        return "bytes differ"
    added, dropped = sorted(set(y) - set(x)), sorted(set(x) - set(y))
    changed = sorted(k for k in set(x) & set(y) if x[k] != y[k])
    return f"changed {changed or 'none'}; added {added or 'none'}; dropped {dropped or 'none'}"


def compare(a: Path, b: Path) -> list[str]:
    """One line per artifact kind of the folders' results/ (how many compared, which differ)."""
    ra, rb = a / "results", b / "results"
    same_frame = lambda p, q: untimed_frame(p).equals(untimed_frame(q))  # noqa: E731
    same_bytes = lambda p, q: digest(p) == digest(q)  # noqa: E731
    kinds = {
        "RL metrics (timings left out)": ("**/metrics.csv", same_frame),  # the study's runs and V1's warm start
        "weights": ("**/*.safetensors", same_bytes),  # the embedded base, V2's SFT model, each RL checkpoint
        "training data (the embedded base's and V2's SFT data)": ("**/*_data/**/*", same_bytes),
        "evaluation summaries (timings, provenance left out)": ("eval/**/*.json", lambda p, q: summary(p) == summary(q)),
        "evaluation episodes": ("eval/**/*.episodes.parquet", same_frame),
        "evaluation steps (each response: the tokens sampled)": ("eval/**/*.steps.parquet", same_frame),
        "tables": ("tables/*.csv", lambda p, q: p.read_text() == q.read_text()),
    }
    lines = []
    for name, (pattern, same) in kinds.items():
        files = sorted(p.relative_to(ra) for p in ra.glob(pattern) if p.is_file())
        missing = [str(f) for f in files if not (rb / f).exists()]
        differ = [f for f in files if (rb / f).exists() and not same(ra / f, rb / f)]
        lines.append(f"{name}: {len(files)} compared, {len(differ)} differ"
                     f"{'; missing in the second: ' + ', '.join(missing[:5]) if missing else ''}")
        lines += [f"  {f}: {what_differs(ra / f, rb / f)}" for f in differ[:3]]
    return lines


def run_grid(commit: str, tree: Path, model: Path) -> float:
    """Check ``commit`` out into ``tree`` and run the reduced grid there; its wall seconds."""
    subprocess.run(["git", "worktree", "add", "--detach", "-f", str(tree), commit], cwd=REPO, check=True,
                   capture_output=True)
    profile = ["--profile", "profiles/embedded"] if (tree / "profiles" / "embedded").is_dir() else []
    override = tree.parent / f"model_{tree.name}.yaml"
    override.write_text(f"model: {{base: {model}}}\n")
    # the study's config where that commit keeps it (an older commit: the repository's root)
    study = "config/config.yaml" if (tree / "config" / "config.yaml").is_file() else "config.yaml"
    env = {"PATH": f"{tree / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONPATH": str(tree),
           "HOME": str(Path.home())}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "snakemake", *TARGETS, "--cores", "2", *profile, "--configfile",
                           study, "tests/smoke_config.yaml", str(override), "--config", "results=results"],  # one folder at either commit
                          cwd=tree, env=env, capture_output=True,
                          text=True)
    if proc.returncode:
        raise SystemExit(f"{tree}: snakemake failed:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return time.monotonic() - started


def commits(old: str, new: str, write: bool) -> int:
    sys.path.insert(0, str(REPO / "tests"))
    from common import record_header, write_record
    from test_slurm_smoke import tiny_model  # the smoke's own tiny seeded model

    scratch = Path(tempfile.mkdtemp(prefix="gentax-equiv-"))
    model = tiny_model(scratch / "tiny_model")
    shas = [subprocess.run(["git", "rev-parse", c], cwd=REPO, check=True, capture_output=True,
                           text=True).stdout.strip() for c in (old, new)]
    trees = [scratch / f"tree{i}" for i in range(2)]
    walls = [run_grid(sha, tree, model) for sha, tree in zip(shas, trees)]
    lines = compare(*trees)
    verdict = "identical" if all(" 0 differ" in line and "missing" not in line
                                 for line in lines if not line.startswith("  ")) else "DIFFERENT"
    report = "\n".join([record_header(f"python benchmarks/equivalence.py {old} {new}"),
                        f"old {shas[0][:12]}: {walls[0]:.0f} s; new {shas[1][:12]}: {walls[1]:.0f} s "
                        "(the reduced grid, --cores 2)", *lines, f"verdict: {verdict}"])
    print(report)
    if write:
        write_record("equivalence.txt", report + "\n")
    for tree in trees:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, capture_output=True)
    return 0 if verdict == "identical" else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", nargs="?")
    parser.add_argument("new", nargs="?", default="HEAD")
    parser.add_argument("--write", action="store_true", help="write the record benchmarks/records/equivalence.txt")
    parser.add_argument("--folders", nargs=2, type=Path, metavar=("FIRST", "SECOND"),
                        help="compare two folders holding results/ instead of two commits")
    parser.add_argument("--out", type=Path, help="with --folders: also write the lines as JSON here")
    args = parser.parse_args(argv)
    if args.folders:
        first, second = args.folders
        lines = compare(second, first)  # the second's files, each against the first's
        print("\n".join(lines))
        if args.out:
            args.out.write_text(json.dumps({"first": str(first), "second": str(second), "compared": lines}, indent=1) + "\n")
        return 0
    if not args.old:
        parser.error("give OLD_COMMIT (or --folders FIRST SECOND)")
    return commits(args.old, args.new, args.write)


if __name__ == "__main__":
    sys.exit(main())
