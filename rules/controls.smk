# Controls (beyond the paper; config `controls`, gentax.study.controls): each level of the
# difficulty and richness sweeps gets its training domain's property log at its own setting (and,
# for a richness level, with its augmentation), measured as Table 3 measures a domain; a level whose
# states are the domain's as configured reuses Table 3's log. The control runs themselves are
# ordinary runs of the grid (gentax.study.plan.runs): rules/rl.smk and rules/eval.smk train and evaluate them.


use rule properties as control_properties with:
    output:
        f"{R}/properties/controls/{{label}}/{{domain}}.json",
        f"{R}/properties/controls/{{label}}/{{domain}}.steps.parquet",
        f"{R}/properties/controls/{{label}}/{{domain}}.episodes.parquet",
    params:
        job=job_param(lambda wc: gjobs.properties(
            config, domain=wc.domain, settings=control_level(wc.label).domain,
            model=init_model_path(config["properties"]["init"]), tasks_file=gpaths.tasks(config, wc.domain),
            out_json=f"{R}/properties/controls/{wc.label}/{wc.domain}.json",
            augmentation=control_level(wc.label).augmentation)),
    log:
        log_path("properties/controls/{label}/{domain}"),
    benchmark:
        bench_path("properties/controls/{label}/{domain}")


rule controls_properties_table:
    input:
        [f"{R}/{path}" for path in gplan.control_property_paths(config)],
    output:
        f"{R}/{gcontrols.PROPERTIES_TABLE}",
    params:
        job=job_param(lambda wc: gjobs.controls_properties_table(
            gplan.control_property_params(config), [f"{R}/{path}" for path in gplan.control_property_paths(config)],
            f"{R}/{gcontrols.PROPERTIES_TABLE}")),
    log:
        log_path("properties/controls"),
    benchmark:
        bench_path("properties/controls")
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/analysis.yaml"
    shell:
        f"{GENTAX} controls-properties-table --job {{params.job:q}} >> {{log}} 2>&1"
