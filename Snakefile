# gentax: the study "Paying Less Generalization Tax" as a Snakemake workflow.
#   snakemake -n                                  # the plan (embedded default profile)
#   snakemake                                     # the whole embedded study on this machine
#   snakemake --profile profiles/slurm            # the paper's study on a SLURM cluster
#   snakemake results/tables/table5_augmentation.csv   # one table and only what it needs
# Rules hold no logic: each runs ONE visible command, `python -m gentax <verb> --job SPEC`, on the spec
# gentax.study.jobs resolves for it (`snakemake -n -p` prints it; the line reruns the job by hand).
# The grid expansion lives in gentax/plan.py (shared with `gentax plan`), every path in gentax/study/paths.py.
import os
import re
import sys

from snakemake.exceptions import WorkflowError

sys.path.insert(0, workflow.basedir)  # this checkout's gentax (each job's command: rules/common.smk GENTAX)

import gentax.controls as gcontrols
import gentax.domains as gdomains
import gentax.io as gio
import gentax.plan as gplan
import gentax.provenance as gprov
import gentax.runspec as grunspec
import gentax.study.jobs as gjobs
import gentax.study.paths as gpaths
from gentax.errors import ConfigError

configfile: "config.yaml"

# Which study (gentax.plan.with_preset): `preset: paper` is config.yaml as it is (profiles/slurm sets
# it); `embedded`, the default whenever no preset is given (a plain `snakemake`, also with your own
# --configfile), lays config/embedded.yaml over config.yaml. Your --configfile files and --config
# key=value pairs go over both, so they always win.
OVERRIDES = workflow.config_settings.overwrite_config or {}
STUDY = gplan.with_preset(config, OVERRIDES)
config.clear()
config.update(STUDY)
PRESET = config["preset"]

try:
    gplan.validate(config, memory=workflow.is_main_process)  # a cluster job re-reads this file: checked once
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None

R = config["results"]

if workflow.is_main_process:  # the budget of what this profile would launch (not inside each SLURM job)
    import gentax.cost as gcost

    _res = workflow.resource_settings
    print(gcost.summary_line(config, gcost.resources_from(_res.default_resources, _res.overwrite_resources)),
          file=sys.stderr)


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


rule all:
    input:
        all_tables(),
        all_figures(),
    default_target: True
