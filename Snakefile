# gentax: the study "Paying Less Generalization Tax" as a Snakemake workflow.
#   bash scripts/run.sh -n                        # the plan (profiles/embedded; sets up on first use)
#   bash scripts/run.sh                           # the whole embedded study on this machine
#   bash scripts/run.sh --profile profiles/slurm  # the paper's study on a SLURM cluster (that profile only)
#   snakemake results/tables/table5_augmentation.csv   # one table and only what it needs
#   bash scripts/run.sh gentax plan --cost        # what it takes: job-hours, GPU-hours, disk (or --target one table)
# Rules hold no logic: each runs ONE visible command, `gentax <verb> --job SPEC`, on the spec
# gentax.study.jobs resolves for it (`snakemake -n -p` prints it; the line reruns the job by hand).
# The grid expansion lives in gentax/study/plan.py (shared with `gentax plan`), every path in gentax/study/paths.py.
from snakemake.utils import validate

import gentax.clone as gclone
import gentax.study.config as gconfig
import gentax.study.snakefile as gsnakefile

gclone.use_this_clone()  # every job runs this clone's `gentax` (bin/) and package

configfile: "config/config.yaml"

# The study config: config/config.yaml, the preset's overlay (`preset: paper`, which profiles/slurm
# sets, is config.yaml as it is; `embedded`, the default, lays config/embedded.yaml over it), then
# your --configfile files and --config pairs, which always win. A bad value: one line, exit 2.
gsnakefile.load(config, workflow.config_settings, main=workflow.is_main_process)
# Snakemake's own check against the same schema (skipped for a `module` with skip_validation),
# after gentax's stricter one (8.0 is no integer; rules that span keys); no defaults in the schema.
with gconfig.schema_file() as schema:
    validate(config, str(schema), set_default=False)

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


onstart:  # a run, before any job starts: the base model, a writable results folder, GPU memory, room on its disk
    gsnakefile.on_start(config)


rule all:
    input:
        all_tables(),
        all_figures(),
    default_target: True
