"""Arrow schemas of trajectory records, and ``Rollouts``: what ``collect`` returns.

Two tables, written as Parquet by ``Rollouts.write(prefix)`` (each atomically): **steps**, one row
per environment step ordered by (traj_id, step), ``STEP_SCHEMA``; **episodes**, one row per
trajectory ordered by traj_id, ``EPISODE_SCHEMA``. Each field's ``doc`` metadata says what it holds
(``describe`` prints them). Token data (prompt ids, response ids, log-probs) is large, so it stays
in memory: ``Rollouts.tokens[i]`` belongs to step row ``i`` (RL needs it, analysis does not).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from gentax.errors import GentaxError
from gentax.evalfile import output_files
from gentax.io import atomic_path

SCHEMA_VERSION = "2"  # 2: think_tokens, filler


def _field(name: str, type_: pa.DataType, doc: str, nullable: bool = False) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={"doc": doc})


_IDENTITY = [
    _field("run", pa.string(), "run id given to collect (empty when none)"),
    _field("domain", pa.string(), "domain name (gentax.domains.REGISTRY)"),
    _field("split", pa.string(), "task split: train | eval"),
    _field("task_seed", pa.int64(), "seed of the task (env.task(seed))"),
    _field("group_id", pa.int32(), "index of the task in the collect call's task_seeds: the GRPO group"),
    _field("traj_id", pa.int32(), "index of the trajectory in the collect call (group_id * group_size + k)"),
]

STEP_SCHEMA = pa.schema(
    _IDENTITY
    + [
        _field("step", pa.int32(), "0-based step index within the trajectory"),
        _field("prompt", pa.string(), "the user message the agent got at this step (chat template not applied)"),
        _field("response", pa.string(), "the model's response text (special tokens removed)"),
        _field("action", pa.string(), "the parsed, normalised action; null when the response had no usable action", True),
        _field("valid", pa.bool_(), "the step was valid: parsed AND accepted by the env (invalid steps cost -0.1)"),
        _field("reason", pa.string(), "why the step was invalid (parser or env reason code); null when valid", True),
        _field("reward", pa.float64(), "reward of this step: 10 on the winning step, -0.1 when invalid, else 0"),
        _field("done", pa.bool_(), "the episode ended with this step"),
        _field("won", pa.bool_(), "the task was solved with this step"),
        _field("obs_chars", pa.int32(), "characters of the observation the agent saw at this step (augmented text when augmented)"),
        _field("augmented", pa.bool_(), "text was inserted into this step's observation (State Information Augmentation)"),
        _field("admissible_count", pa.int32(), "number of admissible actions (or templates) at this step"),
        _field("error", pa.string(), "env failure that ended the episode (worker crash, engine error); null otherwise", True),
        _field("finish_reason", pa.string(), "why generation ended: stop (EOS / </action>) | length (max_new_tokens)"),
        _field("prompt_tokens", pa.int32(), "prompt length in tokens (0 when the generator does not tokenise)"),
        _field("response_tokens", pa.int32(), "response length in tokens (0 when the generator does not tokenise)"),
        _field("think_tokens", pa.int32(), "tokens of the think block the action was conditioned on: the generated one's "
               "content re-tokenised (think mode on), or the forced filler's exact count (filler mode); null otherwise", True),
        _field("filler", pa.string(), "the forced filler think content (filler mode, gentax.agent.filler); null otherwise", True),
    ],
    metadata={"gentax.table": "steps", "gentax.schema_version": SCHEMA_VERSION},
)

EPISODE_SCHEMA = pa.schema(
    _IDENTITY
    + [
        _field("length", pa.int32(), "steps taken"),
        _field("return", pa.float64(), "sum of the step rewards"),
        _field("won", pa.bool_(), "the task was solved (success)"),
        _field("invalid_steps", pa.int32(), "steps that were invalid (parse failure or rejected by the env)"),
        _field("augmented", pa.bool_(), "augmentation was on for this trajectory (drawn with probability aug_p)"),
        _field("truncated", pa.bool_(), "ended by the step limit without a win"),
        _field("response_tokens", pa.int64(), "response tokens over all steps"),
        _field("error", pa.string(), "env failure that ended the episode; null otherwise", True),
    ],
    metadata={"gentax.table": "episodes", "gentax.schema_version": SCHEMA_VERSION},
)

STEP_COLUMNS = tuple(STEP_SCHEMA.names)
EPISODE_COLUMNS = tuple(EPISODE_SCHEMA.names)


def describe(schema: pa.Schema) -> str:
    """One line per column: name, type, doc (used in docs/rollout.md)."""
    return "\n".join(f"{f.name:18s} {str(f.type):8s} {f.metadata[b'doc'].decode()}" for f in schema)


def table_from_rows(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """A table of ``schema`` from row dicts (missing keys or wrong types are an error)."""
    missing = [name for name in schema.names if rows and name not in rows[0]]
    if missing:
        raise ValueError(f"rows lack column(s) {missing} of the {schema.metadata[b'gentax.table'].decode()} schema")
    columns = {name: [row[name] for row in rows] for name in schema.names}
    return pa.Table.from_pydict(columns, schema=schema)


@dataclasses.dataclass
class StepTokens:
    """Token data of one step row (in memory only)."""

    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float] | None


@dataclasses.dataclass
class Rollouts:
    """Trajectories of one ``collect`` call: step and episode tables plus in-memory token data
    (``tokens[i]`` belongs to ``steps`` row ``i``) and timing ``stats``."""

    steps: pa.Table
    episodes: pa.Table
    tokens: list[StepTokens] = dataclasses.field(default_factory=list)
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        _check_schema(self.steps, STEP_SCHEMA)
        _check_schema(self.episodes, EPISODE_SCHEMA)
        if self.tokens and len(self.tokens) != self.steps.num_rows:
            raise ValueError(f"{len(self.tokens)} token records for {self.steps.num_rows} step rows")

    # ---- views -------------------------------------------------------------------------------
    def steps_frame(self):
        return self.steps.to_pandas()

    def episodes_frame(self):
        return self.episodes.to_pandas()

    @property
    def success_rate(self) -> float:
        won = self.episodes.column("won").to_pylist()
        return sum(won) / len(won) if won else float("nan")

    @property
    def invalid_rate(self) -> float:
        valid = self.steps.column("valid").to_pylist()
        return 1.0 - sum(valid) / len(valid) if valid else float("nan")

    # ---- files -------------------------------------------------------------------------------
    @staticmethod
    def paths(prefix: str | os.PathLike) -> tuple[Path, Path]:
        steps, episodes = output_files(str(prefix))[1:]  # the names of an evaluation's tables
        return Path(steps), Path(episodes)

    def write(self, prefix: str | os.PathLike) -> tuple[Path, Path]:
        """Write ``<prefix>.steps.parquet`` and ``<prefix>.episodes.parquet`` (each atomically)."""
        steps_path, episodes_path = self.paths(prefix)
        for table, path in ((self.steps, steps_path), (self.episodes, episodes_path)):
            with atomic_path(path) as tmp:
                pq.write_table(table, tmp, compression="zstd")
        return steps_path, episodes_path

    @classmethod
    def read(cls, prefix: str | os.PathLike) -> "Rollouts":
        """Read the two tables back (token data is not stored, so ``tokens`` is empty)."""
        steps_path, episodes_path = cls.paths(prefix)
        for path in (steps_path, episodes_path):
            if not path.is_file():
                raise GentaxError(f"missing rollout file {path}")
        return cls(pq.read_table(steps_path), pq.read_table(episodes_path))

    @classmethod
    def concat(cls, parts: list["Rollouts"]) -> "Rollouts":
        """Rows of several calls together (ids are per call: keep ``run`` distinct to tell them apart)."""
        if not parts:
            return cls(STEP_SCHEMA.empty_table(), EPISODE_SCHEMA.empty_table())
        tokens = [t for p in parts for t in p.tokens] if all(p.tokens or p.steps.num_rows == 0 for p in parts) else []
        return cls(pa.concat_tables([p.steps for p in parts]), pa.concat_tables([p.episodes for p in parts]), tokens)


def _check_schema(table: pa.Table, schema: pa.Schema) -> None:
    name = schema.metadata[b"gentax.table"].decode()
    if not table.schema.equals(schema, check_metadata=False):
        got = {f.name: str(f.type) for f in table.schema}
        want = {f.name: str(f.type) for f in schema}
        diff = sorted(set(got.items()) ^ set(want.items()))
        raise GentaxError(f"{name} table does not match the {name} schema (differences: {diff})")
