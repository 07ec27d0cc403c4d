"""What the verl driver (``verl_engine``) and the code verl runs (``verl_agent``) share, importable
without verl; neither imports the other at module level, so there is no import cycle.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gentax.errors import GentaxError

AGENT_NAME = "gentax_env"
TRAINER_MODE = "gentax_sync"

#: metrics.csv column -> verl metric key (the rest of a row comes from runs.rollout_metrics); also the
#: names the local engine's tracker logs them under (gentax.train.tracking), without importing verl
VERL_METRICS = {
    "pg_loss": "actor/pg_loss",
    "kl": "actor/kl_loss",
    "entropy": "actor/entropy",
    "clipfrac": "actor/pg_clipfrac",
    "grad_norm": "actor/grad_norm",
    "adv_mean": "gentax/adv_mean",
    "adv_std": "gentax/adv_std",
    "adv_abs_max": "gentax/adv_abs_max",
    "rollout_s": "timing_s/gen",
    "old_log_prob_s": "timing_s/old_log_prob",
    "ref_log_prob_s": "timing_s/ref",
    "update_s": "timing_s/update_actor",
    "weight_sync_s": "timing_s/update_weights",
    "save_s": "timing_s/save_checkpoint",
    "seconds": "timing_s/step",
    "tokens_per_s_per_gpu": "perf/throughput",
    "actor_peak_gpu_gb": "actor/perf/max_memory_allocated_gb",
    "response_tokens_mean": "response_length/mean",
}


def export_checkpoint(actor_dir: str | Path, target_dir: str | Path) -> Path:
    """Convert one verl FSDP actor checkpoint into the HF folder ``target_dir`` (bf16, the merger's
    dtype) with ``python -m verl.model_merger merge --backend fsdp`` in a subprocess (it holds the
    whole model in CPU memory), renamed into place with its manifest: complete or not at all."""
    from gentax.io import atomic_path, write_manifest

    actor_dir, target_dir = Path(actor_dir), Path(target_dir)
    if not (actor_dir / "fsdp_config.json").is_file():
        raise GentaxError(f"{actor_dir} is not a verl FSDP actor checkpoint (no fsdp_config.json)")
    with atomic_path(target_dir) as tmp:
        cmd = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp",
               "--local_dir", str(actor_dir), "--target_dir", str(tmp)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0 or not (tmp / "config.json").is_file():
            raise GentaxError(f"verl model merger failed on {actor_dir}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
        write_manifest(tmp)
    return target_dir
