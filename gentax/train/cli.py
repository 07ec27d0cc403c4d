"""``gentax train rl`` (GRPO, engines local|verl) and ``gentax train export`` (verl -> HF folders).

    gentax train rl --engine local|verl --config CONFIG.yaml [--preset paper|embedded]
                    --init MODEL (--run-spec RUN_SPEC.json | --domain D [--variant V] [--seed S])
                    [--steps A:B] --out RUN_DIR [--print-config]

The run is a run spec (gentax.runspec: training domains with weights, variant, seed, steps,
thinking, augmentation, the domains' settings): ``--run-spec`` reads one (the workflow writes
it into the run folder), or ``--domain/--variant/--seed`` name one whose domains' settings and
augmentation budget come from the RL section (engine defaults). ``--domain`` may be a mixture
``a+b`` or ``a*3+b``; ``--variant`` is a name of gentax.runspec.VARIANTS.
``--config`` holds the RL section (gentax/train/rl_defaults.yaml documents every key), at the
top level or under ``rl:``; keys it leaves out come from ``--preset``. Beside ``rl:``, an optional
``tracking:`` section says where metrics go besides metrics.csv (gentax.train.tracking; default:
TensorBoard event files in RUN_DIR/tensorboard). ``--steps A:B`` trains
steps A+1..B: 0:150 starts from ``--init``; 150:300 continues the same RUN_DIR from its step-150
state (never retraining a step); rerunning a killed command resumes from its newest checkpoint.
``--print-config`` prints the resolved RL section (local) or the composed verl config (verl)
and exits without training. Ckpt V1 = ``--domain webshop --variant default --steps 0:20`` from
the base model.
"""

from __future__ import annotations

import argparse
import functools
from typing import Any

from gentax.errors import ConfigError
from gentax.runspec import RunSpec, variant_names
from gentax.train.config import PRESETS
from gentax.train import runs

ENGINES = ("local", "verl")


def register(subparsers) -> None:
    train = subparsers.add_parser("train", help="RL training (GRPO) runs", description=__doc__.splitlines()[0])
    sub = train.add_subparsers(dest="train_command", required=True, metavar="SUBCOMMAND")

    rl = sub.add_parser("rl", help="train (or resume / extend) one GRPO run", description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    rl.add_argument("--engine", choices=ENGINES, default="local")
    rl.add_argument("--config", help="YAML with the RL section (top level or under rl:)")
    rl.add_argument("--preset", choices=PRESETS, default="paper", help="defaults under --config")
    rl.add_argument("--init", required=True, help="initial policy: an HF model folder")
    rl.add_argument("--run-spec", help="the run: a run spec JSON file (gentax.runspec.RunSpec.to_dict)")
    rl.add_argument("--domain", help="without --run-spec: the training domain (or mixture a+b)")
    rl.add_argument("--variant", choices=variant_names(), default=None, help="without --run-spec (default: default)")
    rl.add_argument("--seed", type=int, default=None, help="without --run-spec (default 0)")
    rl.add_argument("--steps", default=None, help="A:B, train steps A+1..B (default 0:<run spec or config steps>)")
    rl.add_argument("--out", required=True, help="the run folder (checkpoints, metrics.csv, run.json)")
    rl.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    rl.add_argument("--no-progress", action="store_true", help="no progress bar")
    rl.set_defaults(func=_run_rl)

    export = sub.add_parser("export", help="convert a verl run's FSDP checkpoints into HF folders")
    export.add_argument("--out", required=True, help="the run folder")
    export.set_defaults(func=_run_export)


def train_rl(engine: str, section: dict[str, Any] | None, *, init: str, start: int, end: int, run_dir: str,
             run: RunSpec | None = None, domain: str | None = None, variant: str = "default", seed: int = 0,
             preset: str = "paper", print_config: bool = False, progress: bool = True,
             tracking: dict[str, Any] | None = None) -> int:
    """Library entry (the workflow calls this): one run segment ``start:end`` with ``engine``.

    The run is ``run`` (a ``RunSpec``), or the one ``domain``/``variant``/``seed`` name with the RL
    section's domain settings and augmentation budget (``runspec.from_rl_config``)."""
    from gentax.runspec import from_rl_config
    from gentax.train.config import load_rl_config

    if engine not in ENGINES:
        raise ConfigError(f"unknown RL engine {engine!r}; valid: {', '.join(ENGINES)}")
    cfg = load_rl_config(section, preset)
    if run is None:
        if domain is None:
            raise ConfigError("name the run: a run spec (--run-spec) or a training domain (--domain)")
        run = from_rl_config(cfg, init=str(init), domain=domain, variant=variant, seed=seed, steps=end)
    if engine == "verl" and run.think == "filler":  # no forced prefix in the verl agent loop
        raise ConfigError(f"the filler arm (variant {run.variant}, thinking mode filler) runs on the local engine "
                          "only (engines.rl: local)")
    from gentax.train.tracking import load_section

    tracking = load_section(tracking)  # a bad section or a missing backend package stops here
    where = {"init": init, "run": run, "start": start, "end": end, "run_dir": run_dir}
    if engine == "verl":
        from gentax.train.verl_engine import train_verl

        if print_config:
            return train_verl(cfg, **where, print_config=True, tracking=tracking)
        train = functools.partial(train_verl, cfg, **where, tracking=tracking)
    else:
        if print_config:
            import yaml

            print(yaml.safe_dump({**cfg.to_dict(), "run_spec": run.to_dict()}, sort_keys=False))
            return 0
        from gentax.train.local_engine import train_local

        train = functools.partial(train_local, cfg, **where, progress=progress, tracking=tracking)
    with runs.locked(run_dir) as previous:  # one trainer per run folder (runs module doc)
        if previous:
            print(f"gentax: took over the lock of {run_dir} from {previous}, which is no longer running")
        _report_removed(runs.remove_temporaries(run_dir))
        code = train()
        if code == 0:
            _report_removed(runs.remove_temporaries(run_dir))
        return code


def _report_removed(paths) -> None:
    for path in paths:
        print(f"gentax: removed {path} (left by an interrupted write)")


def _run_rl(args) -> int:
    from gentax.errors import GentaxError
    from gentax.io import read_yaml
    from gentax.train.config import load_rl_config, parse_steps, read_rl_section
    from gentax.train.tracking import read_section

    section = read_rl_section(args.config) if args.config else {}
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
    steps = args.steps or f"0:{run.steps if run else load_rl_config(section, args.preset).steps}"
    start, end = parse_steps(steps)
    return train_rl(args.engine, section, init=args.init, run=run, domain=args.domain,
                    variant=args.variant or "default", seed=args.seed if args.seed is not None else 0,
                    start=start, end=end, run_dir=args.out, preset=args.preset, print_config=args.print_config,
                    progress=not args.no_progress, tracking=read_section(args.config) if args.config else None)


def _run_export(args) -> int:
    from gentax.train.verl_engine import export_pending

    done = export_pending(args.out)
    print(f"exported steps: {', '.join(map(str, done)) or 'none (all up to date)'}")
    return 0
