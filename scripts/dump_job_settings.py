"""Dump every job's resolved settings: the record that a refactor of the workflow keeps them.

    python scripts/dump_job_settings.py OUT.json[.gz] [SNAKEMAKE ARGS ...]      # write a dump
    python scripts/dump_job_settings.py --check DUMP.json[.gz]                  # compare with one
    python scripts/dump_job_settings.py tests/golden/jobs_embedded.json.gz
    python scripts/dump_job_settings.py tests/golden/jobs_paper.json.gz --profile profiles/slurm

``--check`` rebuilds the dump with the Snakemake arguments recorded in DUMP and prints every job
whose record differs (exit 1), or "identical" (exit 0): tests/test_job_settings.py runs it on the
committed dumps, so a change to what any job receives is a deliberate, reviewed change of them.

Snakemake's own command line builds the DAG exactly as ``snakemake -n ARGS`` does (profiles,
``--config``, the workflow profile), with every job forced (so the dump does not depend on what
``results/`` holds). For each job the dump holds its rule, wildcards, input and output files, log,
threads and resources, and its **settings**: what the job's program receives, resolved by the
program's own loaders, so that two ways of handing settings to a job compare equal when the
program sees the same thing. A job that runs a ``gentax`` command is executed up to the point
where its command would start; the command's arguments are parsed by gentax's own parser, and its
RL / SFT sections by the engines' loaders (``load_rl_config`` with the defaults it merges,
``load_sft_config``). Nothing is trained or evaluated and nothing is written under ``results/``.

The JSON is sorted and machine-independent (paths relative to the repository), so a change to any
job's settings shows as a diff of the committed dumps.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _namedlist(nl) -> dict[str, Any]:
    """A Snakemake Namedlist as {name: value} for named entries, plus "_" for the unnamed ones."""
    names = {name for name, _ in nl._allitems()} if hasattr(nl, "_allitems") else set()
    named = {name: _plain(value) for name, value in nl.items()} if names else {}
    flat = [str(v) for v in nl]
    return {"named": named, "all": flat}


def _resolve_command(argv: list[str], workdir: Path) -> dict[str, Any]:
    """What the gentax program receives from ``gentax ARGV`` (run from ``workdir``)."""
    from gentax.cli import build_parser

    args = build_parser().parse_args([str(a) for a in argv])
    plain = {k: _plain(v) for k, v in vars(args).items() if k != "func"}
    verb = " ".join(str(a) for a in argv[:2] if not str(a).startswith("--"))
    out: dict[str, Any] = {"verb": verb, "args": plain}
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        if plain.get("command") == "train" and plain.get("train_command") == "rl":
            from gentax.io import read_yaml
            from gentax.runspec import RunSpec
            from gentax.train.config import load_rl_config, read_rl_section
            from gentax.train.tracking import read_section

            section = read_rl_section(args.config)
            out["rl"] = load_rl_config(section, args.preset).to_dict()
            out["run_spec"] = RunSpec.from_dict(read_yaml(args.run_spec)).to_dict()
            out["tracking"] = _plain(read_section(args.config))
        elif plain.get("command") == "sft":
            from gentax.train.sft_cli import _load

            cfg, domains = _load(args)
            out["sft"] = cfg.to_dict()
            out["domains"] = _plain(domains)
            if plain.get("sft_command") == "train":
                from gentax.train.tracking import read_section

                out["tracking"] = _plain(read_section(args.config))
        elif "option" in plain:
            from gentax.domains.cli import parse_options

            out["options"] = _plain(parse_options(args.option))
    finally:
        os.chdir(cwd)
    for key in ("config", "run_spec"):  # the job's own config files: their content is resolved above
        out["args"].pop(key, None)
    return out


def _job_settings(job, workflow, workdir: Path) -> dict[str, Any]:
    """Run the job's workflow step up to its gentax command; the command's resolved settings."""
    from types import SimpleNamespace

    from gentax import pipeline
    from gentax.errors import GentaxError

    commands: list[list[str]] = []
    real = (pipeline.run_gentax, pipeline._provenance, pipeline._embed_provenance)
    pipeline.run_gentax = lambda args, log: commands.append([str(a) for a in args])
    pipeline._provenance = lambda smk, **subjects: {}  # hashes the finished outputs: after the command
    pipeline._embed_provenance = lambda path, record: None
    smk = SimpleNamespace(params=job.params, input=job.input, output=job.output, log=job.log,
                          wildcards=job.wildcards, rule=job.rule.name, config=workflow.config)
    step = {"rl_v1": "rl_segment", "embedded_base_data": "sft_data", "embedded_base": "sft_train",
            "sft_v2": "sft_train", "control_properties": "properties"}.get(job.rule.name, job.rule.name)
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        if step in ("all", "summarize", "run_summary", "base_summary", "table", "figure", "properties_table",
                    "controls_properties_table"):
            return {"params": _plain(dict(job.params.items()))}  # read inputs only; their params are all they get
        if step == "rl_segment" and job.params.get("filler"):  # reads the thinking run's manifest: stand in for it
            real_filler = pipeline.filler_rl_section
            pipeline.filler_rl_section = lambda filler, manifest: {
                "source": str(filler["source"]), "token": str(filler["token"]), "reference": f"<run_dir of {manifest}>"}
        try:
            getattr(pipeline, step)(smk)
        except (FileNotFoundError, GentaxError):
            pass  # a step that checks its command's outputs after it (no checkpoints here): the command was captured
        finally:
            if step == "rl_segment" and job.params.get("filler"):
                pipeline.filler_rl_section = real_filler
    finally:
        pipeline.run_gentax, pipeline._provenance, pipeline._embed_provenance = real
        os.chdir(cwd)
    return {"commands": [_resolve_command(argv, workdir) for argv in commands]}


def _resources(job) -> dict[str, Any]:
    skip = {"_cores", "_nodes", "tmpdir"}
    return {k: _plain(v) for k, v in job.resources.items() if k not in skip}


def dump(snakemake_args: list[str]) -> list[dict[str, Any]]:
    """Every job of ``snakemake -n SNAKEMAKE_ARGS``, forced, with its settings (module doc)."""
    from snakemake import cli
    from snakemake.api import DAGApi

    jobs: list[dict[str, Any]] = []

    def capture(self, *args, **kwargs):
        workflow = self.workflow_api._workflow
        workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True, nolock=True)
        workflow._build_dag()
        with tempfile.TemporaryDirectory(prefix="gentax-dump-") as tmp:
            for job in sorted(workflow.dag.jobs, key=lambda j: (j.rule.name, sorted(map(str, j.output)))):
                jobs.append({
                    "rule": job.rule.name,
                    "wildcards": _plain(dict(job.wildcards.items())),
                    "input": sorted(map(str, job.input)),
                    "output": sorted(map(str, job.output)),
                    "log": sorted(map(str, job.log)),
                    "threads": job.threads,
                    "resources": _resources(job),
                    "settings": _job_settings(job, workflow, Path(tmp)),
                })

    DAGApi.execute_workflow = capture
    os.chdir(REPO)
    try:
        cli.main(["-n", "--quiet", "all", *snakemake_args])
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    return jobs


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
