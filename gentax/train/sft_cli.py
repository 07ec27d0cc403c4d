"""``gentax sft``: build the SFT dataset and fine-tune with LlamaFactory (docs/sft.md).

    gentax sft build-data [--preset v2|embedded-base] [--config CONFIG] [--v1 V1_DIR] --out DATA_DIR [--seed N]
    gentax sft train      [--preset v2|embedded-base] [--config CONFIG] --data DATA_DIR --init MODEL_DIR --out OUT_DIR
                          [--study-preset paper|embedded|gpu1] [--study-config FILE ...]    (both)

A command line runs the study's section of the stage ``--preset`` with ``CONFIG`` laid over it key
by key: ``spec_from_args`` builds the job kind a workflow job reads, and both run the same code.
"""

from __future__ import annotations

import json

from gentax import jobspec
from gentax.errors import GentaxError, KeyProblem
from gentax.io import deep_merge
from gentax.train.jobs import SFTDataJob, SFTTrainJob
from gentax.train.sft_config import PRESETS, load_sft_config, read_sft_file
from gentax.train.tracking import read_section


def register(subparsers) -> None:
    sft = subparsers.add_parser("sft", help="SFT warmup (Ckpt V2) / embedded warm start, with LlamaFactory")
    sub = sft.add_subparsers(dest="sft_command", required=True, metavar="SUBCOMMAND")

    build = sub.add_parser("build-data", help="collect state-action pairs and write a LlamaFactory dataset")
    _arguments(build)
    build.add_argument("--v1", default=None, help="HF folder of the model whose trajectories enter the mix (V1)")
    build.add_argument("--out", help="dataset folder to write")
    build.add_argument("--seed", type=int, default=None, help="the seed (default: --config's seed:, else the study's seed)")
    build.add_argument("--quiet", action="store_true", help="no progress bars")
    build.set_defaults(func=run_build_data)

    train = sub.add_parser("train", help="llamafactory-cli train on a dataset folder; writes an HF folder")
    _arguments(train)
    train.add_argument("--data", help="dataset folder from `gentax sft build-data`")
    train.add_argument("--init", help="HF folder of the model to fine-tune (V1 / the embedded model)")
    train.add_argument("--out", help="HF folder to write")
    train.add_argument("--seed", type=int, default=None, help="the seed (default: --config's seed:, else the study's seed)")
    train.set_defaults(func=run_train)


def _arguments(parser) -> None:
    """What both verbs take: --job, the stage, the study their defaults come from, the file laid over it."""
    parser.add_argument("--preset", choices=PRESETS, default="v2",
                        help="the SFT stage: v2 (Ckpt V2's warmup) | embedded-base (the embedded model's warm start)")
    jobspec.add_arguments(parser, study="sft", preset_option="--study-preset")
    parser.add_argument("--config", help="YAML laid over the study's SFT section of the stage (its keys: "
                                         "config/config.yaml inits.v2.sft and gentax/train/sft_defaults.yaml)")


def spec_from_args(args, verb: str) -> SFTDataJob | SFTTrainJob:
    """The spec a command line makes: the study's section of the stage (``args.study_defaults()``)
    with ``--config``'s section, seed and domains laid over, then ``--seed``; the verb's part of it."""
    needed = ("out",) if verb == "build-data" else ("data", "init", "out")
    missing = [f"--{n}" for n in needed if getattr(args, n) is None]
    if missing:
        raise GentaxError(f"gentax sft {verb}: give {', '.join(missing)} (or --job SPEC)")
    study = args.study_defaults()  # the study's SFT sections and domains
    section, domains, seed = read_sft_file(args.config, args.preset) if args.config else ({}, {}, None)
    section = {**study["stages"][args.preset], **section}
    for given in (seed, args.seed):
        if given is not None:
            section["seed"] = given
    try:
        cfg = load_sft_config(section)
    except KeyProblem as exc:  # the file that set the key (the study's section is validated already), else --seed
        raise GentaxError(f"{args.config}: {exc}" if args.config else str(exc)) from None
    if verb == "train":
        return SFTTrainJob(preset=args.preset, sft=cfg.train(), data=args.data, init=args.init, out=args.out,
                           tracking=read_section(args.config) or {}, dtype="auto")
    domains = deep_merge(study["domains"], domains)
    return SFTDataJob(preset=args.preset, sft=cfg.data(), v1=args.v1, out=args.out, dtype="auto",
                      domains={d: domains[d] for d in cfg.active_domains() if d in domains})


def run_build_data(args) -> int:
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    job = jobspec.take(SFTDataJob, args)
    if args.check:
        return 0
    spec = job or spec_from_args(args, "build-data")
    manifest = spec.run(progress=job is None and not args.quiet)
    summary = {
        domain: {key: info[key] for key in ("count", "source", "episodes", "episode_success", "usable_pairs")}
        for domain, info in manifest["domains"].items()
    }
    print(json.dumps({"out": str(spec.out), "examples": manifest["examples"], "domains": summary}, indent=2))
    return 0


def run_train(args) -> int:
    spec = jobspec.take(SFTTrainJob, args)
    if args.check:
        return 0
    out = (spec or spec_from_args(args, "train")).run()
    summary = json.loads((out / "gentax_sft.json").read_text())
    print(json.dumps({key: summary[key] for key in ("init_model", "steps", "first_loss", "final_loss")}
                     | {"out": str(out)}, indent=2))
    return 0
