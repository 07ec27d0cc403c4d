"""``gentax plan``: the study's plan, its previews (``--settings``, ``--power``, ``--cost``:
``gentax.study.preview``) and ``--check``; and ``gentax controls-properties-table``, the controls' table job."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gentax import jobspec
from gentax.io import REPO_ROOT
from gentax.study.controls import ControlsTableJob
from gentax.study.dag import PROFILES
from gentax.study.snakefile import results_line

REPO = REPO_ROOT  # the repository: the Snakefile and profiles/


def register(sub) -> None:
    p = sub.add_parser("plan", help="print the study's plan (RL runs, segments, evaluations)")
    p.add_argument("--config", action="append", default=[],
                   help="config file(s) laid over the repository's config/config.yaml in order, as "
                        "`snakemake --configfile` lays them")
    p.add_argument("--preset", choices=tuple(PROFILES), default=None,
                   help="embedded: lay config/embedded.yaml over the config, as a plain `snakemake` does")
    p.add_argument("--json", action="store_true", help="print the plan (with --settings: the settings) as JSON")
    p.add_argument("--settings", action="store_true",
                   help="print the effective settings of every job kind (RL as verl receives them, SFT as "
                        "LlamaFactory receives them, evaluation, property logs) with their sources, and the memory check")
    p.add_argument("--verl", action="store_true",
                   help="with --settings: print the whole verl config the first run composes (verl's ppo_trainer "
                        "with gentax's overrides), as YAML")
    p.add_argument("--cost", action="store_true",
                   help="estimate GPU-hours per job kind and in total (time figures: config `cost`)")
    p.add_argument("--power", action="store_true",
                   help="print the smallest ΔID and ΔOOD each table can resolve at 80%% power and eval.test_level "
                        "(the task-paired exact test and the seed-level test, Holm over the table's cells; "
                        "docs/tables.md), from assumed or measured base success")
    p.add_argument("--profile", default=None,
                   help="Snakemake profile whose resources (GPUs, runtime) price the jobs and whose set-resources "
                        "--check checks (default: the preset's, profiles/slurm for paper, profiles/embedded for "
                        "embedded, profiles/gpu1 for gpu1)")
    p.add_argument("--check", action="store_true",
                   help="only check the plan: build its DAG as `snakemake -n` does, which checks every job's spec "
                        "against the inputs the plan writes (gentax.study.checks); exit 2 naming the first job that "
                        "would refuse (`snakemake -n` makes the same check) or a rule the profile's set-resources "
                        "names that the workflow has not")
    p.add_argument("--target", default=None,
                   help="with --cost: price only what one table/figure needs, e.g. results/tables/table5_augmentation.csv")
    p.set_defaults(func=_plan)

    c = sub.add_parser("controls-properties-table", help="one row per level of the controls from its property log",
                       description="One row per level of the controls from its property log (a workflow job).")
    jobspec.add_arguments(c, required=True)
    c.set_defaults(func=_controls_properties_table, verb="controls-properties-table")


def _controls_properties_table(args) -> int:
    spec = jobspec.take(ControlsTableJob, args)
    if spec is not None:
        spec.run()
    return 0


def _plan(args) -> int:
    from gentax.study import plan as gplan
    from gentax.study import config as gconfig
    from gentax.errors import ConfigError

    if args.target and not args.cost:
        raise ConfigError("--target says which table or figure to price: give it with --cost")
    if args.target:
        gplan.artifact_variants(Path(args.target).stem)  # an unknown name stops here, before any work
    cfg = gconfig.study_config(args.preset, args.config)
    print(results_line(cfg), file=sys.stderr)
    from gentax.study.preview import memory  # function-local, as the previews below: `gentax --help` stays fast

    estimates = memory.check(cfg)  # every GPU training job fits its GPUs (cluster.memory_check), before any job runs
    if args.check:  # its dry-run says what a plan made away from the cluster or its disk lacks, as notes
        return _check_plan(cfg, args)
    for problem in gconfig.unmet_inputs(cfg):  # a plan may be made away from the cluster: said, not refused
        print(f"gentax: note: {problem} (a run stops before its first job)", file=sys.stderr)
    if args.settings:
        from gentax.study.preview import settings

        if args.verl:
            print(settings.verl_config(cfg), end="")
        elif args.json:
            print(json.dumps(settings.effective_settings(cfg), indent=2, default=str))
        else:
            print(settings.render(cfg, gconfig.study_config("paper"), [job.line() for job in estimates]), end="")
        return 0
    if args.cost:
        return _cost(cfg, args)
    if args.power:
        from gentax.study.preview import power

        result = power.preview(cfg)
        print(json.dumps(result, indent=2, default=str) if args.json else power.render(result), end="\n" if args.json else "")
        return 0
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


def _check_plan(cfg: dict, args) -> int:
    """``--check``: ``snakemake -n`` of this config, whose every job's check runs as it is built
    (rules/common.smk JobSpec.checked): 0 when every job would start, else 2 naming the first that
    would not, or a rule the profile's set-resources names that the workflow lacks. What a run
    would lack here is said as notes."""
    from gentax.study import config as gconfig
    from gentax.study import dag
    from gentax.study.preview import cost

    profile, _, at_once = _profile(cfg, args)
    per_rule = cost.read_profile(profile).get("set-resources")
    study = dag.study_args(cfg["preset"], args.config)
    unknown = per_rule and cost.unknown_rules(per_rule, dag.rule_names(study))  # said before the DAG is built
    if unknown:
        print(f"gentax: error: {unknown} ({profile})", file=sys.stderr)
        return 2
    disk = cost.disk_problem(cfg, cost.work(dag.build(study)), at_once)
    for problem in gconfig.unmet_inputs(cfg) + ([disk] if disk else []):
        print(f"gentax: note: {problem} (a run stops before its first job)", file=sys.stderr)
    print(f"plan check (preset {cfg['preset']}): every job's spec agrees with the inputs the plan writes")
    return 0


def _profile(cfg: dict, args) -> tuple[Path, dict, int | None]:
    """(the Snakemake profile, the resources it gives each rule, the RL jobs it runs at once)."""
    from gentax.study.preview import cost

    profile = Path(args.profile) if args.profile else PROFILES[cfg["preset"]]
    return profile, cost.profile_resources(profile), cost.profile_at_once(profile)


def _cost(cfg: dict, args) -> int:
    """``--cost``: the jobs of Snakemake's DAG of the study (or of ``--target``) from nothing, priced."""
    from gentax.study import dag
    from gentax.study.preview import cost
    from gentax.study import plan as gplan

    profile, resources, at_once = _profile(cfg, args)
    targets = [gplan.artifact_path(cfg, Path(args.target).stem)] if args.target else []
    planned = cost.work(dag.build(dag.study_args(cfg["preset"], args.config, targets)))
    costs = cost.estimate(cfg, resources, planned)
    disk = cost.disk_need(cfg, planned, at_once)
    if args.json:
        print(json.dumps({"rules": [{**c.__dict__, "gpu_hours": c.gpu_hours, "over_limit": c.over_limit} for c in costs],
                          "total": cost.totals(costs), "figures": cfg["cost"],
                          "disk": {**disk.__dict__, "total": disk.total,
                                   "free": cost.disk_free(cost.results_folder(cfg))[0]}}, indent=2))
        return 0
    where = str(profile.resolve().relative_to(REPO)) if profile.resolve().is_relative_to(REPO) else str(profile)
    print(cost.report(cfg, costs, where=where, target=args.target))
    print("\n".join(cost.disk_report(cfg, disk)))
    return 0
