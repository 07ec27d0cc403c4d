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
        model=checkpoint_path,
        domain=lambda wc: domain_params(wc.eval_domain),
        think=think_param,
        filler=filler_params,
        episodes=lambda wc: gplan.eval_episodes(config, wc.eval_domain),
        **gplan.rollout_settings(config, "eval"),
    log:
        log_path("eval/{init}/{train_domain}/{variant}/seed{seed}/step{step}/{eval_domain}"),
    benchmark:
        bench_path("eval/{init}/{train_domain}/{variant}/seed{seed}/step{step}/{eval_domain}")
    resources:
        mem_mb=32000,
        runtime=120,
    conda:
        "../envs/train-verl.yaml"
    script:
        "../workflow_scripts/eval_checkpoint.py"


rule run_summary:
    input:
        run_summary_inputs,
    output:
        f"{R}/summary/{{part,main|extended}}/{{init}}/{{train_domain}}/{{variant}}/seed{{seed}}.csv",
    params:
        run_keys=lambda wc: {"init": wc.init, "train_domain": wc.train_domain, "variant": wc.variant, "seed": int(wc.seed)},
    log:
        log_path("summary/{part}/{init}/{train_domain}/{variant}/seed{seed}"),
    benchmark:
        bench_path("summary/{part}/{init}/{train_domain}/{variant}/seed{seed}")
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/analysis.yaml"
    script:
        "../workflow_scripts/summarize.py"


rule base_summary:
    input:
        base_summary_inputs,
    output:
        f"{R}/summary/base/{{init}}/{{variant}}.csv",
    params:
        run_keys=lambda wc: {"init": wc.init, "train_domain": "base", "variant": wc.variant, "seed": 0},
    log:
        log_path("summary/base/{init}/{variant}"),
    benchmark:
        bench_path("summary/base/{init}/{variant}")
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/analysis.yaml"
    script:
        "../workflow_scripts/summarize.py"
