# RL runs: one job per training segment. A run's first segment starts from its initial policy;
# an extended run's next segment (e.g. 150 -> 300) resumes from the state the previous segment
# saved in the same run folder, so no step is trained twice.


rule rl_segment:
    input:
        unpack(segment_inputs),
    output:
        f"{R}/runs/{{init}}/{{train_domain}}/{{variant}}/seed{{seed}}/segment_{{start}}_{{end}}.json",
    params:
        init_model=lambda wc: init_model_path(wc.init),
        run_dir=run_dir,
        run_spec=run_spec_params,
        start=lambda wc: int(wc.start),
        end=lambda wc: int(wc.end),
        save_every=config["rl"]["save_every"],
        rl=config["rl"],
        filler=filler_params,
        engine=config["engines"]["rl"],
        rollout=config["engines"].get("rollout"),
        dtype=config["engines"].get("dtype", "auto"),
        preset=config["preset"],
    log:
        log_path("runs/{init}/{train_domain}/{variant}/seed{seed}/segment_{start}_{end}"),
    benchmark:
        bench_path("runs/{init}/{train_domain}/{variant}/seed{seed}/segment_{start}_{end}")
    resources:
        mem_mb=64000,
        runtime=1440,
    conda:
        "../envs/train-verl.yaml"
    script:
        "../workflow_scripts/rl_segment.py"
