"""The training jobs: their specs, their checks and their runs (``gentax train rl``, ``gentax sft
build-data``, ``gentax sft train``; ``gentax.jobspec`` says what a job kind is).

A spec carries its resolved section as the engine reads it (``rl``: an ``RLConfig``; ``sft``: the
verb's part, ``SFTData`` / ``SFTTrain``), built and checked by the plan (``gentax.study.jobs``); the
job's read builds it back, checking keys and types only, and hands it to the engine as it is.
``train_rl`` is the library entry of an RL segment (the tests and ``RLJob.run`` call it).
"""

from __future__ import annotations

import contextlib
import functools
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from gentax import io as gio
from gentax import jobspec, provenance
from gentax.errors import ConfigError, GentaxError
from gentax.jobspec import JobKind
from gentax.runspec import RunSpec
from gentax.train import runs
from gentax.train.config import RLConfig, load_rl_config
from gentax.train.sft_config import SFTData, SFTTrain

ENGINES = ("local", "verl")


class CheckpointKeep(typing.TypedDict):
    """What a training segment keeps of its run's checkpoints (config ``disk.keep_checkpoints:
    evaluated``; ``gentax.study.plan.checkpoint_keep``): the steps whose weights later jobs read, and
    whether the newest checkpoint keeps its resume state (a later segment of the run is planned)."""
    steps: list[int]
    resume_state: bool


@dataclass(frozen=True)
class RLJob(JobKind):
    """``gentax train rl``: steps start+1..end of one run, resuming its folder ``out``; then, for a
    workflow job, the segment's ``manifest`` (its HF checkpoints and provenance), written last."""
    verb: ClassVar[str] = "train rl"
    engine: str
    init: str
    out: str
    start: int
    end: int
    rl: RLConfig
    run_spec: RunSpec
    tracking: dict[str, Any]
    manifest: str | None
    tasks: str | None
    dtype: str
    keep: CheckpointKeep | None = None  # None (left out of the spec): every checkpoint stays

    @classmethod
    def problems(cls, spec, inputs) -> list[str]:
        """Its initial policy is a model folder, its segment trains at least one step."""
        out = jobspec.model_problem("init", spec["init"], inputs)
        if not 0 <= spec["start"] < spec["end"]:
            out.append(f"start/end: a segment trains steps start+1..end (0 <= start < end), "
                       f"got {spec['start']!r}..{spec['end']!r}")
        return out

    def run(self, *, print_config: bool = False, progress: bool = False) -> int:
        """The run spec into the run folder (``runs.RUN_SPEC_FILE``), the segment, then with ``keep``
        the checkpoints it does not name pruned (and the newest one's resume state unless
        ``resume_state``: ``runs.prune_checkpoints``), then the manifest."""
        where = {"init": self.init, "run": self.run_spec, "start": self.start, "end": self.end, "run_dir": self.out}
        if print_config:
            return train_rl(self.engine, self.rl, **where, print_config=True, tracking=self.tracking)
        run_dir, keep = Path(self.out), self.keep
        with holding(run_dir):  # before any write and any import of the engine: a second job is refused at once
            gio.write_json(run_dir / runs.RUN_SPEC_FILE, self.run_spec.to_dict())
            code = train_rl(self.engine, self.rl, **where, progress=progress, tracking=self.tracking,
                            keep=None if keep is None else keep["steps"])
            if code != 0 or self.manifest is None:
                return code
            saved = runs.saved_steps(self.start, self.end, self.rl.save_every)
            if keep is not None:
                runs.prune_checkpoints(run_dir, keep["steps"], upto=self.end, states=1 if keep["resume_state"] else 0)
                saved = [step for step in saved if step in keep["steps"]]
            checkpoints = {str(step): str(run_dir / "checkpoints" / f"step_{step}") for step in saved}
            missing = [path for path in checkpoints.values() if not (Path(path) / "config.json").is_file()]
            if missing:
                raise GentaxError(f"training finished but these HF checkpoints are missing: {', '.join(missing)}")
            record = provenance.job_record(self.to_dict(), self.dtype, model=self.init, tasks=self.tasks)
            gio.write_json(self.manifest, {"run_dir": str(run_dir), "start": self.start, "end": self.end,
                                           "checkpoints": checkpoints, "provenance": record})
        return 0


def train_rl(engine: str, section: dict[str, Any] | RLConfig | None, *, init: str, run: RunSpec, start: int, end: int,
             run_dir: str, print_config: bool = False, progress: bool = True,
             tracking: dict[str, Any] | None = None, keep: list[int] | None = None) -> int:
    """Segment ``start:end`` of the run ``run`` with ``engine``: ``section`` is an ``RLConfig`` used as
    it is, or an RL section merged over the defaults (``load_rl_config``). ``keep``: the steps whose
    checkpoints stay while it trains (None: all; the local engine prunes as it saves)."""
    if engine not in ENGINES:
        raise ConfigError(f"unknown RL engine {engine!r}; valid: {', '.join(ENGINES)}")
    cfg = section if isinstance(section, RLConfig) else load_rl_config(section)
    if engine == "verl" and run.think == "filler":  # no forced prefix in the verl agent loop
        raise ConfigError(f"the filler arm (variant {run.variant}, thinking mode filler) runs on the local engine "
                          "only (engines.rl: local)")
    from gentax.train.tracking import load_section

    where = {"init": init, "run": run, "start": start, "end": end, "run_dir": run_dir}
    if print_config:
        tracking = load_section(tracking)
        if engine == "verl":
            from gentax.train.verl_engine import train_verl

            return train_verl(cfg, **where, print_config=True, tracking=tracking)
        import yaml

        print(yaml.safe_dump({**cfg.to_dict(), "run_spec": run.to_dict()}, sort_keys=False))
        return 0
    # one trainer per run folder (gentax.train.runs), before the tracking backends and the engine are
    # imported: a second trainer is refused at once
    with holding(run_dir):
        tracking = load_section(tracking)  # a bad section or a missing backend package stops here
        if engine == "verl":
            from gentax.train.verl_engine import train_verl

            train = functools.partial(train_verl, cfg, **where, tracking=tracking)
        else:
            from gentax.train.local_engine import train_local

            train = functools.partial(train_local, cfg, **where, progress=progress, tracking=tracking, keep=keep)
        _report_removed(runs.remove_temporaries(run_dir))
        code = train()
        if code == 0:
            _report_removed(runs.remove_temporaries(run_dir))
        return code


@contextlib.contextmanager
def holding(run_dir: str | Path):
    """``runs.locked(run_dir)`` for the body, saying when it took over a killed trainer's lock (a
    trainer that holds it already holds it on)."""
    with runs.locked(run_dir) as previous:
        if previous:
            print(f"gentax: took over the lock of {run_dir} from {previous}, which is no longer running")
        yield


def _report_removed(paths) -> None:
    for path in paths:
        print(f"gentax: removed {path} (left by an interrupted write)")


def _provenance_beside(out, spec: JobKind, model: str | None) -> None:
    gio.write_json(provenance.beside(out), provenance.job_record(spec.to_dict(), spec["dtype"], model=model))


@dataclass(frozen=True)
class SFTDataJob(JobKind):
    """``gentax sft build-data``: an SFT dataset of the SFT stage ``preset`` (v2 | embedded-base);
    ``domains``: the settings of the envs its data is collected in ({max_steps, options})."""
    verb: ClassVar[str] = "sft build-data"
    preset: str
    sft: SFTData
    domains: dict[str, dict[str, Any]]
    v1: str | None
    out: str
    dtype: str

    @classmethod
    def problems(cls, spec, inputs) -> list[str]:
        """V1's model, where the mix has V1 trajectories."""
        return jobspec.model_problem("v1", spec["v1"], inputs) if spec["v1"] else []

    def run(self, *, progress: bool = False) -> dict:
        with gio.output_lock(self.out, "SFT dataset"):  # one writer per dataset, refused before any model loads
            from gentax.train.sft_data import build_sft_data

            manifest = build_sft_data(self.sft, self.out, v1_model=self.v1, domains=self.domains, progress=progress)
            _provenance_beside(self.out, self, self.v1)
        return manifest


@dataclass(frozen=True)
class SFTTrainJob(JobKind):
    """``gentax sft train``: LlamaFactory on a dataset folder, written as an HF folder."""
    verb: ClassVar[str] = "sft train"
    preset: str
    sft: SFTTrain
    data: str
    init: str
    out: str
    tracking: dict[str, Any]
    dtype: str

    @classmethod
    def problems(cls, spec, inputs) -> list[str]:
        """The initial model and the dataset folder."""
        out = jobspec.model_problem("init", spec["init"], inputs)
        if not inputs.file(f"{spec['data']}/dataset_info.json"):
            out.append(f"data: {spec['data']} is no dataset folder (no dataset_info.json there: its job, "
                       f"gentax sft build-data, has not run)")
        return out

    def run(self) -> Path:
        # the output's lock before the trainer's checks (the tokenizer, every example's length: seconds to
        # minutes): a second job on the output is refused at once; train_sft takes it again
        with gio.output_lock(Path(self.out).resolve(), "SFT output"):
            from gentax.train.sft import train_sft

            out = train_sft(self.sft, self.data, self.init, self.out, tracking=self.tracking)
            _provenance_beside(out, self, self.init)
        return out
