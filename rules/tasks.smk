# Task splits: the held-out eval tasks of each domain (seeds + a fingerprint of their first
# observations, so two machines can check they evaluate the same tasks). For ALFWorld this also
# generates the games into the domain's cache before parallel jobs need them.


rule tasks:
    output:
        f"{R}/tasks/{{domain}}.json",
    params:
        domain=lambda wc: domain_params(wc.domain),
        episodes=lambda wc: gplan.eval_episodes(config, wc.domain),
        seed=config["seed"],
    log:
        log_path("tasks/{domain}"),
    benchmark:
        bench_path("tasks/{domain}")
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        "../envs/domains.yaml"
    script:
        "../workflow_scripts/tasks.py"
