# Evaluation: pass@1 success of one checkpoint on one eval domain at validation temperature, on
# the held-out tasks of rules/tasks.smk. train_domain "base" = the initial policy itself (the
# "Base" rows, step 0). Per run, the evaluated checkpoints are gathered into a long-format summary.

TRAIN_OR_BASE = f"{TRAIN_DOMAIN_RE}|base"


EVAL_CHECKPOINT_JOB = JobSpec("eval", lambda wc: gjobs.eval_checkpoint(
    config, domain=wc.eval_domain, model=checkpoint_path(wc), think=think_param(wc),
    tasks_file=gpaths.tasks(config, wc.eval_domain),
    out_json=eval_file(wc.init, wc.train_domain, wc.variant, wc.seed, wc.step, wc.eval_domain),
    filler_reference=filler_eval_input(wc).get("thinking")))


rule eval_checkpoint:
    input:
        unpack(EVAL_CHECKPOINT_JOB.checked),
        unpack(checkpoint_inputs),
        tasks=f"{R}/tasks/{{eval_domain}}.json",
    output:
        summary=f"{R}/eval/{{init}}/{{train_domain,{TRAIN_OR_BASE}}}/{{variant}}/seed{{seed}}/step{{step}}/{{eval_domain}}.json",
        # its trajectories (written before the summary): declared, so a deleted one is rebuilt
        steps=f"{R}/eval/{{init}}/{{train_domain}}/{{variant}}/seed{{seed}}/step{{step}}/{{eval_domain}}.steps.parquet",
        episodes=f"{R}/eval/{{init}}/{{train_domain}}/{{variant}}/seed{{seed}}/step{{step}}/{{eval_domain}}.episodes.parquet",
    params:
        job=EVAL_CHECKPOINT_JOB.param,
    log:
        log_path("eval/{init}/{train_domain}/{variant}/seed{seed}/step{step}/{eval_domain}"),
    benchmark:
        bench_path("eval/{init}/{train_domain}/{variant}/seed{seed}/step{step}/{eval_domain}")
    resources:
        mem_mb=32000,
        runtime=120,
    conda:
        "../envs/train-verl.yaml"
    shell:
        f"{GENTAX} eval --job {{params.job:q}} --log {{log:q}}"


RUN_SUMMARY_JOB = JobSpec("summarize", lambda wc: gjobs.summary(
    run_summary_inputs(wc), {"init": wc.init, "train_domain": wc.train_domain, "variant": wc.variant,
                             "seed": int(wc.seed)},
    f"{R}/summary/{wc.part}/{wc.init}/{wc.train_domain}/{wc.variant}/seed{wc.seed}.csv"))


rule run_summary:
    input:
        unpack(RUN_SUMMARY_JOB.checked),
        run_summary_inputs,
    output:
        f"{R}/summary/{{part,main|extended}}/{{init}}/{{train_domain}}/{{variant}}/seed{{seed}}.csv",
    params:
        job=RUN_SUMMARY_JOB.param,
    log:
        log_path("summary/{part}/{init}/{train_domain}/{variant}/seed{seed}"),
    benchmark:
        bench_path("summary/{part}/{init}/{train_domain}/{variant}/seed{seed}")
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/analysis.yaml"
    shell:
        f"{GENTAX} summarize --job {{params.job:q}} --log {{log:q}}"


BASE_SUMMARY_JOB = JobSpec("summarize", lambda wc: gjobs.summary(
    base_summary_inputs(wc), {"init": wc.init, "train_domain": "base", "variant": wc.variant, "seed": 0},
    gpaths.base_summary(config, wc.init, wc.variant)))


rule base_summary:
    input:
        unpack(BASE_SUMMARY_JOB.checked),
        base_summary_inputs,
    output:
        f"{R}/summary/base/{{init}}/{{variant}}.csv",
    params:
        job=BASE_SUMMARY_JOB.param,
    log:
        log_path("summary/base/{init}/{variant}"),
    benchmark:
        bench_path("summary/base/{init}/{variant}")
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/analysis.yaml"
    shell:
        f"{GENTAX} summarize --job {{params.job:q}} --log {{log:q}}"
