# Tables and figures, each reading only what its registry entry names (gentax.analysis.artifacts).
# Outputs are marked for `snakemake --report` with their provenance as the report's columns; one
# subcategory each (the report shows a label with two values in a category as an on/off toggle).


TABLE_JOB = JobSpec("table", lambda wc: gjobs.artifact(
    config, wc.name, **table_inputs(wc), outputs={ext: gpaths.table(config, wc.name, ext) for ext in ("csv", "md", "tex")},
    provenance=str(gprov.beside(gpaths.table(config, wc.name)))))


rule table:
    input:
        unpack(TABLE_JOB.checked),
        unpack(table_inputs),
    output:
        csv=report(gpaths.table(config, "{name}", "csv"), category="Tables", subcategory="{name}", caption="../report/table.rst",
                   labels=provenance_labels),
        md=gpaths.table(config, "{name}", "md"),
        tex=gpaths.table(config, "{name}", "tex"),
        provenance=str(gprov.beside(gpaths.table(config, "{name}"))),
    wildcard_constraints:
        name="|".join(gplan.table_names(config)),
    params:
        job=TABLE_JOB.param,
    log:
        log_path(job_name(gpaths.table(config, "{name}"))),
    benchmark:
        bench_path(job_name(gpaths.table(config, "{name}")))
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/analysis.yaml"
    shell:
        f"{GENTAX} table --job {{params.job:q}} --log {{log:q}}"


FIGURE_JOB = JobSpec("figure", lambda wc: gjobs.artifact(
    config, wc.name, **table_inputs(wc), outputs={ext: gpaths.figure(config, wc.name, ext) for ext in ("png", "svg")},
    provenance=str(gprov.beside(gpaths.figure(config, wc.name)))))


rule figure:
    input:
        unpack(FIGURE_JOB.checked),
        unpack(table_inputs),
    output:
        png=report(gpaths.figure(config, "{name}", "png"), category="Figures", subcategory="{name}", caption="../report/figure.rst",
                   labels=provenance_labels),
        svg=gpaths.figure(config, "{name}", "svg"),
        provenance=str(gprov.beside(gpaths.figure(config, "{name}"))),
    wildcard_constraints:
        name="|".join(gplan.figure_names(config)),
    params:
        job=FIGURE_JOB.param,
    log:
        log_path(job_name(gpaths.figure(config, "{name}"))),
    benchmark:
        bench_path(job_name(gpaths.figure(config, "{name}")))
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/analysis.yaml"
    shell:
        f"{GENTAX} figure --job {{params.job:q}} --log {{log:q}}"
