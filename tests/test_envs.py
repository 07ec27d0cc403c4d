"""The per-rule conda envs (envs/*.yaml) resolve: the pip part of each against the package
registry with uv's resolver, without downloading the wheels (scripts/check_envs.py says what is and
is not checked). Needs the registry (PyPI); the four envs resolve in parallel in seconds.
"""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECK = [sys.executable, str(REPO / "scripts" / "check_envs.py")]


def test_every_env_resolves():
    done = subprocess.run(CHECK, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    for env in sorted((REPO / "envs").glob("*.yaml")):
        assert f"{env.name}: resolved" in done.stdout, done.stdout
    assert "vllm 0.31.0" in done.stdout and "verl 0.9.1" in done.stdout  # the train env, as pinned


def test_a_conflicting_pin_fails_naming_the_env_and_the_reason(tmp_path):
    env = tmp_path / "clash.yaml"
    # envs/train-verl.yaml had this: verl 0.9.1 needs transformers < 5.11 (vLLM 0.33 wanted >= 5.16.1)
    env.write_text("dependencies:\n  - python=3.11\n  - pip\n  - pip:\n      - verl==0.9.1\n      - transformers==5.20.0\n")
    done = subprocess.run([*CHECK, str(env)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 1
    assert "CONFLICT clash.yaml" in done.stdout, done.stdout
    assert "verl>=0.9.1 depends on" in done.stdout and "you require transformers==5.20.0" in done.stdout, done.stdout
