"""Every table of the study (STUDY.md "Tables") from a validated success summary.

``analyse`` validates the inputs and leaves each table to its registry builder
(``gentax.analysis.artifacts``) on first use; ``compute_tables`` builds them all in memory,
``build_one`` one table or figure to given paths, ``build_all`` everything to a folder (atomically).
Definitions, columns, conventions (percent; NaN in memory, empty in CSV, "—" shown, never 0; an
undefined ratio is NaN plus a note) and the choices made where the paper is vague: docs/tables.md.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import time
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from gentax.analysis import artifacts, ranking, stats
from gentax.analysis import controls as control_tables
from gentax.analysis.formatting import MISSING, Table
from gentax.analysis.formatting import number as _number
from gentax.analysis.formatting import signed as _signed
from gentax.analysis.formulas import delta_ood, relative_change
from gentax.analysis.summary import (BASE, CELL_KEY, DEFAULT_VARIANT, INITS, cell_means, domains_of, drop_excluded,
                                     load_properties, load_summary, load_training, window_rows)
from gentax.domains import DOMAINS
from gentax.domains.spec import MIX_SEP, mixture_weights
from gentax.errors import GentaxError
from gentax.io import atomic_path, write_text


def __getattr__(name: str):
    if name == "TABLE_NAMES":  # derived from the registry (gentax.analysis.artifacts)
        return artifacts.names("table")
    raise AttributeError(name)


DELTA_ID_BASES = ("matching", "default")
MANIFEST = "manifest.json"


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every choice that changes a number (each a ``gentax tables`` option). The study's values, the
    fields without a default, come from its config (``gentax.study.plan.table_settings``;
    ``study_options``): the caller passes them."""

    window: tuple[int, ...]  # the checkpoint steps averaged per seed (last eval.window checkpoints to grid.steps)
    n_boot: int  # bootstrap draws behind the intervals and rank stability (eval.bootstrap; 0: none)
    seed: int  # the bootstrap's seed (the study's seed)
    error_mark_pct: float  # Table 2 marks (†) a cell with more env-error episodes than this (percent)
    test_level: float  # a cell is resolved when its Holm-adjusted p is at or below it (eval.test_level)
    seed_sd: Mapping[str, float]  # τ per "id" / "ood": the seed spread the rule allows for (stats.seed_side)
    rank_decimals: int | None = ranking.RANK_DECIMALS
    tie_points: float = ranking.TIE_POINTS
    aug_variants: tuple[str, ...] = ("aug",)
    nothink_variant: str = "nothink"
    filler_variant: str = "filler"  # filler thinking (thinking's token count, no reasoning): Table 7 rows
    #: "matching": ΔID of variant X against the base row of variant X where there is one, else the
    #: default base row; "default": always the default base row
    delta_id_base: str = "matching"
    #: V2's SFT mix, its domains of weight > 0 (summary.sft_mix_domains); None: Table 6's in_v2_sft_mix empty
    sft_mix: tuple[str, ...] | None = None
    #: each init's training and evaluation domains (inits.<init>.domains); None: every registered domain
    init_domains: Mapping[str, tuple[str, ...]] | None = None
    #: Table 5's rows beyond the summary's: per init, the domains the study augments; None: none
    augmented: Mapping[str, tuple[str, ...]] | None = None

    def __post_init__(self):
        window = tuple(sorted(set(int(s) for s in self.window)))
        if not window or window[0] <= 0:
            raise GentaxError(f"window must be positive checkpoint steps, got {self.window!r}")
        object.__setattr__(self, "window", window)
        if self.delta_id_base not in DELTA_ID_BASES:
            raise GentaxError(f"delta_id_base must be one of {DELTA_ID_BASES}, got {self.delta_id_base!r}")
        if self.n_boot < 0:
            raise GentaxError(f"bootstrap count must be >= 0, got {self.n_boot}")
        if not 0 <= self.error_mark_pct <= 100:
            raise GentaxError(f"error_mark_pct must be in [0, 100], got {self.error_mark_pct}")
        if not 0 < self.test_level < 1:
            raise GentaxError(f"test_level must be in (0, 1), got {self.test_level}")
        if set(self.seed_sd) != {"id", "ood"} or not all(0 <= float(v) <= 0.5 for v in self.seed_sd.values()):
            raise GentaxError(f"seed_sd must be {{id: τ, ood: τ}} with each τ in [0, 0.5], got {dict(self.seed_sd)!r}")
        if self.sft_mix is not None:
            unknown = sorted(set(self.sft_mix) - set(DOMAINS))
            if unknown:
                raise GentaxError(f"sft_mix names unknown domain(s) {', '.join(unknown)}; valid: {', '.join(DOMAINS)}")
            object.__setattr__(self, "sft_mix", tuple(self.sft_mix))
        for field in ("init_domains", "augmented"):
            value = getattr(self, field)
            if value is None:
                continue
            if set(value) != set(INITS):
                raise GentaxError(f"{field} must name the inits {', '.join(INITS)}, got {', '.join(value) or 'none'}")
            unknown = sorted({d for domains in value.values() for d in domains} - set(DOMAINS))
            if unknown:
                raise GentaxError(f"{field} names unknown domain(s) {', '.join(unknown)}; valid: {', '.join(DOMAINS)}")
            object.__setattr__(self, field, {init: tuple(value[init]) for init in INITS})

    def domains(self, init: str) -> tuple[str, ...]:
        """The init's training and evaluation domains, in the study's order (``summary.domains_of``)."""
        return domains_of(init, self.init_domains)


#: a table job's settings (``gentax.study.plan.table_settings``) by their ``Settings`` field
_STUDY_FIELDS = {"bootstrap": "n_boot", **{key: key for key in ("window", "seed", "error_mark_pct", "test_level",
                                                                  "seed_sd", "sft_mix", "init_domains", "augmented")}}


def study_options(settings: Mapping) -> dict:
    """The ``Settings`` fields of a table job's settings (``gentax.study.plan.table_settings``, keys
    as a spec has them: ``bootstrap`` is ``n_boot``); other keys of ``settings`` are left out."""
    return {field: settings[key] for key, field in _STUDY_FIELDS.items() if key in settings}


class Values:
    """Cell means (percent) of one window, looked up by (init, train_domain, variant, eval)."""

    def __init__(self, rows: pd.DataFrame, settings: Settings):
        self.settings = settings
        self.rows = rows  # windowed: the exact tests and the per-seed values read the tasks and seeds
        self.success = cell_means(rows, "success")
        self.invalid = cell_means(rows, "invalid_rate") if "invalid_rate" in rows.columns else None
        self.errors = cell_means(rows, "error_rate") if "error_rate" in rows.columns else None
        # Plain dicts: thousands of lookups, and MultiIndex .at is slow.
        self._lookup = {id(f): f.to_dict("index") for f in (self.success, self.invalid, self.errors) if f is not None}

    def _get(self, frame: pd.DataFrame | None, key: tuple, column: str) -> float:
        if frame is None or key not in self._lookup[id(frame)]:
            return math.nan
        return float(self._lookup[id(frame)][key][column])

    def mean(self, init, train, variant, eval_domain) -> float:
        return self._get(self.success, (init, train, variant, eval_domain), "mean_pct")

    def cell(self, init, train, variant, eval_domain) -> dict:
        key = (init, train, variant, eval_domain)
        return {c: self._get(self.success, key, c) for c in ("mean_pct", "std_pct", "n_seeds")}

    def invalid_rate(self, init, train, variant, eval_domain) -> float:
        return self._get(self.invalid, (init, train, variant, eval_domain), "mean_pct")

    def error_pct(self, init, train, variant, eval_domain) -> float:
        """Share (percent) of the cell's episodes that an env error ended; NaN when not recorded."""
        return self._get(self.errors, (init, train, variant, eval_domain), "mean_pct")

    def error_cells(self) -> list[tuple[tuple, float]]:
        """(cell key, error percent) of every cell with env errors, worst first."""
        if self.errors is None:
            return []
        shares = self.errors["mean_pct"].dropna()
        return sorted(((tuple(k), float(v)) for k, v in shares.items() if v > 0), key=lambda kv: -kv[1])

    def base_variant(self, init, eval_domain, variant=DEFAULT_VARIANT) -> str:
        """The variant of the base row that stands for ``variant``'s initial policy on a domain."""
        if self.settings.delta_id_base == "matching" and not math.isnan(self.mean(init, BASE, variant, eval_domain)):
            return variant
        return DEFAULT_VARIANT

    def base(self, init, eval_domain, variant=DEFAULT_VARIANT) -> float:
        return self.mean(init, BASE, self.base_variant(init, eval_domain, variant), eval_domain)

    def delta_id(self, init, train, variant=DEFAULT_VARIANT) -> float:
        return self.mean(init, train, variant, train) - self.base(init, train, variant)

    def delta_id_evidence(self, init, train, variant=DEFAULT_VARIANT,
                          draws: stats.BootstrapDraws | None = None) -> dict:
        """Everything printed beside a ΔID: its 95% interval and method (``stats.delta_id_interval``),
        the decision rule's two tests (``stats.delta_id_rule``) and, with more than one seed, the
        per-seed ΔIDs (``stats.per_seed_delta_id``)."""
        s = self.settings
        base = (init, BASE, self.base_variant(init, train, variant), train)
        cell = (init, train, variant, train)
        low, high, method = stats.delta_id_interval(self.rows, cell, base, s.n_boot, s.seed, draws)
        test = stats.delta_id_rule(self.rows, cell, base, seed_sd=s.seed_sd["id"])
        per_seed = stats.per_seed_delta_id(self.rows, cell, base)
        return {"delta_id_ci_low_pct": low, "delta_id_ci_high_pct": high, "delta_id_ci": method,
                **_test_columns("delta_id", test),
                "delta_id_per_seed": " ".join(f"{s}:{v:+.1f}" for s, v in per_seed.items()) if len(per_seed) > 1 else ""}

    def ood(self, init, train, variant=DEFAULT_VARIANT) -> dict[str, float]:
        return {e: self.mean(init, train, variant, e) for e in self.settings.domains(init) if e != train}

    def success_grid(self, init, variant=DEFAULT_VARIANT) -> dict[tuple[str, str], float]:
        domains = self.settings.domains(init)
        return {(t, e): self.mean(init, t, variant, e) for t in domains for e in domains}

    def ranking(self, init, variant=DEFAULT_VARIANT, grid=None):
        grid = self.success_grid(init, variant) if grid is None else grid
        s = self.settings
        return ranking.ranking_table(grid, s.domains(init), s.tie_points, s.rank_decimals)


# ---------------------------------------------------------------- tables


def _domain_grid(settings: Settings, include_base: bool) -> Iterable[tuple[str, str]]:
    for init in INITS:
        for train in ((BASE,) if include_base else ()) + settings.domains(init):
            yield init, train


ERROR_MARK = "†"


def error_notes(values: Values) -> list[str]:
    """Notes naming every cell with env-error episodes (none when there are none)."""
    cells = values.error_cells()
    if not cells:
        return []
    limit = values.settings.error_mark_pct
    marked = [(k, v) for k, v in cells if v > limit]
    shown = ", ".join(f"{'/'.join(k[:3])} on {k[3]} {v:.1f}%" for k, v in cells[:_LISTED_CELLS])
    more = f" and {len(cells) - _LISTED_CELLS} more" if len(cells) > _LISTED_CELLS else ""
    notes = [f"env errors (a crashed env, not the policy) ended episodes in {len(cells)} cell(s), left out of "
             f"their success rates unless evaluated with errors_as_losses: {shown}{more}"]
    if marked:
        notes.append(f"{ERROR_MARK} marks the {len(marked)} cell(s) where more than {limit:g}% of episodes ended "
                     "with an env error: read them with care")
    return notes


_LISTED_CELLS = 8


def _test_columns(prefix: str, test: stats.RuleTest | None) -> dict:
    """The rule's columns of one cell (NaN / "" when untested): the task-paired test's ``<prefix>_wins``,
    ``_losses``, ``_p``, ``_test`` (a ``stats.PAIRED_METHODS`` key) and the seed-level ``_seed_p``."""
    if test is None:
        return {f"{prefix}_wins": math.nan, f"{prefix}_losses": math.nan, f"{prefix}_p": math.nan,
                f"{prefix}_test": "", f"{prefix}_seed_p": math.nan}
    return {f"{prefix}_wins": test.tasks.wins, f"{prefix}_losses": test.tasks.losses,
            f"{prefix}_p": test.tasks.p_value, f"{prefix}_test": test.tasks.method,
            f"{prefix}_seed_p": test.seeds.p_value}


@dataclasses.dataclass(frozen=True)
class Family:
    """What ``mark_resolved`` did for one table: the cells in Holm's family, those with a task test
    but one seed on a trained side, and the task tests that ran (method -> cells)."""

    tested: int
    one_seed: int
    methods: dict[str, int]


def mark_resolved(records: list[dict], prefix: str, level: float) -> Family:
    """The decision rule over the cells one table tests (docs/tables.md "Resolved"): a cell's p is
    the larger of its task-paired p (``<prefix>_p``) and its seed-level p (``<prefix>_seed_p``,
    ``stats.RuleTest``); Holm over the cells that have both sets ``<prefix>_p_holm``, and
    ``<prefix>_resolved`` is "yes" where that is ≤ ``level`` (``stats.rejects``), else "no". A
    cell with a task test but no seed-level test (one seed on a trained side) cannot be resolved:
    "no", outside the family (its p could never reach the level, so it takes no share of it); an
    untested cell (no task outcomes) is left empty."""
    def rule_p(r: dict) -> float:
        task_p, seed_p = r.get(f"{prefix}_p", math.nan), r.get(f"{prefix}_seed_p", math.nan)
        return math.nan if math.isnan(task_p) or math.isnan(seed_p) else max(task_p, seed_p)

    adjusted, resolved = stats.resolve([rule_p(r) for r in records], level)
    methods: dict[str, int] = {}
    one_seed = 0
    for r, a, ok in zip(records, adjusted, resolved):
        r[f"{prefix}_p_holm"] = a
        has_task_test = not math.isnan(r.get(f"{prefix}_p", math.nan))
        if has_task_test:
            methods[r[f"{prefix}_test"]] = methods.get(r[f"{prefix}_test"], 0) + 1
        if ok is None:
            one_seed += has_task_test
            r[f"{prefix}_resolved"] = "no" if has_task_test else ""
        else:
            r[f"{prefix}_resolved"] = "yes" if ok else "no"
    return Family(int(sum(ok is not None for ok in resolved)), one_seed, methods)


RESOLVED_MARK = "✓"
#: the columns the decision rule adds, per prefix (``_test_columns`` + ``mark_resolved``)
_TEST_COLUMNS = {prefix: tuple(f"{prefix}_{c}" for c in ("wins", "losses", "p", "test", "seed_p", "p_holm", "resolved"))
                 for prefix in ("delta_id", "delta_ood")}


def _test_text(record: dict, prefix: str) -> str:
    """``w/l, p P; seeds p Q`` (and the resolved mark) of a record's rule; ``; one seed`` where the
    seed-level test could not run; "" when untested."""
    p = record.get(f"{prefix}_p", math.nan)
    if math.isnan(p):
        return ""
    seed_p = record.get(f"{prefix}_seed_p", math.nan)
    seeds = "one seed" if math.isnan(seed_p) else f"seeds p {stats.format_p(seed_p)}"
    mark = f" {RESOLVED_MARK}" if record.get(f"{prefix}_resolved") == "yes" else ""
    return f"{record[f'{prefix}_wins']:.0f}/{record[f'{prefix}_losses']:.0f}, p {stats.format_p(p)}; {seeds}{mark}"


def rule_notes(what: str, family: Family, settings: Settings, kind: str) -> list[str]:
    """The notes of a table's decision rule: the task tests that ran, the seed-level test with the
    seed spread it allows for (``settings.seed_sd[kind]``, kind "id" or "ood"), what resolved means,
    that not resolved is no evidence of no effect, and how many cells Holm's family holds."""
    if not family.methods:
        return []
    level, tau = settings.test_level, float(settings.seed_sd[kind])
    ran = "; ".join(f"{stats.PAIRED_METHODS[m].format(draws=stats.PERMUTATION_DRAWS)} in {n} cell(s)"
                    for m, n in sorted(family.methods.items()))
    notes = [f"{what}, task-paired test (won/lost tasks, p): {ran}",
             "seeds p: Banerjee's (1961) test over seeds of the difference of the per-seed values (a trained side: "
             f"its seeds' variance, at least its own evaluation noise plus τ² = {tau:g}² a domain (eval.seed_sd.{kind}), "
             "t with seeds − 1 degrees of freedom; the initial policy: its binomial variance bound); it holds its level "
             f"for any seed law whose spread is at most τ (docs/tables.md \"Resolved\")",
             f"{RESOLVED_MARK} = resolved: both tests reject, i.e. Holm-adjusted max(p, seeds p) ≤ {level:g} over the "
             f"{family.tested} cell(s) this table tests; a cell not resolved is not shown to have no effect: its test "
             "may lack the power (gentax plan --power)"]
    if family.one_seed:
        notes.append(f"{family.one_seed} cell(s) with one seed on a trained side (\"one seed\"): the variance between "
                     "training seeds cannot be estimated from one, so they cannot be resolved and are not in Holm's family")
    return notes


def interval_notes(data: pd.DataFrame) -> list[str]:
    """The note on the ΔID intervals of a table's rows (their ``delta_id_ci`` methods), if any."""
    methods = sorted(set(data["delta_id_ci"]) - {""}) if "delta_id_ci" in data.columns else []
    if not methods:
        return []
    how = {"paired tasks": "paired tasks: each draw resamples the shared tasks once, the same task draw for every "
                           "seed and the initial policy, and the run's seeds independently of it (crossed, not seeds "
                           "then tasks within seed)",
           "independent": "independent: the run's draws minus the initial policy's"}
    return [f"ΔID intervals [95%], bootstrap percentile, {'; '.join(how[m] for m in methods)}; descriptive: with "
            "2-3 seeds a percentile interval is anti-conservative, so it does not decide \"resolved\" (docs/tables.md)"]


_NO_EVIDENCE = {"delta_id_ci_low_pct": math.nan, "delta_id_ci_high_pct": math.nan, "delta_id_ci": "",
                **_test_columns("delta_id", None), "delta_id_per_seed": ""}


def table2_success(analysis: Analysis, name: str = "table2_success") -> Table:
    """Success of every (init, training domain) on every eval domain; ΔID on the diagonal, with
    its 95% interval and the rule's tests (``Values.delta_id_evidence``); ``delta_id_resolved``
    after Holm over the table's tested ΔIDs (``mark_resolved``)."""
    values, intervals = analysis.values, analysis.intervals
    evidence = {(init, train): values.delta_id_evidence(init, train, DEFAULT_VARIANT, analysis.draws)
                for init, train in _domain_grid(values.settings, include_base=False)}
    records = []
    for init, train in _domain_grid(values.settings, include_base=True):
        for eval_domain in values.settings.domains(init):
            cell = values.cell(init, train, DEFAULT_VARIANT, eval_domain)
            is_id = train == eval_domain
            record = {
                "init": init, "train_domain": train, "eval_domain": eval_domain,
                "success_pct": cell["mean_pct"], "std_pct": cell["std_pct"],
                "n_seeds": cell["n_seeds"], "is_id": is_id,
                "delta_id": values.delta_id(init, train) if is_id else math.nan,
                "error_pct": values.error_pct(init, train, DEFAULT_VARIANT, eval_domain),
            }
            record.update(evidence.get((init, train), _NO_EVIDENCE) if is_id else _NO_EVIDENCE)
            key = (init, train, DEFAULT_VARIANT, eval_domain)
            for column in _CI_COLUMNS:
                record[column] = float(intervals.at[key, column]) if key in intervals.index else math.nan
            records.append(record)
    level = values.settings.test_level
    family = mark_resolved(records, "delta_id", level)
    data = pd.DataFrame.from_records(records)
    display_rows = []
    for (init, train), group in data.groupby(["init", "train_domain"], sort=False):
        row = {"init": init.upper(), "train_domain": train}
        for r in group.to_dict("records"):
            text = _pm(r["success_pct"], r["std_pct"])
            if r["is_id"] and not math.isnan(r["delta_id"]):
                ci = (f" [{_signed(r['delta_id_ci_low_pct'])}, {_signed(r['delta_id_ci_high_pct'])}]"
                      if not math.isnan(r["delta_id_ci_low_pct"]) else "")
                test = _test_text(r, "delta_id")
                text += f" (ΔID {_signed(r['delta_id'])}{ci}{'; ' + test if test else ''})"
            if r["error_pct"] > values.settings.error_mark_pct:  # NaN (not recorded) compares False
                text += f" {ERROR_MARK}"
            row[r["eval_domain"]] = text
        display_rows.append(row)
    display = pd.DataFrame(display_rows, columns=["init", "train_domain", *DOMAINS]).fillna(MISSING)
    notes = error_notes(values) + interval_notes(data)
    notes += rule_notes("ΔID (run vs initial policy)", family, values.settings, "id")
    return Table("table2_success", "Table 2: success (%) on every eval domain, mean ± std over seeds; "
                 "ΔID on the diagonal", data, display, notes)


_CI_COLUMNS = ("ci_seeds_low_pct", "ci_seeds_high_pct", "ci_episodes_low_pct", "ci_episodes_high_pct")


def table8_rank_detail(analysis: Analysis, name: str = "table8_rank_detail") -> Table:
    """Per init and eval domain: each competing training domain's success and rank."""
    values, records, display_rows = analysis.values, [], []
    for init in INITS:
        domains = values.settings.domains(init)
        scores, ranks = values.ranking(init)
        for eval_domain in domains:
            for train in domains:
                if train == eval_domain:
                    continue
                records.append({
                    "init": init, "eval_domain": eval_domain, "train_domain": train,
                    "success_pct": values.mean(init, train, DEFAULT_VARIANT, eval_domain),
                    "rank": ranks.get((train, eval_domain), math.nan),
                    "score": scores[train],
                })
        for train in domains:
            row = {"init": init.upper(), "train_domain": train}
            for eval_domain in domains:
                if eval_domain == train:
                    row[eval_domain] = "(ID)"
                    continue
                success = values.mean(init, train, DEFAULT_VARIANT, eval_domain)
                rank = ranks.get((train, eval_domain))
                row[eval_domain] = MISSING if rank is None else f"{_number(success)} ({rank})"
            row["score"] = _number(scores[train], 0)
            display_rows.append(row)
    s = values.settings
    rule = (f"ranks: sorted by success descending; less than {s.tie_points:g} points below the one "
            f"directly before shares its rank (ties chain), else the next rank; values rounded to "
            f"{s.rank_decimals if s.rank_decimals is not None else 'no'} decimal(s) first")
    display = pd.DataFrame(display_rows, columns=["init", "train_domain", *DOMAINS, "score"]).fillna(MISSING)
    return Table("table8_rank_detail", "Table 8: OOD ranking per eval domain, success % (rank)",
                 pd.DataFrame.from_records(records, columns=[
                     "init", "eval_domain", "train_domain", "success_pct", "rank", "score"]),
                 display, [rule])


def table3_ranking(analysis: Analysis, name: str = "table3_ranking") -> Table:
    """OOD ranking score per training domain (V1, V2, V1+V2) beside the domain properties."""
    values, properties = analysis.values, analysis.properties
    per_init = {init: values.ranking(init)[0] for init in INITS}
    combined = ranking.combined_scores(per_init)
    extra = [c for c in (properties.columns if properties is not None else []) if c not in ("richness", "complexity")]
    records = []
    for domain in DOMAINS:
        record = {
            "train_domain": domain,
            "score_v1": per_init["v1"].get(domain, math.nan),
            "score_v2": per_init["v2"].get(domain, math.nan),
            "score_v1v2": combined.get(domain, math.nan),
        }
        for column in ("richness", "complexity", *extra):
            has = properties is not None and domain in properties.index
            record[column] = properties.at[domain, column] if has else math.nan
        records.append(record)
    notes = ["score = sum of a training domain's OOD ranks (lower is better); V1+V2 = V1 + V2, "
             "so SciWorld (absent from V1) has none"]
    if properties is None:
        notes.append("no properties given: richness and complexity are empty")
    return Table("table3_ranking", "Table 3: OOD ranking score and environment properties",
                 pd.DataFrame.from_records(records), None, notes)


def _ood_columns(prefix_values: dict[str, dict[str, float]]) -> dict[str, float]:
    """Flatten {label: {eval_domain: value}} to ood_<domain>_<label>_pct columns over DOMAINS."""
    out = {}
    for domain in DOMAINS:
        for label, ood in prefix_values.items():
            out[f"ood_{domain}_{label}_pct"] = ood.get(domain, math.nan)
    return out


def _intervention_table(values: Values, name: str, title: str, rows: Sequence[tuple[str, str, str]],
                        labels: tuple[str, str], without_variant: str) -> Table:
    """Rows (init, train_domain, with_variant): ΔID and OOD success without → with the intervention,
    ΔOOD by formula with the rule's tests (``stats.delta_ood_rule``, Holm over the table's rows), and
    invalid-action rates when the summary has them."""
    without_label, with_label = labels
    records, display_rows = [], []
    has_invalid = values.invalid is not None
    for init, train, with_variant in rows:
        ood_without = values.ood(init, train, without_variant)
        ood_with = values.ood(init, train, with_variant)
        change, note = delta_ood(ood_without, ood_with)
        record = {
            "init": init, "train_domain": train, "variant": with_variant,
            f"delta_id_{without_label}": values.delta_id(init, train, without_variant),
            f"delta_id_{with_label}": values.delta_id(init, train, with_variant),
            **_ood_columns({without_label: ood_without, with_label: ood_with}),
            "delta_ood_pct": change,
            "n_seeds": min(values.cell(init, train, v, e)["n_seeds"] for v in (without_variant, with_variant)
                           for e in ood_without) if ood_without else math.nan,
            **_test_columns("delta_ood", None if math.isnan(change) else stats.delta_ood_rule(
                values.rows, [((init, train, without_variant, e), (init, train, with_variant, e)) for e in ood_without],
                seed_sd=values.settings.seed_sd["ood"])),
        }
        if has_invalid:
            for label, variant in ((without_label, without_variant), (with_label, with_variant)):
                ood_invalid = [values.invalid_rate(init, train, variant, e) for e in ood_without]
                record[f"invalid_id_{label}_pct"] = values.invalid_rate(init, train, variant, train)
                record[f"invalid_ood_{label}_pct"] = float(np.mean(ood_invalid)) if ood_invalid else math.nan
        record["note"] = note
        records.append(record)
    family = mark_resolved(records, "delta_ood", values.settings.test_level)
    for record in records:
        init, train, with_variant = record["init"], record["train_domain"], record["variant"]
        ood_without = values.ood(init, train, without_variant)
        ood_with = values.ood(init, train, with_variant)
        change, note = record["delta_ood_pct"], record["note"]
        test = _test_text(record, "delta_ood")
        display = {"init": init.upper(), "train_domain": train, "variant": with_variant,
                   "ΔID": _arrow(record[f"delta_id_{without_label}"], record[f"delta_id_{with_label}"], True)}
        for domain in DOMAINS:
            display[f"OOD {domain}"] = (_arrow(ood_without[domain], ood_with[domain])
                                        if domain in ood_without else "")
        display["ΔOOD %"] = _signed(change) + (f" ({test})" if test else "")
        if has_invalid:
            for scope in ("id", "ood"):
                display[f"invalid {scope.upper()} %"] = _arrow(record[f"invalid_{scope}_{without_label}_pct"],
                                                               record[f"invalid_{scope}_{with_label}_pct"])
        display["note"] = note
        display_rows.append(display)
    data = pd.DataFrame.from_records(records)
    notes = [f"{without_label} → {with_label}; ΔOOD = 100 × Σ_e (G_{with_label}(e) − G_{without_label}(e)) "
             f"/ Σ_e G_{without_label}(e) over the OOD domains e (undefined when that sum is 0)"]
    notes += rule_notes(f"ΔOOD ({with_label} vs {without_label} run, the OOD domains' tasks pooled)", family,
                        values.settings, "ood")
    return Table(name, title, data, pd.DataFrame(display_rows) if display_rows else data.copy(), notes)


def table5_augmentation(analysis: Analysis, name: str = "table5_augmentation") -> Table:
    values, variants_present = analysis.values, analysis.variants_present
    s = values.settings
    rows = []
    for variant in s.aug_variants:
        for init, train in _domain_grid(s, include_base=False):
            if train in (s.augmented or {}).get(init, ()) or (init, train, variant) in variants_present:
                rows.append((init, train, variant))
    table = _intervention_table(values, "table5_augmentation", "Table 5: state information augmentation",
                                rows, ("default", "aug"), DEFAULT_VARIANT)
    table.notes.append("the paper's V1 ΔOOD figures do not follow its own formula; these are computed by the formula")
    return table


def table7_thinking(analysis: Analysis, name: str = "table7_thinking") -> Table:
    """Thinking on vs off on the paper's grid; plus, beyond the paper, thinking vs filler thinking
    (same think tokens, no reasoning content) for each (init, training domain) with a filler run.
    A filler row's own columns are named ``*_filler_*`` (``*_nothink_*`` stay empty there)."""
    values, variants_present = analysis.values, analysis.variants_present
    s = values.settings
    rows = [(init, train, s.nothink_variant) for init, train in _domain_grid(s, include_base=False)]
    title = "Table 7: thinking on vs off"
    table = _intervention_table(values, "table7_thinking", title, rows, ("think", "nothink"), DEFAULT_VARIANT)
    filler_rows = [(init, train, s.filler_variant) for init, train in _domain_grid(s, include_base=False)
                   if (init, train, s.filler_variant) in variants_present]
    if not filler_rows:
        return table
    filler = _intervention_table(values, "table7_thinking", title, filler_rows, ("think", "filler"), DEFAULT_VARIANT)
    order = [c for c in table.data.columns if c != "note"]
    columns = order + [c for c in filler.data.columns if c not in order and c != "note"] + ["note"]
    data = pd.concat([table.data, filler.data], ignore_index=True)[columns]
    display = pd.concat([table.display, filler.display], ignore_index=True)[list(table.display.columns)]
    notes = table.notes + [f"filler rows (variant {s.filler_variant}): the think block holds neutral filler of the "
                           "thinking run's mean think-token count instead of reasoning; ΔOOD of think → filler "
                           "beside think → nothink tells thinking content from thinking length (docs/STUDY.md)"]
    notes += filler.notes[1:]  # the filler rows' exact tests: a family of their own (their own Holm)
    return Table("table7_thinking", title + " and filler thinking", data, display.fillna(""), notes)


def table6_relative_change(analysis: Analysis, name: str = "table6_relative_change") -> Table:
    """Relative change of success after RL vs the initial policy, V1 and V2 side by side."""
    values = analysis.values
    mix = values.settings.sft_mix
    records = []
    for train in DOMAINS:
        for eval_domain in DOMAINS:
            record = {"train_domain": train, "eval_domain": eval_domain, "is_id": train == eval_domain,
                      "in_v2_sft_mix": math.nan if mix is None else eval_domain in mix}
            notes = []
            for init in INITS:
                in_grid = train in values.settings.domains(init) and eval_domain in values.settings.domains(init)
                after = values.mean(init, train, DEFAULT_VARIANT, eval_domain) if in_grid else math.nan
                before = values.base(init, eval_domain) if in_grid else math.nan
                change, note = relative_change(after, before)
                record[f"rel_change_{init}_pct"] = change
                # the seed-level spread: each seed's own relative change (several seeds only)
                seeds = (stats.per_seed_success(values.rows, (init, train, DEFAULT_VARIANT, eval_domain))
                         if in_grid and not math.isnan(change) else {})
                per_seed = {seed: relative_change(value, before)[0] for seed, value in seeds.items()}
                record[f"rel_change_{init}_per_seed"] = (" ".join(f"{seed}:{v:+.1f}" for seed, v in per_seed.items())
                                                         if len(per_seed) > 1 else "")
                if note:
                    notes.append(f"{init.upper()} {note}")
            record["note"] = "; ".join(notes)
            records.append(record)
    return Table("table6_relative_change", "Table 6: relative change (%) of success after RL, V1 vs V2",
                 pd.DataFrame.from_records(records), None,
                 ["relative change = (success after RL − success of the initial policy) / success of the "
                  "initial policy × 100 (mean over seeds; *_per_seed: each seed's own, seed:value); "
                  "in_v2_sft_mix refers to the eval domain"
                  + (f" (V2's SFT mix, weight > 0: {', '.join(mix)})" if mix is not None else
                     ": empty, the V2 SFT mix was not given (config inits.v2.sft.mix; Settings.sft_mix)")])


def table4_extended(summary: pd.DataFrame, values: Values) -> tuple[Table, pd.DataFrame]:
    """Runs longer than the default window: ΔID, OOD success and ranking score at the default
    window and at the run's own last checkpoints (as many as the window has). At the late
    window the run competes with the other training domains' default-window values. Each ΔID
    has its 95% interval paired over tasks and its exact paired test where the rows have task
    outcomes (``Values.delta_id_evidence``), resolved after Holm over the table's rows.

    Also returns the late-window rows (for the bootstrap statistics)."""
    s = values.settings
    trained = summary[(summary["train_domain"] != BASE) & (summary["variant"] == DEFAULT_VARIANT)]
    long_runs = sorted({tuple(k) for k, g in trained.groupby(["init", "train_domain"]) if g["step"].max() > max(s.window)})
    records, notes, late_rows = [], [], []
    for init, train in long_runs:
        run_rows = trained[(trained["init"] == init) & (trained["train_domain"] == train)]
        late_window = tuple(sorted(run_rows["step"].unique())[-len(s.window):])
        rows, run_notes = window_rows(run_rows, late_window)
        notes += run_notes
        with_base = pd.concat([rows, summary[summary["train_domain"] == BASE]])
        late = Values(with_base, s)
        late_rows.append(rows.assign(variant=f"{DEFAULT_VARIANT}@{late_window[-1]}"))
        for label, source in (("default", values), ("last", late)):
            window = s.window if label == "default" else late_window
            grid = values.success_grid(init)
            for eval_domain in s.domains(init):
                grid[(train, eval_domain)] = source.mean(init, train, DEFAULT_VARIANT, eval_domain)
            scores, ranks = values.ranking(init, grid=grid)
            record = {"init": init, "train_domain": train, "window": label,
                      "steps": ",".join(map(str, window)), "delta_id": source.delta_id(init, train),
                      "n_seeds": source.cell(init, train, DEFAULT_VARIANT, train)["n_seeds"],
                      **source.delta_id_evidence(init, train)}
            ood = source.ood(init, train)
            record.update({f"ood_{domain}_pct": ood.get(domain, math.nan) for domain in DOMAINS})
            record.update({f"rank_{domain}": ranks.get((train, domain), math.nan) for domain in DOMAINS})
            record["ranking_score"] = scores.get(train, math.nan)
            records.append(record)
    family = mark_resolved(records, "delta_id", s.test_level)
    columns = (["init", "train_domain", "window", "steps", "n_seeds", "delta_id", "delta_id_ci_low_pct",
                "delta_id_ci_high_pct", "delta_id_ci", *_TEST_COLUMNS["delta_id"], "delta_id_per_seed"]
               + [f"ood_{d}_pct" for d in DOMAINS] + [f"rank_{d}" for d in DOMAINS] + ["ranking_score"])
    if not long_runs:
        notes.append(f"no default-variant run has checkpoints beyond step {max(s.window)}")
    notes.append("at the late window the run is ranked against the other training domains' default-window values")
    notes += interval_notes(pd.DataFrame.from_records(records, columns=["delta_id_ci"]))
    notes += rule_notes("ΔID (run vs initial policy)", family, s, "id")
    table = Table("table4_extended", "Table 4: longer training, default window vs the run's last checkpoints",
                  pd.DataFrame.from_records(records, columns=columns), None, notes)
    late = pd.concat(late_rows) if late_rows else summary.iloc[0:0]
    return table, late


# ---------------------------------------------------------------- formatting


def _pm(mean, std) -> str:
    if math.isnan(mean):
        return MISSING
    return _number(mean) if math.isnan(std) else f"{mean:.1f} ± {std:.1f}"


def _arrow(before, after, signed: bool = False) -> str:
    fmt = _signed if signed else _number
    return f"{fmt(before)} → {fmt(after)}"


_INTEGER_COLUMNS = {"score_v1", "score_v2", "score_v1v2", "score", "rank", "ranking_score", "n_seeds",
                    "draws_with_score", "n_runs", "n_settings", "draws_used"}
_TWO_DECIMALS = {"r2"}


def _format_value(value, column: str) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value or ""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, (int, np.integer)) or column in _INTEGER_COLUMNS or column.startswith("rank_"):
        return f"{value:.0f}"
    if column in _TWO_DECIMALS:
        return f"{value:.2f}"
    return f"{value:.1f}"


def display_frame(table: Table) -> pd.DataFrame:
    if table.display is not None:
        return table.display
    return pd.DataFrame({c: [_format_value(v, c) for v in table.data[c]] for c in table.data.columns},
                        columns=table.data.columns)


def to_markdown(table: Table) -> str:
    frame = display_frame(table)
    body = (frame.to_markdown(index=False, disable_numparse=True) if len(frame.columns)
            else "(empty)")
    lines = [f"### {table.title}", "", body if len(frame) else body + "\n\n(no rows)", ""]
    if table.notes:
        lines += ["Notes:", ""] + [f"- {n}" for n in table.notes] + [""]
    return "\n".join(lines)


_LATEX_REPLACEMENTS = {"—": "---", "±": r"$\pm$", "→": r"$\to$", "Δ": r"$\Delta$", "Σ": r"$\Sigma$", "−": "-"}


def to_latex(table: Table) -> str:
    frame = display_frame(table)
    if not len(frame.columns):
        return f"% {table.title}: no columns\n"
    styler = frame.style.hide(axis="index").format(escape="latex").format_index(escape="latex", axis=1)
    header = [f"% {table.title}"] + [f"% note: {n}" for n in table.notes]
    text = "\n".join(header) + "\n" + styler.to_latex(hrules=True, column_format="l" * len(frame.columns))
    for old, new in _LATEX_REPLACEMENTS.items():
        text = text.replace(old, new)
    return text


TABLE_FORMATS = ("csv", "md", "tex")


def render(table: Table) -> dict[str, str]:
    """The table's file contents by format: CSV (empty = missing), Markdown, LaTeX."""
    return {"csv": table.data.to_csv(index=False, na_rep="", float_format="%.10g"), "md": to_markdown(table),
            "tex": to_latex(table)}


def write_table(table: Table, folder: Path) -> list[Path]:
    paths = []
    for ext, text in render(table).items():
        paths.append(folder / f"{table.name}.{ext}")
        write_text(paths[-1], text)
    return paths


# ---------------------------------------------------------------- everything


class Analysis:
    """One build's validated inputs and the values its tables share (``analyse``): ``settings``,
    ``summary`` (excluded rows dropped), ``properties``, ``controls`` (or None), ``values`` (the
    window's cell means and rows), ``variants_present``, ``notes``. ``extended``, ``draws``,
    ``intervals`` and ``stability`` are computed on first use and kept (a builder elsewhere keeps
    its own with ``shared``), so a table job computes only what its table reads."""

    def __init__(self, settings: Settings, summary: pd.DataFrame, properties: pd.DataFrame | None,
                 notes: list[str], controls: pd.DataFrame | None):
        self.settings, self.summary, self.properties, self.controls = settings, summary, properties, controls
        self.training: pd.DataFrame | None = None  # per-step training metrics (summary.load_training), where read
        rows, window_notes = window_rows(summary, settings.window)
        self.values = Values(rows, settings)
        self.variants_present = {tuple(k) for k in summary[list(CELL_KEY[:3])].drop_duplicates().itertuples(index=False)}
        self.notes = notes + window_notes + error_notes(self.values)
        known = {DEFAULT_VARIANT, settings.nothink_variant, settings.filler_variant, *settings.aug_variants,
                 *(controls["label"] if controls is not None else ())}
        unused = sorted({k[2] for k in self.variants_present} - known)
        if unused:
            self.notes.append(f"variant(s) in no table: {', '.join(unused)} (see success_ci)")
        self._built: dict[str, Table] = {}
        self._shared: dict[str, object] = {}

    @functools.cached_property
    def extended(self) -> tuple[Table, pd.DataFrame]:
        """Table 4 and the late-window rows of its runs (``table4_extended``)."""
        return table4_extended(self.summary, self.values)

    @functools.cached_property
    def draws(self) -> stats.BootstrapDraws:
        """The bootstrap draws of every cell, the late windows' included (``stats.bootstrap``)."""
        return stats.bootstrap(pd.concat([self.values.rows, self.extended[1]]), self.settings.n_boot,
                               self.settings.seed)

    @functools.cached_property
    def intervals(self) -> pd.DataFrame:
        """Every cell's mean with its bootstrap intervals (``success_ci``'s rows)."""
        late_rows = self.extended[1]
        means = pd.concat([self.values.success, cell_means(late_rows)]) if not late_rows.empty else self.values.success
        return means.join(stats.success_intervals(self.draws), how="left")

    @functools.cached_property
    def stability(self) -> pd.DataFrame:
        s = self.settings
        return stats.rank_stability(self.draws, s.domains, INITS, DEFAULT_VARIANT, s.tie_points, s.rank_decimals)

    @functools.cached_property
    def has_mixtures(self) -> bool:
        return any(MIX_SEP in train for _, train, _ in self.variants_present)

    def shared(self, key: str, compute):
        """A value several builders share, computed by ``compute()`` on first use and kept."""
        if key not in self._shared:
            self._shared[key] = compute()
        return self._shared[key]

    def present(self, name: str) -> bool:
        """Whether this analysis has the registered ``name``: one planned with the mixtures only with
        mixture runs, one planned with the controls only with their properties (``build_one`` still
        writes it, empty)."""
        planned = artifacts.get(name).planned
        return {"always": True, "mixtures": self.has_mixtures, "controls": self.controls is not None}[planned]

    def table(self, name: str) -> Table:
        """The registered table ``name``, built by its registry builder on first use."""
        if name not in self._built:
            artifact = artifacts.get(name)
            if artifact.kind != "table":
                raise GentaxError(f"{name!r} is a {artifact.kind}, not a table")
            self._built[name] = artifacts.builder(name)(self, name)
        return self._built[name]

    @property
    def tables(self) -> dict[str, Table]:
        """Every table this analysis has (``present``), in registry order."""
        return {name: self.table(name) for name in artifacts.names("table") if self.present(name)}


def mixture_ood(analysis: Analysis, name: str = "mixture_ood") -> Table:
    """Beyond the paper: each run on a mixture of domains, and each member's single-domain run,
    against the initial policy over the init's domains outside the mixture (ΔOOD, its 95% interval
    ``stats.delta_ood_interval`` and the rule's tests; docs/tables.md). Empty, and no draws
    computed, without mixture runs."""
    values, variants_present = analysis.values, analysis.variants_present
    draws = analysis.draws if analysis.has_mixtures else None
    records = []
    for init, train, variant in sorted(k for k in variants_present if MIX_SEP in k[1]):
        members = list(mixture_weights(train))
        ood_domains = [e for e in values.settings.domains(init) if e not in members]
        base = {e: values.base(init, e, variant) for e in ood_domains}
        base_keys = {e: (init, BASE, values.base_variant(init, e, variant), e) for e in ood_domains}
        for run in [train, *members]:
            cells = [values.cell(init, run, variant, e) for e in ood_domains]
            change, note = delta_ood(base, {e: c["mean_pct"] for e, c in zip(ood_domains, cells)})
            ci = (stats.delta_ood_interval(draws, {e: (init, run, variant, e) for e in ood_domains}, base_keys,
                                           base, delta_ood) if draws is not None else None)
            low, high = (ci.low, ci.high) if ci is not None else (math.nan, math.nan)
            note = "; ".join(n for n in (note, ci.note() if ci is not None else "") if n)
            test = None if math.isnan(change) else stats.delta_ood_rule(
                values.rows, [(base_keys[e], (init, run, variant, e)) for e in ood_domains],
                seed_sd=values.settings.seed_sd["ood"])
            records.append({
                "init": init, "mixture": train, "variant": variant, "run": run,
                "ood_domains": " ".join(ood_domains),
                "ood_success_pct": float(np.mean([c["mean_pct"] for c in cells])) if cells else math.nan,
                "ood_std_pct": float(np.mean([c["std_pct"] for c in cells])) if cells else math.nan,
                "n_seeds": min((c["n_seeds"] for c in cells), default=math.nan),
                "delta_ood_pct": change, "delta_ood_ci_low_pct": low, "delta_ood_ci_high_pct": high,
                **_test_columns("delta_ood", test), "note": note,
            })
    family = mark_resolved(records, "delta_ood", values.settings.test_level)
    columns = ["init", "mixture", "variant", "run", "ood_domains", "ood_success_pct", "ood_std_pct", "n_seeds",
               "delta_ood_pct", "delta_ood_ci_low_pct", "delta_ood_ci_high_pct", *_TEST_COLUMNS["delta_ood"], "note"]
    return Table("mixture_ood", "Training on a mixture of domains: ΔOOD (percent) of each mixture run and of "
                 "its members' single-domain runs, over the domains outside the mixture, with 95% bootstrap "
                 "intervals", pd.DataFrame.from_records(records, columns=columns), None,
                 rule_notes("ΔOOD (run vs initial policy, the OOD domains' tasks pooled)", family,
                            values.settings, "ood"))


def analyse(summary, properties, settings: Settings, controls=None) -> Analysis:
    """Validate the inputs (``controls``: the controls' properties table, optional) and window the
    runs; every table and statistic is left to be computed on first use (``Analysis``)."""
    summary = load_summary(summary)
    properties = load_properties(properties) if properties is not None else None
    levels = control_tables.load_levels(controls) if controls is not None else None
    summary, notes = drop_excluded(summary, settings.init_domains)
    return Analysis(settings, summary, properties, notes, levels)


def compute_tables(summary, properties, settings: Settings, controls=None) -> Analysis:
    """Validate the inputs and compute every table of the registry the inputs give rise to (nothing
    is written): ``analyse`` and then each present table's builder, in registry order."""
    analysis = analyse(summary, properties, settings, controls)
    analysis.tables  # noqa: B018 (builds them)
    return analysis


# ---- the registry builders (gentax.analysis.artifacts), ``(analysis, name) -> Table``, beside the table functions


def build_table4(analysis: Analysis, name: str) -> Table:
    return analysis.extended[0]


def build_success_ci(analysis: Analysis, name: str) -> Table:
    return Table("success_ci", "Every success figure (percent) with 95% bootstrap intervals "
                 "(over seeds; over seeds and episodes where episode counts exist); variant "
                 "default@N = the run's checkpoints ending at step N", analysis.intervals.reset_index())


def build_rank_stability(analysis: Analysis, name: str) -> Table:
    return Table("rank_stability", "Rank stability: share of bootstrap draws in which each training "
                 "domain has the best (lowest) OOD ranking score", analysis.stability)


_OUTPUTS = {"table": TABLE_FORMATS, "figure": ("png", "svg")}


def build_one(name: str, summary, properties, outputs, controls=None, training=None, **options) -> Analysis:
    """Build one registered table or figure and write it atomically to ``outputs`` (``csv``, ``md``,
    ``tex`` or ``png``, ``svg`` -> path): what a workflow job calls. ``summary`` may be a list of
    per-run files; ``options`` are ``Settings`` fields (``n_boot`` forced to 0 for an entry that
    needs no bootstrap); ``training``: the segment records beside the runs' metrics.csv (an entry
    with ``training``). Only what the entry's builder reads is computed."""
    artifact = artifacts.get(name)  # an unknown name is one GentaxError
    outputs = dict(outputs)
    wanted = _OUTPUTS[artifact.kind]
    missing = [ext for ext in wanted if ext not in outputs]
    if missing:
        raise GentaxError(f"{name}: no output path for {', '.join(missing)}")
    if not artifact.bootstrap:
        options["n_boot"] = 0
    analysis = analyse(summary, properties, Settings(**options), controls)
    if training:  # only an entry with ``training`` has records to read
        analysis.training = load_training(training)
    if artifact.kind == "table":
        for ext, text in render(analysis.table(name)).items():
            write_text(outputs[ext], text)
    else:
        from gentax.analysis import figures  # defers matplotlib to the figure jobs

        built = artifacts.builder(name)(analysis, name)
        for ext in wanted:
            figures.save(built, outputs[ext])
    return analysis


def _is_replaceable(out_dir: Path) -> bool:
    """Only an empty folder or an earlier ``gentax tables`` output may be replaced."""
    return not out_dir.exists() or (out_dir.is_dir() and (not any(out_dir.iterdir()) or (out_dir / MANIFEST).is_file()))


def _describe_input(source) -> dict | list | None:
    """Path and sha256 of an input file (a list for several; None for a DataFrame)."""
    if source is None or isinstance(source, pd.DataFrame):
        return None
    if not isinstance(source, (str, os.PathLike)):
        return [_describe_input(s) for s in source]
    path = Path(source)
    return {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def build_all(summary, properties, out_dir: str | os.PathLike, *, figures: bool = True, controls=None,
              **options) -> Analysis:
    """Compute everything and write it to ``out_dir``, replaced atomically; it must be absent, empty
    or an earlier output of this function (it has ``manifest.json``). ``summary`` / ``properties``
    / ``controls``: paths (CSV/Parquet) or DataFrames (the last two may be None); ``options``: the
    ``Settings`` fields, the study's among them (``study_options``)."""
    started = time.perf_counter()
    out_dir = Path(out_dir)
    if not _is_replaceable(out_dir):
        raise GentaxError(f"refusing to replace {out_dir}: not empty and not an earlier 'gentax tables' output")
    settings = Settings(**options)
    analysis = compute_tables(summary, properties, settings, controls)
    with atomic_path(out_dir) as tmp:
        tmp.mkdir()
        written = []
        for table in analysis.tables.values():
            written += write_table(table, tmp)
        if figures:
            from gentax.analysis import figures as figure_module  # defers matplotlib until figures are asked for

            written += figure_module.write_all(analysis, tmp / "figures")
        notes = ["# Notes", ""] + [f"- {n}" for n in analysis.notes or ["none"]]
        for table in analysis.tables.values():
            notes += ["", f"## {table.name}", ""] + [f"- {n}" for n in table.notes or ["none"]]
            if "note" in table.data.columns:
                notes += [f"- row {i + 1}: {n}" for i, n in enumerate(table.data["note"]) if n]
        (tmp / "notes.md").write_text("\n".join(notes) + "\n")
        manifest = {
            "settings": dataclasses.asdict(settings),
            "inputs": {"summary": _describe_input(summary), "properties": _describe_input(properties),
                       "controls": _describe_input(controls)},
            "summary_rows": int(len(analysis.summary)),
            "files": sorted(str(p.relative_to(tmp)) for p in written) + ["notes.md"],
            "seconds": round(time.perf_counter() - started, 3),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    return analysis
