"""A job spec holds each setting once, and only what its job reads (issue #41 item 1).

For every job of the embedded and the paper plan, the spec its printed command hands its verb
(``snakemake -n -p``: tests/snakemake_plans.py ``planned_jobs``):

**Every key is read** (``unread_keys``). The spec's keys are its verb's job kind's
(``gentax.study.checks.KINDS``, the dataclass the verb reads it back into, nested typed parts
included: each resolved section's keys are the fields of the dataclass the read builds, ``rl`` an
``RLConfig``, ``run_spec`` a ``RunSpec``, ``sft`` the verb's part of the SFT section, ``SFTData`` /
``SFTTrain``), ``tracking`` the tracking section's, an SFT data job's
``domains`` {max_steps, options}, and every ``options`` its domain's knobs (``default_options``).
Those section dataclasses hold no field their program leaves unread (``ENGINE_READS``): each field
of ``RLConfig`` is read as ``cfg.<field>`` by an RL engine (either engine, or ``run_job``: a key
only one engine reads, verl's ``verl`` block, counts), each of ``SFTData`` by the data builder, of
``SFTTrain`` by the trainer (found in their source: attribute reads of ``cfg`` / ``self.cfg``).

**No setting appears under two keys** (``settings_held_twice``). A value's setting is named by its
path: the last key on it that names no entity (no list index, no domain, no initial policy), and
the entities on it (the domain, the list entry, the policy): ``rl.max_steps.sokoban`` and
``run_spec.domains.sokoban.max_steps`` are both Sokoban's ``max_steps``; ``ALIASES`` names the
settings that go by two names (a property log's ``t_max`` is its step limit). Two paths of one spec
holding the same setting with the same value are one setting written twice. Values alone would
not do: different settings share values by chance (``kl_coef`` and ``weight_decay`` are both 0.01,
an evaluation's Sokoban and WebShop step limits both 15); and one name over two values is two
settings (a run spec's ``init`` "v1", the job's ``init`` model folder; the RL section's parameter
``dtype`` and the job's compute ``dtype``). A copy that disagrees with the value that runs, the
embedded RL spec's old ``rl.steps`` 150 beside its run spec's 2, is a key its job does not read.

``test_the_checks_catch_a_setting_put_back`` shows both checks fail on the keys this issue removed.
"""

import ast
import dataclasses
import functools
from pathlib import Path
from typing import Any, Iterator

import pytest
from snakemake_plans import planned_jobs

from gentax.domains import domain_class
from gentax.domains.spec import names as domain_names
from gentax.errors import GentaxError
from gentax.study.checks import KINDS
from gentax.train import tracking
from gentax.train.config import RLConfig
from gentax.train.sft_config import SFTData, SFTTrain

REPO = Path(__file__).resolve().parents[1]
PLANS = {"embedded": ("--profile", "profiles/embedded"), "paper": ("--profile", "profiles/slurm")}

#: a section dataclass -> the modules of the program that receives it (their ``cfg.<field>`` reads)
ENGINE_READS = {
    RLConfig: ("gentax/train/local_engine.py", "gentax/train/verl_engine.py", "gentax/train/jobs.py"),
    SFTData: ("gentax/train/sft_data.py",),
    SFTTrain: ("gentax/train/sft.py",),
}
#: a name -> the setting it names where one setting goes by two names
ALIASES = {"t_max": "max_steps"}  # a property log's step limit (gentax.rollout.jobs.PropertiesJob)
INITS = ("v1", "v2", "base")  # initial policies: entities, as domains are


def _fields(kind) -> set[str]:
    return {field.name for field in dataclasses.fields(kind)}


@functools.lru_cache(maxsize=None)
def _attribute_reads(paths: tuple[str, ...]) -> frozenset[str]:
    """Attributes read off ``cfg`` or ``self.cfg`` in the modules at ``paths``."""
    def is_cfg(node) -> bool:
        return (isinstance(node, ast.Name) and node.id == "cfg") or (
            isinstance(node, ast.Attribute) and node.attr == "cfg" and isinstance(node.value, ast.Name)
            and node.value.id == "self")

    reads = set()
    for path in paths:
        for node in ast.walk(ast.parse((REPO / path).read_text())):
            if isinstance(node, ast.Attribute) and is_cfg(node.value):
                reads.add(node.attr)
    return frozenset(reads)


def _section_problems(verb: str, spec: dict) -> list[str]:
    """Keys of the spec's untyped sections that their program does not read (one line each); the
    typed ones (``rl``, ``run_spec``, ``sft``) are the job kind's read's."""
    out = []
    if "tracking" in spec:
        out += [f"tracking.{key}: not a tracking key" for key in sorted(set(spec["tracking"]) - set(tracking.DEFAULTS))]
    if verb == "sft build-data":
        out += [f"domains.{d}.{key}: build-data reads max_steps and options" for d, settings in spec["domains"].items()
                for key in sorted(set(settings) - {"max_steps", "options"})]
    return out


def _options_problems(value: Any, path: str = "", domain: str | None = None) -> Iterator[str]:
    """Every ``options`` mapping's keys are its domain's knobs (the domain: the nearest key on the
    path that names one, or the enclosing object's ``domain`` / ``train_domain``)."""
    if isinstance(value, dict):
        domain = value.get("domain") if isinstance(value.get("domain"), str) else value.get("train_domain", domain)
        for key, item in value.items():
            here = _domain_of(key, domain)
            if key == "options" and isinstance(item, dict):
                known = domain_class(here).default_options
                yield from (f"{path}options.{k}: not a knob of {here}" for k in sorted(set(item) - set(known)))
            else:
                yield from _options_problems(item, f"{path}{key}.", here)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _options_problems(item, f"{path}{index}.", domain)


def _domain_of(key: Any, current: str | None) -> str | None:
    return key if isinstance(key, str) and key in domain_names() else current


def unread_keys(verb: str, spec: dict) -> list[str]:
    """The keys of ``spec`` that its verb does not read (module docstring), one line each."""
    try:
        KINDS[verb].read(spec)  # the job kind's keys, nested typed parts included
    except GentaxError as exc:
        return [str(exc)]
    return _section_problems(verb, spec) + list(_options_problems(spec))


def _leaves(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """(path, value) of every scalar, and of every list of scalars (one setting: a list of steps)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
    else:
        yield path, value


def setting_of(path: tuple) -> tuple[str, tuple]:
    """(name, entities) of a value's path: its last key that names no entity (module docstring)."""
    entity = [part for part in path if isinstance(part, int) or part in domain_names() or part in INITS]
    name = next((part for part in reversed(path) if isinstance(part, str) and part not in entity), "")
    return ALIASES.get(name, name), tuple(entity)


def settings_held_twice(spec: dict) -> list[str]:
    """Each setting that two paths of ``spec`` hold with the same value: "a.b = c.d (value)"."""
    seen: dict[tuple, list[tuple[tuple, Any]]] = {}
    for path, value in _leaves(spec):
        seen.setdefault(setting_of(path), []).append((path, value))
    out = []
    for held in seen.values():
        for i, (path, value) in enumerate(held):
            out += [f"{_dotted(path)} = {_dotted(other)} ({value!r})" for other, same in held[i + 1:]
                    if same == value and type(same) is type(value)]
    return out


def _dotted(path: tuple) -> str:
    return ".".join(map(str, path))


@pytest.fixture(scope="module", params=sorted(PLANS))
def plan(request) -> tuple[str, list[tuple[str, dict]]]:
    return request.param, planned_jobs(*PLANS[request.param])


def test_every_key_of_every_job_spec_is_read_by_its_job(plan):
    name, jobs = plan
    problems = [f"{verb} {spec.get('out', '')}: {line}" for verb, spec in jobs for line in unread_keys(verb, spec)]
    assert not problems, f"{name} plan, {len(problems)}:\n" + "\n".join(problems[:20])
    assert {verb for verb, _ in jobs} >= {"train rl", "sft build-data", "sft train", "eval", "properties", "table"}


@pytest.mark.parametrize("section", sorted(ENGINE_READS, key=lambda kind: kind.__name__), ids=lambda kind: kind.__name__)
def test_every_field_of_a_resolved_section_is_read_by_its_program(section):
    """A section's dataclass holds nothing its program leaves unread: the reason the RL section's
    steps, max_steps, env_options and augmentation went (only the command line read them)."""
    unread = sorted(_fields(section) - _attribute_reads(ENGINE_READS[section]))
    assert not unread, f"{section.__name__} fields no reader in {', '.join(ENGINE_READS[section])} reads: {unread}"


def test_no_job_spec_holds_a_setting_twice(plan):
    name, jobs = plan
    problems = [f"{verb} {spec.get('out', '')}: {line}" for verb, spec in jobs for line in settings_held_twice(spec)]
    assert not problems, f"{name} plan, {len(problems)}:\n" + "\n".join(problems[:20])


def _first(jobs, verb: str, **match) -> dict:
    return next(spec for v, spec in jobs if v == verb and all(spec.get(k) == m for k, m in match.items()))


def test_the_checks_catch_a_setting_put_back():
    """The keys removed for this issue, put back into an embedded and a paper spec, fail the checks:
    the RL section's copies of the run spec's settings, a property log's max_steps beside its t_max,
    an SFT job's other part."""
    import copy

    embedded, paper = planned_jobs(*PLANS["embedded"]), planned_jobs(*PLANS["paper"])
    rl = copy.deepcopy(_first(paper, "train rl"))
    run = rl["run_spec"]
    (domain, _), = run["train"]
    rl["rl"].update(steps=run["steps"], max_steps={domain: run["domains"][domain]["max_steps"]})
    assert any("key rl:" in line and "steps" in line for line in unread_keys("train rl", rl))
    assert {"rl.steps = run_spec.steps", f"rl.max_steps.{domain} = run_spec.domains.{domain}.max_steps"} <= {
        line.split(" (")[0] for line in settings_held_twice(rl)}
    embedded_rl = copy.deepcopy(_first(embedded, "train rl"))
    embedded_rl["rl"]["steps"] = 150  # the old embedded spec: a copy that disagrees with the run spec's
    assert settings_held_twice(embedded_rl) == [] and any("steps" in line for line in unread_keys("train rl", embedded_rl))
    props = copy.deepcopy(_first(embedded, "properties"))
    props["max_steps"] = props["t_max"]
    twice, = settings_held_twice(props)
    assert set(twice.split(" (")[0].split(" = ")) == {"max_steps", "t_max"}
    assert any("max_steps" in line for line in unread_keys("properties", props))
    train = copy.deepcopy(_first(embedded, "sft train"))
    train["sft"]["pairs"] = 96
    assert any("pairs" in line for line in unread_keys("sft train", train))
    reads = _attribute_reads(ENGINE_READS[RLConfig])
    assert "steps" not in reads and "max_steps" not in reads  # an RLConfig field `steps` would fail the reads test
