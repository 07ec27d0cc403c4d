# gentax: the study "Paying Less Generalization Tax" as a Snakemake workflow.
#   bash scripts/run.sh -n                        # the plan (profiles/embedded; sets up on first use)
#   bash scripts/run.sh                           # the whole embedded study on this machine
#   bash scripts/run.sh --profile profiles/slurm  # the paper's study on a SLURM cluster (that profile only)
#   snakemake results/tables/table5_augmentation.csv   # one table and only what it needs
# Rules hold no logic: each runs ONE visible command, `gentax <verb> --job SPEC`, on the spec
# gentax.study.jobs resolves for it (`snakemake -n -p` prints it; the line reruns the job by hand).
# The grid expansion lives in gentax/study/plan.py (shared with `gentax plan`), every path in gentax/study/paths.py.
import os
import re
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

sys.path.insert(0, workflow.basedir)  # this checkout's gentax (each job's command: rules/common.smk GENTAX)

import gentax.clone as gclone
import gentax.study.checks as gchecks
import gentax.study.controls as gcontrols
import gentax.domains as gdomains
import gentax.io as gio
import gentax.progress as gprogress
import gentax.study.plan as gplan
import gentax.study.config as gconfig
import gentax.provenance as gprov
import gentax.runspec as grunspec
import gentax.study.jobs as gjobs
import gentax.study.paths as gpaths
from gentax.errors import ConfigError

gclone.use_this_clone(workflow.basedir)  # every job runs this clone's `gentax` (bin/) and package

configfile: "config/config.yaml"

# Which study (gentax.study.plan.with_preset): `preset: paper` is config/config.yaml as it is (profiles/slurm sets
# it); `embedded`, the default whenever no preset is given (a plain `snakemake`, also with your own
# --configfile), lays config/embedded.yaml over config/config.yaml. Your --configfile files and --config
# key=value pairs go over both, so they always win. Nested --config values (`eval={episodes: 4}`)
# are read as in a config file (Snakemake leaves them text).
try:
    OVERRIDES = gconfig.cli_overrides(workflow.config_settings.overwrite_config or {},
                                    workflow.config_settings.config or {})
    STUDY = gconfig.with_preset(gio.read_yaml(os.path.join(workflow.basedir, "config", "config.yaml")), OVERRIDES)
    gconfig.validate(STUDY, sources=gconfig.config_sources(STUDY["preset"], workflow.config_settings.configfiles,
                                                         workflow.config_settings.config))
except ConfigError as exc:  # one line, no traceback (a WorkflowError would print the Snakefile's frame)
    print(f"gentax: error: {exc}", file=sys.stderr)
    sys.exit(2)
# Snakemake's own check against the same schema (skipped for a `module` with skip_validation). After
# gentax's, which is the stricter (8.0 is no integer; the rules that span keys), so a bad config is
# always told in gentax's one line; defaults live in config/config.yaml, none in the schema.
with gconfig.schema_file() as _schema:
    validate(STUDY, str(_schema), set_default=False)
config.clear()
config.update(STUDY)
PRESET = config["preset"]

if workflow.is_main_process:  # the budget of what this profile would launch (not inside each SLURM job)
    import gentax.study.cost as gcost
    import gentax.study.dag as gdag

    for _problem in gconfig.unmet_inputs(config):  # a dry-run may be made away from the cluster: said only
        print(f"gentax: note: {_problem} (a run stops before its first job)", file=sys.stderr)

    _res = workflow.resource_settings
    try:
        _given = gcost.resources_from(_res.default_resources, _res.overwrite_resources, _res.resources)
        _DISK_AT_ONCE = gcost.rl_at_once(_given, jobs=_res.nodes, cores=_res.cores)
        print(f"gentax: each job's progress goes to its log (the `log:` line of its block): "
              f"tail -f {gpaths.logs(config)}/<its log>; a run prints the running jobs' latest lines every "
              f"{gprogress.EVERY_S:g} s (gentax/progress.py)", file=sys.stderr)
    except ConfigError as exc:
        print(f"gentax: error: {exc}", file=sys.stderr)
        sys.exit(2)

    # once Snakemake has its DAG: the budget of the jobs it will run, and a note where what they write
    # does not fit the results folder's disk (a run stops at onstart)
    gdag.when_built(workflow, lambda jobs: gcost.preview(config, _given, jobs, _DISK_AT_ONCE, base=os.getcwd()))


onstart:  # a real run, before any job is started or queued: what every job needs is there
    _unmet = gconfig.unmet_inputs(config)
    for _problem in _unmet:
        print(f"gentax: error: {_problem}", file=sys.stderr)
    # what its jobs write fits the results folder's disk
    _disk = gcost.disk_problem(config, gcost.work(map(gdag.planned, workflow.dag.needrun_jobs())), _DISK_AT_ONCE,
                               base=os.getcwd())
    if _disk:
        print(f"gentax: error: {_disk}", file=sys.stderr)
    if _unmet or _disk:
        sys.exit(2)
    # every 15 s, each running job's latest progress line (its log's), here on the console
    gprogress.follow(gpaths.logs(config))


include: "rules/common.smk"
include: "rules/model.smk"
include: "rules/tasks.smk"
include: "rules/init_policies.smk"
include: "rules/rl.smk"
include: "rules/eval.smk"
include: "rules/properties.smk"
include: "rules/controls.smk"
include: "rules/tables.smk"

# Bookkeeping (a run's summary, a table, a figure: seconds of pandas or matplotlib on small files)
# runs where Snakemake runs, never as a cluster job: under the SLURM profile each would otherwise
# wait in the queue and start its own Snakemake for a few seconds of work.
localrules: run_summary, base_summary, properties_table, controls_properties_table, table, figure

# A profile's set-resources for a rule the workflow has not (a renamed one) would be dropped
# silently, and its jobs would run without the GPUs it asks for: one error instead.
if workflow.is_main_process:
    _unknown = gcost.unknown_rules(workflow.resource_settings.overwrite_resources, [r.name for r in workflow.rules])
    if _unknown:
        print(f"gentax: error: {_unknown}", file=sys.stderr)
        sys.exit(2)


rule all:
    input:
        all_tables(),
        all_figures(),
    default_target: True
