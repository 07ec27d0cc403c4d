"""Load and validate the analysis inputs; reduce checkpoints to per-seed and per-run values.

The success summary (long format, one row per run, checkpoint and eval domain) and the properties
table: columns and what is rejected, docs/tables.md "Inputs". Bad input is one ``GentaxError``
naming the problem and the offending rows ("row N": the 1-based data row, line N+1 of a CSV;
"<file> row N" when several files are read together).

A run's value (STUDY.md "Evaluation"): per seed, the mean over the window's checkpoints; then mean
and sample std over seeds. A seed lacking any of the window's checkpoints is left out (and noted),
never averaged over fewer. Base rows are step 0 and do not use the window. Rows of an init that
involve a domain outside its config's ``inits.<init>.domains`` are dropped, with a note.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from gentax.domains import DOMAINS
from gentax.domains.spec import MIX_SEP, mixture_weights
from gentax.errors import GentaxError
from gentax.evalfile import read_eval, task_outcomes
from gentax.io import read_result_csv, read_result_parquet
from gentax.train.runs import metrics_beside

INITS = ("v1", "v2")
BASE = "base"
DEFAULT_VARIANT = "default"

RUN_KEY = ("init", "train_domain", "variant")
CELL_KEY = RUN_KEY + ("eval_domain",)
ROW_KEY = ("init", "train_domain", "variant", "seed", "step", "eval_domain")
SUMMARY_COLUMNS = ROW_KEY + ("success",)
OPTIONAL_FRACTIONS = ("invalid_rate", "error_rate")
PROPERTY_COLUMNS = ("domain", "richness", "complexity")
TASK_OUTCOMES = "task_outcomes"
_MAX_LISTED_ROWS = 5


def sft_mix_domains(mix: dict[str, float]) -> tuple[str, ...]:
    """The domains of an SFT mix (config ``inits.v2.sft.mix``: domain -> weight) that carry data:
    weight > 0, in the study's domain order (what Table 6's ``in_v2_sft_mix`` reads)."""
    unknown = sorted(set(mix) - set(DOMAINS))
    if unknown:
        raise GentaxError(f"SFT mix names unknown domain(s) {', '.join(unknown)}; valid: {', '.join(DOMAINS)}")
    return tuple(d for d in DOMAINS if float(mix.get(d, 0)) > 0)


def domains_of(init: str, init_domains: Mapping[str, Sequence[str]] | None = None) -> tuple[str, ...]:
    """Training and evaluation domains of an initial policy, in the study's (the registry's) order:
    those ``init_domains[init]`` lists (config ``inits.<init>.domains``, ``config_settings``), every
    registered domain when not given."""
    if init_domains is None:
        return tuple(DOMAINS)
    listed = set(init_domains[init])
    return tuple(d for d in DOMAINS if d in listed)


def config_settings(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The tables' settings a study config declares (``tables.Settings`` fields as plain lists; what a
    table job's spec carries and ``gentax tables`` defaults to): ``sft_mix`` its domains of weight > 0,
    ``augmented`` each init's domains with ``augmentation.<init>.eps`` > 0 (Table 5's rows)."""
    return {"test_level": float(cfg["eval"]["test_level"]),
            "seed_sd": {kind: float(tau) for kind, tau in cfg["eval"]["seed_sd"].items()},
            "sft_mix": list(sft_mix_domains(cfg["inits"]["v2"]["sft"]["mix"])),
            "init_domains": {init: list(domains_of(init, {init: cfg["inits"][init]["domains"]})) for init in INITS},
            "augmented": {init: [d for d in DOMAINS if float(cfg["augmentation"][init]["eps"].get(d, 0)) > 0]
                          for init in INITS}}


def _known_train_domain(name: str) -> bool:
    """A domain, ``base``, or a mixture of domains (``gentax.domains.spec.mixture_weights``)."""
    if name in DOMAINS or name == BASE:
        return True
    try:
        return MIX_SEP in name and len(mixture_weights(name)) > 1
    except GentaxError:
        return False


def _read_table(source: str | os.PathLike | pd.DataFrame, what: str) -> pd.DataFrame:
    if isinstance(source, pd.DataFrame):
        return source.copy()
    path = Path(source)
    if not path.is_file():
        raise GentaxError(f"{what} file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".csv":  # a damaged one: one GentaxError naming it and the job that rebuilds it
        return read_result_csv(path)
    if suffix in (".parquet", ".pq"):
        return read_result_parquet(path).to_pandas()
    raise GentaxError(f"{what} {path}: unknown format {suffix!r}; use .csv or .parquet")


def _read_tables(sources, what: str) -> pd.DataFrame:
    """One table, or several concatenated (one path per run, as the workflow writes them), with
    ``_where`` ("row N", or "<file> row N" for several files, the file's whole path: many share a
    name, seed0.csv) for error messages."""
    if isinstance(sources, (str, os.PathLike, pd.DataFrame)):
        df = _read_table(sources, what).reset_index(drop=True)
        if "_where" not in df.columns:
            df["_where"] = [f"row {i}" for i in range(1, len(df) + 1)]
        return df
    parts = []
    for source in sources:
        part = _read_table(source, what).reset_index(drop=True)
        name = str(source) if not isinstance(source, pd.DataFrame) else "<DataFrame>"
        part["_where"] = [f"{name} row {i}" for i in range(1, len(part) + 1)]
        parts.append(part)
    if not parts:
        raise GentaxError(f"no {what} given")
    return pd.concat(parts, ignore_index=True)


def _describe_rows(df: pd.DataFrame, mask: Iterable[bool], columns: Sequence[str]) -> str:
    """'row 3 (init=v1, ...); row 9 (...)' for the first offending rows, 1-based."""
    bad = df[np.asarray(list(mask), dtype=bool)]
    parts = []
    for where, (_, row) in zip(bad["_where"], bad.iterrows()):
        values = ", ".join(f"{c}={row[c]!r}" for c in columns if c in row.index)
        parts.append(f"{where} ({values})")
    more = len(bad) - _MAX_LISTED_ROWS
    text = "; ".join(parts[:_MAX_LISTED_ROWS])
    return text + (f"; and {more} more" if more > 0 else "")


def _fail(problem: str, df: pd.DataFrame, mask, columns: Sequence[str]) -> None:
    mask = np.asarray(mask, dtype=bool)
    if mask.any():
        raise GentaxError(f"{problem}: {_describe_rows(df, mask, columns)}")


def _checked_copy(raw: pd.DataFrame, required: Sequence[str], what: str) -> pd.DataFrame:
    """A copy of ``raw`` with ``_where`` (for the messages), once it has the ``required`` columns and rows."""
    missing = [c for c in required if c not in raw.columns]
    if missing:
        raise GentaxError(f"{what} is missing column(s) {', '.join(missing)}; it has {', '.join(map(str, raw.columns))}")
    if raw.empty:
        raise GentaxError(f"{what} has no rows")
    df = raw.reset_index(drop=True).copy()
    if "_where" not in df.columns:
        df["_where"] = [f"row {i}" for i in range(1, len(df) + 1)]
    return df


def _as_integers(df: pd.DataFrame, column: str, key: Sequence[str]) -> pd.Series:
    values = pd.to_numeric(df[column], errors="coerce")
    integral = values.notna() & np.isfinite(values) & (values == np.round(values))
    _fail(f"{column} must be an integer", df, ~integral, key)
    return values.astype("int64")


def _as_fractions(df: pd.DataFrame, column: str, key: Sequence[str], optional: bool) -> pd.Series:
    values = pd.to_numeric(df[column], errors="coerce")
    unparsable = values.isna() & df[column].notna()
    _fail(f"{column} is not a number", df, unparsable, key)
    if not optional:
        _fail(f"{column} is missing", df, values.isna(), key)
    _fail(f"{column} is outside [0, 1]", df, values.notna() & ~values.between(0.0, 1.0), key)
    return values.astype(float)


def format_task_outcomes(outcomes: dict[int, float]) -> str:
    """``{3: 1.0, 7: 0.0}`` -> ``"3:1 7:0"`` (task seeds in ascending order)."""
    return " ".join(f"{int(seed)}:{float(value):.10g}" for seed, value in sorted(outcomes.items()))


def parse_task_outcomes(text: str) -> dict[int, float]:
    """The inverse of ``format_task_outcomes``; ValueError names what is wrong."""
    outcomes: dict[int, float] = {}
    for item in str(text).split():
        seed, sep, value = item.partition(":")
        if not sep:
            raise ValueError(f"{item!r} is not <task_seed>:<fraction>")
        task, fraction = int(seed), float(value)
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"task {task}: {fraction} is outside [0, 1]")
        if task in outcomes:
            raise ValueError(f"task {task} appears twice")
        outcomes[task] = fraction
    if not outcomes:
        raise ValueError("no tasks")
    return outcomes


def _check_task_outcomes(df: pd.DataFrame) -> None:
    """Each given ``task_outcomes`` parses and its mean is the row's ``success``."""
    for where, text, success in zip(df["_where"], df[TASK_OUTCOMES], df["success"]):
        if not isinstance(text, str) and pd.isna(text):
            continue
        try:
            outcomes = parse_task_outcomes(text)
        except ValueError as exc:
            raise GentaxError(f"{TASK_OUTCOMES} of {where} is malformed: {exc}") from None
        mean = float(np.mean(list(outcomes.values())))
        if abs(mean - success) > 1e-6:
            raise GentaxError(f"{TASK_OUTCOMES} of {where} average {mean:.6g}, but its success is {success:.6g}")


def validate_summary(raw: pd.DataFrame) -> pd.DataFrame:
    """Return a clean copy of a success summary (see module docstring) or raise GentaxError."""
    df = _checked_copy(raw, SUMMARY_COLUMNS, "success summary")
    shown = list(ROW_KEY) + ["success"]
    for column in ("init", "train_domain", "variant", "eval_domain"):
        _fail(f"{column} is missing", df, df[column].isna(), shown)
        df[column] = df[column].astype(str).str.strip().str.lower()
    _fail(f"unknown init (valid: {', '.join(INITS)})", df, ~df["init"].isin(INITS), shown)
    _fail(f"unknown train_domain (valid: {', '.join(DOMAINS + (BASE,))}, or a mixture such as alfworld+webshop)",
          df, ~df["train_domain"].map(_known_train_domain), shown)
    _fail(f"unknown eval_domain (valid: {', '.join(DOMAINS)})", df, ~df["eval_domain"].isin(DOMAINS), shown)
    _fail("variant is empty", df, df["variant"] == "", shown)
    df["seed"] = _as_integers(df, "seed", shown)
    df["step"] = _as_integers(df, "step", shown)
    _fail("step is negative", df, df["step"] < 0, shown)
    _fail("base rows (the initial policy) must have step 0", df,
          (df["train_domain"] == BASE) & (df["step"] != 0), shown)
    df["success"] = _as_fractions(df, "success", shown, optional=False)
    for column in OPTIONAL_FRACTIONS:
        if column in df.columns:
            df[column] = _as_fractions(df, column, shown, optional=True)
    if "episodes" in df.columns:
        episodes = pd.to_numeric(df["episodes"], errors="coerce")
        bad = df["episodes"].notna() & ~(episodes.notna() & (episodes > 0) & (episodes == np.round(episodes)))
        _fail("episodes must be a positive integer", df, bad, shown + ["episodes"])
        df["episodes"] = episodes.astype(float)  # float keeps NaN for rows without a count
    if TASK_OUTCOMES in df.columns:
        _check_task_outcomes(df)
    _fail("duplicate rows (same init, train_domain, variant, seed, step, eval_domain)",
          df, df.duplicated(list(ROW_KEY), keep=False), shown)
    return df


def validate_properties(raw: pd.DataFrame) -> pd.DataFrame:
    """Return a clean copy of the properties table, indexed by domain, or raise GentaxError."""
    df = _checked_copy(raw, PROPERTY_COLUMNS, "properties")
    shown = list(PROPERTY_COLUMNS)
    _fail("domain is missing", df, df["domain"].isna(), shown)
    df["domain"] = df["domain"].astype(str).str.strip().str.lower()
    _fail(f"unknown domain (valid: {', '.join(DOMAINS)})", df, ~df["domain"].isin(DOMAINS), shown)
    _fail("duplicate domain rows", df, df.duplicated("domain", keep=False), shown)
    for column in [c for c in df.columns if c not in ("domain", "_where")]:
        values = pd.to_numeric(df[column], errors="coerce")
        if column in PROPERTY_COLUMNS or values.notna().any():
            _fail(f"{column} is not a number", df, values.isna() & df[column].notna(), shown + [column])
            df[column] = values
    return df.drop(columns="_where").set_index("domain")


def load_summary(source) -> pd.DataFrame:
    """Read and validate a success summary: a CSV/Parquet path, a DataFrame, or a list of
    those (concatenated; errors then name the file and its row)."""
    return validate_summary(_read_tables(source, "success summary"))


def load_properties(source) -> pd.DataFrame:
    """Read (CSV/Parquet path, DataFrame or a list of them) and validate a properties table."""
    return validate_properties(_read_tables(source, "properties"))


def drop_excluded(summary: pd.DataFrame, init_domains: Mapping[str, Sequence[str]] | None = None
                  ) -> tuple[pd.DataFrame, list[str]]:
    """Drop the rows outside an init's grid: a training or eval domain that is not one of the init's
    (``domains_of``; the paper's V1 has no SciWorld); return the rest and a note per init."""
    excluded = np.zeros(len(summary), dtype=bool)
    notes = []
    for init in INITS:
        domains = [d for d in DOMAINS if d not in domains_of(init, init_domains)]
        of_init = (summary["init"] == init) & (summary["train_domain"].isin(domains)
                                                | summary["eval_domain"].isin(domains))
        if of_init.any():
            notes.append(f"{int(of_init.sum())} {init.upper()} row(s) involving {', '.join(domains)} ignored "
                         f"(not among {init.upper()}'s domains: {', '.join(domains_of(init, init_domains))}).")
        excluded |= of_init
    return summary[~excluded], notes


def window_rows(summary: pd.DataFrame, window: Sequence[int]) -> tuple[pd.DataFrame, list[str]]:
    """Rows at the window's checkpoints of seeds that have all of them (base rows: step 0), and one
    note per run whose seeds were left out."""
    window = tuple(sorted(set(int(s) for s in window)))
    is_base = summary["train_domain"] == BASE
    rows = summary[is_base | summary["step"].isin(window)]
    steps = rows.groupby(list(CELL_KEY) + ["seed"])["step"].transform("nunique")
    complete = rows["train_domain"].eq(BASE) | steps.eq(len(window))
    notes = []
    # Only runs that reached the window at all are worth a note; earlier ones are just absent.
    partial = rows[~complete]
    for key, group in partial.groupby(list(RUN_KEY)):
        seeds = ", ".join(str(s) for s in sorted(group["seed"].unique()))
        evals = ", ".join(sorted(group["eval_domain"].unique()))
        notes.append(f"{'/'.join(key)}: seed(s) {seeds} lack some of steps {list(window)} "
                     f"(eval on {evals}); left out.")
    return rows[complete], notes


def seed_values(rows: pd.DataFrame, column: str = "success") -> pd.DataFrame:
    """Per-seed mean of ``column`` over the (already windowed) checkpoints."""
    return rows.groupby(list(CELL_KEY) + ["seed"], as_index=False)[column].mean()


def cell_means(rows: pd.DataFrame, column: str = "success") -> pd.DataFrame:
    """Mean and sample std over seeds, in percent, indexed by (init, train_domain, variant,
    eval_domain); columns ``mean_pct``, ``std_pct`` (NaN with one seed), ``n_seeds``."""
    per_seed = seed_values(rows.dropna(subset=[column]), column)
    grouped = per_seed.groupby(list(CELL_KEY))[column]
    return pd.DataFrame({"mean_pct": grouped.mean() * 100.0, "std_pct": grouped.std(ddof=1) * 100.0,
                         "n_seeds": grouped.size()})


def summarize_evals(paths, keys) -> "pd.DataFrame":
    """Long-format success rows (the analysis input) from the eval JSONs of one run or initial
    policy, each row with its success per task from the episodes table beside its JSON.
    ``keys``: the run's identity columns (init, train_domain, variant, seed). A missing or damaged
    eval file, or one whose every episode an env error ended, is one GentaxError naming it and its
    recovery (``gentax.evalfile.read_eval``)."""
    rows = []
    for path in paths:
        data, episodes = read_eval(path)
        outcomes = task_outcomes(episodes, data.get("errors_as_losses", False))
        rows.append({**dict(keys), "step": int(Path(path).parent.name.removeprefix("step")), "eval_domain": data["domain"],
                     "success": data["success_rate"], "invalid_rate": data["invalid_rate"],
                     "episodes": data["scored_episodes"], "mean_length": data["mean_length"],
                     "errors": data["errors"], "error_rate": data["error_rate"],
                     TASK_OUTCOMES: format_task_outcomes(outcomes)})
    return pd.DataFrame(rows).sort_values(["step", "eval_domain"])


#: per-step training metrics the training-curves figure draws: metrics.csv column -> its name there
TRAINING_COLUMNS = {"id_success": "success", "return_mean": "return", "invalid_rate": "invalid_rate"}


def load_training(records: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """One row per run and trained step: ``RUN_KEY``, ``seed``, ``step`` and ``TRAINING_COLUMNS``, from
    the ``metrics.csv`` beside each segment record (``.../runs/<init>/<train_domain>/<variant>/seed<k>/``);
    a column a run's engine does not write is NaN. One GentaxError naming a file that cannot be read."""
    frames = []
    for record in records:
        path = metrics_beside(record)
        init, train_domain, variant, seed = path.parent.parts[-4:]
        metrics = read_result_csv(path, fix="rerun the run's last RL segment (it rewrites the file)")
        if "step" not in metrics.columns:
            raise GentaxError(f"{path}: no 'step' column")
        frame = pd.DataFrame({"init": init, "train_domain": train_domain, "variant": variant,
                              "seed": int(seed.removeprefix("seed")), "step": metrics["step"].astype(int)})
        for column, name in TRAINING_COLUMNS.items():
            frame[name] = pd.to_numeric(metrics[column], errors="coerce") if column in metrics.columns else np.nan
        frames.append(frame)
    columns = [*RUN_KEY, "seed", "step", *TRAINING_COLUMNS.values()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)

