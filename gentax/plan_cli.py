"""``gentax plan``: print the study's plan (the grid of RL runs and what they imply), or with
``--settings`` every job kind's effective settings and their sources (``gentax.settings``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = REPO / "config.yaml"
PROFILES = {"paper": REPO / "profiles" / "slurm", "embedded": REPO / "profiles" / "embedded"}


def register(sub) -> None:
    p = sub.add_parser("plan", help="print the study's plan (RL runs, segments, evaluations)")
    p.add_argument("--config", action="append", default=[],
                   help="config file(s) laid over the repository's config.yaml in order, as "
                        "`snakemake --configfile` lays them")
    p.add_argument("--preset", choices=("paper", "embedded"), default=None,
                   help="embedded: lay config/embedded.yaml over the config, as a plain `snakemake` does")
    p.add_argument("--json", action="store_true", help="print the plan (with --settings: the settings) as JSON")
    p.add_argument("--settings", action="store_true",
                   help="print the effective settings of every job kind (RL as verl receives them, SFT as "
                        "LlamaFactory receives them, evaluation, property logs) with their sources, and the memory check")
    p.add_argument("--cost", action="store_true",
                   help="estimate GPU-hours per job kind and in total (time figures: config `cost`)")
    p.add_argument("--profile", default=None,
                   help="Snakemake profile whose resources (GPUs, runtime) price the jobs "
                        "(default: profiles/slurm for the paper preset, profiles/embedded for embedded)")
    p.add_argument("--target", default=None,
                   help="with --cost: price only what one table/figure needs, e.g. results/tables/table5_augmentation.csv")
    p.set_defaults(func=_plan)

    t = sub.add_parser("tasks", help="write a domain's held-out eval task manifest (seeds + fingerprint)")
    t.add_argument("--domain", required=True)
    t.add_argument("--episodes", type=int, required=True, help="number of eval tasks (seeds 0..N-1)")
    t.add_argument("--split", default="eval")
    t.add_argument("--max-steps", type=int, default=None)
    t.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="domain option (difficulty knob); VALUE is JSON when it parses, else a string")
    t.add_argument("--out", required=True)
    t.set_defaults(func=_tasks)


def _tasks(args) -> int:
    from gentax import io as gio
    from gentax.domains.cli import parse_options
    from gentax.domains.tasks import task_manifest

    manifest = task_manifest(args.domain, args.episodes, split=args.split, max_steps=args.max_steps,
                             options=parse_options(args.option))
    gio.write_json(args.out, manifest)
    print(f"{args.domain}: {len(manifest['seeds'])} {args.split} tasks, fingerprint {manifest['fingerprint'][:16]}")
    return 0


def _plan(args) -> int:
    from gentax import plan as gplan
    from gentax.errors import ConfigError
    from gentax.io import deep_merge, read_yaml

    if args.target and not args.cost:
        raise ConfigError("--target says which table or figure to price: give it with --cost")
    if args.target:
        gplan.artifact_variants(Path(args.target).stem)  # an unknown name stops here, before any work
    # as the Snakefile: config.yaml is the base, the files are overrides (in order), laid over the
    # preset's overlay; the preset is --preset, else what the files set, else paper
    overrides: dict = {}
    for layer in [read_yaml(path) for path in args.config] + [{"preset": args.preset} if args.preset else {}]:
        overrides = deep_merge(overrides, layer)
    cfg = gplan.with_preset(read_yaml(DEFAULT_CONFIG), overrides, default="paper")
    gplan.validate(cfg, sources=gplan.config_sources(cfg["preset"], args.config))
    for problem in gplan.unmet_inputs(cfg):  # a plan may be made away from the cluster: said, not refused
        print(f"gentax: note: {problem} (a run stops before its first job)", file=sys.stderr)
    if args.settings:
        from gentax import settings

        print(json.dumps(settings.effective_settings(cfg), indent=2, default=str) if args.json else settings.render(cfg),
              end="\n" if args.json else "")
        return 0
    if args.cost:
        return _cost(cfg, args)
    result = gplan.plan(cfg)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    counts = result["counts"]
    print(f"{counts['runs']} RL runs ({counts['segments']} training segments), "
          f"{counts['checkpoint_evals']} checkpoint evaluations, {counts['base_evals']} base evaluations")
    for run in result["runs"]:
        print(f"  {run['init']:<3} {run['train_domain']:<9} {run['variant']:<8} seed {run['seed']}  {run['steps']} steps")
    if result["controls"]:
        print("controls: each level, the runs it reads, its property log")
    for c in result["controls"]:
        reads = "its own runs" if c["own_runs"] else f"the grid's {c['runs']} runs"
        print(f"  {c['control']:<10} {c['level']:<10} {c['setting']}: {reads}; {c['property_log']}")
    return 0


def _cost(cfg: dict, args) -> int:
    from gentax import cost

    profile = Path(args.profile) if args.profile else PROFILES[cfg["preset"]]
    names = [Path(args.target).stem] if args.target else None
    costs = cost.estimate(cfg, cost.profile_resources(profile), names)
    if args.json:
        print(json.dumps({"rules": [{**c.__dict__, "gpu_hours": c.gpu_hours, "over_limit": c.over_limit} for c in costs],
                          "total": cost.totals(costs), "figures": cfg["cost"]}, indent=2))
        return 0
    where = str(profile.relative_to(REPO)) if profile.resolve().is_relative_to(REPO) else str(profile)
    print(cost.report(cfg, costs, where=where, target=args.target))
    return 0
