# Controls (beyond the paper; gentax.study.controls): each level's property log at its own setting,
# measured as Table 3 measures a domain. The control runs are ordinary runs (rules/rl.smk, eval.smk).


CONTROL_PROPERTIES_JOB = JobSpec("properties", lambda wc: gjobs.properties(
    config, domain=wc.domain, settings=control_level(wc.label).domain,
    model=init_model_path(config["properties"]["init"]), tasks_file=gpaths.tasks(config, wc.domain),
    out_json=gpaths.under(config, gpaths.relative_control_properties(wc.label, wc.domain)),
    augmentation=control_level(wc.label).augmentation))


CONTROL_PROPERTIES = gpaths.under(config, gpaths.relative_control_properties("{label}", "{domain}"))


use rule properties as control_properties with:
    input:  # the properties rule's inputs, with this job's check
        unpack(CONTROL_PROPERTIES_JOB.checked),
        model=init_model_input(config["properties"]["init"]),
        tasks=gpaths.tasks(config, "{domain}"),
    output:
        CONTROL_PROPERTIES,
        *gpaths.trajectories(CONTROL_PROPERTIES).values(),
    params:
        job=CONTROL_PROPERTIES_JOB.param,
    log:
        log_path(job_name(CONTROL_PROPERTIES)),
    benchmark:
        bench_path(job_name(CONTROL_PROPERTIES))


CONTROLS_PROPERTIES_TABLE_JOB = JobSpec("controls-properties-table", lambda wc: gjobs.controls_properties_table(
    gplan.control_property_params(config), [gpaths.under(config, path) for path in gplan.control_property_paths(config)],
    gpaths.controls_table(config)))


rule controls_properties_table:
    input:
        unpack(CONTROLS_PROPERTIES_TABLE_JOB.checked),
        [gpaths.under(config, path) for path in gplan.control_property_paths(config)],
    output:
        gpaths.controls_table(config),
    params:
        job=CONTROLS_PROPERTIES_TABLE_JOB.param,
    log:
        log_path(job_name(gpaths.controls_table(config))),
    benchmark:
        bench_path(job_name(gpaths.controls_table(config)))
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/analysis.yaml"
    shell:
        f"{GENTAX} controls-properties-table --job {{params.job:q}} --log {{log:q}}"
