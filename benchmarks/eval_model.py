"""Success of one model on every domain, with a study config's eval settings (what the
workflow's eval jobs run, via `gentax eval`), plus the wall time of each domain.

    python benchmarks/eval_model.py --model results/model/embedded_base            # embedded preset
    python benchmarks/eval_model.py --model DIR --config config/config.yaml --episodes 16 --domains sokoban

It measures, e.g., the embedded base's success rates (docs/sft.md "The embedded base"). Each
domain's rollouts land in OUT/<domain>.* (default: a temporary folder).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gentax.study.config import load_config  # noqa: E402
from gentax.study.plan import eval_episodes, rollout_settings  # noqa: E402  (the eval jobs' own settings)

DOMAINS = ["alfworld", "webshop", "sokoban", "sciworld"]


def _domain_args(domain: dict) -> list[str]:
    """A domain's step limit and knobs as `gentax eval` options."""
    args = ["--max-steps", str(domain["max_steps"])]
    for key, value in sorted((domain.get("options") or {}).items()):
        args += ["--option", f"{key}={json.dumps(value, separators=(',', ':'))}"]
    return args


def eval_arguments(cfg: dict, domain: str, model: str, episodes: int, out: Path, *, no_think: bool = False) -> list[str]:
    """`gentax eval` arguments for ``domain`` with the config's eval settings (what an eval job runs)."""
    settings = rollout_settings(cfg, "eval")
    args = ["eval", "--model", model, "--domain", domain, "--split", "eval",
            "--episodes", str(episodes), "--temperature", str(settings["temperature"]),
            "--top-p", str(settings["top_p"]), "--max-new-tokens", str(settings["max_new_tokens"]),
            "--history-length", str(settings["history_length"]), "--generator", "hf",
            "--seed", str(settings["seed"]), "--quiet", "--out", str(out / f"{domain}.parquet"),
            *_domain_args(cfg["domains"][domain])]
    return args + (["--no-think"] if no_think else [])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--config", nargs="*", default=[str(REPO / "config" / "config.yaml"), str(REPO / "config/embedded.yaml")],
                    help="config files merged in order (default: the embedded preset)")
    ap.add_argument("--domains", default=",".join(DOMAINS))
    ap.add_argument("--episodes", type=int, help="default: the config's, per domain (gentax.study.plan.eval_episodes)")
    ap.add_argument("--no-think", action="store_true")
    ap.add_argument("--out", help="folder for the rollouts (default: temporary)")
    args = ap.parse_args()

    cfg = load_config(args.config)
    out = Path(args.out or tempfile.mkdtemp(prefix="gentax-eval-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"model {args.model}; rollouts in {out}")
    print(f"{'domain':10} {'episodes':>8} {'success':>7} {'invalid':>8} {'length cut':>10} {'mean steps':>10} {'wall s':>7}")
    for domain in args.domains.split(","):
        episodes = args.episodes or eval_episodes(cfg, domain)
        cmd = [sys.executable, "-m", "gentax", *eval_arguments(cfg, domain, args.model, episodes, out, no_think=args.no_think)]
        started = time.monotonic()
        subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        wall = time.monotonic() - started
        summary = json.loads((out / f"{domain}.json").read_text())
        print(f"{domain:10} {episodes:8} {summary['success_rate']:7.2f} {summary['invalid_rate']:8.2f} {summary['length_cut_rate']:10.2f} "
              f"{summary['mean_length']:10.1f} {wall:7.0f}", flush=True)


if __name__ == "__main__":
    main()
