# Initial policies. Ckpt V1 = base + GRPO on WebShop (20 steps); Ckpt V2 = V1 + SFT warmup on a
# 19:3:1 SciWorld-expert : ALFWorld-V1 : WebShop-V1 mix (state-action pairs; Sokoban absent).


rule rl_v1:
    input:
        model=base_model_input(),
        tasks=f"{R}/tasks/{config['inits']['v1']['rl']['train_domain']}.json",
    output:
        f"{R}/init/v1/run/segment_0_{config['inits']['v1']['rl']['steps']}.json",
    params:
        init_model=lambda wc: base_model_path(),
        run_dir=lambda wc, output: os.path.dirname(output[0]),
        run_spec=gplan.v1_run(config).to_dict(),
        start=0,
        end=config["inits"]["v1"]["rl"]["steps"],
        save_every=config["inits"]["v1"]["rl"]["steps"],
        rl=config["rl"],
        engine=config["engines"]["rl"],
        rollout=config["engines"].get("rollout"),
        dtype=config["engines"].get("dtype", "auto"),
        preset=config["preset"],
    log:
        log_path("init/v1"),
    benchmark:
        bench_path("init/v1")
    priority: CHAIN_PRIORITY
    resources:
        mem_mb=64000,
        runtime=600,
    conda:
        "../envs/train-verl.yaml"
    script:
        "../workflow_scripts/rl_segment.py"


rule sft_data:
    input:
        v1=init_model_input("v1"),
        tasks=expand(f"{R}/tasks/{{domain}}.json", domain=sft_mix_domains(config["inits"]["v2"]["sft"])),
    output:
        directory(f"{R}/init/v2/sft_data"),
    params:
        v1_model=init_model_path("v1"),
        sft=config["inits"]["v2"]["sft"],
        domains={d: domain_params(d) for d in sft_mix_domains(config["inits"]["v2"]["sft"])},
        rl=rollout_params(),
        generator=config["engines"]["generator"],
        seed=config["seed"],
    log:
        log_path("init/v2_sft_data"),
    benchmark:
        bench_path("init/v2_sft_data")
    priority: CHAIN_PRIORITY
    resources:
        mem_mb=32000,
        runtime=240,
    conda:
        "../envs/domains.yaml"
    script:
        "../workflow_scripts/sft_data.py"


rule sft_v2:
    input:
        model=init_model_input("v1"),
        data=f"{R}/init/v2/sft_data",
    output:
        directory(f"{R}/init/v2/model"),
    params:
        init_model=init_model_path("v1"),
        sft=config["inits"]["v2"]["sft"],
        seed=config["seed"],
        dtype=config["engines"].get("dtype", "auto"),
    log:
        log_path("init/v2"),
    benchmark:
        bench_path("init/v2")
    priority: CHAIN_PRIORITY
    resources:
        mem_mb=128000,
        runtime=600,
    conda:
        "../envs/sft-llamafactory.yaml"
    script:
        "../workflow_scripts/sft_train.py"
