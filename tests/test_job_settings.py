"""Every job's resolved settings equal the committed dumps (scripts/dump_job_settings.py).

The dumps (tests/golden/) record, for the embedded study and the paper grid under the SLURM
profile, what each job's program receives. A change of any job's settings, resources or files must
come with regenerated dumps (the script's docstring says how), so it is seen in review."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("dump", ["jobs_embedded.json.gz", "jobs_paper.json.gz"])
def test_job_settings_equal_the_committed_dump(dump):
    proc = subprocess.run([sys.executable, "scripts/dump_job_settings.py", "--check", f"tests/golden/{dump}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "identical" in proc.stdout
