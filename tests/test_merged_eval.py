"""One evaluation job per checkpoint: every eval domain in one process, the outputs per domain, and a
rerun that plays only the domains whose evaluation changed (gentax/rollout/kept.py).

The job runs as the workflow runs it (`gentax eval --job SPEC`, the spec from
gentax.study.jobs.eval_checkpoint), with the expert generator (no model: fast) on Sokoban and
WebShop; "Snakemake reruns it" is what Snakemake does to a job: its outputs deleted, the job run
again with its (changed) spec.
"""

import json
from pathlib import Path

import pytest

from gentax.cli import main
from gentax.io import REPO_ROOT

DOMAINS = ("sokoban", "webshop")
EPISODES = 2


@pytest.fixture()
def job(tmp_path):
    """The embedded preset's evaluation spec of one checkpoint on DOMAINS, played by the expert."""
    from gentax.study import config as gconfig
    from gentax.study import jobs as gjobs

    cfg = gconfig.load_config([REPO_ROOT / "config" / "config.yaml", REPO_ROOT / "config" / "embedded.yaml"])
    tasks = {}
    for domain in DOMAINS:
        tasks[domain] = tmp_path / "tasks" / f"{domain}.json"
        tasks[domain].parent.mkdir(exist_ok=True)
        tasks[domain].write_text(json.dumps({"domain": domain, "split": "eval", "seeds": list(range(EPISODES))}))
    step = tmp_path / "eval" / "v1" / "base" / "default" / "seed0" / "step0"
    spec = gjobs.eval_checkpoint(cfg, model=str(tmp_path / "unused"), think="on",
                                 tasks_files={d: str(p) for d, p in tasks.items()},
                                 out_jsons={d: str(step / f"{d}.json") for d in DOMAINS})
    spec.update(generator="expert", model=None)
    for entry in spec["domains"]:
        entry["episodes"] = EPISODES
    return {"spec": spec, "folder": step, "tasks": tasks}


def outputs(folder: Path, domain: str) -> list[Path]:
    return [folder / f"{domain}{suffix}" for suffix in (".json", ".steps.parquet", ".episodes.parquet")]


def run(spec, capsys) -> str:
    assert main(["eval", "--job", json.dumps(spec)]) == 0
    return capsys.readouterr().out


def snakemake_reruns(job) -> None:
    """What Snakemake does before it runs the job again: it deletes the job's outputs."""
    for domain in DOMAINS:
        for path in outputs(job["folder"], domain):
            path.unlink()


def kept_line(domain: str) -> str:
    return f"{domain}: kept from an earlier run of this job"


def test_the_spec_holds_the_shared_settings_once_and_each_domains_own(job):
    from gentax.rollout.jobs import EvalDomain, evaluations

    spec = job["spec"]
    assert [entry["domain"] for entry in spec["domains"]] == list(DOMAINS)
    assert set(spec["domains"][0]) == set(EvalDomain.__annotations__)
    assert "temperature" in spec and "temperature" not in spec["domains"][0]
    per_domain = evaluations(spec)
    assert [s["domain"] for s in per_domain] == list(DOMAINS) and per_domain[1]["temperature"] == spec["temperature"]


def test_one_job_writes_every_domains_outputs_and_a_rerun_plays_only_the_changed_domain(job, capsys, monkeypatch):
    first = run(job["spec"], capsys)
    for domain in DOMAINS:
        assert all(path.is_file() for path in outputs(job["folder"], domain))
        assert f"{domain}: {EPISODES} episodes, success rate" in first and kept_line(domain) not in first
    webshop_before = outputs(job["folder"], "webshop")[0].read_bytes()

    # sokoban's step limit changes: the job reruns whole, but only sokoban is played again
    snakemake_reruns(job)
    spec = json.loads(json.dumps(job["spec"]))
    spec["domains"][0]["max_steps"] = 3
    second = run(spec, capsys)
    assert kept_line("webshop") in second and kept_line("sokoban") not in second
    assert "sokoban: 2 episodes, success rate" in second
    assert outputs(job["folder"], "webshop")[0].read_bytes() == webshop_before
    from gentax import provenance
    from gentax.rollout.jobs import evaluations

    sokoban = json.loads(outputs(job["folder"], "sokoban")[0].read_text())  # its record: its own settings
    assert sokoban["provenance"]["config_sha256"] == provenance.config_hash(evaluations(spec)[0])
    kept = sorted(p.name for p in (job["folder"] / ".kept").iterdir())
    assert len(kept) == 6 and len({name.split(".")[1] for name in kept if name.startswith("sokoban.")}) == 1

    # nothing changed: both kept; then the replay switch plays both
    snakemake_reruns(job)
    third = run(spec, capsys)
    assert kept_line("webshop") in third and kept_line("sokoban") in third
    snakemake_reruns(job)
    monkeypatch.setenv("GENTAX_EVAL_REPLAY", "1")
    assert "kept from" not in run(spec, capsys)


def test_a_changed_task_manifest_or_a_damaged_kept_table_plays_the_domain_again(job, capsys):
    run(job["spec"], capsys)
    snakemake_reruns(job)
    manifest = job["tasks"]["webshop"]
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "note": "rebuilt"}))
    out = run(job["spec"], capsys)
    assert kept_line("sokoban") in out and kept_line("webshop") not in out

    snakemake_reruns(job)
    table = next((job["folder"] / ".kept").glob("sokoban.*.steps.parquet.kept"))
    table.write_bytes(table.read_bytes() + b"\0")  # no longer the table its JSON's digest names
    out = run(job["spec"], capsys)
    assert kept_line("sokoban") not in out and kept_line("webshop") in out


def test_a_spec_with_a_domain_twice_or_none_is_one_clear_error(job, capsys):
    spec = json.loads(json.dumps(job["spec"]))
    spec["domains"].append(spec["domains"][0])
    assert main(["eval", "--job", json.dumps(spec)]) == 2
    assert "domains: sokoban listed more than once" in capsys.readouterr().err
    spec["domains"] = []
    assert main(["eval", "--job", json.dumps(spec)]) == 2
    assert "domains: an evaluation job plays at least one domain" in capsys.readouterr().err


def test_an_output_edited_in_place_does_not_change_what_is_kept(job, capsys):
    run(job["spec"], capsys)
    summary = outputs(job["folder"], "sokoban")[0]
    played = summary.read_text()
    summary.write_text(played.replace('"success_rate"', '"edited_success_rate"'))  # the same file, in place
    snakemake_reruns(job)
    assert kept_line("sokoban") in run(job["spec"], capsys)
    assert summary.read_text() == played
