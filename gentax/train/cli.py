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

from gentax import jobspec
from gentax.errors import ConfigError, GentaxError, KeyProblem
from gentax.io import deep_merge, read_yaml
from gentax.runspec import RunSpec, from_defaults, variant_names
from gentax.train.config import load_rl_config, parse_steps, read_rl_section
from gentax.train.jobs import ENGINES, RLJob, holding
from gentax.train.tracking import read_section


def register(subparsers) -> None:
    train = subparsers.add_parser("train", help="RL training (GRPO) runs", description=__doc__.splitlines()[0])
    sub = train.add_subparsers(dest="train_command", required=True, metavar="SUBCOMMAND")

    rl = sub.add_parser("rl", help="train (or resume / extend) one GRPO run", description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    jobspec.add_arguments(rl, study="train rl")
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


def _run_rl(args) -> int:
    spec = jobspec.take(RLJob, args)
    if args.check:
        return 0
    if spec is not None:
        return spec.run()
    return spec_from_args(args).run(print_config=args.print_config, progress=not args.no_progress)


def spec_from_args(args) -> RLJob:
    """The spec a command line makes (no manifest: it trains and stops): ``--config``'s RL section
    laid over the study's ``rl:`` block, the run from ``--run-spec`` or named by ``--domain
    --variant --seed`` with the study's settings (``args.study_defaults()``; ``runspec.from_defaults``)."""
    if not args.init or not args.out:
        raise ConfigError("gentax train rl: give --init and --out (or --job SPEC)")
    study = args.study_defaults()  # the study's rl block and command-line run
    try:
        rl = load_rl_config(deep_merge(study["rl"], read_rl_section(args.config) if args.config else {}))
    except KeyProblem as exc:  # the file that set the key (the study's block is validated already)
        raise ConfigError(f"{args.config}: {exc}") from None
    run = None
    if args.run_spec:
        given = [flag for flag, value in (("--domain", args.domain), ("--variant", args.variant), ("--seed", args.seed))
                 if value is not None]
        if given:
            raise ConfigError(f"--run-spec names the run: leave out {', '.join(given)}")
        try:
            run = RunSpec.from_dict(read_yaml(args.run_spec))  # JSON is YAML: the one config reader
        except GentaxError as exc:
            raise ConfigError(f"{args.run_spec}: {exc}") from None
    elif args.domain is None:
        raise ConfigError("name the run: --run-spec FILE, or --domain D [--variant V] [--seed S]")
    start, end = parse_steps(args.steps or f"0:{run.steps if run else study['run']['steps']}")
    if run is None:
        run = from_defaults(init=str(args.init), domain=args.domain, variant=args.variant or "default",
                            seed=study["run"]["seed"] if args.seed is None else args.seed, steps=end,
                            domains=study["run"]["domains"], augmentation=study["run"]["augmentation"])
    return RLJob(engine=study["engine"] if args.engine is None else args.engine, init=str(args.init), out=str(args.out),
                 start=start, end=end, rl=rl, run_spec=run, tracking=read_section(args.config) or {}, manifest=None,
                 tasks=None, dtype="auto")  # dtype: a manifest's provenance, which a command line writes none of


def _run_export(args) -> int:
    with holding(args.out):  # the run folder's lock before verl's imports: it writes the run's checkpoints
        from gentax.train.verl_engine import export_pending

        done = export_pending(args.out)
    print(f"exported steps: {', '.join(map(str, done)) or 'none (all up to date)'}")
    return 0
