# Evaluation: pass@1 of one checkpoint on each eval domain of its initial policy, in one job (one rule
# per initial policy: its domains are the rule's outputs); train_domain "base" = the initial policy
# itself. Per run, the evaluated checkpoints are gathered into a long-format summary.
for _init in config["inits"]:
    _job = eval_checkpoint_job(_init)

    rule:
        name:
            gplan.eval_rule(_init)
        input:
            unpack(_job.checked),
            unpack(checkpoint_inputs),
            tasks=[gpaths.tasks(config, d) for d in gplan.eval_domains(config, _init)],
        output:
            **eval_outputs(_init),
        wildcard_constraints:
            init=_init,
        params:
            job=_job.param,
        log:
            log_path(EVAL_JOB),
        benchmark:
            bench_path(EVAL_JOB)
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
    gpaths.run_summary(config, wc.part, gpaths.run_path(wc.init, wc.train_domain, wc.variant, wc.seed))))


RUN_SUMMARY = gpaths.run_summary(config, "{part}", gpaths.run_path("{init}", "{train_domain}", "{variant}", "{seed}"))


rule run_summary:
    input:
        unpack(RUN_SUMMARY_JOB.checked),
        run_summary_inputs,
    output:
        RUN_SUMMARY,
    wildcard_constraints:
        part="main|extended",
    params:
        job=RUN_SUMMARY_JOB.param,
    log:
        log_path(job_name(RUN_SUMMARY)),
    benchmark:
        bench_path(job_name(RUN_SUMMARY))
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
        gpaths.base_summary(config, "{init}", "{variant}"),
    params:
        job=BASE_SUMMARY_JOB.param,
    log:
        log_path(job_name(gpaths.base_summary(config, "{init}", "{variant}"))),
    benchmark:
        bench_path(job_name(gpaths.base_summary(config, "{init}", "{variant}")))
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/analysis.yaml"
    shell:
        f"{GENTAX} summarize --job {{params.job:q}} --log {{log:q}}"
