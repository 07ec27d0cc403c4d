"""``gentax sft``: build the SFT dataset and fine-tune with LlamaFactory.

    gentax sft build-data --job SPEC | gentax sft train --job SPEC     (workflow jobs: gentax.study.jobs)
    gentax sft build-data [--preset v2|embedded-base] [--config CONFIG] [--v1 V1_DIR] --out DATA_DIR [--seed N]
                          [--study-preset paper|embedded|gpu1] [--study-config FILE ...]
    gentax sft train      [--preset v2|embedded-base] [--config CONFIG] --data DATA_DIR --init MODEL_DIR --out OUT_DIR
                          [--study-preset paper|embedded|gpu1] [--study-config FILE ...]

``--preset`` names the SFT stage: ``v2`` (default) is Ckpt V2's warmup (SciWorld expert :
ALFWorld-V1 : WebShop-V1 = 19 : 3 : 1, needs ``--v1``); ``embedded-base`` is the embedded model's
warm start (expert demonstrations of every domain; no ``--v1``). The section a command line runs is
the study's section of that stage (``gentax.study.plan.study_sft``: what the workflow's job of the
stage receives) with ``CONFIG`` laid over it key by key; the study is ``--study-preset`` (default
paper: config/config.yaml; the SFT stage holds ``--preset``, so the study's preset is spelled apart) with
``--study-config`` files laid over it. ``CONFIG`` is a YAML file read by
``gentax.train.sft_config.read_sft_file``: the SFT section (``sft:``, or ``embedded_base:`` for
that stage, or the whole file), optional ``domains:`` (``{name: {max_steps, options}}``, laid over
the study's) and ``seed:``. ``train`` runs ``llamafactory-cli`` from the SFT environment
(scripts/setup.sh) and writes an HF folder usable by eval and RL. Both outputs are written
atomically.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from gentax import jobspec, studyargs
from gentax.errors import GentaxError
from gentax.train.sft_config import PRESETS


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
    jobspec.add_argument(parser)
    parser.add_argument("--preset", choices=PRESETS, default="v2",
                        help="the SFT stage: v2 (Ckpt V2's warmup) | embedded-base (the embedded model's warm start)")
    studyargs.add_arguments(parser, "sft", preset_option="--study-preset")
    parser.add_argument("--config", help="YAML laid over the study's SFT section of the stage (its keys: "
                                         "config/config.yaml inits.v2.sft and gentax/train/sft_defaults.yaml)")


def sft_problems(verb: str, spec: dict, inputs) -> list[str]:
    """The check of an ``sft build-data`` / ``sft train`` job spec against its inputs
    (``gentax.jobspec``'s contract): V1's model (build-data, where the mix has V1 trajectories), the
    initial model and the dataset folder (train)."""
    if verb == "build-data":
        return jobspec.model_problem("v1", spec["v1"], inputs) if spec["v1"] else []
    out = jobspec.model_problem("init", spec["init"], inputs)
    if not inputs.file(f"{spec['data']}/dataset_info.json"):
        out.append(f"data: {spec['data']} is no dataset folder (no dataset_info.json there: its job, "
                   f"gentax sft build-data, has not run)")
    return out


def _job(text: str, verb: str):
    """(spec, its SFT part) of a job spec (``jobspec.SFTDataJob`` / ``SFTTrainJob``): the verb's
    resolved part (``SFTData`` / ``SFTTrain``) taken as it is, after its check."""
    from gentax.train.sft_config import sft_data_config, sft_train_config

    spec = jobspec.read(f"sft {verb}", text)
    part = sft_data_config if verb == "build-data" else sft_train_config
    cfg = jobspec.section(f"sft {verb}", "sft", lambda section: part(section, spec["preset"]), spec["sft"])
    jobspec.require(f"sft {verb}", sft_problems(verb, spec, jobspec.OnDisk()))
    return spec, cfg


def _required(args, verb: str, *names: str) -> None:
    missing = [f"--{n}" for n in names if getattr(args, n) is None]
    if missing:
        raise GentaxError(f"gentax sft {verb}: give {', '.join(missing)} (or --job SPEC)")


def _provenance_beside(out, spec: dict, model) -> None:
    from gentax import io as gio
    from gentax import provenance

    gio.write_json(provenance.beside(out), provenance.job_record(spec.to_dict(), spec["dtype"], model=model))


def _load(args):
    """(the resolved SFT section, the domains' settings) of a command line: the study's section of
    the stage (``args.study_defaults()``) with ``--config``'s section, seed and domains laid over,
    then ``--seed``."""
    from gentax.errors import KeyProblem
    from gentax.io import deep_merge
    from gentax.train.sft_config import load_sft_config, read_sft_file

    study = args.study_defaults()  # the study's SFT sections and domains (gentax.study.config.command_line_defaults)
    section, domains, seed = read_sft_file(args.config, args.preset) if args.config else ({}, {}, None)
    section = {**study["stages"][args.preset], **section}
    if seed is not None:
        section["seed"] = seed
    if args.seed is not None:
        section["seed"] = args.seed
    try:
        cfg = load_sft_config(section)
    except KeyProblem as exc:  # the file that set the key (the study's section is validated already), else --seed
        raise GentaxError(f"{args.config}: {exc}" if args.config else str(exc)) from None
    domains = deep_merge(study["domains"], domains)
    return cfg, {domain: domains[domain] for domain in cfg.active_domains() if domain in domains}


def run_build_data(args) -> int:
    from gentax import io as gio

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.check and not args.job:
        raise GentaxError("gentax sft build-data --check checks a job spec: give --job SPEC")
    if args.job:
        spec, cfg = _job(args.job, "build-data")
        if args.check:
            return jobspec.checked("sft build-data")
        out, v1, domains, progress = spec["out"], spec["v1"], spec["domains"], False
    else:
        _required(args, "build-data", "out")
        spec, (section, domains) = None, _load(args)
        cfg, out, v1, progress = section.data(), args.out, args.v1, not args.quiet
    with gio.output_lock(out, "SFT dataset"):  # one writer per dataset, refused before any model loads
        from gentax.train.sft_data import build_sft_data

        manifest = build_sft_data(cfg, out, v1_model=v1, domains=domains, progress=progress)
        if spec is not None:
            _provenance_beside(out, spec, v1)
    summary = {
        domain: {key: info[key] for key in ("count", "source", "episodes", "episode_success", "usable_pairs")}
        for domain, info in manifest["domains"].items()
    }
    print(json.dumps({"out": str(out), "examples": manifest["examples"], "domains": summary}, indent=2))
    return 0


def run_train(args) -> int:
    from gentax import io as gio
    from gentax.train.tracking import read_section

    if args.check and not args.job:
        raise GentaxError("gentax sft train --check checks a job spec: give --job SPEC")
    if args.job:
        spec, cfg = _job(args.job, "train")
        if args.check:
            return jobspec.checked("sft train")
        data, init, out, tracking = spec["data"], spec["init"], spec["out"], spec["tracking"]
    else:
        _required(args, "train", "data", "init", "out")
        spec, (section, _) = None, _load(args)
        cfg, data, init, out, tracking = section.train(), args.data, args.init, args.out, read_section(args.config)
    # the output's lock before the trainer's checks (the tokenizer, every example's length: seconds to
    # minutes): a second job on the output is refused at once; train_sft takes it again
    with gio.output_lock(Path(out).resolve(), "SFT output"):
        from gentax.train.sft import train_sft

        out = train_sft(cfg, data, init, out, tracking=tracking)
        if spec is not None:
            _provenance_beside(out, spec, init)
    summary = json.loads((out / "gentax_sft.json").read_text())
    print(json.dumps({key: summary[key] for key in ("init_model", "steps", "first_loss", "final_loss")}
                     | {"out": str(out)}, indent=2))
    return 0
