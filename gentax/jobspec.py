"""Reading a job spec: the one argument a workflow job hands its verb (``--job SPEC``).

``SPEC`` is the spec's JSON text (what the rules write, ``gentax.study.jobs.encode``) or
``@FILE``, a JSON file holding it. Each verb's spec is one typed structure, a frozen dataclass of
``KINDS`` (``EvalJob``, ``RLJob``, ...): the plan builds every spec through it
(``gentax.study.jobs``) and the verb reads its spec back into it (``read(verb, spec)``), so what
the plan writes and what the verb reads cannot drift. Reading checks that the spec has every key
(but an optional one, a field with a default, which the spec holds only when it is not that
default) and no unknown one, then each value's type: a bad spec is one ``GentaxError`` naming the verb, the
key, the value and the type wanted, before any work starts. A job kind is a read-only mapping of
its keys as well (``spec[key]``), so the verbs' checks take a plan's spec (a dict) and a read one alike.

Below that: the views of a job's inputs its check runs on (``OnDisk``, ``Manifest``) and the
helpers the verbs' checks share (``file_problems``, ``model_problem``, ``require``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterable, Mapping

from gentax.errors import GentaxError, key_problems, number_hint

HELP = ("the job's whole spec, as the workflow resolved it (JSON text, or @FILE); the other options are then "
        "not read (`snakemake -n -p` prints every job's command with its spec)")


def add_argument(parser, *, required: bool = False) -> None:
    """``--job SPEC``, ``--check`` (run the job's check of its spec against its inputs, then exit)
    and ``--log FILE`` (the job's log, kept across attempts: ``gentax.joblog``; read by
    ``gentax.cli.main`` before the parser)."""
    parser.add_argument("--job", metavar="SPEC", default=None, required=required, help=HELP)
    parser.add_argument("--check", action="store_true", help=CHECK_HELP)
    parser.add_argument("--log", metavar="FILE", default=None, help=LOG_HELP)


def load(text: str) -> dict[str, Any]:
    """The spec of ``--job TEXT`` (inline JSON or @FILE)."""
    source = "--job"
    if text.startswith("@"):
        source = text[1:]
        try:
            text = Path(source).read_text()
        except OSError as exc:
            raise GentaxError(f"--job {source}: cannot read it ({exc.strerror})") from None
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GentaxError(f"{source}: not a JSON job spec ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(spec, dict):
        raise GentaxError(f"{source}: a job spec is a JSON object, got {type(spec).__name__}")
    return spec


# ---- the typed job specs ----------------------------------------------------------------------------
_WORDS = {int: ("an integer", "integers"), float: ("a number", "numbers"), str: ("a string", "strings"),
          bool: ("true or false", "booleans"), type(None): ("null", "nulls"), dict: ("an object", "objects")}


def _wanted(kind: Any, plural: bool = False) -> str:
    """A type annotation in JSON's words, as the error says what a key takes."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any:
        return "values" if plural else "any value"
    if typing.is_typeddict(kind):
        return ("objects" if plural else "an object") + f" with keys {', '.join(_hints(kind))}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_wanted(arm, plural) for arm in args)
    if origin is list:
        return ("lists" if plural else "a list") + (f" of {_wanted(args[0], plural=True)}" if args else "")
    return _WORDS[origin or kind][plural]


def _given(value: Any) -> str:
    """A value as the error shows it: its JSON text and what kind of JSON value it is."""
    kind = ("a boolean" if isinstance(value, bool) else "an integer" if isinstance(value, int)
            else "a number" if isinstance(value, float) else "a string" if isinstance(value, str)
            else "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) else "null")
    text = json.dumps(value, default=str)
    return "null" if value is None else f"{text if len(text) <= 60 else text[:57] + '...'} ({kind})"


def type_problem(value: Any, kind: Any, key: str) -> str | None:
    """What is wrong with ``value`` for the annotation ``kind`` at ``key`` (None: it fits): one line
    naming the key (``inputs[2]``, ``outputs.csv`` inside), the value and the type wanted. A bool is
    no number, and a float no whole number (8.0 is refused where 8 is wanted: the rule of every
    config section too, ``gentax.errors.number_hint``); a whole number is a number."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any:
        return None
    if origin in (typing.Union, types.UnionType):
        if any(type_problem(value, arm, key) is None for arm in args):
            return None
        # an object or list where one arm takes objects or lists: what is wrong inside it
        shaped = [arm for arm in args if (isinstance(value, dict) and (typing.is_typeddict(arm) or arm is dict
                                                                      or typing.get_origin(arm) is dict))
                  or (isinstance(value, list) and typing.get_origin(arm) is list)]
        if len(shaped) == 1:
            return type_problem(value, shaped[0], key)
        numeric = next((arm for arm in args if arm in (int, float)), None)
    else:
        numeric = kind if kind in (int, float) else None
        if typing.is_typeddict(kind):
            if not isinstance(value, dict):
                return _wrong(value, kind, key)
            declared = list(_hints(kind))
            problems = key_problems(value, [k for k in declared if k in kind.__required_keys__],
                                    [k for k in declared if k in kind.__optional_keys__])
            if problems:
                return f"key {key}: {problems}"
            hints = _hints(kind)
            return next((p for name, item in value.items() if (p := type_problem(item, hints[name], f"{key}.{name}"))),
                        None)
        if origin is list:
            if not isinstance(value, list):
                return _wrong(value, kind, key)
            return next((p for i, item in enumerate(value) if (p := type_problem(item, args[0], f"{key}[{i}]"))), None)
        if origin is dict or kind is dict:
            if not isinstance(value, dict):
                return _wrong(value, kind, key)
            inner = args[1] if args else Any
            return next((p for name, item in value.items() if (p := type_problem(item, inner, f"{key}.{name}"))), None)
        if kind is type(None) and value is None:
            return None
        if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return None
        if kind in (int, str, bool) and isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return None
    return _wrong(value, kind, key, hint=number_hint(value, integer=numeric is int) if numeric else "")


def _wrong(value: Any, kind: Any, key: str, hint: str = "") -> str:
    return f"key {key}: {_given(value)} is not {_wanted(kind)}{hint}"


@functools.lru_cache(maxsize=None)
def _hints(kind: type) -> dict[str, Any]:
    """A job kind's (or a nested part's) annotations, resolved once (a plan builds a spec per job)."""
    return typing.get_type_hints(kind)


# The nested parts of a spec: plain JSON objects in the spec (what the plan writes and the dumps hold),
# each key's type checked as a top-level key's is (``type_problem``).
class FillerArm(typing.TypedDict):
    """An evaluation's filler arm (``jobs.eval_checkpoint``): the thinking evaluation it matches
    (``reference``), how the filler is drawn (``source``, ``token``) and its length (None: matched)."""
    reference: str
    source: str
    token: str
    tokens: int | None


class Augmentation(typing.TypedDict):
    """A property log's state augmentation (``jobs.properties``)."""
    eps: int | float
    p: float
    kind: str


class ControlDomain(typing.TypedDict):
    """A control level's training-domain setting."""
    max_steps: int
    options: dict[str, Any]


class CheckpointKeep(typing.TypedDict):
    """What a training segment keeps of its run's checkpoints (``jobs.rl_segment``, config
    ``disk.keep_checkpoints: evaluated``; ``gentax.study.plan.checkpoint_keep``): the steps whose
    weights the plan's evaluations (or later jobs) read, and whether the newest checkpoint keeps its
    resume state (a later segment of the run is planned)."""
    steps: list[int]
    resume_state: bool


class ControlLevelSpec(typing.TypedDict):
    """One level of the controls' table (``gentax.study.controls.ControlLevel`` and its runs' label)."""
    control: str
    level: str
    order: int
    init: str
    train_domain: str
    variant: str
    domain: ControlDomain
    augmentation: dict[str, Any]
    run_label: str


class JobKind:
    """The base of every job kind (a frozen dataclass of its keys, below). Building one checks every
    value's type (one GentaxError naming the verb, the key, the value and the type wanted); its keys
    read as a mapping's do (``spec["episodes"]``, ``spec.get("filler")``: the checks read a plan's
    dict alike; a spec has a key ``keys``, so it is no ``Mapping``), and ``to_dict`` is the spec as
    the rule's param holds it."""

    verb: ClassVar[str]

    def __post_init__(self):
        hints = _hints(type(self))
        for field in dataclasses.fields(self):
            problem = type_problem(getattr(self, field.name), hints[field.name], field.name)
            if problem:
                raise GentaxError(f"gentax {self.verb} --job: {problem}")

    @classmethod
    def field_names(cls) -> list[str]:
        return [field.name for field in dataclasses.fields(cls)]

    @classmethod
    def optional_names(cls) -> list[str]:
        """Keys a spec may leave out: those with a default, which ``to_dict`` leaves out at it (a key
        added for one setting leaves every other spec's text, and so its job, as it was)."""
        return [field.name for field in dataclasses.fields(cls) if field.default is not dataclasses.MISSING]

    @classmethod
    def read(cls, spec: Mapping[str, Any]):
        """The spec as this kind: missing or unknown keys, then each value's type (one GentaxError)."""
        optional = cls.optional_names()
        problems = key_problems(spec, [name for name in cls.field_names() if name not in optional], optional)
        if problems:
            raise GentaxError(f"gentax {cls.verb} --job: {problems}")
        return cls(**spec)

    def to_dict(self) -> dict[str, Any]:
        defaults = {field.name: field.default for field in dataclasses.fields(self)}
        return {name: getattr(self, name) for name in self.field_names()
                if name not in self.optional_names() or getattr(self, name) != defaults[name]}

    def __getitem__(self, key: str) -> Any:
        if key not in self.field_names():
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self.field_names() else default

    def __contains__(self, key: str) -> bool:
        return key in self.field_names()


@dataclass(frozen=True)
class TasksJob(JobKind):
    """``gentax tasks``: a domain's held-out task manifest (``gentax.study.jobs.tasks``)."""
    verb: ClassVar[str] = "tasks"
    domain: str
    episodes: int
    split: str
    max_steps: int | None
    options: dict[str, Any]
    out: str


@dataclass(frozen=True)
class EmbeddedModelJob(JobKind):
    """``gentax model embedded``: the embedded model as an HF folder (``jobs.embedded_model``)."""
    verb: ClassVar[str] = "model embedded"
    out: str
    dtype: str


@dataclass(frozen=True)
class RLJob(JobKind):
    """``gentax train rl``: one segment of one RL run (``jobs.rl_segment``); ``rl`` is the resolved RL
    section (``gentax.train.config.rl_config`` checks its keys), ``run_spec`` the run
    (``gentax.runspec.RunSpec.from_dict``)."""
    verb: ClassVar[str] = "train rl"
    engine: str
    init: str
    out: str
    start: int
    end: int
    rl: dict[str, Any]
    run_spec: dict[str, Any]
    tracking: dict[str, Any]
    manifest: str
    tasks: str | None
    dtype: str
    keep: CheckpointKeep | None = None  # None (left out of the spec): every checkpoint stays


@dataclass(frozen=True)
class SFTDataJob(JobKind):
    """``gentax sft build-data``: an SFT dataset (``jobs.sft_data``); ``sft`` is the resolved data
    part of the SFT section (``gentax.train.sft_config.sft_data_config`` checks its keys)."""
    verb: ClassVar[str] = "sft build-data"
    preset: str
    sft: dict[str, Any]
    domains: dict[str, dict[str, Any]]
    v1: str | None
    out: str
    dtype: str


@dataclass(frozen=True)
class SFTTrainJob(JobKind):
    """``gentax sft train``: LlamaFactory on a dataset folder (``jobs.sft_train``); ``sft`` is the
    resolved training part of the SFT section (``gentax.train.sft_config.sft_train_config``)."""
    verb: ClassVar[str] = "sft train"
    preset: str
    sft: dict[str, Any]
    data: str
    init: str
    out: str
    tracking: dict[str, Any]
    dtype: str


@dataclass(frozen=True)
class _RolloutJob(JobKind):
    """What ``gentax eval`` and ``gentax properties`` both receive (``jobs._rollout``); the step
    limit is each one's own (an evaluation's ``max_steps``, a property log's ``t_max``)."""
    model: str | None
    domain: str
    split: str
    tasks: str
    episodes: int
    batch_size: int | None
    temperature: float
    top_p: float
    max_new_tokens: int
    history_length: int
    generator: str
    dtype: str
    seed: int
    options: dict[str, Any]
    think: str
    errors_as_losses: bool
    out: str


class EvalDomain(typing.TypedDict):
    """One domain of an evaluation job (``EvalJob.domains``): the keys of its rollout that differ
    between domains; ``filler`` the filler arm's settings (None: no filler)."""
    domain: str
    tasks: str
    episodes: int
    batch_size: int | None
    max_steps: int
    options: dict[str, Any]
    out: str
    filler: FillerArm | None


#: ``gentax eval``: one checkpoint on each of its eval domains in one process (``jobs.eval_checkpoint``):
#: a rollout's keys (``_RolloutJob``, in their order) but those that differ between domains, which
#: move into ``domains`` (``EvalDomain``, with the domain's step limit ``max_steps``): the model and
#: the sampling once, then per domain what differs. ``evaluations(spec)``: each domain's whole
#: settings, a one-domain evaluation's keys.
EvalJob = dataclasses.make_dataclass(
    "EvalJob", [(field.name, field.type) for field in dataclasses.fields(_RolloutJob)
                if field.name not in EvalDomain.__annotations__] + [("domains", "list[EvalDomain]")],
    bases=(JobKind,), frozen=True, namespace={"verb": "eval", "__module__": __name__})


def evaluations(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An ``eval`` job's spec (a plan's dict or a read ``EvalJob``) as one settings dict per domain,
    in the spec's order: its shared keys with the domain's (``EvalDomain``)."""
    shared = {key: spec[key] for key in EvalJob.field_names() if key != "domains"}
    return [{**shared, **entry} for entry in spec["domains"]]


@dataclass(frozen=True)
class PropertiesJob(_RolloutJob):
    """``gentax properties``: one property log (``jobs.properties``); ``t_max`` is its step limit
    (T_max: an episode plays at most t_max steps, a failed one counts t_max)."""
    verb: ClassVar[str] = "properties"
    t_max: int
    augmentation: Augmentation | None


@dataclass(frozen=True)
class SummaryJob(JobKind):
    """``gentax summarize``: a run's evaluations as long-format rows (``jobs.summary``)."""
    verb: ClassVar[str] = "summarize"
    inputs: list[str]
    keys: dict[str, Any]
    out: str


@dataclass(frozen=True)
class TableJob(JobKind):
    """``gentax table``: one table from the summaries it reads (``jobs.artifact``)."""
    verb: ClassVar[str] = "table"
    name: str
    summaries: list[str]
    properties: str | None
    controls: str | None
    outputs: dict[str, str]
    provenance: str
    window: list[int]
    bootstrap: int
    seed: int
    error_mark_pct: float
    test_level: float
    seed_sd: dict[str, float]
    sft_mix: list[str]
    init_domains: dict[str, list[str]]
    augmented: dict[str, list[str]]


@dataclass(frozen=True)
class FigureJob(TableJob):
    """``gentax figure``: one figure, the keys of a table's spec."""
    verb: ClassVar[str] = "figure"


@dataclass(frozen=True)
class PropertiesTableJob(JobKind):
    """``gentax properties-table``: one row per domain from the property logs (``jobs.properties_table``)."""
    verb: ClassVar[str] = "properties-table"
    inputs: list[str]
    out: str


@dataclass(frozen=True)
class ControlsTableJob(JobKind):
    """``gentax controls-properties-table``: one row per level of the controls (``jobs.controls_properties_table``)."""
    verb: ClassVar[str] = "controls-properties-table"
    levels: list[ControlLevelSpec]
    inputs: list[str]
    out: str


#: verb -> its job kind: the one declaration of what its spec holds
KINDS: dict[str, type[JobKind]] = {kind.verb: kind for kind in (
    TasksJob, EmbeddedModelJob, RLJob, SFTDataJob, SFTTrainJob, EvalJob, PropertiesJob, SummaryJob, TableJob,
    FigureJob, PropertiesTableJob, ControlsTableJob)}


def read(verb: str, spec: str | Mapping[str, Any]):
    """The spec of job ``verb`` (``--job`` text, @FILE or a mapping) as its job kind (``KINDS``)."""
    return KINDS[verb].read(load(spec) if isinstance(spec, str) else spec)


def build(verb: str, **values: Any) -> dict[str, Any]:
    """A spec as the plan writes it (``gentax.study.jobs``): built through the verb's job kind, so a
    key the verb does not read, or a value of the wrong type, stops the plan."""
    return KINDS[verb](**values).to_dict()


# ---- a job's check of its spec against its inputs ------------------------------------------------
# Each verb owns its check, ``<verb>_problems(spec, inputs) -> list[str]`` ("key: what disagrees,
# with the file and the fix"; [] when the job would start), run on one of two views of its inputs:
# ``OnDisk`` here (the job itself, before any work; ``--check`` stops after it) and the plan's
# ``gentax.study.checks.Planned`` (every job of a plan, when Snakemake builds it).
LOG_HELP = ("append this attempt's output to FILE under a header line (attempt, host, pid, time); FILE keeps "
            "every attempt, also where Snakemake removes it before a retry (gentax/joblog.py)")
CHECK_HELP = "check the spec against its inputs (task manifest, model folder, input files) and exit before any work"


@dataclass(frozen=True)
class Manifest:
    """What a job reads of a task manifest (``gentax.domains.tasks.task_manifest``)."""
    domain: str
    split: str
    size: int


class OnDisk:
    """A job's inputs as they are on disk."""

    def manifest(self, path: str) -> Manifest | None:
        """The manifest at ``path``; None when there is none; a damaged one is a GentaxError."""
        file = Path(path)
        if not file.is_file():
            return None
        try:
            data = json.loads(file.read_text())
            return Manifest(str(data["domain"]), str(data["split"]), len(data["seeds"]))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise GentaxError(f"{path}: not a task manifest ({type(exc).__name__}: {exc}); rebuild it "
                              f"(snakemake --forcerun tasks)") from None

    def model(self, path: str) -> bool:
        """An HF model folder is there."""
        return (Path(path) / "config.json").is_file()

    def file(self, path: str) -> bool:
        return Path(path).is_file()


def file_problems(spec: Mapping[str, Any], inputs, *keys: str) -> list[str]:
    """Every file the spec's ``keys`` name (a path, a list of paths, or None) is there."""
    out = []
    for key in keys:
        value = spec[key]
        for path in [value] if isinstance(value, str) else (value or []):
            if not inputs.file(path):
                out.append(f"{key}: {path} is not there (its job has not run: snakemake {path})")
    return out


def model_problem(key: str, path: str, inputs) -> list[str]:
    """[] when ``path`` is a model folder in ``inputs``, else the one problem naming ``key``."""
    if inputs.model(path):
        return []
    return [f"{key}: {path} is no model folder (no config.json there) and no job of the plan writes one there"]


def require(verb: str, found: list[str]) -> None:
    """A job's problems (its check's list) as one GentaxError of one line; nothing if none."""
    if found:
        raise GentaxError(f"gentax {verb} --job: " + "; ".join(found))


def section(verb: str, key: str, load, value: Any):
    """``load(value)`` for the resolved config section at spec key ``key`` (``rl``, ``sft``): its
    errors worded as every spec key's are, ``gentax VERB --job: key rl.group_size: ...``."""
    from gentax.errors import ConfigError, KeyProblem

    try:
        return load(value)
    except KeyProblem as exc:
        raise GentaxError(f"gentax {verb} --job: key {'.'.join([key, *map(str, exc.key)])}: {exc.problem}") from None
    except ConfigError as exc:
        raise GentaxError(f"gentax {verb} --job: key {key}: {exc}") from None


def checked(verb: str) -> int:
    """What ``--check`` prints once the check passed: the job would start."""
    print(f"gentax {verb} --check: the spec agrees with its inputs")
    return 0
