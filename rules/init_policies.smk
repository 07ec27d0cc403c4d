# Initial policies. Ckpt V1 = base + GRPO on WebShop (20 steps); Ckpt V2 = V1 + SFT warmup on a
# 19:3:1 SciWorld-expert : ALFWorld-V1 : WebShop-V1 mix (state-action pairs; Sokoban absent).


RL_V1_JOB = JobSpec("train rl", lambda wc: gjobs.rl_segment(
    config, gplan.v1_run(config), start=0, end=gpaths.v1_steps(config), save_every=gpaths.v1_steps(config),
    init_model=gpaths.base_model(config), run_folder=gpaths.v1_run_dir(config), manifest=init_model_input("v1"),
    tasks_file=gpaths.tasks(config, config["inits"]["v1"]["rl"]["train_domain"]), keep=gplan.v1_checkpoint_keep(config)))


rule rl_v1:
    input:
        unpack(RL_V1_JOB.checked),
        model=gpaths.base_model_input(config),
        tasks=gpaths.tasks(config, config["inits"]["v1"]["rl"]["train_domain"]),
    output:
        init_model_input("v1"),
    params:
        job=RL_V1_JOB.param,
    log:
        log_path(gpaths.V1_JOB),
    benchmark:
        bench_path(gpaths.V1_JOB)
    priority: CHAIN_PRIORITY
    resources:
        mem_mb=64000,
        runtime=600,
    conda:
        "../envs/train-verl.yaml"
    shell:
        f"{GENTAX} train rl --job {{params.job:q}} --log {{log:q}}"


SFT_DATA_JOB = JobSpec("sft build-data", lambda wc: gjobs.sft_data(config, preset="v2", out=gpaths.v2_sft_data(config),
                                        v1_model=init_model_path("v1")))


rule sft_data:
    input:
        unpack(SFT_DATA_JOB.checked),
        v1=init_model_input("v1"),
        tasks=[gpaths.tasks(config, d) for d in gplan.sft_domains(config, "v2")],
    output:
        directory(gpaths.v2_sft_data(config)),
    params:
        job=SFT_DATA_JOB.param,
    log:
        log_path(gpaths.V2_SFT_DATA_JOB),
    benchmark:
        bench_path(gpaths.V2_SFT_DATA_JOB)
    priority: CHAIN_PRIORITY
    resources:
        mem_mb=32000,
        runtime=240,
    conda:
        "../envs/domains.yaml"
    shell:
        f"{GENTAX} sft build-data --job {{params.job:q}} --log {{log:q}}"


SFT_V2_JOB = JobSpec("sft train", lambda wc: gjobs.sft_train(config, preset="v2", data=gpaths.v2_sft_data(config),
                                         init_model=init_model_path("v1"), out=gpaths.v2_model(config)))


rule sft_v2:
    input:
        unpack(SFT_V2_JOB.checked),
        model=init_model_input("v1"),
        data=gpaths.v2_sft_data(config),
    output:
        directory(gpaths.v2_model(config)),
    params:
        job=SFT_V2_JOB.param,
    log:
        log_path(gpaths.V2_JOB),
    benchmark:
        bench_path(gpaths.V2_JOB)
    priority: CHAIN_PRIORITY
    resources:
        mem_mb=128000,
        runtime=600,
    conda:
        "../envs/sft-llamafactory.yaml"
    shell:
        f"{GENTAX} sft train --job {{params.job:q}} --log {{log:q}}"
