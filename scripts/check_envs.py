#!/usr/bin/env python3
"""Resolve the pip part of every per-rule conda env (envs/*.yaml) against the package registry.

    python scripts/check_envs.py [ENV.yaml ...]     # default: every envs/*.yaml; exit 1 on a conflict

uv's resolver (``uv pip compile``) resolves each env's pip requirements with every transitive one
for the envs' target (CPython 3.11, manylinux x86_64), installing nothing, from PyPI only with a
fresh cache (``--no-config``); the envs run in parallel. Checked: one set of versions satisfies every
pip pin of an env. Not checked: the conda-forge part, CUDA, importing anything. A conflict prints
uv's own explanation, naming the env.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from uv import find_uv_bin

REPO = Path(__file__).resolve().parents[1]
TARGET_PYTHON, TARGET_PLATFORM = "3.11", "x86_64-manylinux_2_28"  # the envs' python=3.11, Linux x86_64
SHOWN = ("torch", "vllm", "transformers", "verl", "numpy")


def pip_requirements(env_file: Path) -> list[str]:
    data = yaml.safe_load(env_file.read_text()) or {}
    for dep in data.get("dependencies", []):
        if isinstance(dep, dict) and "pip" in dep:
            return [str(r) for r in dep["pip"]]
    return []


def resolve(env_file: Path, uv: str, cache: Path) -> tuple[bool, str]:
    """(resolved?, one summary line or uv's explanation of the conflict)."""
    requirements = pip_requirements(env_file)
    if not requirements:
        return True, f"{env_file.name}: no pip part"
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        reqs, pinned = Path(tmp) / "requirements.txt", Path(tmp) / "pinned.txt"
        reqs.write_text("\n".join(requirements) + "\n")
        cmd = [uv, "pip", "compile", "--no-config", "--quiet", "--no-header", "--no-annotate",
               "--python-version", TARGET_PYTHON, "--python-platform", TARGET_PLATFORM,
               "--cache-dir", str(cache), "--output-file", str(pinned), str(reqs)]
        done = subprocess.run(cmd, cwd=env_file.parent, capture_output=True, text=True)
        if done.returncode != 0 or not pinned.is_file():
            text = (done.stdout + done.stderr).strip().replace(str(reqs), env_file.name)
            return False, f"{env_file.name}: the resolver cannot satisfy its pins:\n{text}"
        pins = [line.split("==", 1) for line in pinned.read_text().splitlines() if "==" in line]
    installed = {name.lower(): version for name, version in pins}
    shown = ", ".join(f"{name} {installed[name]}" for name in SHOWN if name in installed)
    return True, (f"{env_file.name}: resolved, {len(installed)} packages ({shown}) "
                  f"in {time.monotonic() - started:.0f} s")


def main(argv: list[str]) -> int:
    files = [Path(a).resolve() for a in argv] or sorted((REPO / "envs").glob("*.yaml"))
    uv = find_uv_bin()  # before the threads: it reads sysconfig, whose first read is not thread-safe
    with tempfile.TemporaryDirectory() as cache, ThreadPoolExecutor(max_workers=len(files)) as pool:
        results = list(pool.map(lambda f: resolve(f, uv, Path(cache)), files))
    for ok, text in results:
        print(("" if ok else "CONFLICT ") + text)
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
