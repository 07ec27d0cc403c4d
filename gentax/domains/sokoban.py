"""Sokoban: push the box onto the target in a small room (gym-sokoban rooms, text state).

docs/domains.md "Sokoban" describes the observation, the actions, the expert and the knobs.
Rooms come from gym-sokoban's own generator (every room is solvable); a room whose shortest
solution is outside ``min_solution_length``..``max_solution_length`` is redrawn. The observation
lists ``(row, col)`` coordinates, one kind per line, not a grid (the study's change: a grid made
RL fail). Bumping into a wall or a blocked box is a valid move that changes nothing, as in
gym-sokoban. The expert is a breadth-first search, so it plays a shortest solution.
"""

from __future__ import annotations

import collections
import importlib
import importlib.util
import random
import re
import sys
import threading
import types
from typing import Any

import numpy as np

from gentax.domains.augment import article
from gentax.domains.base import DomainEnv, InvalidAction, Observation, Task
from gentax.domains.spec import Augmentation, DomainSpec, exact_action
from gentax.errors import GentaxError

MOVES: dict[str, tuple[int, int]] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
ACTIONS = tuple(MOVES)
MAX_ATTEMPTS = 200  # redraws per task before giving up (knob combinations no room satisfies)

Cell = tuple[int, int]
State = tuple[Cell, frozenset[Cell]]

_ALIAS = "_gentax_gym_sokoban"


def gym_sokoban_module(name: str) -> types.ModuleType:
    """Import ``gym_sokoban.envs.<name>`` without the package's ``__init__``, which (like its render
    module) imports ``pkg_resources``, gone from setuptools >= 81. The modules load under a private
    alias, so nothing named ``gym_sokoban`` is half-imported; rendering is a stub that raises."""
    spec = importlib.util.find_spec("gym_sokoban")
    if spec is None or not spec.submodule_search_locations:
        raise GentaxError("the sokoban domain needs gym-sokoban (pip install gym-sokoban==0.0.6)")
    root = list(spec.submodule_search_locations)[0]
    for alias, path in ((_ALIAS, root), (f"{_ALIAS}.envs", f"{root}/envs")):
        if alias not in sys.modules:
            pkg = types.ModuleType(alias)
            pkg.__path__ = [path]
            sys.modules[alias] = pkg
    render_alias = f"{_ALIAS}.envs.render_utils"
    if name == "sokoban_env" and render_alias not in sys.modules:
        stub = types.ModuleType(render_alias)

        def _no_render(*_args, **_kwargs):
            raise NotImplementedError("gentax loads gym-sokoban without its image rendering")

        stub.room_to_rgb = stub.room_to_tiny_world_rgb = _no_render
        sys.modules[render_alias] = stub
    return importlib.import_module(f"{_ALIAS}.envs.{name}")


def gym_sokoban_env(spec: dict[str, Any]):
    """gym-sokoban's own ``SokobanEnv`` set to a task's start state (for cross-checks and the
    benchmark: gentax steps its own pure-Python copy of the rules)."""
    rows, cols = spec["room_size"]
    env = gym_sokoban_module("sokoban_env").SokobanEnv(dim_room=(rows, cols), num_boxes=len(spec["boxes"]), reset=False)
    fixed = np.ones((rows, cols), dtype=int)  # gym-sokoban codes: 0 wall, 1 floor, 2 target
    for r, c in spec["walls"]:
        fixed[r, c] = 0
    for r, c in spec["targets"]:
        fixed[r, c] = 2
    state = fixed.copy()  # plus 3 box on target, 4 box elsewhere, 5 player
    for r, c in spec["boxes"]:
        state[r, c] = 3 if fixed[r, c] == 2 else 4
    state[tuple(spec["player"])] = 5
    env.room_fixed, env.room_state, env.player_position = fixed, state, np.array(spec["player"])
    env.num_env_steps, env.reward_last, env.boxes_on_target = 0, 0, 0
    return env


def _cells(grid: np.ndarray, *values: int) -> list[Cell]:
    rows, cols = np.nonzero(np.isin(grid, values))
    return sorted(zip(rows.tolist(), cols.tolist()))


def _fmt(cells) -> str:
    return ", ".join(f"({r}, {c})" for r, c in sorted(cells))


class Room:
    """The fixed part of a room plus the rules of movement (pure Python, no numpy per step)."""

    def __init__(self, rows: int, cols: int, walls: set[Cell], targets: frozenset[Cell]):
        self.rows, self.cols = rows, cols
        self.walls = walls
        self.targets = targets

    def blocked(self, cell: Cell) -> bool:
        r, c = cell
        return cell in self.walls or not (0 <= r < self.rows and 0 <= c < self.cols)

    def move(self, state: State, action: str) -> State:
        """The state after ``action`` (the same state when the player bumps)."""
        (pr, pc), boxes = state
        dr, dc = MOVES[action]
        nxt = (pr + dr, pc + dc)
        if self.blocked(nxt):
            return state
        if nxt in boxes:
            beyond = (nxt[0] + dr, nxt[1] + dc)
            if self.blocked(beyond) or beyond in boxes:
                return state
            return nxt, (boxes - {nxt}) | {beyond}
        return nxt, boxes

    def solved(self, state: State) -> bool:
        return state[1] <= self.targets

    def solve(self, start: State, limit: int = 200_000) -> list[str] | None:
        """A shortest action sequence from ``start`` to a solved state (None: unsolvable)."""
        if self.solved(start):
            return []
        parent: dict[State, tuple[State, str] | None] = {start: None}
        queue = collections.deque([start])
        while queue and len(parent) < limit:
            state = queue.popleft()
            for action in ACTIONS:
                nxt = self.move(state, action)
                if nxt in parent:
                    continue
                parent[nxt] = (state, action)
                if self.solved(nxt):
                    path = []
                    while parent[nxt] is not None:
                        nxt, act = parent[nxt]
                        path.append(act)
                    return path[::-1]
                queue.append(nxt)
        return None


#: gym-sokoban draws from the global RNGs: one room at a time per process, or two threads' rooms
#: (verl's agent loops make tasks from threads at once) would interleave their draws
_GLOBAL_RNG = threading.Lock()


def generate(dim: tuple[int, int], num_boxes: int, num_steps: int, seed: int) -> dict[str, Any]:
    """One gym-sokoban room from ``seed``; the global RNG states are restored afterwards."""
    room_utils = gym_sokoban_module("room_utils")
    with _GLOBAL_RNG:
        py_state, np_state = random.getstate(), np.random.get_state()
        try:
            random.seed(seed)
            np.random.seed(seed % 2**32)
            fixed, state, _ = room_utils.generate_room(dim=dim, num_steps=num_steps, num_boxes=num_boxes)
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
    return {
        "room_size": list(dim),
        "walls": [list(c) for c in _cells(fixed, 0)],
        "targets": [list(c) for c in _cells(fixed, 2)],
        "boxes": [list(c) for c in _cells(state, 3, 4)],
        "player": list(_cells(state, 5)[0]),
    }


class SokobanEnv(DomainEnv):
    name = "sokoban"
    default_max_steps = 15
    default_options = {
        "room_size": 6,
        "num_boxes": 1,
        "num_steps": None,
        "min_solution_length": 3,
        "max_solution_length": 15,
        # False: the floor alone is listed ("every cell not listed as floor is a wall"): a room's
        # border walls cost no prompt tokens; the study's default lists both
        "list_walls": True,
    }

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        opts = super().check_options(options)
        _room_dims(opts["room_size"])
        _int_option(opts, "num_boxes", 1, 4)
        if opts["num_steps"] is not None:
            _int_option(opts, "num_steps", 1, 1000)
        shortest, longest = _int_option(opts, "min_solution_length", 0, 1000), _int_option(opts, "max_solution_length", 0, 1000)
        if longest and longest < shortest:
            raise GentaxError(f"sokoban: max_solution_length {longest} < min_solution_length {shortest}")
        if not isinstance(opts["list_walls"], bool):
            raise GentaxError(f"sokoban option list_walls must be true or false, got {opts['list_walls']!r}")
        return opts

    def __init__(self, split: str = "train", seed: int = 0, max_steps: int | None = None, **options):
        super().__init__(split=split, seed=seed, max_steps=max_steps, **options)
        self.dim = _room_dims(self.options["room_size"])
        self.num_boxes = self.options["num_boxes"]
        steps = self.options["num_steps"]
        self.num_gen_steps = int(1.7 * sum(self.dim)) if steps is None else steps
        self.min_len = self.options["min_solution_length"]
        self.max_len = self.options["max_solution_length"]
        self.room: Room | None = None
        self.state: State | None = None
        self._plan: dict[State, str] = {}

    # ---- tasks -----------------------------------------------------------------------------
    def _make_task(self, seed: int) -> Task:
        for attempt in range(MAX_ATTEMPTS):
            # str seeds hash with SHA-512 in random.Random: stable across runs and processes
            room_seed = random.Random(f"sokoban/{self.split}/{seed}/{attempt}").getrandbits(63)
            try:
                spec = generate(self.dim, self.num_boxes, self.num_gen_steps, room_seed)
            except (RuntimeError, RuntimeWarning):  # the generator's "no room found" signals
                continue
            room, start = _room_and_state(spec)
            solution = room.solve(start)
            if solution is None or len(solution) < self.min_len or (self.max_len and len(solution) > self.max_len):
                continue
            spec.update(solution=solution, attempt=attempt)
            return Task(self.name, self.split, seed, spec)
        raise GentaxError(
            f"sokoban: no room of size {self.dim} with {self.num_boxes} box(es) and a solution of "
            f"{self.min_len}..{self.max_len or 'any'} moves in {MAX_ATTEMPTS} draws (seed {seed}); relax the options"
        )

    # ---- protocol --------------------------------------------------------------------------
    def _reset(self, task: Task) -> Observation:
        self.room, self.state = _room_and_state(task.spec)
        rows, cols = self.room.rows, self.room.cols
        floor = [(r, c) for r in range(rows) for c in range(cols) if (r, c) not in self.room.walls]
        corner = f"Room {rows}x{cols}; coordinates are (row, col), 0-based, (0, 0) is the top-left corner"
        if self.options["list_walls"]:
            self._head = f"{corner}.\nWalls: {_fmt(self.room.walls)}\nFloor: {_fmt(floor)}\n"
        else:
            self._head = f"{corner}; every cell not listed as floor is a wall.\nFloor: {_fmt(floor)}\n"
        self._tail = f"Target: {_fmt(self.room.targets)}"
        boxes = "the box" if len(self.room.targets) == 1 else "every box"
        self._goal = (
            f"Push {boxes} onto {'the target' if len(self.room.targets) == 1 else 'a target'}. "
            "Moves: up (row - 1), down (row + 1), left (col - 1), right (col + 1); "
            "walking into a box pushes it one cell if the cell behind it is free."
        )
        self._plan = {}
        return self._render()

    def _step(self, action: str) -> tuple[Observation, bool]:
        move = action.lower()
        if move not in MOVES:
            raise InvalidAction("not_admissible", f"{action[:40]!r} is not one of {', '.join(ACTIONS)}")
        self.state = self.room.move(self.state, move)
        return self._render(), self.room.solved(self.state)

    def expert_action(self) -> str:
        if self.state not in self._plan:
            path = self.room.solve(self.state)
            if not path:  # unsolvable (a box is stuck) or solved: any legal move
                return ACTIONS[0]
            state = self.state
            for act in path:
                self._plan[state] = act
                state = self.room.move(state, act)
        return self._plan[self.state]

    # ---- internals -------------------------------------------------------------------------
    def _render(self) -> Observation:
        (pr, pc), boxes = self.state
        text = f"{self._head}Player: ({pr}, {pc})\nBox: {_fmt(boxes)}\n{self._tail}"
        return Observation(text=text, goal=self._goal, admissible=ACTIONS)


def _room_and_state(spec: dict[str, Any]) -> tuple[Room, State]:
    rows, cols = spec["room_size"]
    room = Room(rows, cols, {tuple(c) for c in spec["walls"]}, frozenset(tuple(c) for c in spec["targets"]))
    return room, (tuple(spec["player"]), frozenset(tuple(c) for c in spec["boxes"]))


def _room_dims(size: Any) -> tuple[int, int]:
    dims = [size, size] if isinstance(size, int) else list(size) if isinstance(size, (list, tuple)) else []
    if len(dims) != 2 or not all(isinstance(d, int) and not isinstance(d, bool) and 5 <= d <= 20 for d in dims):
        raise GentaxError(f"sokoban option room_size must be an int or [rows, cols] in 5..20, got {size!r}")
    return dims[0], dims[1]


def _int_option(options: dict[str, Any], key: str, low: int, high: int) -> int:
    value = options[key]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise GentaxError(f"sokoban option {key} must be an int in {low}..{high}, got {value!r}")
    return value


# ---- augmentation sources: 10-token lines "(7, 2) shows a Broken crate (beyond the wall;
# unreachable)" at distinct coordinates outside the room's bounding box, so never a real cell ----
SOKOBAN_THINGS = (
    "Broken crate", "Cracked tile", "Rusty pipe", "Pile of rubble", "Faded marking",
    "Empty barrel", "Loose brick", "Puddle of water", "Old lantern", "Dusty sack",
)  # fmt: skip
_COORD = re.compile(r"\((\d+),\s*(\d+)\)")
_ROOM_SIZE = re.compile(r"\bRoom (\d+)x(\d+)")


def _room_cells(text: str) -> set[tuple[int, int]]:
    return {(int(r), int(c)) for r, c in _COORD.findall(text)}


def sokoban_distractor_cells(text: str, count: int, rng: random.Random) -> list[tuple[int, int]]:
    """``count`` distinct cells outside the bounding box of every coordinate in ``text``."""
    cells = _room_cells(text)
    size = _ROOM_SIZE.search(text)  # the room's own corner: its walls may go unlisted (list_walls false)
    rows = max([r + 1 for r, _ in cells] + [int(size[1]) if size else 0])
    cols = max([c + 1 for _, c in cells] + [int(size[2]) if size else 0])
    margin = 2
    while True:
        outside = [
            (r, c) for r in range(rows + margin) for c in range(cols + margin) if r >= rows or c >= cols
        ]
        if len(outside) >= count:
            return rng.sample(outside, count)
        margin *= 2


def sokoban_distractors(text, count, rng, keywords, layout):
    placed = []
    for r, c in sokoban_distractor_cells(text, count, rng):
        thing = rng.choice(SOKOBAN_THINGS)
        line = f"({r}, {c}) shows {article(thing)} {thing} (beyond the wall; unreachable)"
        placed.append((rng.choice(layout.boundaries), line))
    return placed


#: everything domain-specific about Sokoban (gentax.domains.spec); the goal text states the move rules
SPEC = DomainSpec(
    name="sokoban",
    env="gentax.domains.sokoban:SokobanEnv",
    intro="You are an expert agent solving a Sokoban puzzle.",
    action_syntax=exact_action,
    augmentation=Augmentation(
        nominal_tokens=10, donor_chars_per_token=1.5, separator="\n", monitor_shows="a puzzle game",
        distractors=sokoban_distractors,
    ),
)
