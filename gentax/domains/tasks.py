"""Task splits as workflow artifacts: the held-out eval tasks of a domain, fingerprinted.

``task_manifest(domain, n, ...)`` draws eval tasks ``0..n-1`` (the seeds ``gentax eval`` plays),
resets each once — which, for ALFWorld, generates and caches its game before parallel jobs need
it — and records a SHA-256 over the first observations, so two machines (or two runs) can check
that they evaluate exactly the same tasks. ``TasksJob`` is the ``gentax tasks`` job's spec.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, ClassVar

from gentax.domains import make
from gentax.domains.spec import names
from gentax.io import write_json
from gentax.jobspec import JobKind


@dataclass(frozen=True)
class TasksJob(JobKind):
    """``gentax tasks``: a domain's held-out task manifest (``gentax.study.jobs.tasks``)."""
    verb: ClassVar[str] = "tasks"
    domain: str
    episodes: int
    split: str
    max_steps: int | None
    options: dict[str, Any]
    out: str

    @classmethod
    def problems(cls, spec, inputs) -> list[str]:
        """A registered domain, a whole number of tasks >= 1; it reads no input file."""
        out = []
        if spec["domain"] not in names():
            out.append(f"domain: {spec['domain']!r} is no registered domain ({', '.join(names())})")
        if spec["episodes"] < 1:
            out.append(f"episodes: a whole number >= 1, got {spec['episodes']!r}")
        return out

    def run(self) -> dict[str, Any]:
        manifest = task_manifest(self.domain, self.episodes, split=self.split, max_steps=self.max_steps,
                                 options=self.options)
        write_json(self.out, manifest)
        return manifest


def task_manifest(domain: str, n: int, *, split: str = "eval", max_steps: int | None = None,
                  options: dict[str, Any] | None = None) -> dict[str, Any]:
    digest = hashlib.sha256()
    goals = []
    with make(domain, split=split, seed=0, max_steps=max_steps, **(options or {})) as env:
        for seed in range(n):
            obs = env.reset(env.task(seed))
            digest.update(f"{seed}\0{obs.goal}\0{obs.text}\0".encode())
            goals.append(obs.goal)
    return {
        "domain": domain,
        "split": split,
        "seeds": list(range(n)),
        "max_steps": max_steps,
        "options": options or {},
        "fingerprint": digest.hexdigest(),
        "goals": goals,
    }
