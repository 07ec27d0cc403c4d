"""What the benchmark scripts share: this clone's gentax first on ``sys.path``, their records (one
file each, ``benchmarks/records/<name>``, overwritten by the next run, headed by date, commit and
machine; latest figures in docs/performance.md), and what two correct runs may differ in (timings).
"""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORDS = REPO / "benchmarks" / "records"
if str(REPO) not in sys.path[:1]:
    sys.path.insert(0, str(REPO))  # this clone's gentax, not an installed one


def record_header(command: str) -> str:
    """``# DATE UTC, commit C[ (dirty)], CPU, N cores; COMMAND``: a record's first line."""
    from gentax import provenance

    code, machine = provenance.code_version(), provenance.machine()
    return (f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, commit {str(code['commit'])[:12]}"
            f"{' (dirty)' if code['dirty'] else ''}, {machine['cpu']}, {machine['cores']} cores; {command}")


def write_record(name: str, text: str) -> Path:
    """Replace ``benchmarks/records/<name>`` with ``text`` (atomically) and say so."""
    from gentax.io import write_text

    path = RECORDS / name
    write_text(path, text)
    print(f"wrote {path.relative_to(REPO)}")
    return path


#: keys (JSON) and columns (tables) whose values are wall-clock times
TIMING_KEYS = {"seconds", "time", "timing", "created", "elapsed", "since"}


def timing(key: str) -> bool:
    return key in TIMING_KEYS or key.endswith(("_s", "_seconds", "/seconds"))


def untimed(value, also: frozenset[str] = frozenset()):
    """``value`` (parsed JSON) without its timing keys, nor the keys in ``also``, at any depth."""
    if isinstance(value, dict):
        return {k: untimed(v, also) for k, v in value.items() if not (timing(k) or k in also)}
    return [untimed(v, also) for v in value] if isinstance(value, list) else value


def untimed_frame(path: Path):
    """A CSV or Parquet file as a DataFrame without its timing columns."""
    import pandas as pd

    data = pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
    return data.drop(columns=[c for c in data.columns if timing(c)])
