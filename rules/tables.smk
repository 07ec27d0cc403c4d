# Tables and figures. Each reads only the run summaries of the variants it needs (common.smk
# TABLE_VARIANTS / FIGURE_VARIANTS), so e.g. table5 reruns when an augmentation setting changes
# and table2 does not. Outputs are marked for `snakemake --report`.


rule table:
    input:
        unpack(table_inputs),
    output:
        csv=report(f"{R}/tables/{{name}}.csv", category="Tables", caption="../report/table.rst"),
        md=f"{R}/tables/{{name}}.md",
        tex=f"{R}/tables/{{name}}.tex",
    wildcard_constraints:
        name="|".join(TABLE_VARIANTS),
    params:
        window=lambda wc: gplan.window(config, config["grid"]["steps"]),
        seed=config["seed"],
        error_mark_pct=config["eval"].get("error_mark_pct", 5),
    log:
        log_path("tables/{name}"),
    benchmark:
        bench_path("tables/{name}")
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/analysis.yaml"
    script:
        "../workflow_scripts/table.py"


rule figure:
    input:
        unpack(table_inputs),
    output:
        png=report(f"{R}/figures/{{name}}.png", category="Figures", caption="../report/figure.rst"),
        svg=f"{R}/figures/{{name}}.svg",
    wildcard_constraints:
        name="|".join(FIGURE_VARIANTS),
    params:
        window=lambda wc: gplan.window(config, config["grid"]["steps"]),
        seed=config["seed"],
        error_mark_pct=config["eval"].get("error_mark_pct", 5),
    log:
        log_path("figures/{name}"),
    benchmark:
        bench_path("figures/{name}")
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/analysis.yaml"
    script:
        "../workflow_scripts/figure.py"
