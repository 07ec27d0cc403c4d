# RL runs: one job per training segment; an extended run's next segment resumes from the state the
# previous one saved in the same run folder.


SEGMENT = gpaths.segment_manifest(gpaths.run_dir(config, "{init}", "{train_domain}", "{variant}", "{seed}"), "{start}", "{end}")


RL_SEGMENT_JOB = JobSpec("train rl", lambda wc: gjobs.rl_segment(
    config, planned_run(wc), start=int(wc.start), end=int(wc.end), save_every=config["rl"]["save_every"],
    init_model=init_model_path(wc.init), run_folder=run_dir(wc),
    manifest=gpaths.segment_manifest(run_dir(wc), int(wc.start), int(wc.end)),
    filler_reference=filler_reference_dir(wc), keep=gplan.checkpoint_keep(config, planned_run(wc), int(wc.end))))


rule rl_segment:
    input:
        unpack(RL_SEGMENT_JOB.checked),
        unpack(segment_inputs),
    output:
        SEGMENT,
    params:
        job=RL_SEGMENT_JOB.param,
    log:
        log_path(job_name(SEGMENT)),
    benchmark:
        bench_path(job_name(SEGMENT))
    resources:
        mem_mb=64000,
        runtime=1440,
    conda:
        "../envs/train-verl.yaml"
    shell:
        f"{GENTAX} train rl --job {{params.job:q}} --log {{log:q}}"
