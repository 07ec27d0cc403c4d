"""Trajectory record schemas: documented columns, types, Parquet round trip, atomic writes."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gentax.errors import GentaxError
from gentax.rollout.collector import CollectConfig, collect
from gentax.rollout.generators import ExpertGenerator
from gentax.rollout.schema import EPISODE_SCHEMA, STEP_SCHEMA, Rollouts, StepTokens, describe, table_from_rows

# the columns docs/contracts.md promises (the schemas may have more)
PROMISED_STEPS = "run domain split task_seed group_id traj_id step prompt response action valid reason reward done won obs_chars augmented admissible_count error".split()
PROMISED_EPISODES = "run domain task_seed group_id traj_id length return won invalid_steps augmented error".split()


@pytest.fixture(scope="module")
def rollouts():
    return collect(ExpertGenerator(), [0, 1], CollectConfig(domain="sokoban", split="eval", group_size=2), run_id="t", progress=False)


def test_promised_columns_exist_and_every_column_is_documented():
    assert set(PROMISED_STEPS) <= set(STEP_SCHEMA.names)
    assert set(PROMISED_EPISODES) <= set(EPISODE_SCHEMA.names)
    for schema in (STEP_SCHEMA, EPISODE_SCHEMA):
        for field in schema:
            assert field.metadata and len(field.metadata[b"doc"]) > 10, field.name
    assert "obs_chars" in describe(STEP_SCHEMA)


def test_column_types():
    types = {f.name: f.type for f in STEP_SCHEMA}
    assert types["task_seed"] == pa.int64() and types["step"] == pa.int32()
    assert types["valid"] == types["done"] == types["won"] == types["augmented"] == pa.bool_()
    assert types["reward"] == pa.float64() and types["prompt"] == pa.string()
    assert {f.name for f in STEP_SCHEMA if f.nullable} == {"action", "reason", "error", "think_tokens", "filler"}
    assert EPISODE_SCHEMA.field("return").type == pa.float64()
    assert EPISODE_SCHEMA.field("length").type == pa.int32()


def test_parquet_round_trip_keeps_values_types_and_docs(rollouts, tmp_path):
    steps_path, episodes_path = rollouts.write(tmp_path / "run")
    assert steps_path.name == "run.steps.parquet" and episodes_path.name == "run.episodes.parquet"
    back = Rollouts.read(tmp_path / "run")
    assert back.steps.equals(rollouts.steps) and back.episodes.equals(rollouts.episodes)
    assert back.steps.schema.equals(STEP_SCHEMA, check_metadata=False)
    assert pq.read_schema(steps_path).field("obs_chars").metadata[b"doc"].startswith(b"characters")
    assert back.tokens == []  # token data stays in memory
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.episodes.parquet", "run.steps.parquet"]


def test_tables_hold_what_the_collector_saw(rollouts):
    steps, episodes = rollouts.steps_frame(), rollouts.episodes_frame()
    assert len(rollouts.tokens) == len(steps)
    assert (episodes.groupby("traj_id")["length"].sum() == steps.groupby("traj_id").size()).all()
    assert (steps.groupby("traj_id")["reward"].sum() == episodes.set_index("traj_id")["return"]).all()
    assert steps["reason"].isna().all() and steps["action"].notna().all()


def test_a_table_of_another_shape_is_rejected(rollouts):
    with pytest.raises(GentaxError, match="steps schema"):
        Rollouts(rollouts.steps.drop_columns(["prompt"]), rollouts.episodes)
    wrong = rollouts.steps.set_column(rollouts.steps.schema.get_field_index("reward"), "reward",
                                      pa.array([1] * rollouts.steps.num_rows, pa.int64()))
    with pytest.raises(GentaxError, match="reward"):
        Rollouts(wrong, rollouts.episodes)
    with pytest.raises(ValueError, match="token records"):
        Rollouts(rollouts.steps, rollouts.episodes, [StepTokens([1], [2], None)])
    with pytest.raises(ValueError, match="lack column"):
        table_from_rows([{"run": "x"}], EPISODE_SCHEMA)


def test_write_is_atomic(rollouts, tmp_path, monkeypatch):
    rollouts.write(tmp_path / "a")
    before = (tmp_path / "a.steps.parquet").read_bytes()

    def broken(table, path, **kw):
        open(path, "wb").write(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(OSError):
        rollouts.write(tmp_path / "a")
    assert (tmp_path / "a.steps.parquet").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.episodes.parquet", "a.steps.parquet"]


def test_missing_files_and_concat(rollouts, tmp_path):
    with pytest.raises(GentaxError, match="missing rollout file"):
        Rollouts.read(tmp_path / "nothing")
    both = Rollouts.concat([rollouts, rollouts])
    assert both.steps.num_rows == 2 * rollouts.steps.num_rows and len(both.tokens) == 2 * len(rollouts.tokens)
    assert Rollouts.concat([]).episodes.num_rows == 0
