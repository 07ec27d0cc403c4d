# Evaluation: pass@1 success of one checkpoint on one eval domain at validation temperature, on
# the held-out tasks of rules/tasks.smk. train_domain "base" = the initial policy itself (the
# "Base" rows, step 0). Per run, the evaluated checkpoints are gathered into a long-format summary.

TRAIN_OR_BASE = f"{TRAIN_DOMAIN_RE}|base"


rule eval_checkpoint:
    input:
        unpack(checkpoint_inputs),
        tasks=f"{R}/tasks/{{eval_domain}}.json",
    output:
        summary=f"{R}/eval/{{init}}/{{train_domain,{TRAIN_OR_BASE}}}/{{variant}}/seed{{seed}}/step{{step}}/{{eval_domain}}.json",
    params:
        job=job_param(lambda wc, input, output: gjobs.eval_checkpoint(
            config, domain=wc.eval_domain, model=checkpoint_path(wc), think=think_param(wc), tasks_file=input.tasks,
            out_json=output.summary, filler_reference=input.get("thinking"))),
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
        f"{GENTAX} eval --job {{params.job:q}} >> {{log}} 2>&1"


rule run_summary:
    input:
        run_summary_inputs,
    output:
        f"{R}/summary/{{part,main|extended}}/{{init}}/{{train_domain}}/{{variant}}/seed{{seed}}.csv",
    params:
        job=job_param(lambda wc, input, output: gjobs.summary(
            input, {"init": wc.init, "train_domain": wc.train_domain, "variant": wc.variant, "seed": int(wc.seed)},
            output[0])),
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
        f"{GENTAX} summarize --job {{params.job:q}} >> {{log}} 2>&1"


rule base_summary:
    input:
        base_summary_inputs,
    output:
        f"{R}/summary/base/{{init}}/{{variant}}.csv",
    params:
        job=job_param(lambda wc, input, output: gjobs.summary(
            input, {"init": wc.init, "train_domain": "base", "variant": wc.variant, "seed": 0}, output[0])),
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
        f"{GENTAX} summarize --job {{params.job:q}} >> {{log}} 2>&1"
