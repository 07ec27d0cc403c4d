"""Dump every job's resolved settings: the record that a refactor of the workflow keeps them.

    python scripts/dump_job_settings.py OUT.json[.gz] [SNAKEMAKE ARGS ...]      # write a dump
    python scripts/dump_job_settings.py --check DUMP.json[.gz]                  # compare with one
    python scripts/dump_job_settings.py tests/golden/jobs_embedded.json.gz --profile profiles/embedded
    python scripts/dump_job_settings.py tests/golden/jobs_paper.json.gz --profile profiles/slurm

``--check`` rebuilds the dump with the Snakemake arguments recorded in DUMP and prints every job
whose record differs (exit 1), or "identical" (tests/test_job_settings.py runs it on the committed
dumps). The DAG is ``gentax.study.dag.build`` (every job forced: independent of ``results/``); per
job its rule, wildcards, files, log, threads, resources and **settings**: its spec in the shape of
the verb's command-line arguments beside its resolved RL / SFT sections. Sorted, machine-independent JSON.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _table_params(spec: dict) -> dict[str, Any]:
    return {k: spec[k] for k in ("window", "bootstrap", "seed", "error_mark_pct", "test_level", "sft_mix")}


#: the bookkeeping verbs (summaries, tables, figures): the settings each reads beside its inputs
BOOKKEEPING = {"summarize": lambda spec: {"run_keys": spec["keys"]}, "table": _table_params, "figure": _table_params,
               "properties-table": lambda spec: {}, "controls-properties-table": lambda spec: {"levels": spec["levels"]}}


def _options(options: dict) -> list[str]:
    """A domain's knobs as the command line's ``--option KEY=JSON`` values, sorted."""
    return [f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in sorted(options.items())]


def _rollout_args(verb: str, spec: dict) -> dict[str, Any]:
    from gentax.rollout.jobs import ENGINE_INTERNALS

    args = {"command": verb, "model": spec["model"], "domain": spec["domain"], "split": spec["split"],
            "out": spec["out"], "temperature": spec["temperature"], "top_p": spec["top_p"],
            "max_new_tokens": spec["max_new_tokens"], "no_think": False, "filler_reference": None,
            "filler_tokens": None, "filler_source": "repeat", "filler_token": ".", "generator": spec["generator"],
            "seed": spec["seed"], "first_task": 0, "history_length": spec["history_length"],
            "max_steps": spec["max_steps"] if verb == "eval" else spec["t_max"],  # a property log's limit: T_max
            "dtype": spec["dtype"], "option": _options(spec["options"]),
            "errors_as_losses": spec["errors_as_losses"], "quiet": True, "episodes": spec["episodes"],
            **ENGINE_INTERNALS}
    if verb == "eval":
        args["think"] = spec["think"]
        if spec["filler"]:
            f = spec["filler"]
            args.update(filler_reference=f["reference"], filler_source=f["source"], filler_token=f["token"],
                        filler_tokens=f["tokens"])
    else:
        aug = spec["augmentation"] or {"eps": 0, "p": 1.0, "kind": "distractor"}
        args.update(think=None, t_max=spec["t_max"], aug_eps=aug["eps"], aug_p=aug["p"], aug_kind=aug["kind"])
    return args


def _settings(verb: str | None, spec: dict | None) -> dict[str, Any]:
    """What the job's program receives, as its command-line arguments (``args``) and resolved
    sections; a bookkeeping job's settings beside its inputs; none for rule all."""
    if verb is None:
        return {"params": {}}
    if verb in BOOKKEEPING:
        return {"params": BOOKKEEPING[verb](spec)}
    out: dict[str, Any] = {"verb": verb}
    if verb == "tasks":
        out["args"] = {"command": "tasks", "domain": spec["domain"], "episodes": spec["episodes"], "split": spec["split"],
                       "max_steps": spec["max_steps"], "option": _options(spec["options"]), "out": spec["out"]}
        out["options"] = spec["options"]
    elif verb == "model embedded":
        out["args"] = {"command": "model", "model_command": "embedded", "out": spec["out"], "dtype": spec["dtype"]}
    elif verb == "train rl":
        out["args"] = {"command": "train", "train_command": "rl", "engine": spec["engine"], "init": spec["init"],
                       "domain": None, "variant": None, "seed": None, "steps": f"{spec['start']}:{spec['end']}",
                       "out": spec["out"], "print_config": False, "no_progress": True}
        out.update(rl=spec["rl"], run_spec=spec["run_spec"], tracking=spec["tracking"])
    elif verb.startswith("sft"):
        sub = verb.split()[1]
        out["args"] = {"command": "sft", "sft_command": sub, "preset": spec["preset"], "out": spec["out"], "seed": None,
                       **({"v1": spec["v1"], "quiet": True} if sub == "build-data" else
                          {"data": spec["data"], "init": spec["init"]})}
        out.update(sft=spec["sft"], domains=spec["domains"] if sub == "build-data" else {})
        if sub == "train":
            out["tracking"] = spec["tracking"]
    elif verb == "eval":  # one command's settings per domain, as a one-domain evaluation's
        from gentax.rollout.jobs import evaluations

        return {"commands": [{**out, "args": _rollout_args(verb, settings), "options": settings["options"]}
                             for settings in evaluations(spec)]}
    else:
        out["args"] = _rollout_args(verb, spec)
        out["options"] = spec["options"]
    return {"commands": [out]}


#: resources Snakemake adds to every job (not the profile's or the rule's)
SNAKEMAKE_RESOURCES = {"_cores", "_nodes", "tmpdir"}


def dump(snakemake_args: list[str]) -> list[dict[str, Any]]:
    """Every job of ``snakemake -n SNAKEMAKE_ARGS``, forced, with its settings (module doc)."""
    from gentax.study import dag

    return [{"rule": job.rule, "wildcards": job.wildcards, "input": sorted(job.input), "output": sorted(job.output),
             "log": sorted(job.log), "threads": job.threads,
             "resources": {k: v for k, v in job.resources.items() if k not in SNAKEMAKE_RESOURCES},
             "settings": _settings(job.verb, job.spec)}
            for job in sorted(dag.build(snakemake_args), key=lambda j: (j.rule, sorted(j.output)))]


def _text(record: dict) -> str:
    return json.dumps(record, indent=1, sort_keys=True, default=str) + "\n"


def read_dump(path: str | Path) -> dict:
    path = Path(path)
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return json.loads(raw)


def differences(expected: dict, actual: dict) -> list[str]:
    """One line per job that is in one dump only or whose record differs (by its outputs)."""
    def by_output(d):
        return {"|".join(j["output"]) or j["rule"]: j for j in d["jobs"]}

    want, got = by_output(expected), by_output(actual)
    lines = [f"only in the committed dump: {k}" for k in sorted(set(want) - set(got))]
    lines += [f"only now: {k}" for k in sorted(set(got) - set(want))]
    for key in sorted(set(want) & set(got)):
        if want[key] != got[key]:
            fields = sorted(f for f in set(want[key]) | set(got[key]) if want[key].get(f) != got[key].get(f))
            lines.append(f"differs: {key} ({', '.join(fields)})")
    return lines


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    sys.path.insert(0, str(REPO))
    if argv[0] == "--check":
        expected = read_dump(argv[1])
        actual = {"snakemake_args": expected["snakemake_args"], "jobs": dump(expected["snakemake_args"])}
        actual = json.loads(_text(actual))  # the same normal form as the file
        lines = differences(expected, actual)
        print("\n".join(lines) if lines else f"{argv[1]}: identical ({len(actual['jobs'])} jobs)")
        return 1 if lines else 0
    out, *snakemake_args = argv
    jobs = dump(snakemake_args)
    text = _text({"snakemake_args": snakemake_args, "jobs": jobs})
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    data = gzip.compress(text.encode(), mtime=0) if out.endswith(".gz") else text.encode()
    Path(out).write_bytes(data)
    rules: dict[str, int] = {}
    for job in jobs:
        rules[job["rule"]] = rules.get(job["rule"], 0) + 1
    print(f"{out}: {len(jobs)} jobs ({', '.join(f'{r} {n}' for r, n in sorted(rules.items()))})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
