"""The effective settings of every job kind of a study, each with its source (``gentax plan
--settings``): one place to audit a preset against the paper. ``effective_settings``: ``{kind:
{name: value}}`` as each engine receives them (verl: its Hydra overrides; ``verl_config`` composes
them); ``render`` prints them with each one's source from ``settings_sources.yaml``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from gentax.io import read_yaml
from gentax.jobspec import plain
from gentax.study import plan as gplan
from gentax.study.config import study_sft
from gentax.study.jobs import rl_config
from gentax.train.sft import llamafactory_args
from gentax.train.sft_config import load_sft_config

SOURCES_FILE = Path(__file__).with_name("settings_sources.yaml")
KINDS = ("study", "runs", "rl", "sft", "sft_data", "eval", "properties", "domains")
HEADINGS = {
    "study": "The study: initial policies, grid, interventions",
    "runs": "Every RL run: what its run spec sets (the settings that differ between runs; the rest as below)",
    "rl": "RL ({engine} engine): {run}, as {receiver} receives it",
    "sft": "SFT of Ckpt V2: the llamafactory-cli train arguments on {gpus} device(s)",
    "sft_data": "SFT data (gentax sft build-data)",
    "eval": "Evaluation (gentax eval, per checkpoint and eval domain)",
    "properties": "Property logs (gentax properties, Table 3)",
    "domains": "Episodes",
}


@lru_cache(maxsize=1)
def sources() -> dict[str, dict[str, list[str]]]:
    """kind -> printed name -> [source, note] (see settings_sources.yaml)."""
    return read_yaml(SOURCES_FILE)


def shown_run(cfg: dict):
    """The run whose RL settings are shown: the grid's first, else Ckpt V1's training."""
    runs = gplan.runs(cfg)
    return runs[0] if runs else gplan.v1_run(cfg)


def _verl_overrides(cfg: dict) -> list[str]:
    """The Hydra overrides the verl engine hands verl for the shown run."""
    from gentax.train.verl_engine import verl_overrides  # function-local: defers verl's imports

    run = shown_run(cfg)
    return verl_overrides(rl_config(cfg, save_every=cfg["rl"]["save_every"]), model_path=f"<Ckpt {run.init}>", run=run, run_dir="RUN_DIR",
                          end_step=run.steps, train_file="train.parquet", val_file="val.parquet")


def rl_settings(cfg: dict) -> dict[str, Any]:
    """The first grid run's RL settings as its engine receives them."""
    if cfg["engines"]["rl"] != "verl":
        return {**rl_config(cfg, save_every=cfg["rl"]["save_every"]).to_dict(), "run_spec": shown_run(cfg).to_dict()}
    from hydra.core.override_parser.overrides_parser import OverridesParser  # function-local: hydra is verl's

    return {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(_verl_overrides(cfg))}


def verl_config(cfg: dict) -> str:
    """The whole verl config the shown run composes (verl's ``ppo_trainer`` with our overrides), YAML."""
    from omegaconf import OmegaConf

    from gentax.train.verl_engine import compose_verl_config  # function-local: defers verl and hydra

    run = shown_run(cfg)
    config = compose_verl_config(_verl_overrides(cfg))
    return (f"# verl config composed for run {run.path} ({run.steps} steps): verl's ppo_trainer + gentax's overrides\n"
            + OmegaConf.to_yaml(config))


def runs_settings(cfg: dict) -> dict[str, Any]:
    """Every planned run -> what its run spec sets beyond the shared RL settings."""
    return {run.path: {"steps": run.steps, "think": run.think, "augmentation": plain(run.augmentation),
                       "domains": plain(run.domains)} for run in gplan.runs(cfg)}


def augmentation_units() -> dict[str, Any]:
    """Each domain's tokens per inserted distractor, and WebShop's distractor kinds."""
    from gentax.domains.spec import specs  # function-local, with the next: reads the domain registry when printed
    from gentax.domains.webshop import DISTRACTOR_KINDS as WEBSHOP_DISTRACTOR_KINDS  # (the WebShop module, likewise)

    out = {f"augmentation.{name}.tokens_per_distractor": spec.augmentation.nominal_tokens
           for name, spec in specs().items() if spec.augmentation is not None}
    out["augmentation.webshop.distractor_kinds"] = WEBSHOP_DISTRACTOR_KINDS
    return out


def sft_settings(cfg: dict) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the LlamaFactory arguments, the data settings) of the V2 SFT."""
    sft = load_sft_config(study_sft(cfg, "v2"))
    gpus = int(cfg.get("cluster", {}).get("gpus_per_node", 1))
    args = llamafactory_args(sft.train(), Path("SFT_DATA"), Path("<Ckpt v1>"), Path("OUT"), 0, gpus)
    args["cutoff_len"] = sft.cutoff_len if sft.cutoff_len is not None else "the longest example (measured at run time)"
    args["global_batch_size"] = args["per_device_train_batch_size"] * args["gradient_accumulation_steps"] * gpus
    data = {"pairs": sft.pairs, "mix": sft.mix, "sources": {d: sft.sources[d] for d in sft.active_domains()},
            "v1_episodes_per_domain": sft.v1_episodes_per_domain, "temperature": sft.temperature,
            "history_length": sft.history_length, "max_new_tokens": sft.max_new_tokens,
            "epochs_over_mix": round(sft.steps * sft.batch_size / sft.pairs, 3), "expert_think": sft.expert_think}
    return args, data


def effective_settings(cfg: dict) -> dict[str, dict[str, Any]]:
    """kind -> {name: value} (see the module docstring)."""
    sft, sft_data = sft_settings(cfg)
    eval_settings = {"episodes": cfg["eval"]["episodes"],
                     "episodes_per_domain": dict(cfg["eval"].get("episodes_per_domain") or {}),
                     "batch_size_per_domain": dict(cfg["eval"].get("batch_size_per_domain") or {}),
                     **gplan.rollout_settings(cfg, "eval"),
                     "window": cfg["eval"]["window"]}
    grid, inits, aug = cfg["grid"], cfg["inits"], cfg["augmentation"]
    study = {
        "model.base": cfg["model"]["base"],
        "inits.v1.rl": inits["v1"]["rl"],
        "inits.v1.domains": inits["v1"]["domains"],
        "inits.v2.domains": inits["v2"]["domains"],
        "grid.seeds": grid["seeds"],
        "grid.steps": grid["steps"],
        "grid.runs": len(gplan.runs(cfg)),
        "grid.extended": {f"{e['init']}/{e['train_domain']}": e["steps"] for e in grid.get("extended", [])},
        "augmentation.kind": aug["kind"],
        "augmentation.v1": aug["v1"],
        "augmentation.v2": aug["v2"],
        **augmentation_units(),
        "cluster.gpus_per_node": cfg.get("cluster", {}).get("gpus_per_node"),
        "cluster.gpu_memory_gib": cfg.get("cluster", {}).get("gpu_memory_gib"),
    }
    return {
        "study": study,
        "runs": runs_settings(cfg),
        "rl": rl_settings(cfg),
        "sft": sft,
        "sft_data": sft_data,
        "eval": eval_settings,
        "properties": {"init": cfg["properties"]["init"], **gplan.rollout_settings(cfg, "properties")},
        "domains": {f"{d}.max_steps": cfg["domains"][d]["max_steps"] for d in cfg["domains"]},
    }


def render(cfg: dict, paper_cfg: dict, memory_lines: list[str] = ()) -> str:
    """The settings as text, sources beside them, then ``memory_lines`` (the memory check's). A value
    that differs from the paper preset's (``paper_cfg``) shows that value instead of a source."""
    settings = effective_settings(cfg)
    paper = effective_settings(paper_cfg)
    run = shown_run(cfg)
    engine = cfg["engines"]["rl"]
    fill = {"engine": engine, "run": f"run {run.path}, {run.steps} steps",
            "receiver": "verl" if engine == "verl" else "the local engine",
            "gpus": cfg.get("cluster", {}).get("gpus_per_node", 1)}
    known = sources()
    width = max(len(name) for values in settings.values() for name in values)
    lines = [f"preset {cfg.get('preset', 'paper')}; sources: [paper] the paper states it, [verl-agent] the codebase "
             "the paper used, [verl] verl's default, [LlamaFactory] its full-SFT example, [ours] our reasoning"]
    for kind in KINDS:
        lines += ["", "== " + HEADINGS[kind].format(**fill)]
        for name, value in settings[kind].items():
            source = known.get(kind, {}).get(name)
            tag = f"  [{source[0]}] {source[1]}" if source else ""
            if source and value != paper[kind].get(name):
                tag = f"  [changed] the paper preset has {_show(paper[kind].get(name))}"
            lines.append(f"  {name:<{width}}  {_show(value)}{tag}")
    if memory_lines:
        lines += ["", f"== Memory per GPU ({cfg['cluster']['gpu_memory_gib']} GiB, margin "
                      f"{cfg['cluster']['memory_margin']:.0%}; DeepSpeed's estimators + activations)"]
        lines += [f"  {line}" for line in memory_lines]
    return "\n".join(lines) + "\n"


def _show(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return yaml.safe_dump(value).split("\n")[0]
    if isinstance(value, (dict, list)):
        return yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False).strip()
    return str(value)
