"""Loading and validating the analysis inputs: CSV/Parquet, and every kind of bad input."""

import pandas as pd
import pytest

from analysis_cases import hand_properties, hand_summary
from gentax.analysis.summary import load_properties, load_summary
from gentax.errors import GentaxError


def test_csv_and_parquet_load_the_same(tmp_path):
    summary = hand_summary()
    summary.to_csv(tmp_path / "s.csv", index=False)
    summary.to_parquet(tmp_path / "s.parquet", index=False)
    from_csv = load_summary(tmp_path / "s.csv")
    from_parquet = load_summary(tmp_path / "s.parquet")
    assert len(from_csv) == len(summary)
    pd.testing.assert_frame_equal(from_csv, from_parquet, check_dtype=False)
    hand_properties().to_csv(tmp_path / "p.csv", index=False)
    props = load_properties(tmp_path / "p.csv")
    assert props.loc["sciworld", "richness"] == 2851.0


def test_names_are_normalised():
    summary = hand_summary()
    summary.loc[0, "init"] = " V1 "
    summary.loc[0, "eval_domain"] = "ALFWorld"
    clean = load_summary(summary)
    assert clean.loc[0, "init"] == "v1" and clean.loc[0, "eval_domain"] == "alfworld"


def _mutate(column, value, index=2):
    def apply(df):
        df = df.astype({column: object}) if column in df.columns else df
        df.loc[index, column] = value
        return df
    return apply


BAD_SUMMARIES = [
    ("missing column", lambda df: df.drop(columns=["success", "seed"]), r"missing column\(s\) seed, success"),
    ("unknown init", _mutate("init", "v3"), r"unknown init .*row 3 \(init='v3'"),
    ("unknown train domain", _mutate("train_domain", "minecraft"), r"unknown train_domain.*row 3"),
    ("base as eval domain", _mutate("eval_domain", "base"), r"unknown eval_domain.*row 3"),
    ("success above 1", _mutate("success", 1.2), r"success is outside \[0, 1\]: row 3 .*success=1.2"),
    ("negative success", _mutate("success", -0.1), r"success is outside \[0, 1\]: row 3"),
    ("success not a number", _mutate("success", "lots"), r"success is not a number: row 3"),
    ("success missing", _mutate("success", None), r"success is missing: row 3"),
    ("fractional seed", _mutate("seed", 1.5), r"seed must be an integer: row 3"),
    ("base row at a later step", _mutate("step", 15, index=0), r"base rows .* step 0: row 1 "),
    ("invalid rate above 1", lambda df: df.assign(invalid_rate=2.0), r"invalid_rate is outside \[0, 1\]: row 1"),
    ("zero episodes", lambda df: df.assign(episodes=0), r"episodes must be a positive integer: row 1"),
    ("duplicate rows", lambda df: pd.concat([df, df.iloc[[4]]], ignore_index=True),
     rf"duplicate rows .*row 5 \(.*\); row {len(hand_summary()) + 1} \("),
    ("no rows", lambda df: df.iloc[0:0], r"has no rows"),
]


@pytest.mark.parametrize("case, mutate, message", BAD_SUMMARIES, ids=[c[0] for c in BAD_SUMMARIES])
def test_bad_summary_names_problem_and_rows(case, mutate, message):
    with pytest.raises(GentaxError, match=message):
        load_summary(mutate(hand_summary()))


def test_many_offending_rows_are_counted_not_all_listed():
    summary = hand_summary().assign(success=1.5)
    with pytest.raises(GentaxError, match=r"and \d+ more$"):
        load_summary(summary)


BAD_PROPERTIES = [
    ("missing column", lambda df: df.drop(columns=["complexity"]), r"missing column\(s\) complexity"),
    ("unknown domain", _mutate("domain", "minecraft", index=1), r"unknown domain.*row 2"),
    ("duplicate domain", lambda df: pd.concat([df, df.iloc[[0]]], ignore_index=True),
     r"duplicate domain rows: row 1 .*row 5"),
    ("richness not a number", _mutate("richness", "big", index=3), r"richness is not a number: row 4"),
]


@pytest.mark.parametrize("case, mutate, message", BAD_PROPERTIES, ids=[c[0] for c in BAD_PROPERTIES])
def test_bad_properties(case, mutate, message):
    with pytest.raises(GentaxError, match=message):
        load_properties(mutate(hand_properties()))


def test_unreadable_files(tmp_path):
    with pytest.raises(GentaxError, match="not found"):
        load_summary(tmp_path / "absent.csv")
    (tmp_path / "s.json").write_text("{}")
    with pytest.raises(GentaxError, match="unknown format"):
        load_summary(tmp_path / "s.json")
    (tmp_path / "broken.parquet").write_text("not parquet")
    with pytest.raises(GentaxError, match="broken.parquet is corrupt \\(not a readable Parquet file: .*\\); rebuild it"):
        load_summary(tmp_path / "broken.parquet")
