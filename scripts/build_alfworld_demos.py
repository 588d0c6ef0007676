"""Build the ALFWorld ReAct demonstrations: one per task type, from valid_train games.

    python scripts/build_alfworld_demos.py [--out reinagent/data/alfworld_demos]
    python scripts/build_alfworld_demos.py --number 2     # the second ones (--alfworld-demos 2)

The first demonstration of a type is <kind>.txt (its game in sources.json); the second,
<kind>-2.txt (sources-2.json), comes from the next game of that type that makes one, never the
first's game.

Each demonstration is a real episode played in the engine, so every observation in it is what the
game actually says. The engine's PDDL planner knows where every object is; a demonstration that
walks straight to the hidden object would teach the model to guess, so the episode first searches
two other plausible receptacles (opening closed ones), then follows the planner's plan from there.
Short thoughts, written from templates, mark the sub-goals as in the ReAct paper's prompts. The
games come from valid_train only: nothing from the evaluation splits (valid_unseen, valid_seen).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from reinagent.benchmarks import alfworld_data as data
from reinagent.benchmarks.alfworld_env import ALFWorldEnv, WorkerPool

OUT = Path(__file__).resolve().parent.parent / "reinagent" / "data" / "alfworld_demos"
VERB = {"clean": "clean", "heat": "heat", "cool": "cool"}


def article(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def parse_plan(plan: list[str]) -> dict[str, str]:
    """Object, receptacle, tool and lamp named by the planner's commands."""
    facts: dict[str, str] = {}
    for cmd in plan:
        if m := re.match(r"take (\w+) \d+ from (.+)", cmd):
            facts.setdefault("obj", m.group(1))
            facts.setdefault("found_at", m.group(2))
        elif m := re.match(r"put \w+ \d+ in/on (.+)", cmd):
            facts["target"] = m.group(1)
        elif m := re.match(r"(clean|heat|cool) \w+ \d+ with (.+)", cmd):
            facts["verb"], facts["tool"] = m.group(1), m.group(2)
        elif m := re.match(r"use (.+)", cmd):
            facts["lamp"] = m.group(1)
    return facts


def decoys(first_obs: str, found_at: str, avoid: set[str]) -> list[str]:
    """Two receptacles to search before the right one: same kind first, then listed order."""
    room = re.findall(r"an? ([a-z]+ \d+)", first_obs.split("Your task is to:")[0])
    kind = found_at.split()[0]
    others = [r for r in room if r != found_at and r not in avoid]
    same = sorted((r for r in others if r.split()[0] == kind), key=lambda r: int(r.split()[1]))
    rest = [r for r in others if r.split()[0] != kind and r.split()[0] in PLAUSIBLE]
    return (same + rest)[:2]


PLAUSIBLE = {"cabinet", "countertop", "drawer", "shelf", "desk", "diningtable", "sidetable",
             "dresser", "coffeetable", "bed", "sofa", "armchair", "fridge", "stoveburner"}


def play(env: ALFWorldEnv, kind: str) -> list[str] | None:
    """Play one game as a demonstration; the transcript lines, or None if it did not win."""
    obs, info = env.reset()
    facts = parse_plan(info["expert_plan"])
    if "obj" not in facts:
        return None
    obj, found_at = facts["obj"], facts["found_at"]
    # Name receptacles by kind ("shelf", not "shelf 2"): which one the planner picks changes
    # with the detours below, and the task text names only the kind.
    target, tool = _kind(facts.get("target", "")), _kind(facts.get("tool", ""))
    lamp = _kind(facts.get("lamp", "desklamp"))
    lines = [obs]

    def act(cmd: str) -> str:
        nonlocal info
        result, _, _, _, info = env.step(cmd)
        lines.extend([f"> {cmd}", result])
        return result

    def think(text: str) -> None:
        lines.extend([f"> think: {text}", "OK."])

    goal = {"put": f"find and take {article(obj)}, then put it in/on {target}",
            "examine": f"find and take {article(obj)}, then find and use {article(lamp)}",
            "puttwo": f"find and take the first {obj}, then put it in/on {target}, "
                      f"then find and take the second {obj}, then put it in/on {target}"}
    goal.update({v: f"find and take {article(obj)}, then {v} it with {tool}, "
                    f"then put it in/on {target}" for v in VERB})
    think(f"To solve the task, I need to {goal[kind]}.")
    search = [*decoys(obs, found_at, {facts.get("target", "")}), found_at]
    think(f"First I need to find {article(obj)}. {article(obj).capitalize()} is likely to be in "
          f"{', '.join(search[:-1])} or {search[-1]}. I will check them one by one, "
          f"starting with {search[0]}.")
    for place in search[:-1]:
        if "is closed" in act(f"go to {place}"):
            act(f"open {place}")
    taken = 0
    while info["expert_plan"] and not info["won"] and len(lines) < 120:
        cmd = info["expert_plan"][0]
        result = act(cmd)
        if re.search(rf"\b{obj} \d+", result) and cmd.startswith(("go to", "open")) and "take" in info["expert_plan"][0]:
            think(f"Now I find {article(obj)} ({info['expert_plan'][0].split()[2]}). Next, I need to take it.")
        elif cmd.startswith("take"):
            taken += 1
            nxt = {"put": f"put it in/on {target}", "puttwo": f"put it in/on {target}",
                   "examine": f"find {article(lamp)} and use it"}
            nxt.update({v: f"go to a {tool} and {v} it" for v in VERB})
            if kind == "examine" and info["expert_plan"][0].startswith("go to "):
                nxt[kind] += f". I will check {info['expert_plan'][0][6:]} first"
            think(f"Now I take {article(obj)}. Next, I need to {nxt[kind]}.")
        elif cmd.split()[0] in VERB:
            think(f"Now I {cmd.split()[0]} the {obj}. Next, I need to put it in/on {target}.")
        elif kind == "puttwo" and cmd.startswith("put") and taken == 1:
            think(f"Now I put the first {obj} in/on {target}. Next, I need to find the "
                  f"second {obj}. I will look again where I found the first one, then elsewhere.")
            act(f"go to {found_at}")
    return lines if info["won"] else None


def _kind(receptacle: str) -> str:
    return receptacle.rsplit(" ", 1)[0] if receptacle[-1:].isdigit() else receptacle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--max-plan", type=int, default=10, help="skip games with longer optimal plans")
    parser.add_argument("--number", type=int, choices=(1, 2), default=1, help="which demonstration of each type")
    args = parser.parse_args()
    root = data.data_dir()
    games = data.list_games(root, "valid_train")
    pool = WorkerPool(1)
    sources: dict[str, str] = {}
    suffix = "" if args.number == 1 else f"-{args.number}"
    taken = set()
    if args.number > 1:  # never the first demonstration's game again
        taken = set(json.loads((args.out / "sources.json").read_text(encoding="utf-8")).values())
    try:
        for task_type, kind in data.TASK_TYPES.items():
            for game in (g for g in games if g.task_type == task_type and f"valid_train/{g.game_id}" not in taken):
                env = ALFWorldEnv(pool, game.path, game_id=game.game_id, max_steps=200, expert="planner")
                try:
                    lines = play(env, kind) if _short(env, args.max_plan) else None
                finally:
                    env.close()
                if lines:
                    args.out.mkdir(parents=True, exist_ok=True)
                    (args.out / f"{kind}{suffix}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
                    sources[kind] = f"valid_train/{game.game_id}"
                    print(f"{kind}: {game.game_id} ({sum(ln.startswith('> ') for ln in lines)} steps)")
                    break
    finally:
        pool.close()
    (args.out / f"sources{suffix}.json").write_text(json.dumps(sources, indent=2) + "\n", encoding="utf-8")


def _short(env: ALFWorldEnv, max_plan: int) -> bool:
    _, info = env.reset()
    return len(info["expert_plan"]) <= max_plan


if __name__ == "__main__":
    main()
