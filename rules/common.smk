# Input functions and path helpers shared by the rules. Every path the workflow declares is built
# here, from the grid that gentax.study.plan expands.
import re
import sys

from snakemake.exceptions import WorkflowError

import gentax.domains as gdomains
import gentax.provenance as gprov
import gentax.runspec as grunspec
import gentax.study.checks as gchecks
import gentax.study.controls as gcontrols
import gentax.study.jobs as gjobs
import gentax.study.paths as gpaths
import gentax.study.plan as gplan

DOMAIN_RE = "|".join(gdomains.names())  # the registered domains (gentax.domains.spec)
# a run's training domain: one domain or a mixture "a+b" / "a*2+b" (gentax.domains.spec.mixture_weights)
TRAIN_DOMAIN_RE = rf"(?:{DOMAIN_RE})(?:\*\d+)?(?:\+(?:{DOMAIN_RE})(?:\*\d+)?)*"

wildcard_constraints:
    init="v1|v2",
    variant="|".join(map(re.escape, gplan.variant_labels(config))),  # the variant registry (gentax/runspec.py) + control runs' labels
    label="|".join(re.escape(level.label) for level in gcontrols.control_levels(config)) or "(?!)",  # control levels
    domain=DOMAIN_RE,
    train_domain=TRAIN_DOMAIN_RE,
    seed=r"\d+",
    step=r"\d+",
    start=r"\d+",
    end=r"\d+",

# The chain that makes the initial policies is the critical path: its jobs go first when ready.
CHAIN_PRIORITY = 10


def provenance_labels(wildcards, output):
    """The report's columns for a table/figure: its provenance record (read when the report is built)."""
    return gprov.report_labels(wildcards.name, output.provenance)


# Every path comes from gentax.study.paths; every job's spec from gentax.study.jobs. `gentax` is this
# clone's bin/gentax, first on every job's PATH (gentax.clone, called by the Snakefile).
GENTAX = "gentax"


def log_path(name):
    return gpaths.log(config, name)


def bench_path(name):
    return gpaths.benchmark(config, name)


def job_name(written):
    """The name of the job whose output pattern is ``written``: its log's and its benchmark's."""
    return gpaths.job_name(config, written)


class JobSpec:
    """A rule's job: the verb its one command runs and ``builder(wildcards)``, the spec it receives.

    ``param``: the rule's `job` param, the spec as JSON, a function of the wildcards alone (so it
    triggers reruns). ``checked``: an input function that adds no input and runs the job's check
    against the plan's inputs (gentax.study.checks), so `snakemake -n` stops at a job that would refuse."""

    def __init__(self, verb, builder):
        self.verb, self.builder = verb, builder

    def param(self, wildcards):
        return gjobs.encode(self.builder(wildcards))

    def checked(self, wildcards):
        where = ", ".join(f"{k}={v}" for k, v in wildcards.items())
        problem = gchecks.plan_problem(config, self.verb, self.builder(wildcards), f"job {self.verb!r}"
                                       + (f" ({where})" if where else ""))
        if problem:
            print(f"gentax: error: {problem}", file=sys.stderr)
            sys.exit(2)
        return {}


# ---- models -------------------------------------------------------------------------------------
def init_model_input(init):
    return gpaths.init_model_input(config, init)


def init_model_path(init):
    return gpaths.init_model(config, init)


# ---- runs ---------------------------------------------------------------------------------------
def run_dir(wc):
    return gpaths.run_dir(config, wc.init, wc.train_domain, wc.variant, wc.seed)


def planned_run(wc):
    return gplan.find_run(config, wc.init, wc.train_domain, wc.variant, int(wc.seed))


def segment_inputs(wc):
    start = int(wc.start)
    if start == 0:
        return {"init": init_model_input(wc.init), **filler_segment_input(wc)}
    prev = [s for s in gplan.segments(config, planned_run(wc)) if s[1] == start]
    if not prev:
        raise WorkflowError(f"no segment of {run_dir(wc)} ends at step {start}")
    return {"init": init_model_input(wc.init), "previous": gpaths.segment_manifest(run_dir(wc), prev[0][0], start),
            **filler_segment_input(wc)}


def checkpoint_inputs(wc):
    """For an eval of checkpoint `step`: the manifest of the segment that saved it (or the init's)."""
    thinking = {f"thinking_{d}": path for d, path in filler_eval_inputs(wc, wc.init).items()}
    if wc.train_domain == "base":
        return {"model": init_model_input(wc.init), **thinking}
    start, end = gplan.segment_of(config, planned_run(wc), int(wc.step))
    return {"model": gpaths.segment_manifest(run_dir(wc), start, end), **thinking}


def checkpoint_path(wc):
    if wc.train_domain == "base":
        return init_model_path(wc.init)
    return gpaths.checkpoint(run_dir(wc), wc.step)


def eval_file(init, train_domain, variant, seed, step, eval_domain):
    return gpaths.eval_file(config, init, train_domain, variant, seed, step, eval_domain)


# ---- evaluations (rules/eval.smk: one rule per initial policy) -----------------------------------
TRAIN_OR_BASE = f"{TRAIN_DOMAIN_RE}|base"
EVAL_JOB = job_name(gpaths.eval_folder(config, "{init}", "{train_domain}", "{variant}", "{seed}", "{step}"))


def eval_checkpoint_job(init):
    return JobSpec("eval", lambda wc: gjobs.eval_checkpoint(
        config, model=checkpoint_path(wc), think=think_param(wc),
        tasks_files={d: gpaths.tasks(config, d) for d in gplan.eval_domains(config, init)},
        out_jsons={d: eval_file(wc.init, wc.train_domain, wc.variant, wc.seed, wc.step, d)
                   for d in gplan.eval_domains(config, init)},
        filler_references=filler_eval_inputs(wc, init) or None))


def eval_outputs(init):
    """Per eval domain its summary and trajectories (declared: a deleted one is rebuilt)."""
    out = {}
    for d in gplan.eval_domains(config, init):
        summary = gpaths.eval_file(config, "{init}", f"{{train_domain,{TRAIN_OR_BASE}}}", "{variant}", "{seed}", "{step}", d)
        out.update({d: summary, **{f"{d}_{kind}": path for kind, path in gpaths.trajectories(summary).items()}})
    return out


def run_summary_inputs(wc):
    """part "main": checkpoints up to grid.steps; "extended": those of the continued training."""
    run = planned_run(wc)
    return [eval_file(run.init, run.train_domain, run.variant_label, run.seed, step, d)
            for step in gplan.eval_steps(config, run, wc.part) for d in gplan.eval_domains(config, run.init)]


def base_summary_inputs(wc):
    return [eval_file(wc.init, "base", wc.variant, 0, 0, d) for d in gplan.eval_domains(config, wc.init)]


def table_inputs(wc):
    """What a table/figure reads: the artifact registry's entry (gentax.analysis.artifacts), as paths."""
    return gplan.artifact_inputs(config, wc.name)


def all_tables():
    return [gpaths.table(config, name) for name in gplan.table_names(config)]


def all_figures():
    return [gpaths.figure(config, name) for name in gplan.figure_names(config)]


def think_param(wc):
    """The thinking mode an eval uses: the run's (gentax.runspec), or for a base row its variant's."""
    if wc.train_domain == "base":
        return grunspec.think_mode(wc.variant)
    return planned_run(wc).think


def control_level(label):
    """A level of the controls (gentax.study.controls) by its label."""
    return gplan.control_level(config, label)


# ---- the filler arm (controls.filler; gentax.agent.filler) ---------------------------------------
def filler_segment_input(wc):
    """A filler run's segment waits for its thinking run trained through the segment's last step."""
    if think_param(wc) != "filler":
        return {}
    ref = gplan.filler_reference(config, planned_run(wc))
    start, end = gplan.segment_of(config, ref, int(wc.end))
    return {"thinking": gpaths.segment_manifest(gpaths.run_folder(config, ref.path), start, end)}


def filler_eval_inputs(wc, init):
    """A filler-mode eval's {domain: the same cell's thinking evaluation}; empty for every other eval."""
    if think_param(wc) != "filler":
        return {}
    if wc.train_domain == "base":
        return {d: eval_file(wc.init, "base", grunspec.DEFAULT_VARIANT, 0, 0, d) for d in gplan.eval_domains(config, init)}
    return {d: eval_file(wc.init, wc.train_domain, grunspec.DEFAULT_VARIANT, wc.seed, wc.step, d)
            for d in gplan.eval_domains(config, init)}


def filler_reference_dir(wc):
    """A filler run's matching thinking run folder (None for every other run)."""
    if think_param(wc) != "filler":
        return None
    ref = gplan.filler_reference(config, planned_run(wc))
    return gpaths.run_dir(config, ref.init, ref.train_domain, ref.variant_label, ref.seed)
