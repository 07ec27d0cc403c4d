"""The kill record of the GPU smoke's phase verl1-kills (smoke.py), printed and kept.

    python benchmarks/verl_gpu_smoke/kills_report.py SMOKE_JSON --commit C --date D [--out RECORD.json]

SMOKE_JSON is the smoke.json a device call brought back. Prints one line per attempt (its kill,
what was left of the trainer's processes and when nvidia-smi's memory was back to its value before
the first attempt, the steps the attempt trained and its time to the end of its first step) and the
checks; ``--out`` keeps the phase's record with the commit, the machine and the date beside it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def lines(smoke: dict) -> list[str]:
    phase = smoke["verl1-kills"]
    out = [f"machine: {', '.join(smoke.get('machine', []))}; GPU memory in use before the first attempt: "
           f"{phase['gpu_used_mib_before']:.0f} MiB (the smoke's own warm-start process)",
           "attempt  kill     processes  all gone after s  memory back after s  left after the watch  "
           "resumed after  trained  first step ends after s  of it step s"]
    steps = {int(r["step"]): float(r["seconds"]) for r in phase["metrics"]}
    for i, attempt in enumerate(phase["attempts"], 1):
        kill = attempt["kill"] or {}
        first = attempt["trained_steps"][0] if attempt["trained_steps"] else None
        out.append(f"{i:7}  {attempt['kind'] or '-':7}  {len(kill.get('processes_at_kill', [])) or '-':>9}  "
                   f"{kill.get('all_gone_after_s', '-') if kill else '-':>16}  "
                   f"{kill.get('memory_back_after_s', '-') if kill else '-':>19}  "
                   f"{', '.join(kill.get('left_at_end', [])) or '-':>20}  {attempt['resumed_after_step']:>13}  "
                   f"{','.join(map(str, attempt['trained_steps'])) or '-':>7}  {attempt['first_step_after_s'] or '-':>23}  "
                   f"{steps.get(first, float('nan')):12.1f}")
    if phase.get("skipped"):
        out.append(f"skipped (no time left in the call): {', '.join(phase['skipped'])}")
    out.append("checks: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in phase["checks"].items()))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("smoke_json", type=Path)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--date", required=True)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    smoke = json.loads(args.smoke_json.read_text())
    text = lines(smoke)
    print("\n".join(text))
    if args.out:
        args.out.write_text(json.dumps({"commit": args.commit, "date": args.date, "machine": smoke.get("machine"),
                                        "warm_start": smoke.get("warm-start"), "phase_seconds": smoke.get("phase_seconds"),
                                        "printout": text, "verl1-kills": smoke["verl1-kills"]}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
