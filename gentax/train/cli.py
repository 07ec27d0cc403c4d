"""``gentax train rl`` (GRPO, engines local|verl) and ``gentax train export`` (verl -> HF folders).

    gentax train rl --job SPEC                       (a workflow job: gentax.study.jobs.rl_segment)
    gentax train rl [--engine local|verl] [--config CONFIG.yaml]
                    --init MODEL (--run-spec RUN_SPEC.json | --domain D [--variant V] [--seed S])
                    [--steps A:B] --out RUN_DIR [--print-config] [--preset paper|embedded|gpu1] [--study-config FILE ...]

The run is a run spec (gentax.runspec: training domains with weights, variant, seed, steps,
thinking, augmentation, the domains' settings): ``--run-spec`` reads one (the workflow writes
it into the run folder), or ``--domain/--variant/--seed`` name one whose domains' step limits and
knobs are the study's (``domains.<d>``; a domain the study has no section for: its env's own) and
whose augmentation is the study's kind with V1's p and budgets (``augmentation.kind``,
``augmentation.v1``; gentax.runspec.from_defaults), its seed the study's first (``grid.seeds``);
a run with other domain settings is a ``--run-spec`` file. ``--engine`` defaults to
the study's ``engines.rl``. ``--domain`` may be a mixture ``a+b`` or ``a*3+b``;
``--variant`` is a name of gentax.runspec.VARIANTS.
``--config`` holds the RL section, at the top level or under ``rl:``; keys it leaves out come from
the study's ``rl:`` block (``--preset``, default paper: config/config.yaml's; ``--study-config`` files laid
over it) and gentax/train/rl_defaults.yaml (which documents every other key). Beside ``rl:``, an optional
``tracking:`` section says where metrics go besides metrics.csv (gentax.train.tracking; default:
TensorBoard event files in RUN_DIR/tensorboard). ``--steps A:B`` trains
steps A+1..B (default 0:<the run spec's steps>; without --run-spec, the study's ``grid.steps``):
0:150 starts from ``--init``; 150:300 continues the same RUN_DIR from its step-150
state (never retraining a step); rerunning a killed command resumes from its newest checkpoint.
``--print-config`` prints the resolved RL section (local) or the composed verl config (verl)
and exits without training. Ckpt V1 = ``--domain webshop --variant default --steps 0:20`` from
the base model.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
from pathlib import Path
from typing import Any

from gentax import jobspec, studyargs
from gentax.errors import ConfigError
from gentax.runspec import RunSpec, variant_names
from gentax.train import runs
from gentax.train.config import RLConfig

ENGINES = ("local", "verl")


def register(subparsers) -> None:
    train = subparsers.add_parser("train", help="RL training (GRPO) runs", description=__doc__.splitlines()[0])
    sub = train.add_subparsers(dest="train_command", required=True, metavar="SUBCOMMAND")

    rl = sub.add_parser("rl", help="train (or resume / extend) one GRPO run", description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    jobspec.add_argument(rl)
    studyargs.add_arguments(rl, "train rl")
    rl.add_argument("--engine", choices=ENGINES, default=None, help="default: the study's engines.rl")
    rl.add_argument("--config", help="YAML with the RL section (top level or under rl:)")
    rl.add_argument("--init", help="initial policy: an HF model folder (required without --job)")
    rl.add_argument("--run-spec", help="the run: a run spec JSON file (gentax.runspec.RunSpec.to_dict)")
    rl.add_argument("--domain", help="without --run-spec: the training domain (or mixture a+b)")
    rl.add_argument("--variant", choices=variant_names(), default=None, help="without --run-spec (default: default)")
    rl.add_argument("--seed", type=int, default=None,
                    help="without --run-spec: the run's seed (default: the study's first, grid.seeds)")
    rl.add_argument("--steps", default=None, help="A:B, train steps A+1..B (default 0:<the run spec's steps>)")
    rl.add_argument("--out", help="the run folder (checkpoints, metrics.csv, run.json; required without --job)")
    rl.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    rl.add_argument("--no-progress", action="store_true", help="no progress bar")
    rl.set_defaults(func=_run_rl)

    export = sub.add_parser("export", help="convert a verl run's FSDP checkpoints into HF folders")
    export.add_argument("--out", required=True, help="the run folder")
    export.set_defaults(func=_run_export)


def train_rl(engine: str, section: dict[str, Any] | RLConfig | None, *, init: str, run: RunSpec, start: int, end: int,
             run_dir: str, print_config: bool = False, progress: bool = True,
             tracking: dict[str, Any] | None = None, keep: list[int] | None = None) -> int:
    """Library entry (the workflow calls this): segment ``start:end`` of the run ``run`` with ``engine``.

    ``section`` is an RL section merged over the defaults (``load_rl_config``), or an ``RLConfig`` used as it
    is (a job spec's, resolved by the workflow). ``run`` is the run spec (a job's, a ``--run-spec``
    file's, or ``runspec.from_defaults``' for a run named on the command line). ``keep``: the steps
    whose checkpoints stay while it trains (None: all; the local engine prunes as it saves,
    ``runs.prune_checkpoints``)."""
    from gentax.train.config import load_rl_config

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
    # one trainer per run folder (runs module doc), before the tracking backends and the engine are
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
    """``runs.locked(run_dir)`` for the body, saying when it took over a killed trainer's lock. A
    trainer that holds it already (``run_job``, which takes it before its imports) holds it on."""
    with runs.locked(run_dir) as previous:
        if previous:
            print(f"gentax: took over the lock of {run_dir} from {previous}, which is no longer running")
        yield


def _report_removed(paths) -> None:
    for path in paths:
        print(f"gentax: removed {path} (left by an interrupted write)")


def rl_problems(spec: dict[str, Any], inputs) -> list[str]:
    """The check of a ``train rl`` job spec against its inputs (``gentax.jobspec``'s contract): its
    initial policy is a model folder, its segment trains at least one step, its run spec parses."""
    from gentax.errors import GentaxError

    out = jobspec.model_problem("init", spec["init"], inputs)
    start, end = spec["start"], spec["end"]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)) or not 0 <= start < end:
        out.append(f"start/end: a segment trains steps start+1..end (whole numbers, 0 <= start < end), "
                   f"got {start!r}..{end!r}")
    try:
        RunSpec.from_dict(spec["run_spec"])
    except GentaxError as exc:
        out.append(f"run_spec: {exc}")
    return out


def run_job(spec: dict[str, Any], check: bool = False) -> int:
    """One training segment of the workflow: the run spec into the run folder (``runs.RUN_SPEC_FILE``),
    steps start+1..end, then the segment's manifest (its HF checkpoints and provenance), written last.
    A spec with ``keep`` (config ``disk.keep_checkpoints: evaluated``) keeps of the run's checkpoints
    up to ``end`` only those it names, and the resume state of the last one only with its
    ``resume_state`` (``runs.prune_checkpoints``; both engines), before the manifest.
    ``check``: only the spec's check against its inputs (``rl_problems``)."""
    from gentax import io as gio
    from gentax import provenance
    from gentax.errors import GentaxError
    from gentax.train.config import rl_config

    s = jobspec.read("train rl", spec)  # jobspec.RLJob: keys and types
    cfg = jobspec.section("train rl", "rl", rl_config, s["rl"])  # the resolved RL section's own keys
    jobspec.require("train rl", rl_problems(s, jobspec.OnDisk()))
    if check:
        return jobspec.checked("train rl")
    run, run_dir = RunSpec.from_dict(s["run_spec"]), Path(s["out"])
    with holding(run_dir):  # before any write and any import of the engine: a second job is refused at once
        gio.write_json(run_dir / runs.RUN_SPEC_FILE, run.to_dict())
        keep = s["keep"]
        code = train_rl(s["engine"], cfg, init=s["init"], run=run, start=s["start"], end=s["end"],
                        run_dir=str(run_dir), progress=False, tracking=s["tracking"],
                        keep=None if keep is None else keep["steps"])
        if code != 0:
            return code
        saved = runs.saved_steps(s["start"], s["end"], cfg.save_every)
        if keep is not None:
            runs.prune_checkpoints(run_dir, keep["steps"], upto=s["end"], states=1 if keep["resume_state"] else 0)
            saved = [step for step in saved if step in keep["steps"]]
        checkpoints = {str(step): str(run_dir / "checkpoints" / f"step_{step}") for step in saved}
        missing = [path for path in checkpoints.values() if not (Path(path) / "config.json").is_file()]
        if missing:
            raise GentaxError(f"training finished but these HF checkpoints are missing: {', '.join(missing)}")
        record = provenance.job_record(spec, s["dtype"], model=s["init"], tasks=s["tasks"])
        gio.write_json(s["manifest"], {"run_dir": str(run_dir), "start": s["start"], "end": s["end"],
                                       "checkpoints": checkpoints, "provenance": record})
    return 0


def _run_rl(args) -> int:
    from gentax.errors import GentaxError, KeyProblem
    from gentax.io import deep_merge, read_yaml
    from gentax.runspec import from_defaults
    from gentax.train.config import load_rl_config, parse_steps, read_rl_section
    from gentax.train.tracking import read_section

    if args.job:
        return run_job(jobspec.load(args.job), check=args.check)
    if args.check:
        raise ConfigError("gentax train rl --check checks a job spec: give --job SPEC")
    if not args.init or not args.out:
        raise ConfigError("gentax train rl: give --init and --out (or --job SPEC)")
    study = args.study_defaults()  # the study's rl block and command-line run (gentax.study.config.command_line_defaults)
    section = read_rl_section(args.config) if args.config else {}
    try:
        resolved = load_rl_config(deep_merge(study["rl"], section))
    except KeyProblem as exc:  # the file that set the key (the study's block is validated already)
        raise ConfigError(f"{args.config}: {exc}") from None
    run = None
    if args.run_spec:
        given = [flag for flag, value in (("--domain", args.domain), ("--variant", args.variant), ("--seed", args.seed))
                 if value is not None]
        if given:
            raise ConfigError(f"--run-spec names the run: leave out {', '.join(given)}")
        data = read_yaml(args.run_spec)  # JSON is YAML: the one config reader
        try:
            run = RunSpec.from_dict(data)
        except GentaxError as exc:
            raise ConfigError(f"{args.run_spec}: {exc}") from None
    elif args.domain is None:
        raise ConfigError("name the run: --run-spec FILE, or --domain D [--variant V] [--seed S]")
    start, end = parse_steps(args.steps or f"0:{run.steps if run else study['run']['steps']}")
    if run is None:  # the command line names it: the study's domain settings and budgets (runspec.from_defaults)
        run = from_defaults(init=str(args.init), domain=args.domain, variant=args.variant or "default",
                            seed=study["run"]["seed"] if args.seed is None else args.seed, steps=end,
                            domains=study["run"]["domains"], augmentation=study["run"]["augmentation"])
    engine = study["engine"] if args.engine is None else args.engine
    return train_rl(engine, resolved, init=args.init, run=run, start=start, end=end, run_dir=args.out,
                    print_config=args.print_config, progress=not args.no_progress,
                    tracking=read_section(args.config) if args.config else None)


def _run_export(args) -> int:
    with holding(args.out):  # the run folder's lock before verl's imports: it writes the run's checkpoints
        from gentax.train.verl_engine import export_pending

        done = export_pending(args.out)
    print(f"exported steps: {', '.join(map(str, done)) or 'none (all up to date)'}")
    return 0
