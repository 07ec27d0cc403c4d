"""Do two runs of one config agree? Every result the second (the "twin", which ran fewer targets)
made, compared with the same file of the first.

    python3 benchmarks/gpu1/twin.py FIRST_RESULTS TWIN_RESULTS [--out twin.json]

Compared, for every file of TWIN_RESULTS that FIRST_RESULTS has too:
- weights (``*.safetensors``, ``*.pt``): the same bytes (sha256);
- tables (``*.parquet``, ``*.csv``): the same rows, leaving out columns of wall-clock time
  (``TIME_COLUMNS``); where they differ, the share of rows that do (rows paired by position);
- evaluation summaries (``eval/**/*.json``): the same values, leaving out time-like keys;
- everything else (logs, benchmarks/, provenance, manifests): not compared (they hold times and pids).
Prints one line a file and the totals; ``--out`` writes them as JSON. Standard library, pandas and
pyarrow only (the GPU machine's image).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

#: columns and keys that hold wall-clock time or machine facts, not results
TIME_WORDS = ("seconds", "time", "elapsed", "wall", "date", "host", "pid", "started", "finished", "tokens_per_s")
SKIP_PARTS = {"benchmarks", "logs", "log", ".snakemake"}


def _timely(name: str) -> bool:
    return any(word in name.lower() for word in TIME_WORDS)


def _sha(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 23), b""):
            digest.update(block)
    return digest.hexdigest()


def _table(path: Path):
    import pandas as pd

    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    return frame[[c for c in frame.columns if not _timely(str(c))]]


def _without_time(value):
    if isinstance(value, dict):
        return {k: _without_time(v) for k, v in value.items() if not _timely(k)}
    if isinstance(value, list):
        return [_without_time(v) for v in value]
    return value


def compare_file(first: Path, twin: Path) -> dict | None:
    """{"kind", "equal", ...} for one file pair; None where the kind is not compared."""
    if twin.suffix in (".safetensors", ".pt"):
        return {"kind": "weights", "equal": _sha(first) == _sha(twin)}
    if twin.suffix in (".parquet", ".csv"):
        a, b = _table(first), _table(twin)
        if list(a.columns) != list(b.columns) or len(a) != len(b):
            return {"kind": "table", "equal": False, "why": f"shape {a.shape} vs {b.shape}"}
        rows = (a.astype(str).values != b.astype(str).values).any(axis=1)
        return {"kind": "table", "equal": not rows.any(), "rows": len(a), "rows_differ": int(rows.sum())}
    if twin.suffix == ".json" and "eval" in twin.parts:
        a, b = (_without_time(json.loads(p.read_text())) for p in (first, twin))
        return {"kind": "summary", "equal": a == b}
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("twin", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    files, missing = {}, []
    for twin in sorted(p for p in args.twin.rglob("*") if p.is_file()):
        relative = twin.relative_to(args.twin)
        if SKIP_PARTS & set(relative.parts):
            continue
        first = args.first / relative
        if not first.is_file():
            missing.append(str(relative))
            continue
        result = compare_file(first, twin)
        if result is not None:
            files[str(relative)] = result
            extra = f" ({result['rows_differ']} of {result['rows']} rows differ)" if result.get("rows_differ") else ""
            print(f"{'same' if result['equal'] else 'DIFFERS'}  {result['kind']:8s} {relative}{extra}", flush=True)
    kinds = sorted({r["kind"] for r in files.values()})
    totals = {kind: {"files": sum(r["kind"] == kind for r in files.values()),
                     "equal": sum(r["kind"] == kind and r["equal"] for r in files.values())} for kind in kinds}
    print("totals:", json.dumps(totals), f"; only in the twin: {len(missing)}")
    if args.out:
        args.out.write_text(json.dumps({"totals": totals, "files": files, "only_in_twin": missing}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
