# Environment properties (Table 3): 128 trajectories per domain with Ckpt V2 and T_max = 50,
# measured into richness, complexity and the extra measures of gentax.agent.properties.


rule properties:
    input:
        model=init_model_input(config["properties"]["init"]),
        tasks=f"{R}/tasks/{{domain}}.json",
    output:
        f"{R}/properties/{{domain}}.json",
    params:
        model=lambda wc: init_model_path(config["properties"]["init"]),
        domain=lambda wc: domain_params(wc.domain),
        **gplan.rollout_settings(config, "properties"),
    log:
        log_path("properties/{domain}"),
    benchmark:
        bench_path("properties/{domain}")
    resources:
        mem_mb=32000,
        runtime=120,
    conda:
        "../envs/train-verl.yaml"
    script:
        "../workflow_scripts/properties.py"


rule properties_table:
    input:
        expand(f"{R}/properties/{{domain}}.json", domain=gplan.eval_domains(config, config["properties"]["init"])),
    output:
        f"{R}/properties/properties.csv",
    log:
        log_path("properties/table"),
    benchmark:
        bench_path("properties/table")
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/analysis.yaml"
    script:
        "../workflow_scripts/properties_table.py"
