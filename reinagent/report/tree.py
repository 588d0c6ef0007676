"""A search rollout's tree (Trajectory.tree: ToT, MCTS) arranged for drawing: children under
their parent, the chosen path marked, long observations shortened.

The chosen path is the one the search recorded (`Trajectory.extra["search"]["chosen"]`, node ids
from the root, as reinagent/rollouts/search.py writes it); else the one the episode's steps took
(what the Reflector and LAST_ATTEMPT saw), followed from the root by matching each step's action
among the children; else the path to the first successful terminal node, the best terminal node
by reward, or the best node by value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reinagent.records import SearchNode, Trajectory

OBSERVATION_CHARS = 240  # a node box stays a few lines high; the full text is in the steps


@dataclass
class DrawnNode:
    node: SearchNode
    chosen: bool
    observation: str
    children: list[DrawnNode] = field(default_factory=list)


def chosen_path(traj: Trajectory) -> list[int]:
    """Node ids from the root to the end of the chosen path ([] for an empty tree)."""
    tree = traj.tree
    if not tree:
        return []
    by_id = {n.id: n for n in tree}
    search = traj.extra.get("search")
    recorded = search.get("chosen") if isinstance(search, dict) else None
    if _is_path(by_id, recorded):
        return list(recorded)
    children = _children(tree)
    root = tree[0]
    path = [root.id]
    for step in traj.steps:
        if step.action is None:
            continue
        matches = [c for c in children.get(path[-1], []) if _same(c.action, step.action)]
        if not matches:
            break
        # Sampled siblings may repeat an action: prefer the one that saw the same observation.
        path.append(max(matches, key=lambda c: (_same(c.observation, step.observation), bool(c.success),
                                                c.value if c.value is not None else float("-inf"))).id)
    else:
        if len(path) > 1:
            return path
    return _path_to(by_id, _best_leaf(tree).id)


def drawn_tree(traj: Trajectory) -> list[DrawnNode]:
    """The tree's roots (normally one: node 0), each with its children nested below it."""
    chosen = set(chosen_path(traj))
    drawn = {n.id: DrawnNode(n, n.id in chosen, shorten(n.observation)) for n in traj.tree}
    by_id = {n.id: n for n in traj.tree}
    roots = []
    for n in traj.tree:
        # A node whose parent is missing, or whose ancestry loops, is drawn as a root of its own:
        # every node appears exactly once and the drawing always ends.
        parent = drawn.get(n.parent) if _reaches_root(by_id, n) and n.parent is not None else None
        (parent.children if parent else roots).append(drawn[n.id])
    return roots


def tree_depth(traj: Trajectory) -> int:
    return max((n.depth for n in traj.tree), default=0)


def shorten(text: str | None, limit: int = OBSERVATION_CHARS) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_path(by_id: dict[int, SearchNode], ids: object) -> bool:
    """A list of node ids, each the parent of the next, starting at a root."""
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and i in by_id for i in ids):
        return False
    return by_id[ids[0]].parent is None and all(by_id[b].parent == a for a, b in zip(ids, ids[1:]))


def _reaches_root(by_id: dict[int, SearchNode], n: SearchNode) -> bool:
    seen = {n.id}
    while n.parent is not None and n.parent in by_id:
        if n.parent in seen:
            return False
        seen.add(n.parent)
        n = by_id[n.parent]
    return True


def _children(tree: list[SearchNode]) -> dict[int, list[SearchNode]]:
    out: dict[int, list[SearchNode]] = {}
    for n in tree:
        if n.parent is not None:
            out.setdefault(n.parent, []).append(n)
    return out


def _same(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and " ".join(a.split()) == " ".join(b.split())


def _best_leaf(tree: list[SearchNode]) -> SearchNode:
    terminals = [n for n in tree if n.terminal]
    won = [n for n in terminals if n.success]
    if won:
        return won[0]
    if terminals:
        return max(terminals, key=lambda n: (n.reward if n.reward is not None else float("-inf"), n.depth))
    return max(tree, key=lambda n: (n.value if n.value is not None else float("-inf"), n.depth))


def _path_to(by_id: dict[int, SearchNode], node_id: int) -> list[int]:
    path, seen = [], set()
    current: int | None = node_id
    while current is not None and current in by_id and current not in seen:  # a cycle must not hang
        seen.add(current)
        path.append(current)
        current = by_id[current].parent
    return path[::-1]
