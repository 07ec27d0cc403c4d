"""benchmarks/study_time.py: the per-job-kind table of a finished run's Snakemake benchmark files."""

from __future__ import annotations

from pathlib import Path

import pytest

import by_path

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _load():
    return by_path.load("benchmarks/study_time.py")


def _bench(root: Path, name: str, *rows: tuple[float, float]) -> None:
    path = root / "benchmarks" / f"{name}.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + "".join(f"{s}\t0:00:00\t1\t1\t1\t1\t0\t0\t50\t{cpu}\n" for s, cpu in rows))


def test_jobs_grouped_by_kind_with_sums(tmp_path, capsys):
    study_time = _load()
    _bench(tmp_path, "runs/v1/sokoban/default/seed0/segment_0_2", (100.0, 180.0))
    _bench(tmp_path, "runs/v2/webshop/aug/seed0/segment_0_2", (50.0, 90.0), (70.0, 110.0))  # two repeats: mean
    _bench(tmp_path, "eval/v1/base/default/seed0/step0/sokoban", (10.0, 15.0))
    _bench(tmp_path, "eval/v1/sokoban/default/seed0/step2/webshop", (20.0, 30.0))
    _bench(tmp_path, "init/v2_sft_data", (5.0, 6.0))
    _bench(tmp_path, "init/v2", (7.0, 8.0))
    _bench(tmp_path, "model/embedded_base", (300.0, 590.0))
    table = study_time.kind_table(tmp_path)
    assert table["RL segments"] == [2, 160.0, 280.0, 2]
    assert table["evaluations: initial policies"] == [1, 10.0, 15.0, 1]
    assert table["evaluations: checkpoints"] == [1, 20.0, 30.0, 1]
    assert table["Ckpt V2: SFT data"] == [1, 5.0, 6.0, 1] and table["Ckpt V2: SFT"] == [1, 7.0, 8.0, 1]
    assert list(table)[0] == "warm start: SFT"  # the workflow's order, not the files'
    assert study_time.main([str(tmp_path)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "| job kind | jobs | wall s | CPU s | CPU s sampled by Snakemake (jobs) |"
    assert printed[-1] == "| **sum** | 7 | 502 | 929 | 7 |"


def test_cpu_seconds_from_the_jobs_log_where_it_has_them(tmp_path):
    """A job's log ends with what it used (gentax.joblog); its CPU seconds replace the benchmark
    file's sample, of the log's LAST ended attempt; a log without the line keeps the sample."""
    from gentax import joblog

    study_time = _load()
    _bench(tmp_path, "eval/v1/base/default/seed0/step0", (10.0, 3.0))  # sampled: missed the last seconds
    _bench(tmp_path, "eval/v1/sokoban/default/seed0/step2", (20.0, 30.0))
    log = tmp_path / "logs" / "eval" / "v1" / "base" / "default" / "seed0" / "step0.log"
    log.parent.mkdir(parents=True)
    first = joblog.usage_line(1, 0.0).replace("CPU", "CPU 99.0 s X", 1)  # a damaged line is not read
    second = f"{joblog.USED}2: wall 9.9 s, CPU 12.5 s (process 10.0 s, children 2.5 s), peak memory 1.20 GB " \
             "(process), 0.30 GB (largest child)"
    log.write_text(f"{joblog.HEADER}1: ...\n{first}\n{joblog.HEADER}2: ...\nepisode 8 of 8\n{second}\n")
    (tmp_path / "logs" / "eval" / "v1" / "sokoban" / "default" / "seed0").mkdir(parents=True)
    (tmp_path / "logs" / "eval" / "v1" / "sokoban" / "default" / "seed0" / "step2.log").write_text("killed\n")
    table = study_time.kind_table(tmp_path)
    assert table["evaluations: initial policies"] == [1, 10.0, 12.5, 0]
    assert table["evaluations: checkpoints"] == [1, 20.0, 30.0, 1]
    assert joblog.usage(log) == {"attempt": 2, "wall_s": 9.9, "cpu_s": 12.5, "process_cpu_s": 10.0,
                                 "children_cpu_s": 2.5, "peak_gb": 1.2, "child_peak_gb": 0.3}


def test_no_benchmarks_is_one_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="no benchmark files"):
        _load().kind_table(tmp_path)
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "x.tsv").write_text("a\tb\n1\t2\n")
    with pytest.raises(SystemExit, match="not a Snakemake benchmark file"):
        _load().kind_table(tmp_path)
