"""A job's spec: the one argument a workflow job hands its verb (``gentax VERB --job SPEC``, SPEC
the JSON text or ``@FILE``).

Each verb's spec is one frozen dataclass on ``JobKind``, declared beside the verb
(``gentax.study.checks.KINDS`` lists them): the plan builds each spec through it and the verb reads
it back into it (``Kind.read``), so the two cannot drift. The read checks keys and types only, nested
parts included (a bad spec is one GentaxError naming the verb, the key, the value and the type
wanted); what the values mean was checked when the plan built the spec. ``Kind.problems(spec,
inputs)`` is a kind's check against its inputs: the job runs it on ``OnDisk`` before any work
(``--check`` stops after it), the plan on what its jobs will write.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from pathlib import Path
from typing import Any, ClassVar, Mapping

from gentax.errors import GentaxError, key_problems, number_hint

HELP = ("the job's whole spec, as the workflow resolved it (JSON text, or @FILE); the other options are then "
        "not read (`snakemake -n -p` prints every job's command with its spec)")
CHECK_HELP = "check the spec against its inputs (task manifest, model folder, input files) and exit before any work"
LOG_HELP = ("append this attempt's output to FILE under a header line (attempt, host, pid, time); FILE keeps "
            "every attempt, also where Snakemake removes it before a retry (gentax/joblog.py)")


def add_arguments(parser, *, required: bool = False, study: str | None = None, preset_option: str = "--preset") -> None:
    """``--job SPEC``, ``--check`` and ``--log FILE`` (read by ``gentax.cli.main`` before the parser:
    ``gentax.joblog``); with ``study``, ``add_study_arguments`` too."""
    parser.add_argument("--job", metavar="SPEC", default=None, required=required, help=HELP)
    parser.add_argument("--check", action="store_true", help=CHECK_HELP)
    parser.add_argument("--log", metavar="FILE", default=None, help=LOG_HELP)
    if study:
        add_study_arguments(parser, study, preset_option)


def add_study_arguments(parser, command: str, preset_option: str = "--preset") -> None:
    """The options that pick the study ``command``'s other options default to: ``preset_option`` and
    ``--study-config``. ``gentax.cli.main`` then gives the parsed arguments ``study_defaults()``: the
    command's defaults from that study config, read at the first call only (a command given every
    value, or a job spec, reads none)."""
    parser.add_argument(preset_option, dest="study_preset", default=None,
                        help="the study whose values the options left out default to: paper (config/config.yaml "
                             "as it is; the default), embedded, gpu1 (config/resolved/<preset>.yaml lists them)")
    parser.add_argument("--study-config", action="append", default=[], metavar="FILE",
                        help="a config file laid over the preset's study, as `snakemake --configfile` (repeatable)")
    parser.set_defaults(study_command=command)


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


def plain(obj: Any) -> Any:
    """JSON's types of a spec's values: a typed part's ``to_dict()``; Snakemake's Namedlist and dict
    subclasses as lists and dicts."""
    if hasattr(obj, "to_dict"):
        return plain(obj.to_dict())
    if isinstance(obj, Mapping):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


def encode(spec: Any) -> str:
    """The spec as the rule's ``job`` param: compact, sorted JSON (equal specs are equal text)."""
    return json.dumps(plain(spec), sort_keys=True, separators=(",", ":"))


# ---- types ------------------------------------------------------------------------------------------
_WORDS = {int: ("an integer", "integers"), float: ("a number", "numbers"), str: ("a string", "strings"),
          bool: ("true or false", "booleans"), type(None): ("null", "nulls"), dict: ("an object", "objects")}


def _is_part(kind: Any) -> bool:
    """A dataclass a spec holds as a JSON object (the RL section, a run spec)."""
    return isinstance(kind, type) and dataclasses.is_dataclass(kind)


def _wanted(kind: Any, plural: bool = False) -> str:
    """A type annotation in JSON's words, as the error says what a key takes."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any:
        return "values" if plural else "any value"
    if typing.is_typeddict(kind):
        return ("objects" if plural else "an object") + f" with keys {', '.join(_hints(kind))}"
    if _is_part(kind):
        return ("objects" if plural else "an object") + f" of {kind.__name__}'s keys"
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
    no number and a float no whole number (8.0 is refused where 8 is wanted, as in every config
    section: ``gentax.errors.number_hint``); a whole number is a number."""
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
        if _is_part(kind):
            return None if isinstance(value, kind) else _wrong(value, kind, key)
        if typing.is_typeddict(kind):
            if not isinstance(value, dict):
                return _wrong(value, kind, key)
            return _fields_problem(value, _hints(kind), kind.__required_keys__, key)
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


def _fields_problem(value: Mapping[str, Any], hints: dict[str, Any], required, key: str) -> str | None:
    """The keys of an object against its declared ``hints`` (those in ``required`` must be there),
    then each value's type."""
    problems = key_problems(value, [k for k in hints if k in required], [k for k in hints if k not in required])
    if problems:
        return f"key {key}: {problems}"
    return next((p for name, item in value.items() if (p := type_problem(item, hints[name], f"{key}.{name}"))), None)


def _wrong(value: Any, kind: Any, key: str, hint: str = "") -> str:
    return f"key {key}: {_given(value)} is not {_wanted(kind)}{hint}"


@functools.lru_cache(maxsize=None)
def _hints(kind: type) -> dict[str, Any]:
    """A job kind's (or a nested part's) annotations, resolved once (a plan builds a spec per job)."""
    return typing.get_type_hints(kind)


def _required(kind: type) -> set[str]:
    return {f.name for f in dataclasses.fields(kind)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}


def read_part(kind: type, value: Mapping[str, Any], key: str):
    """The dataclass ``kind`` from its JSON object ``value`` at spec key ``key``: its own ``from_dict``
    where it has one, else its fields' keys and types (GentaxError "key KEY...: ...", no prefix)."""
    if hasattr(kind, "from_dict"):
        try:
            return kind.from_dict(value)
        except GentaxError as exc:
            raise GentaxError(f"key {key}: {exc}") from None
    problem = _fields_problem(value, {f.name: _hints(kind)[f.name] for f in dataclasses.fields(kind)},
                              _required(kind), key)
    if problem:
        raise GentaxError(problem)
    return kind(**value)


class JobKind:
    """The base of every job kind (a frozen dataclass of its keys). Building one checks every value's
    type and builds its typed parts (one GentaxError naming the verb, the key, the value and the type
    wanted); its keys read as a mapping's do (``spec["episodes"]``, ``spec.get("filler")``: a kind's
    check reads a plan's dict alike; a spec has a key ``keys``, so it is no ``Mapping``);
    ``to_dict`` is the spec as the rule's param holds it."""

    verb: ClassVar[str]

    def __post_init__(self):
        hints = _hints(type(self))
        for field in dataclasses.fields(self):
            value, kind = getattr(self, field.name), hints[field.name]
            try:
                if _is_part(kind) and isinstance(value, Mapping):
                    object.__setattr__(self, field.name, read_part(kind, value, field.name))
                    continue
            except GentaxError as exc:
                raise GentaxError(f"gentax {self.verb} --job: {exc}") from None
            problem = type_problem(value, kind, field.name)
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
    def read(cls, spec: str | Mapping[str, Any]):
        """``--job`` text (@FILE) or a mapping as this kind: missing or unknown keys, then each value's type."""
        spec = load(spec) if isinstance(spec, str) else spec
        optional = cls.optional_names()
        problems = key_problems(spec, [name for name in cls.field_names() if name not in optional], optional)
        if problems:
            raise GentaxError(f"gentax {cls.verb} --job: {problems}")
        return cls(**spec)

    @classmethod
    def build(cls, **values: Any) -> dict[str, Any]:
        """A spec as the plan writes it: built through this kind (a key it does not read, or a value of
        the wrong type, stops the plan), as plain JSON values."""
        return cls(**values).to_dict()

    @classmethod
    def problems(cls, spec, inputs) -> list[str]:
        """What keeps the job on ``spec`` from starting on ``inputs`` (``OnDisk``, or the plan's view);
        [] when nothing does. Each kind with inputs declares its own."""
        return []

    def to_dict(self) -> dict[str, Any]:
        defaults = {field.name: field.default for field in dataclasses.fields(self)}
        return {name: plain(getattr(self, name)) for name in self.field_names()
                if name not in self.optional_names() or getattr(self, name) != defaults[name]}

    def __getitem__(self, key: str) -> Any:
        if key not in self.field_names():
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self.field_names() else default

    def __contains__(self, key: str) -> bool:
        return key in self.field_names()


# ---- a job's check of its spec against its inputs ------------------------------------------------
@dataclasses.dataclass(frozen=True)
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


def file_problems(spec, inputs, *keys: str) -> list[str]:
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


def take(kind: type[JobKind], args):
    """The spec a command was given: ``args.job`` read as ``kind`` and checked against its inputs on
    disk (one GentaxError naming every problem), None under ``--check`` once that passed (printed);
    None too without ``--job`` (a command line), where ``--check`` is an error."""
    if not args.job:
        if args.check:
            raise GentaxError(f"gentax {kind.verb} --check checks a job spec: give --job SPEC")
        return None
    spec = kind.read(args.job)
    found = kind.problems(spec, OnDisk())
    if found:
        raise GentaxError(f"gentax {kind.verb} --job: " + "; ".join(found))
    if args.check:
        print(f"gentax {kind.verb} --check: the spec agrees with its inputs")
        return None
    return spec
