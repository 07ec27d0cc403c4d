"""The workflow's bookkeeping jobs: their specs, their checks and their runs (``gentax summarize``,
``gentax table``, ``gentax figure``, ``gentax properties-table``; ``gentax.jobspec`` says what a job
kind is). Each reads small files the plan's other jobs write and checks that they are there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gentax import jobspec
from gentax.analysis import artifacts
from gentax.io import atomic_path, read_result_json, write_json
from gentax.jobspec import JobKind
from gentax.train.runs import metrics_beside


@dataclass(frozen=True)
class SummaryJob(JobKind):
    """``gentax summarize``: a run's (or initial policy's) evaluations as long-format success rows."""
    verb: ClassVar[str] = "summarize"
    inputs: list[str]
    keys: dict[str, Any]
    out: str

    @classmethod
    def problems(cls, spec, inputs) -> list[str]:
        return jobspec.file_problems(spec, inputs, "inputs")

    def run(self) -> None:
        from gentax.analysis.summary import summarize_evals  # function-local: defers pandas

        frame = summarize_evals(self.inputs, self.keys)
        with atomic_path(self.out) as tmp:
            frame.to_csv(tmp, index=False)
        print(f"wrote {self.out}: {len(frame)} rows")


@dataclass(frozen=True)
class TableJob(JobKind):
    """``gentax table``: one table from the run summaries it reads (and the properties / controls
    tables where its registry entry reads them), with its provenance record."""
    verb: ClassVar[str] = "table"
    name: str
    summaries: list[str]
    training: list[str]  # records of the runs' last segments: their metrics.csv beside them (``artifacts.Artifact``)
    properties: str | None
    controls: str | None
    outputs: dict[str, str]
    provenance: str
    window: list[int]
    bootstrap: int
    seed: int
    error_mark_pct: float
    test_level: float
    seed_sd: dict[str, float]
    sft_mix: list[str]
    init_domains: dict[str, list[str]]
    augmented: dict[str, list[str]]

    @classmethod
    def problems(cls, spec, inputs) -> list[str]:
        """Every file it reads is there; a table or figure the registry knows."""
        out = jobspec.file_problems(spec, inputs, "summaries", "training", "properties", "controls")
        if spec["name"] not in artifacts.names():
            out.append(f"name: {spec['name']!r} is no {cls.verb} of the registry (gentax/analysis/artifacts.py)")
        return out

    def run(self) -> None:
        from gentax import provenance  # function-local: reads package metadata only when a job runs
        from gentax.analysis.tables import build_one, study_options  # function-local: defers pandas and matplotlib

        build_one(self.name, list(self.summaries), self.properties, self.outputs, controls=self.controls,
                  training=list(self.training), **study_options(self.to_dict()))
        metrics = [str(metrics_beside(record)) for record in self.training]  # what the figure read
        inputs = [*self.summaries, *metrics, *[f for f in (self.properties, self.controls) if f]]
        write_json(self.provenance, provenance.job_record(self.to_dict(), None, inputs=inputs))
        print(f"wrote {', '.join(self.outputs.values())}")


@dataclass(frozen=True)
class FigureJob(TableJob):
    """``gentax figure``: one figure, the keys of a table's spec."""
    verb: ClassVar[str] = "figure"


@dataclass(frozen=True)
class PropertiesTableJob(JobKind):
    """``gentax properties-table``: one row per domain from the property logs."""
    verb: ClassVar[str] = "properties-table"
    inputs: list[str]
    out: str

    @classmethod
    def problems(cls, spec, inputs) -> list[str]:
        return jobspec.file_problems(spec, inputs, "inputs")

    def run(self) -> None:
        import pandas as pd  # function-local: `gentax --help` stays fast

        rows = []
        for path in self.inputs:
            data = read_result_json(path, keys=("domain", "measures"))  # a property log (gentax properties)
            rows.append({"domain": data["domain"], **data["measures"]})
        with atomic_path(self.out) as tmp:
            pd.DataFrame(rows).sort_values("domain").to_csv(tmp, index=False)
        print(f"wrote {self.out}: {len(rows)} domains")


KINDS = {kind.verb: kind for kind in (SummaryJob, TableJob, FigureJob, PropertiesTableJob)}
