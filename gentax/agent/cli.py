"""``gentax augment preview``: one real observation before and after augmentation.

Takes the first observation of task seed S of a domain and augments it as the collector would a
trajectory with seed S at step 0 (``TrajectoryAugmenter`` with p = 1, the task's goal passed).
``--json`` writes ``{"original", "augmented", "inserted": [...]}``; ``--kind`` defaults to the
study's ``augmentation.kind``. docs/agent.md "State Information Augmentation".
"""

from __future__ import annotations

import argparse
import json
import sys

from gentax import jobspec
from gentax.domains import DOMAINS, make
from gentax.domains.augment import KINDS, TrajectoryAugmenter


def register(subparsers) -> None:
    augment = subparsers.add_parser("augment", help="State Information Augmentation tools")
    sub = augment.add_subparsers(dest="augment_command", required=True, metavar="SUBCOMMAND")
    preview = sub.add_parser("preview", help="show one real observation before and after augmentation")
    preview.add_argument("--domain", required=True, choices=DOMAINS)
    preview.add_argument("--eps", required=True, type=int, help="token budget (floor(eps / size) snippets)")
    preview.add_argument("--kind", default=None, choices=KINDS, help="default: the study's augmentation.kind")
    jobspec.add_study_arguments(preview, "augment preview")
    preview.add_argument("--seed", type=int, default=0, help="task seed (also the trajectory seed)")
    preview.add_argument("--split", default="train", choices=("train", "eval"))
    preview.add_argument("--json", action="store_true", help="write JSON to stdout")
    preview.set_defaults(func=_preview)


def _preview(args: argparse.Namespace) -> int:
    kind = args.study_defaults()["kind"] if args.kind is None else args.kind
    augmenter = TrajectoryAugmenter(args.domain, args.eps, 1.0, kind, seed=args.seed)
    with make(args.domain, split=args.split, seed=args.seed) as env:
        obs = env.reset(env.task(args.seed))
    result = augmenter(obs.text, 0, goal=obs.goal)
    if args.json:
        json.dump({"original": obs.text, "augmented": result.text, "inserted": result.inserted}, sys.stdout)
        sys.stdout.write("\n")
        return 0
    print(f"=== original ({len(obs.text)} characters) ===\n{obs.text}")
    print(f"=== augmented ({len(result.text)} characters; {len(result.inserted)} snippets) ===\n{result.text}")
    print("=== inserted ===")
    for snippet in result.inserted:
        print(snippet)
    return 0
