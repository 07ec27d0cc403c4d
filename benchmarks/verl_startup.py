"""What the Ray processes a verl run starts beside its GPU workers cost to start, on a CPU: Ray
itself, TransferQueue's storage units and verl's reward workers, at verl's defaults (8 storage
units, 8 reward workers, Ray's dashboard) against the sizes gentax gives a one-GPU run
(``gentax.train.verl_engine.verl_overrides``). The GPU workers (FSDP, vLLM) are not started: only a
GPU runs them.

    python benchmarks/verl_startup.py MODEL_DIR [--write]     # MODEL_DIR: an HF folder (its tokenizer)

Each configuration runs in a fresh process, twice, on an otherwise idle machine: wall seconds from
``ray.init`` to every worker ready, the machine's CPU seconds over that span (/proc/stat), the Ray
processes and their memory. Record: ``benchmarks/records/verl_startup.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from common import REPO, record_header, write_record

#: (name, reward workers, storage units, Ray's dashboard); None: what verl_overrides gives one GPU
CONFIGS = (("verl's defaults", 8, 8, True), ("gentax, one GPU", None, None, None))


def machine_cpu_s() -> float:
    fields = open("/proc/stat").readline().split()[1:4]  # user, nice, system (clock ticks of 1/100 s)
    return sum(int(f) for f in fields) / 100


def measure(model: str, reward_workers: int | None, units: int | None, dashboard: bool | None) -> dict:
    """One configuration in this process: start, wait for every worker, count, stop."""
    import ray
    import transfer_queue as tq
    from verl.experimental.reward_loop import RewardLoopManager

    sys.path.insert(0, str(REPO / "tests"))
    from rl_helpers import make_run, small_rl

    from gentax.train import verl_engine

    config = verl_engine.build_config(small_rl(), model_path=model, run=make_run("sokoban", "default", 0, 2),
                                      run_dir="/tmp/verl_startup_run", end_step=1, write_data=False)
    if reward_workers is not None:
        config.reward.num_workers = reward_workers
        config.transfer_queue.backend.SimpleStorage.num_data_storage_units = units
        config.ray_kwargs.ray_init.include_dashboard = dashboard
    cpu, start = machine_cpu_s(), time.time()
    ray.init(num_cpus=16, include_dashboard=config.ray_kwargs.ray_init.include_dashboard, log_to_driver=False)
    config.transfer_queue.enable = True
    tq.init(config.transfer_queue)
    workers = RewardLoopManager(config=config, rm_resource_pool=None).reward_loop_workers
    ray.get([w.__ray_ready__.remote() for w in workers])
    wall, cpu = time.time() - start, machine_cpu_s() - cpu
    ps = subprocess.run(["ps", "-eo", "rss,args"], capture_output=True, text=True).stdout.splitlines()
    ours = [line for line in ps if "ray" in line.lower() and "verl_startup" not in line and "ps -eo" not in line]
    ray.shutdown()
    return {"reward_workers": config.reward.num_workers,
            "storage_units": config.transfer_queue.backend.SimpleStorage.num_data_storage_units,
            "dashboard": config.ray_kwargs.ray_init.include_dashboard, "wall_s": round(wall, 1),
            "cpu_s": round(cpu), "processes": len(ours), "rss_mib": sum(int(line.split()[0]) for line in ours) // 1024}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--write", action="store_true", help="write benchmarks/records/verl_startup.txt")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # a configuration's index: run in a child process
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(measure(args.model, *CONFIGS[int(args.one)][1:])))
        return 0
    lines = [record_header("python benchmarks/verl_startup.py MODEL" + (" --write" if args.write else "")),
             "configuration | reward workers | storage units | dashboard | wall s | machine CPU-s | Ray processes | RSS MiB"]
    for _ in range(2):
        for index, (name, *_) in enumerate(CONFIGS):
            done = subprocess.run([sys.executable, __file__, args.model, "--one", str(index)], capture_output=True,
                                  text=True, env={"OMP_NUM_THREADS": "1", **os.environ})
            if done.returncode != 0:
                sys.exit(f"{name}: failed\n{done.stderr[-3000:]}")
            r = json.loads(done.stdout.strip().splitlines()[-1])
            lines.append(f"{name} | {r['reward_workers']} | {r['storage_units']} | {r['dashboard']} | {r['wall_s']} | "
                         f"{r['cpu_s']} | {r['processes']} | {r['rss_mib']}")
            print(lines[-1], flush=True)
    if args.write:
        write_record("verl_startup.txt", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
