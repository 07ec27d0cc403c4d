"""A long job's progress lines (gentax/progress.py): what a line says, the heartbeat while a unit
runs, the collector's episodes and tokens reaching the active job, and the console's view of the
running jobs' logs."""

from __future__ import annotations

import io
import os
import threading
import time

from gentax import progress
from gentax.rollout.collector import CollectConfig, collect
from gentax.rollout.generators import ExpertGenerator, Generation


class Lines(io.StringIO):
    """A stream that signals each line written (the heartbeat's, from its thread)."""

    def __init__(self):
        super().__init__()
        self.written = threading.Condition()

    def write(self, text):
        with self.written:
            n = super().write(text)
            self.written.notify_all()
        return n

    def wait_for(self, count: int, timeout: float = 30.0) -> list[str]:
        deadline = time.monotonic() + timeout
        with self.written:
            while len(self.lines()) < count and time.monotonic() < deadline:
                self.written.wait(deadline - time.monotonic())
        return self.lines()

    def lines(self) -> list[str]:
        return [line for line in self.getvalue().splitlines() if line]


def test_a_line_says_the_unit_the_episodes_inside_it_the_rate_and_the_eta():
    stream = Lines()
    job = progress.Job("RL sokoban/default s0", 6, "step", done=2, every=0, stream=stream)
    with job:
        assert job.line().startswith("gentax progress: RL sokoban/default s0: step 2/6, ")
        assert "ETA" not in job.line()  # nothing finished in this attempt yet: no rate to extrapolate
        progress.episodes_planned(16)
        for _ in range(12):
            progress.episode_finished()
        progress.tokens(500)
        line = job.line()
        assert "step 2/6, 12/16 episodes of step 3, " in line and " tok/s, " in line, line
        job.advance()
        line = stream.lines()[-1]
        assert line.startswith("gentax progress: RL sokoban/default s0: step 3/6, ") and ", ETA " in line, line
        assert "episodes of" not in line  # a new step has no episodes yet
    job.advance(3)
    assert job.line().endswith(", done")
    assert progress._active is None  # the job is no longer the one the collector reports to


def test_the_heartbeat_says_a_line_while_a_unit_runs():
    stream = Lines()
    with progress.Job("eval sokoban", 8, "episode", every=0.05, stream=stream):
        lines = stream.wait_for(3)  # the first line, then the heartbeat's, with no unit finished
    assert len(lines) >= 3 and all(line.startswith("gentax progress: eval sokoban: episode 0/8, ") for line in lines)


def test_a_job_inside_another_hands_the_reports_back_when_it_ends():
    outer = progress.Job("RL", 2, "step", every=0, stream=Lines())
    with outer:
        with progress.Job("eval", 4, "episode", every=0, stream=Lines()) as inner:
            progress.episode_finished()
        assert inner.done == 1 and progress._active is outer
    assert progress._active is None


class ExpertWithTokens(ExpertGenerator):
    """The expert's actions, each answer counted as 3 response tokens (the expert itself counts none)."""

    def generate(self, prompts, params, hints=None):
        return [Generation(g.text, [1], [7, 7, 7], [-0.1] * 3, g.finish_reason)
                for g in super().generate(prompts, params, hints)]


def test_the_collector_reports_every_episode_and_its_tokens_to_the_active_job():
    stream = Lines()
    with progress.Job("eval sokoban", 4, "episode", every=0, stream=stream) as job:
        rollouts = collect(ExpertWithTokens(), [0, 1], CollectConfig(domain="sokoban", split="eval", group_size=2),
                           progress=False)
    assert job.done == 4 == len(rollouts.episodes_frame())
    assert job.token_count == rollouts.stats["response_tokens"] > 0
    # and nothing is reported (nor fails) with no job active
    collect(ExpertGenerator(), [0], CollectConfig(domain="sokoban", split="eval"), progress=False)


def test_the_console_shows_each_running_jobs_newest_line_once(tmp_path):
    logs = tmp_path / "logs"
    (logs / "runs").mkdir(parents=True)
    rl, done = logs / "runs" / "seg.log", logs / "old.log"
    rl.write_text("starting\ngentax progress: RL: step 1/6\nother output\ngentax progress: RL: step 2/6\n")
    done.write_text("gentax progress: eval: episode 8/8, done\n")
    os.utime(done, (time.time() - 600, time.time() - 600))  # finished long ago: not running
    seen: dict = {}
    assert list(progress.new_lines(logs, seen, time.time() - 60)) == ["[runs/seg.log] RL: step 2/6"]
    assert list(progress.new_lines(logs, seen, time.time() - 60)) == []  # nothing new since
    with open(rl, "a") as fh:
        fh.write("gentax progress: RL: step 3/6\n")
    assert list(progress.new_lines(logs, seen, time.time() - 60)) == ["[runs/seg.log] RL: step 3/6"]


def test_the_console_follower_is_off_at_zero_seconds(monkeypatch, tmp_path):
    monkeypatch.setenv("GENTAX_PROGRESS_EVERY", "0")
    assert progress.follow(tmp_path) is None


def test_a_mixture_steps_episodes_add_up_and_a_job_without_a_count_claims_no_end():
    job = progress.Job("RL mix", 2, "step", every=0, stream=Lines())
    with job:
        progress.episodes_planned(8)  # a mixture's step: one collect per domain
        progress.episodes_planned(4)
        progress.episode_finished()
        assert "1/12 episodes of step 1" in job.line()
    export = progress.Job("SFT export", 0, "step", every=0, stream=Lines())
    assert export.line().startswith("gentax progress: SFT export: 0s elapsed") and "done" not in export.line()
