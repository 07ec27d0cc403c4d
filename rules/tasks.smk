# Task splits: the held-out eval tasks of each domain, fingerprinted (for ALFWorld this also
# generates the games into the domain's cache before parallel jobs need them).


TASKS_JOB = JobSpec("tasks", lambda wc: gjobs.tasks(config, wc.domain, gpaths.tasks(config, wc.domain)))


rule tasks:
    input:
        unpack(TASKS_JOB.checked),
    output:
        gpaths.tasks(config, "{domain}"),
    params:
        job=TASKS_JOB.param,
    log:
        log_path(job_name(gpaths.tasks(config, "{domain}"))),
    benchmark:
        bench_path(job_name(gpaths.tasks(config, "{domain}")))
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        "../envs/domains.yaml"
    shell:
        f"{GENTAX} tasks --job {{params.job:q}} --log {{log:q}}"
