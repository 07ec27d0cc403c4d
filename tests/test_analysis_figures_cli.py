"""Figures (PNG + SVG) and the ``gentax tables`` command line, end to end."""

import json
import xml.etree.ElementTree as ET

import pandas as pd
import pytest

from analysis_cases import base, hand_properties, hand_summary, run, study
from gentax import cli
from gentax.analysis import tables
from gentax.errors import GentaxError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def only_tables_command(monkeypatch):
    # other stages' command modules may not exist yet in this tree; test ours alone
    monkeypatch.setattr(cli, "COMMAND_MODULES", ["gentax.analysis.cli"])


@pytest.fixture
def inputs(tmp_path):
    hand_summary().to_parquet(tmp_path / "summary.parquet", index=False)
    hand_properties().to_csv(tmp_path / "properties.csv", index=False)
    return tmp_path / "summary.parquet", tmp_path / "properties.csv"


def test_tables_command_writes_tables(tmp_path, inputs, only_tables_command, capsys):
    summary, properties = inputs
    out = tmp_path / "out"
    code = cli.main(["tables", "--summary", str(summary), "--properties", str(properties),
                     "--out", str(out), "--bootstrap", "50", "--seed", "4", "--no-figures"])
    assert code == 0
    assert "wrote 9 tables" in capsys.readouterr().out
    table3 = pd.read_csv(out / "table3_ranking.csv").set_index("train_domain")
    assert table3.loc["webshop", "score_v1v2"] == 5.0 and table3.loc["sokoban", "score_v2"] == 5.0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["n_boot"] == 50 and manifest["settings"]["seed"] == 4
    assert len(manifest["inputs"]["summary"]["sha256"]) == 64
    assert manifest["inputs"]["properties"]["path"] == str(properties)
    assert "table5_augmentation.tex" in manifest["files"]
    assert not (out / "figures").exists()


def figure_case() -> pd.DataFrame:
    """V1: two training domains, three variants of one, one run trained to step 300."""
    rows = base("v1", {"alfworld": 0.2, "webshop": 0.3, "sokoban": 0.1})
    for variant, ood in (("default", 0.25), ("aug", 0.3), ("nothink", 0.1)):
        rows += run("v1", "alfworld", {"alfworld": 0.5, "webshop": ood, "sokoban": 0.05}, variant=variant,
                    steps=range(15, 151, 15))
    rows += run("v1", "webshop", {"alfworld": 0.1, "webshop": 0.6, "sokoban": 0.05}, steps=range(15, 301, 15))
    return pd.DataFrame(rows)


def test_figures_are_written(tmp_path):
    out = tmp_path / "out"
    tables.build_all(figure_case(), hand_properties(), out, **study(n_boot=0))
    figures = out / "figures"
    for stem in ("ood_vs_properties", "delta_ood_augmentation", "delta_ood_thinking", "training_curves"):
        png, svg = figures / f"{stem}.png", figures / f"{stem}.svg"
        assert png.read_bytes()[:8] == PNG_MAGIC, stem
        assert png.stat().st_size > 5000, stem
        assert ET.parse(svg).getroot().tag.endswith("svg"), stem
    assert len(list(figures.iterdir())) == 8
    # SVG text stays text: a bar says its value; a row whose variant no run trains is left out (V1 webshop: no aug run)
    augmentation = (figures / "delta_ood_augmentation.svg").read_text()
    assert "V1 alfworld" in augmentation and "+16.7" in augmentation and "V1 webshop" not in augmentation
    curves = (figures / "training_curves.svg").read_text()
    for text in ("V1 alfworld", "V1 webshop", "aug", "nothink", "eval OOD mean"):
        assert text in curves, text
    assert "V2 sciworld" not in curves  # no run trained on it: its panel is left out, not drawn empty
    properties = (figures / "ood_vs_properties.svg").read_text()
    assert "richness" in properties and "complexity" in properties and "webshop" in properties
    manifest = json.loads((out / "manifest.json").read_text())
    assert "figures/training_curves.svg" in manifest["files"]


def test_build_one_writes_just_the_named_output(tmp_path):
    paths = []
    for i, part in enumerate((figure_case().iloc[:100], figure_case().iloc[100:])):
        paths.append(tmp_path / f"run{i}.csv")
        part.to_csv(paths[-1], index=False)
    outputs = {ext: tmp_path / "t" / f"table5_augmentation.{ext}" for ext in ("csv", "md", "tex")}
    tables.build_one("table5_augmentation", paths, None, outputs, **study(window=[105, 120, 135, 150], seed=1))
    t5 = pd.read_csv(outputs["csv"])
    alf = t5[(t5.init == "v1") & (t5.train_domain == "alfworld")].iloc[0]
    # 100 * ((30 - 25) + (5 - 5)) / (25 + 5)
    assert alf.delta_ood_pct == pytest.approx(100 * 5 / 30, abs=1e-6)
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == sorted(p.name for p in outputs.values())
    figure = {"png": tmp_path / "f" / "curves.png", "svg": tmp_path / "f" / "curves.svg"}
    tables.build_one("training_curves", paths, None, figure, **study())
    assert figure["png"].read_bytes()[:8] == PNG_MAGIC
    # with the runs' per-step training metrics (metrics.csv beside each run's last segment record)
    records = []
    for variant, success in (("default", 0.25), ("aug", 0.5)):
        folder = tmp_path / "runs" / "v1" / "alfworld" / variant / "seed0"
        folder.mkdir(parents=True)
        pd.DataFrame({"step": range(1, 151), "id_success": success, "return_mean": 2.0,
                      "invalid_rate": 0.1}).to_csv(folder / "metrics.csv", index=False)
        records.append(folder / "segment_0_150.json")
    analysis = tables.build_one("training_curves", paths, None, figure, training=records, **study())
    assert len(analysis.training) == 300 and set(analysis.training["variant"]) == {"default", "aug"}
    assert analysis.training.groupby("variant")["success"].mean().to_dict() == {"aug": 0.5, "default": 0.25}
    assert "training success" in figure["svg"].read_text() and "mean return per episode" in figure["svg"].read_text()
    (records[0].parent / "metrics.csv").write_text("step,id_success\n1,0.5")  # cut short: no line end
    with pytest.raises(GentaxError, match="metrics.csv"):
        tables.build_one("training_curves", paths, None, figure, training=records, **study())
    with pytest.raises(GentaxError, match="unknown table or figure 'table99'"):
        tables.build_one("table99", paths, None, {})
    with pytest.raises(GentaxError, match="no output path for tex"):
        tables.build_one("table2_success", paths, None, {"csv": tmp_path / "x.csv", "md": tmp_path / "x.md"}, **study())
    broken = figure_case().iloc[100:].reset_index(drop=True)
    broken.loc[20, "success"] = 7
    broken.to_csv(paths[1], index=False)
    with pytest.raises(GentaxError, match=r"run1.csv row 21 "):
        tables.build_one("table2_success", paths, None, outputs, **study())


def test_same_inputs_same_files(tmp_path, inputs, only_tables_command):
    summary, properties = inputs
    for name in ("a", "b"):
        assert cli.main(["tables", "--summary", str(summary), "--properties", str(properties),
                         "--out", str(tmp_path / name), "--bootstrap", "30", "--no-figures"]) == 0
    for name in ("table2_success.csv", "success_ci.csv", "rank_stability.csv", "table8_rank_detail.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert not (tmp_path / "a" / "figures").exists()


def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, inputs, only_tables_command, capsys):
    summary, _ = inputs
    bad = pd.read_parquet(summary)
    bad.loc[7, "init"] = "v9"
    bad.to_csv(tmp_path / "bad.csv", index=False)
    out = tmp_path / "out"
    code = cli.main(["tables", "--summary", str(tmp_path / "bad.csv"), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("gentax: error: unknown init") and "row 8 (init='v9'" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "properties.csv", "summary.parquet"]


def test_window_option(tmp_path, inputs, only_tables_command):
    summary, _ = inputs
    assert cli.main(["tables", "--summary", str(summary), "--out", str(tmp_path / "o"),
                     "--window", "15,90", "--bootstrap", "0", "--no-figures"]) == 0
    t2 = pd.read_csv(tmp_path / "o" / "table2_success.csv")
    cell = t2[(t2.init == "v1") & (t2.train_domain == "alfworld") & (t2.eval_domain == "alfworld")]
    assert cell.success_pct.tolist() == [90.0]
    with pytest.raises(SystemExit):
        cli.main(["tables", "--summary", str(summary), "--out", str(tmp_path / "p"), "--window", "a,b"])
