# Environment properties (Table 3): trajectories per domain measured into richness and complexity.


PROPERTIES_JOB = JobSpec("properties", lambda wc: gjobs.properties(
    config, domain=wc.domain, settings=gjobs.domain_settings(config, wc.domain),
    model=init_model_path(config["properties"]["init"]), tasks_file=gpaths.tasks(config, wc.domain),
    out_json=gpaths.properties(config, wc.domain)))


rule properties:
    input:
        unpack(PROPERTIES_JOB.checked),
        model=init_model_input(config["properties"]["init"]),
        tasks=gpaths.tasks(config, "{domain}"),
    output:
        gpaths.properties(config, "{domain}"),
        *gpaths.trajectories(gpaths.properties(config, "{domain}")).values(),  # declared: a deleted one is rebuilt
    params:
        job=PROPERTIES_JOB.param,
    log:
        log_path(job_name(gpaths.properties(config, "{domain}"))),
    benchmark:
        bench_path(job_name(gpaths.properties(config, "{domain}")))
    resources:
        mem_mb=32000,
        runtime=120,
    conda:
        "../envs/train-verl.yaml"
    shell:
        f"{GENTAX} properties --job {{params.job:q}} --log {{log:q}}"


PROPERTIES_TABLE_JOB = JobSpec("properties-table", lambda wc: gjobs.properties_table(
    [gpaths.properties(config, d) for d in gplan.eval_domains(config, config["properties"]["init"])],
    gpaths.properties_table(config)))


rule properties_table:
    input:
        unpack(PROPERTIES_TABLE_JOB.checked),
        [gpaths.properties(config, d) for d in gplan.eval_domains(config, config["properties"]["init"])],
    output:
        gpaths.properties_table(config),
    params:
        job=PROPERTIES_TABLE_JOB.param,
    log:
        log_path(gpaths.PROPERTIES_TABLE_JOB),
    benchmark:
        bench_path(gpaths.PROPERTIES_TABLE_JOB)
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/analysis.yaml"
    shell:
        f"{GENTAX} properties-table --job {{params.job:q}} --log {{log:q}}"
