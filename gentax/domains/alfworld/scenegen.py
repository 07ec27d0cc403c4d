"""Procedural ALFWorld games in the official format, built from what the ``alfworld`` wheel ships.

The official games cannot be downloaded at run time, so this module writes games of the same
format and kind (a folder with ``game.tw-pddl`` and ``traj_data.json``, which alfworld's own
loaders accept) from the wheel's ~120 ALFRED floor plans, object tables, goal library, PDDL domain
and grammar. docs/alfworld.md "Generated games" gives the recipe: floor plan (train and eval on
disjoint ones, ``EVAL_FLOOR_PLANS``), receptacles, task, objects, knobs, and the check by the real
engine and planner (``check_game``), whose plan becomes the game's walkthrough. A game is a pure
function of (split, task seed, ``SceneOptions``, ``GENERATOR_VERSION``), all four in its folder's
name, so racing workers write the same bytes (atomically).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import random
from pathlib import Path
from typing import Any

import numpy as np

from gentax.domains.alfworld import engine as alf_engine
from gentax.errors import GentaxError
from gentax.io import write_text

GENERATOR_VERSION = 1
MAX_ATTEMPTS = 60
#: plans longer than this are rejected (the default step limit is 50; leave the agent slack)
MAX_PLAN_LENGTH = 40

#: the six ALFWorld task types, official names (the keys of alfworld's goal library)
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
TASK_ALIASES = {
    "pick_and_place": "pick_and_place_simple",
    "look_at_obj": "look_at_obj_in_light",
    "pick_clean_then_place": "pick_clean_then_place_in_recep",
    "pick_heat_then_place": "pick_heat_then_place_in_recep",
    "pick_cool_then_place": "pick_cool_then_place_in_recep",
    "pick_two": "pick_two_obj_and_place",
}

_ALFRED_UNSEEN = (10, 219, 308, 424)
_THOR_TEST = tuple(n for base in (0, 200, 300, 400) for n in range(base + 1, base + 7))
EVAL_FLOOR_PLANS = tuple(sorted(set(_ALFRED_UNSEEN) | set(_THOR_TEST)))

#: receptacle that performs each state change, and the object property it needs
_TOOL = {
    "pick_clean_then_place_in_recep": ("SinkBasin", "Cleanable"),
    "pick_heat_then_place_in_recep": ("Microwave", "Heatable"),
    "pick_cool_then_place_in_recep": ("Fridge", "Coolable"),
}
_LAMP_HOLDERS = ("Desk", "SideTable", "Dresser", "Shelf")  # where official desk lamps stand
_BASINS = {"SinkBasin": "Sink", "BathtubBasin": "Bathtub"}  # basin class -> id prefix
_INSTANCE_WEIGHTS = ((1, 0.5), (2, 0.3), (3, 0.2))
_GRID = 0.25  # AI2-THOR navigation grid step (metres); location names use grid units


@dataclasses.dataclass(frozen=True)
class SceneOptions:
    """Difficulty knobs of generated games (``None`` = as the floor plan has it)."""

    task_types: tuple[str, ...] = TASK_TYPES
    max_receptacles: int | None = None
    max_objects: int | None = None

    @classmethod
    def parse(cls, task_types=None, max_receptacles=None, max_objects=None) -> "SceneOptions":
        types = canonical_task_types(task_types if task_types is not None else TASK_TYPES)
        for name, value, least in (("max_receptacles", max_receptacles, 4), ("max_objects", max_objects, 2)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < least):
                raise GentaxError(f"alfworld option {name} must be an integer >= {least} or null, got {value!r}")
        return cls(types, max_receptacles, max_objects)

    def key(self) -> str:
        """Short stable name of these options (part of the cache folder name)."""
        text = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def canonical_task_types(names) -> tuple[str, ...]:
    if isinstance(names, str):
        names = [names]
    out = []
    for name in names:
        canon = TASK_ALIASES.get(name, name)
        if canon not in TASK_TYPES:
            valid = ", ".join(TASK_TYPES + tuple(TASK_ALIASES))
            raise GentaxError(f"unknown alfworld task type {name!r}; valid: {valid}")
        if canon not in out:
            out.append(canon)
    if not out:
        raise GentaxError("alfworld option task_types must name at least one task type")
    return tuple(out)


# ---- alfworld's tables ---------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _tables() -> dict[str, Any]:
    c = alf_engine.import_alfworld("gen.constants")
    glib = alf_engine.import_alfworld("gen.goal_library")
    static = set(c.RECEPTACLES) - set(c.MOVABLE_RECEPTACLES)
    objects = set(c.OBJECTS) | set(c.MOVABLE_RECEPTACLES)
    holds = {r: set(v) & objects for r, v in c.VAL_RECEPTACLE_OBJECTS.items() if r in static}
    placeable = set().union(*holds.values())
    return {
        "static": static,
        "holds": holds,
        "placeable": placeable,
        "movable": set(c.MOVABLE_RECEPTACLES),
        "openable": set(c.OPENABLE_CLASS_SET),
        "actions": {k: set(v) & objects for k, v in c.VAL_ACTION_OBJECTS.items()},
        "otypes": sorted(objects - static),
        "rtypes": sorted(static),
        "goals": {t: glib.gdict[t] for t in TASK_TYPES},
    }


@dataclasses.dataclass(frozen=True)
class FloorPlan:
    number: int
    classes: frozenset[str]  # object and receptacle classes present in the room
    receptacles: tuple[tuple[str, tuple[float, float, int, int]], ...]  # (thor id, pose)
    floor: tuple[tuple[float, float], ...]  # reachable (x, z) points


@functools.lru_cache(maxsize=None)
def floor_plan(number: int) -> FloorPlan:
    layouts = alf_engine.alfworld_root() / "gen" / "layouts"
    base = layouts / f"FloorPlan{number}"
    classes = frozenset(json.loads(Path(f"{base}-objects.json").read_text()))
    poses = json.loads(Path(f"{base}-openable.json").read_text())
    floor = np.load(f"{base}-layout.npy")
    return FloorPlan(
        number,
        classes,
        tuple(sorted((k, tuple(v)) for k, v in poses.items())),
        tuple(sorted((float(x), float(z)) for x, z in floor.tolist())),
    )


@functools.lru_cache(maxsize=1)
def all_floor_plans() -> tuple[int, ...]:
    layouts = alf_engine.alfworld_root() / "gen" / "layouts"
    return tuple(sorted(int(p.name[9:-13]) for p in layouts.glob("FloorPlan*-objects.json")))


def split_floor_plans(split: str) -> tuple[int, ...]:
    plans = all_floor_plans()
    if split == "eval":
        return tuple(n for n in plans if n in EVAL_FLOOR_PLANS)
    return tuple(n for n in plans if n not in EVAL_FLOOR_PLANS)


@functools.lru_cache(maxsize=None)
def host_floor_plans(split: str, task_type: str) -> tuple[int, ...]:
    """The split's floor plans whose receptacle classes admit at least one task of the type."""
    static = _tables()["static"]
    hosts = []
    for number in split_floor_plans(split):
        plan = floor_plan(number)
        classes = {_class_of(r) for r, _ in plan.receptacles} | plan.classes
        if _candidate_tasks(task_type, plan, classes & static):
            hosts.append(number)
    return tuple(hosts)


# ---- scene ---------------------------------------------------------------------------------
def _class_of(thor_id: str) -> str:
    parts = thor_id.split("|")
    return parts[-1] if parts[-1] in _BASINS else parts[0]


def _fmt(v: float) -> str:
    return f"{v:+06.2f}"


def _thor_id(cls: str, x: float, y: float, z: float) -> str:
    prefix = _BASINS.get(cls, cls)
    suffix = f"|{cls}" if cls in _BASINS else ""
    return f"{prefix}|{_fmt(x)}|{_fmt(y)}|{_fmt(z)}{suffix}"


def _loc(x: float, z: float, rotation: int, horizon: int) -> str:
    return f"loc|{round(x / _GRID)}|{round(z / _GRID)}|{int(rotation) // 90 % 4}|{int(horizon)}"


def mangle(name: str) -> str:
    """alfworld's PDDL-safe spelling of a THOR id (``PlannedGameState.fix_pddl_str_chars``)."""
    for char, word in (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        name = name.replace(char, word)
    return name


@dataclasses.dataclass
class Scene:
    floor_plan: int
    task_type: str
    object_target: str
    parent_target: str  # "" for look-at
    toggle_target: str  # "" unless look-at
    receptacles: dict[str, str]  # thor id -> location
    objects: dict[str, tuple[str, str]]  # thor id -> (receptacle id or "", location)
    agent_location: str
    goal_text: str


def _receptacle_instances(plan: FloorPlan, rng: random.Random) -> dict[str, tuple[str, str]]:
    """thor id -> (class, location) for every receptacle of the room."""
    tables = _tables()
    out: dict[str, tuple[str, str]] = {}
    for thor_id, (x, z, rot, hor) in plan.receptacles:
        cls = _class_of(thor_id)
        if cls in tables["static"]:
            out[thor_id] = (cls, _loc(x, z, rot, hor))
    present = {cls for cls, _ in out.values()}
    for cls in sorted(plan.classes & tables["static"]):
        if cls in present:
            continue
        count, per_pose = (4, 2) if cls == "StoveBurner" else (1, 1)
        for i in range(0, count, per_pose):
            x, z = rng.choice(plan.floor)
            rot = rng.choice((0, 90, 180, 270))
            loc = _loc(x, z, rot, 30)
            for j in range(per_pose):
                dx, dz = {0: (0, 1), 90: (1, 0), 180: (0, -1), 270: (-1, 0)}[rot]
                reach = rng.uniform(0.5, 1.0)
                side = 0.25 * (j - (per_pose - 1) / 2)
                thor_id = _thor_id(cls, x + dx * reach + dz * side, rng.uniform(0.0, 1.6), z + dz * reach + dx * side)
                out[thor_id] = (cls, loc)
    return out


def _candidate_tasks(task_type: str, plan: FloorPlan, rec_classes: set[str]) -> list[tuple[str, str]]:
    """(object class, parent class) pairs valid for ``task_type`` in this room."""
    tables = _tables()
    objs = sorted(plan.classes & tables["placeable"])
    hosted = {o for o in objs if any(o in tables["holds"][r] for r in rec_classes)}
    if task_type == "look_at_obj_in_light":
        if "DeskLamp" not in plan.classes or not rec_classes & set(_LAMP_HOLDERS):
            return []
        return [(o, "") for o in sorted(hosted)]
    pairs = []
    for parent in sorted(rec_classes):
        for obj in sorted(hosted):
            if obj not in tables["holds"][parent]:
                continue
            if task_type in _TOOL:
                tool, prop = _TOOL[task_type]
                if tool not in rec_classes or parent == tool or obj not in tables["actions"][prop]:
                    continue
                # the object must be able to start somewhere that is neither parent nor tool
                if not any(obj in tables["holds"][r] for r in rec_classes - {parent, tool}):
                    continue
            elif not any(obj in tables["holds"][r] for r in rec_classes - {parent}):
                continue
            pairs.append((obj, parent))
    return pairs


def build_scene(plan: FloorPlan, task_type: str, opts: SceneOptions, rng: random.Random) -> Scene | None:
    """One random scene of ``task_type`` in ``plan`` (None when the room cannot host it)."""
    tables = _tables()
    holds = tables["holds"]
    recs = _receptacle_instances(plan, rng)
    rec_classes = {cls for cls, _ in recs.values()}
    pairs = _candidate_tasks(task_type, plan, rec_classes)
    if not pairs:
        return None
    obj_cls, parent = rng.choice(pairs)
    toggle = "DeskLamp" if task_type == "look_at_obj_in_light" else ""
    banned = {parent} | ({_TOOL[task_type][0]} if task_type in _TOOL else set())

    # receptacles the task needs, then the rest (optionally capped)
    by_class: dict[str, list[str]] = {}
    for thor_id in sorted(recs):
        by_class.setdefault(recs[thor_id][0], []).append(thor_id)
    required: list[str] = []
    if parent:
        required.append(rng.choice(by_class[parent]))
    if task_type in _TOOL:
        required.append(rng.choice(by_class[_TOOL[task_type][0]]))
    lamp_holder = None
    if toggle or "DeskLamp" in plan.classes:
        holders = [r for c in _LAMP_HOLDERS for r in by_class.get(c, [])]
        if holders:
            lamp_holder = rng.choice(holders)
            if toggle:
                required.append(lamp_holder)
    starts = [r for r in sorted(recs) if recs[r][0] not in banned and obj_cls in holds[recs[r][0]]]
    required.append(rng.choice(starts))
    required = list(dict.fromkeys(required))
    others = [r for r in sorted(recs) if r not in required]
    rng.shuffle(others)
    if opts.max_receptacles is not None:
        others = others[: max(0, opts.max_receptacles - len(required))]
    kept = sorted(required + others)
    if lamp_holder not in kept:
        lamp_holder = None

    # objects: targets first (always kept), then the room's other classes
    def instances(cls: str) -> int:
        r = rng.random()
        for n, w in _INSTANCE_WEIGHTS:
            if r < w:
                return n
            r -= w
        return _INSTANCE_WEIGHTS[-1][0]

    n_targets = rng.choice((2, 3)) if task_type == "pick_two_obj_and_place" else instances(obj_cls)
    target_homes = [r for r in kept if recs[r][0] not in banned and obj_cls in holds[recs[r][0]]]
    placements: list[tuple[str, str]] = [(obj_cls, rng.choice(target_homes)) for _ in range(n_targets)]
    others_placed: list[tuple[str, str]] = []
    for cls in sorted(plan.classes & tables["placeable"] - {obj_cls}):
        homes = [r for r in kept if cls in holds[recs[r][0]]]
        if homes:
            others_placed += [(cls, rng.choice(homes)) for _ in range(instances(cls))]
    rng.shuffle(others_placed)
    if opts.max_objects is not None:
        others_placed = others_placed[: max(0, opts.max_objects - len(placements))]
    placements += others_placed
    if lamp_holder is not None and "DeskLamp" in plan.classes:
        placements.append(("DeskLamp", lamp_holder))

    receptacles = {r: recs[r][1] for r in kept}
    objects: dict[str, tuple[str, str]] = {}
    for cls, home in placements:
        while True:  # ids are THOR-like: class|x|y|z near the receptacle; redraw on collision
            parts = home.split("|")
            x, y, z = (float(v) for v in parts[1:4])
            thor_id = _thor_id(cls, x + rng.uniform(-0.4, 0.4), y + rng.uniform(0.0, 0.2), z + rng.uniform(-0.4, 0.4))
            if thor_id not in objects:
                break
        objects[thor_id] = (home, receptacles[home])
    locations = sorted(set(receptacles.values()))
    # room objects with an object type of their own that never sit in a receptacle
    scenery = sorted((plan.classes & set(tables["otypes"])) - tables["placeable"] - {"DeskLamp"})
    for cls in scenery:
        x, z = rng.choice(plan.floor)
        objects[_thor_id(cls, x, rng.uniform(0.0, 2.0), z)] = ("", _loc(x, z, rng.choice((0, 90, 180, 270)), 30))
    while True:
        x, z = rng.choice(plan.floor)
        agent = _loc(x, z, rng.choice((0, 90, 180, 270)), 30)
        if agent not in locations:
            break
    template = rng.choice(tables["goals"][task_type]["templates"])
    goal_text = template.format(obj=obj_cls.lower(), recep=parent.lower(), toggle=toggle.lower(), mrecep="")
    return Scene(plan.number, task_type, obj_cls, parent, toggle, receptacles, objects, agent, goal_text)


# ---- game files ----------------------------------------------------------------------------
def pddl_problem(scene: Scene, name: str, *, task_objects_only: bool = False) -> str:
    """The scene as a PDDL problem laid out like the official ``initial_state.pddl``.

    ``task_objects_only`` keeps only the task's objects (target and lamp): the planning core, which
    is solvable (or already solved) exactly when the full problem is, with plans of the same command
    text, and which the blind planner searches many times faster (docs/alfworld.md, step 5).
    """
    tables = _tables()
    recs = {r: _class_of(r) for r in scene.receptacles}
    keep = {scene.object_target, scene.toggle_target}
    objects = {o: v for o, v in scene.objects.items() if not task_objects_only or _class_of(o) in keep}
    objs = {o: _class_of(o) for o in objects}
    placed = {o: home for o, (home, _) in objects.items() if home}
    locations = sorted(set(scene.receptacles.values()) | {loc for _, loc in objects.values()} | {scene.agent_location})
    m = mangle
    lines = [f"\n(define (problem plan_{name})", "(:domain alfred)", "(:objects", "agent1 - agent"]
    lines += [f"        {t}Type - otype" for t in tables["otypes"]]
    lines += [f"        {t}Type - rtype" for t in tables["rtypes"]]
    lines += [f"        {m(o)} - object" for o in sorted(objs)]
    lines += [f"        {m(r)} - receptacle" for r in sorted(recs)]
    lines += [f"        {m(loc)} - location" for loc in locations]
    lines += ["        )", "", "(:init"]
    init = [f"(receptacleType {m(r)} {c}Type)" for r, c in sorted(recs.items())]
    init += [f"(objectType {m(o)} {c}Type)" for o, c in sorted(objs.items())]
    contain = sorted({(c, oc) for c in recs.values() for oc in set(objs.values()) if oc in tables["holds"][c]})
    init += [f"(canContain {c}Type {oc}Type)" for c, oc in contain]
    init += [f"(pickupable {m(o)})" for o in sorted(placed) if objs[o] in tables["placeable"]]
    init += [f"(isReceptacleObject {m(o)})" for o in sorted(placed) if objs[o] in tables["movable"]]
    init += [f"(openable {m(r)})" for r, c in sorted(recs.items()) if c in tables["openable"]]
    init += [f"(atLocation agent1 {m(scene.agent_location)})"]
    for prop, fact in (("Cleanable", "cleanable"), ("Heatable", "heatable"), ("Coolable", "coolable")):
        init += [f"({fact} {m(o)})" for o in sorted(placed) if objs[o] in tables["actions"][prop]]
    # official games mark target objects that start in a fridge as already cool
    init += [
        f"(isCool {m(o)})"
        for o in sorted(placed)
        if objs[o] == scene.object_target and recs[placed[o]] == "Fridge"
    ]
    if scene.toggle_target:
        init += [f"(toggleable {m(o)})" for o in sorted(placed) if objs[o] == scene.toggle_target]
    init += [f"(sliceable {m(o)})" for o in sorted(placed) if objs[o] in tables["actions"]["Sliceable"]]
    init += [f"(inReceptacle {m(o)} {m(r)})" for o, r in sorted(placed.items())]
    init += [f"(receptacleAtLocation {m(r)} {m(loc)})" for r, loc in sorted(scene.receptacles.items())]
    init += [f"(objectAtLocation {m(o)} {m(loc)})" for o, (_, loc) in sorted(objects.items())]
    lines += [f"        {fact}" for fact in init]
    lines += ["        )", ""]
    goal = tables["goals"][scene.task_type]["pddl"].format(
        obj=scene.object_target, recep=scene.parent_target, toggle=scene.toggle_target, mrecep=""
    )
    lines.append(goal.replace("#", "-"))
    return "\n".join(lines)


def game_data(scene: Scene, name: str) -> dict[str, Any]:
    domain, grammar = alf_engine.domain_files()
    return {
        "pddl_domain": domain,
        "grammar": grammar.replace("UNKNOWN GOAL", scene.goal_text),
        "pddl_problem": pddl_problem(scene, name),
        "solvable": None,
        "walkthrough": None,
    }


def traj_data(scene: Scene, name: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "task_id": name,
        "task_type": scene.task_type,
        "pddl_params": {
            "object_target": scene.object_target,
            "parent_target": scene.parent_target,
            "toggle_target": scene.toggle_target,
            "mrecep_target": "",
            "object_sliced": False,
        },
        "scene": {"floor_plan": f"FloorPlan{scene.floor_plan}", "scene_num": scene.floor_plan},
        "turk_annotations": {"anns": [{"task_desc": scene.goal_text, "high_descs": [], "assignment_id": "gentax"}]},
        "plan": {"high_pddl": [], "low_actions": []},
        "gentax": meta,
    }


def check_game(engine, game: dict[str, Any]) -> tuple[str | None, list[str]]:
    """(rejection reason or None, planner walkthrough) for a candidate game (the generator passes
    its planning core), by the real engine."""
    already, plan = alf_engine.plan_game(engine, game)
    if already:
        return "already_solved", []
    if not plan:
        return "unsolvable", []
    if len(plan) > MAX_PLAN_LENGTH:
        return "plan_too_long", plan
    return None, plan


def game_dir(cache_root: str | Path, split: str, seed: int, opts: SceneOptions) -> Path:
    return Path(cache_root) / "alfworld" / f"gen-v{GENERATOR_VERSION}-{opts.key()}" / split / f"seed_{seed:07d}"


def task_type_for(seed: int, opts: SceneOptions) -> str:
    """Task types rotate with the seed, so any run of consecutive seeds covers them evenly."""
    return opts.task_types[seed % len(opts.task_types)]


def _attempt_rng(split: str, seed: int, opts: SceneOptions, attempt: int) -> random.Random:
    text = f"gentax-alfworld-v{GENERATOR_VERSION}|{split}|{seed}|{opts.key()}|{attempt}"
    return random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))


def generate_game(engine, split: str, seed: int, opts: SceneOptions, cache_root: str | Path) -> Path:
    """Write (if not cached yet) the game of (split, seed, opts); returns its ``game.tw-pddl``."""
    out = game_dir(cache_root, split, seed, opts)
    game_file = out / "game.tw-pddl"
    if game_file.is_file():
        return game_file
    task_type = task_type_for(seed, opts)
    plans = host_floor_plans(split, task_type)
    rejected: dict[str, int] = {}
    for attempt in range(MAX_ATTEMPTS):
        rng = _attempt_rng(split, seed, opts, attempt)
        scene = build_scene(floor_plan(rng.choice(plans)), task_type, opts, rng)
        if scene is None:
            rejected["room_cannot_host_task"] = rejected.get("room_cannot_host_task", 0) + 1
            continue
        name = f"gentax_{split}_{seed}"
        game = game_data(scene, name)
        core = dict(game, pddl_problem=pddl_problem(scene, name, task_objects_only=True))
        reason, plan = check_game(engine, core)
        if reason is not None:
            rejected[reason] = rejected.get(reason, 0) + 1
            continue
        game["solvable"] = True
        game["walkthrough"] = plan
        meta = {
            "generator_version": GENERATOR_VERSION,
            "split": split,
            "seed": seed,
            "options": dataclasses.asdict(opts),
            "attempt": attempt,
            "rejected": rejected,
        }
        # traj_data first: a folder counts as a game once game.tw-pddl exists
        write_text(out / "traj_data.json", json.dumps(traj_data(scene, name, meta), indent=2, sort_keys=True) + "\n")
        write_text(game_file, json.dumps(game))
        return game_file
    raise GentaxError(
        f"alfworld: no valid {task_type} scene for {split} seed {seed} in {MAX_ATTEMPTS} attempts "
        f"(rejections: {rejected}); loosen max_receptacles / max_objects"
    )
