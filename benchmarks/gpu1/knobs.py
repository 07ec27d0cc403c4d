"""Success of an initial policy at candidate difficulty knobs: the base-rate check behind the
one-GPU preset's `domains:` (success between 10 and 90 % on every domain, so a ΔID can move).

    python benchmarks/gpu1/knobs.py --model results/model/embedded_base --work /tmp/knobs \
        --record benchmarks/records/gpu1_knobs_DATE.tsv \
        --setting "ws_o0 webshop 8 results_per_page=3 goal_attributes=1 goal_options=0" ...

Each setting is NAME DOMAIN MAX_STEPS KEY=VALUE...; it runs `gentax eval` (the one-GPU preset's
evaluation settings: its new-token limit, history length and temperature, read from config/gpu1.yaml) on the first
--episodes eval tasks into WORK/NAME.*, or reads WORK/NAME.json where that evaluation exists
already, and writes one TSV row per setting (commit, machine, device, date in the header) and prints it.
KEY=VALUE pairs are the domain's env options, except ``history_length=N``: the number of past
(observation, action) pairs in the prompt, in place of the preset's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import shlex
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def preset_eval_settings() -> dict:
    """What the one-GPU preset's evaluation jobs generate with (``gentax.study.plan.rollout_settings``)."""
    from gentax.io import read_yaml
    from gentax.study import config as gconfig
    from gentax.study.plan import rollout_settings

    cfg = gconfig.load_config(gconfig.with_preset(read_yaml(REPO / "config" / "config.yaml"), {"preset": "gpu1"}, default="paper"))
    return rollout_settings(cfg, "eval")


def evaluate(model: str, work: Path, name: str, domain: str, max_steps: int, options: list[str], episodes: int,
             settings: dict) -> dict:
    history = [o for o in options if o.startswith("history_length=")]
    options = [o for o in options if o not in history]
    settings = {**settings, **({"history_length": int(history[-1].split("=", 1)[1])} if history else {})}
    out = work / f"{name}.json"
    if not out.exists():
        cmd = [str(REPO / "bin" / "gentax"), "eval", "--model", model, "--domain", domain, "--episodes", str(episodes),
               "--max-steps", str(max_steps), "--max-new-tokens", str(settings["max_new_tokens"]),
               "--history-length", str(settings["history_length"]), "--temperature", str(settings["temperature"]),
               "--quiet", "--out", str(work / f"{name}.parquet")]
        for option in options:
            cmd += ["--option", option]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def _device() -> str:
    """What ``gentax eval`` generates on: its hf generator takes the GPU where torch sees one."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--record", type=Path)
    parser.add_argument("--setting", action="append", required=True)
    parser.add_argument("--commit", help="the code's commit, where this checkout's git cannot say it (the GPU machine's "
                                         "copy of the working tree: its .git may be stale)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    commit = args.commit or subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                           text=True).stdout.strip()
    lines = [f"# {dt.date.today()} commit {commit} machine {platform.node()} ({platform.processor() or platform.machine()}, "
             f"{_device()}) model {args.model}",
             "name\tdomain\tmax_steps\toptions\tepisodes\tsuccess\tmean_length\tinvalid_rate\twall_s"]
    settings = preset_eval_settings()
    for setting in args.setting:
        name, domain, max_steps, *options = shlex.split(setting)
        d = evaluate(args.model, args.work, name, domain, int(max_steps), options, args.episodes, settings)
        lines.append("\t".join(str(v) for v in (name, domain, max_steps, " ".join(options), d["episodes"],
                                                 round(d["success_rate"], 4), round(d["mean_length"], 2),
                                                 round(d["invalid_rate"], 3), d["timing"]["wall_s"])))
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.record:
        args.record.write_text(text)


if __name__ == "__main__":
    main()
