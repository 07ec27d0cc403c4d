#!/usr/bin/env python3
"""Resolve the pip part of every per-rule conda env (envs/*.yaml) against the package registry.

    python scripts/check_envs.py [ENV.yaml ...]     # default: every envs/*.yaml; exit 1 on a conflict

For each env, pip resolves its pip requirements together with every transitive requirement
(``pip install --dry-run --ignore-installed --report``) without installing anything and without
downloading the wheels: ``--use-feature=fast-deps`` reads each wheel's metadata with HTTP range
requests (the registry here does not serve PEP 658 metadata files, so a plain dry-run would fetch
every wheel, torch and vLLM included). ``--isolated``: the registry's index only, none of this
machine's local wheel folders, constraint files or pip config. The envs run in parallel.

Checked: one set of versions satisfies every pip pin of an env at once, for this machine's Python
(3.11, the envs' ``python=3.11``) on Linux x86_64; relative paths (the torchaudio shim) resolve
from the env file's folder. Not checked: the conda-forge part (python, openjdk, pip; conda-forge
is not reachable from CI), CUDA/driver compatibility, building sdists beyond their metadata,
importing anything. A conflict prints pip's own explanation, naming the env.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SHOWN = ("torch", "vllm", "transformers", "verl", "numpy")


def pip_requirements(env_file: Path) -> list[str]:
    data = yaml.safe_load(env_file.read_text()) or {}
    for dep in data.get("dependencies", []):
        if isinstance(dep, dict) and "pip" in dep:
            return [str(r) for r in dep["pip"]]
    return []


def resolve(env_file: Path) -> tuple[bool, str]:
    """(resolved?, one summary line or pip's explanation of the conflict)."""
    requirements = pip_requirements(env_file)
    if not requirements:
        return True, f"{env_file.name}: no pip part"
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        reqs, report = Path(tmp) / "requirements.txt", Path(tmp) / "report.json"
        reqs.write_text("\n".join(requirements) + "\n")
        cmd = [sys.executable, "-m", "pip", "--isolated", "install", "--dry-run", "--ignore-installed",
               "--use-feature=fast-deps", "--report", str(report), "-r", str(reqs)]
        done = subprocess.run(cmd, cwd=env_file.parent, capture_output=True, text=True)
        if done.returncode != 0 or not report.is_file():
            out = done.stdout + done.stderr
            errors = [line for line in out.splitlines() if line.startswith("ERROR:")]
            cause = out.split("The conflict is caused by:", 1)[1].split("\n\n", 1)[0] if "conflict is caused" in out else ""
            text = "\n".join(errors[:1] + (["The conflict is caused by:" + cause] if cause else []) + errors[1:])
            text = re.sub(r"-r \S+ \(line (\d+)\)", lambda m: requirements[int(m.group(1)) - 1], text)
            return False, f"{env_file.name}: pip cannot resolve its pins:\n{text}"
        installed = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    shown = ", ".join(f"{name} {installed[name]}" for name in SHOWN if name in installed)
    return True, (f"{env_file.name}: resolved, {len(installed)} packages ({shown}) "
                  f"in {time.monotonic() - started:.0f} s")


def main(argv: list[str]) -> int:
    files = [Path(a).resolve() for a in argv] or sorted((REPO / "envs").glob("*.yaml"))
    with ThreadPoolExecutor(max_workers=len(files)) as pool:
        results = list(pool.map(resolve, files))
    for ok, text in results:
        print(("" if ok else "CONFLICT ") + text)
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
