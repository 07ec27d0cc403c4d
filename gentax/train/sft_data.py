"""The SFT dataset: state-action pairs from our own collector, written as a LlamaFactory dataset
(docs/sft.md "Data").

    apportion(total, weights) -> {domain: count}      # the exact mix: largest remainder
    build_sft_data(cfg, out_dir, *, v1_model=None, domains=None, progress=True) -> manifest dict
    read_examples(data_dir) -> list of sharegpt records  (train.json)

One example is one step the env accepted, from episodes played with the ``expert`` generator or the
``--v1`` model (``cfg.sources``): the step prompt as the agent saw it and ``format_response(action,
think)`` re-rendered canonically, so every assistant turn parses as valid. Each domain collects
rounds of fresh episodes until it has its count, then exactly that many are drawn and all examples
shuffled, every draw seeded from ``cfg.seed``. The output folder is written atomically.
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Any, Mapping

from gentax import io as gio
from gentax.agent.parse import format_response, parse_response
from gentax.errors import GentaxError
from gentax.rollout.generators import SamplingParams, derive_seed, make_generator, require_model_folder
from gentax.train.sft_config import SFTData

log = logging.getLogger(__name__)

DATASET_NAME = "gentax_sft"
DATA_FILE = "train.json"
DATASET_INFO = {
    DATASET_NAME: {
        "file_name": DATA_FILE,
        "formatting": "sharegpt",
        "columns": {"messages": "conversations"},
        "tags": {"role_tag": "from", "content_tag": "value", "user_tag": "human", "assistant_tag": "gpt"},
    }
}
ROUNDING_RULE = "largest remainder (Hamilton); ties to the domain listed first in mix"


def apportion(total: int, weights: Mapping[str, int]) -> dict[str, int]:
    """Split ``total`` over ``weights`` by the largest-remainder rule (module docstring)."""
    if total < 0:
        raise GentaxError(f"total must be >= 0, got {total}")
    weight_sum = sum(weights.values())
    if weight_sum <= 0 or any(w < 0 for w in weights.values()):
        raise GentaxError(f"weights must be >= 0 with a positive sum, got {dict(weights)}")
    counts = {d: total * w // weight_sum for d, w in weights.items()}
    remainders = {d: total * w % weight_sum for d, w in weights.items()}  # exact integer remainders
    order = sorted(weights, key=lambda d: (-remainders[d], list(weights).index(d)))
    for domain in order[: total - sum(counts.values())]:
        counts[domain] += 1
    return counts


def read_examples(data_dir: str | Path) -> list[dict[str, Any]]:
    """The sharegpt records of a dataset folder written by ``build_sft_data``; a damaged one is one
    GentaxError naming the file and the job that rebuilds the folder (``gentax sft build-data``)."""
    data_dir = Path(data_dir)
    info_path = data_dir / "dataset_info.json"
    if not info_path.is_file():
        raise GentaxError(f"{data_dir} is not an SFT dataset folder (no dataset_info.json)")
    fix = gio.rebuild_hint(data_dir)
    info = gio.read_result_json(info_path, keys=(DATASET_NAME,), fix=fix)
    path = data_dir / info[DATASET_NAME]["file_name"]
    examples = gio.read_result_json(path, fix=fix)
    if not isinstance(examples, list) or not examples:
        raise GentaxError(f"{path} holds no examples; {fix}")
    return examples


def build_sft_data(cfg: SFTData, out_dir: str | Path, *, v1_model: str | Path | None = None,
                   domains: Mapping[str, Mapping[str, Any]] | None = None, progress: bool = True) -> dict[str, Any]:
    """Collect, mix and write the dataset (see the module docstring); returns the manifest."""
    domains = dict(domains or {})
    counts = apportion(cfg.pairs, {d: cfg.mix[d] for d in cfg.active_domains()})
    needs_v1 = [d for d in counts if cfg.sources[d] == "v1"]
    if needs_v1 and v1_model is None:
        raise GentaxError(f"the mix takes {', '.join(needs_v1)} from the V1 model: give its HF folder (--v1)")
    generators: dict[str, Any] = {"expert": make_generator("expert", think_template=cfg.expert_think)}
    if needs_v1:
        generators["v1"] = make_generator(cfg.generator, require_model_folder(v1_model, "--v1"))

    examples: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    per_domain: dict[str, Any] = {}
    rollouts_by_domain = {}
    for domain, count in counts.items():
        source = cfg.sources[domain]
        settings = domains.get(domain, {})
        pairs, rollouts, stats = _collect_pairs(cfg, domain, count, source, generators[source], settings, progress)
        rng = random.Random(derive_seed(cfg.seed, "sft-draw", domain))
        chosen = sorted(rng.sample(range(len(pairs)), count))
        for index in chosen:
            example, row = pairs[index]
            examples.append(example)
            rows.append(row)
        rollouts_by_domain[domain] = rollouts
        per_domain[domain] = {**stats, "count": count, "source": source, "weight": cfg.mix[domain],
                              "max_steps": settings.get("max_steps"), "options": settings.get("options") or {}}
        log.info("%s: %d of %d usable pairs drawn (%s)", domain, count, len(pairs), source)

    order = list(range(len(examples)))
    random.Random(derive_seed(cfg.seed, "sft-shuffle")).shuffle(order)
    manifest = {
        "dataset": DATASET_NAME,
        "examples": len(examples),
        "counts": counts,
        "rounding_rule": ROUNDING_RULE,
        "domains": per_domain,
        "v1_model": str(v1_model) if v1_model is not None else None,
        "config": cfg.to_dict(),
    }
    _write(out_dir, [examples[i] for i in order], [rows[i] for i in order], rollouts_by_domain, manifest)
    return manifest


def _collect_pairs(cfg: SFTData, domain: str, count: int, source: str, generator, settings, progress):
    """Usable (example, row) pairs of ``domain`` from rounds of fresh episodes (module docstring)."""
    from gentax.rollout.collector import CollectConfig, collect
    from gentax.rollout.schema import Rollouts

    episodes = cfg.expert_episodes_per_domain if source == "expert" else cfg.v1_episodes_per_domain
    first_seed = derive_seed(cfg.seed, "sft-tasks", domain) % 1_000_000_000
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    parts = []
    for round_index in range(cfg.max_rounds):
        seeds = [first_seed + round_index * episodes + i for i in range(episodes)]
        sampling = SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens,
                                  seed=derive_seed(cfg.seed, "sft-sample", domain, round_index) % 2**31)
        collect_cfg = CollectConfig(domain=domain, split=cfg.split, think=cfg.think, history_length=cfg.history_length,
                                    sampling=sampling, max_steps=settings.get("max_steps"),
                                    env_options=dict(settings.get("options") or {}), num_workers=cfg.env_workers,
                                    seed=derive_seed(cfg.seed, "sft-collect", domain, round_index) % 2**31)
        rollouts = collect(generator, seeds, collect_cfg, run_id=f"sft-{domain}-{source}-r{round_index}", progress=progress)
        parts.append(rollouts)
        pairs.extend(_usable_pairs(rollouts, domain, source, round_index, cfg.think))
        if len(pairs) >= count:
            break
    else:
        raise GentaxError(f"{domain}: only {len(pairs)} usable state-action pairs from {cfg.max_rounds} rounds of "
                          f"{episodes} {source} episodes, {count} needed; raise {source}_episodes_per_domain or "
                          "max_rounds, or lower pairs")
    rollouts = Rollouts.concat(parts)
    frame = rollouts.episodes_frame()
    stats = {
        "rounds": len(parts),
        "episodes": int(len(frame)),
        "episode_success": float(frame["won"].mean()) if len(frame) else 0.0,
        "steps": int(rollouts.steps.num_rows),
        "usable_pairs": len(pairs),
    }
    return pairs, rollouts, stats


def _usable_pairs(rollouts, domain: str, source: str, round_index: int, think: bool):
    """(sharegpt example, description row) for every step with an env-accepted action."""
    steps = rollouts.steps_frame()
    won = dict(zip(rollouts.episodes_frame()["traj_id"], rollouts.episodes_frame()["won"]))
    out = []
    for row in steps.itertuples(index=False):
        if not row.valid or not isinstance(row.action, str) or isinstance(row.error, str):
            continue
        reasoning = parse_response(row.response, domain=domain, think=think).think if think else None
        if think and reasoning is None:
            continue  # cannot happen for a valid think-mode step; guards against odd logs
        response = format_response(row.action, reasoning)
        example = {"conversations": [{"from": "human", "value": row.prompt}, {"from": "gpt", "value": response}]}
        description = {
            "domain": domain,
            "source": source,
            "task_seed": int(row.task_seed),
            "traj_id": int(row.traj_id),
            "step": int(row.step),
            "round": round_index,
            "episode_won": bool(won[row.traj_id]),
            "prompt_chars": len(row.prompt),
            "response_chars": len(response),
        }
        out.append((example, description))
    return out


def _write(out_dir, examples, rows, rollouts_by_domain, manifest) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with gio.atomic_path(out_dir) as tmp:
        tmp.mkdir(parents=True)
        (tmp / DATA_FILE).write_text(json.dumps(examples, ensure_ascii=False, indent=1) + "\n")
        (tmp / "dataset_info.json").write_text(json.dumps(DATASET_INFO, indent=2) + "\n")
        pq.write_table(pa.Table.from_pylist(rows), tmp / "pairs.parquet")
        for domain, rollouts in rollouts_by_domain.items():
            rollouts.write(tmp / "rollouts" / domain)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n")
