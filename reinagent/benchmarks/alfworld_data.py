"""Where the ALFWorld game files live, and unpacking the copy that ships with the package.

The package carries `reinagent/data/alfworld/alfworld-json_2.1.1-valid.tar.gz` (4 MB; see
PROVENANCE.md next to it). On first use it is unpacked once into a cache folder; a researcher with
their own copy points `ALFWORLD_DATA` (or `alfworld_data` in the run config) at it instead.

    python -m reinagent.benchmarks.alfworld_data          # unpack now, print the folder
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from reinagent.errors import ConfigError, choices
from reinagent.paths import DATA_DIR, cache_root

ARCHIVE = "alfworld-json_2.1.1-valid.tar.gz"
GAMES_DIR = "json_2.1.1"
SPLITS: dict[str, int] = {"valid_unseen": 134, "valid_seen": 140, "valid_train": 200}

# The six ALFRED task types, by the prefix of a game's folder name, with the short names the
# ReAct paper uses for its demonstrations (and we for ours).
TASK_TYPES: dict[str, str] = {
    "pick_and_place_simple": "put",
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "look_at_obj_in_light": "examine",
    "pick_two_obj_and_place": "puttwo",
}


@dataclass(frozen=True)
class GameFile:
    """One game of a split: its folder names and the path of its `game.tw-pddl`."""

    task_dir: str  # e.g. look_at_obj_in_light-AlarmClock-None-DeskLamp-308
    trial_dir: str  # e.g. trial_T20190908_222917_366542
    path: Path
    task_type: str  # one of TASK_TYPES

    @property
    def game_id(self) -> str:
        return f"{self.task_dir}/{self.trial_dir}"


def _check(root: Path, source: str) -> Path:
    if not (root / GAMES_DIR).is_dir():
        raise ConfigError(
            f"ALFWorld data folder {root} (from {source}) has no {GAMES_DIR}/ inside; point it at "
            "the unpacked alfworld_data/ folder, or unset it to use the copy shipped with reinagent"
        )
    return root


def data_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The folder that holds json_2.1.1/: the argument, ALFWORLD_DATA, or the unpacked cache."""
    if explicit:
        return _check(Path(explicit).expanduser(), "alfworld_data in the config")
    if os.environ.get("ALFWORLD_DATA"):
        return _check(Path(os.environ["ALFWORLD_DATA"]).expanduser(), "ALFWORLD_DATA")
    return ensure_unpacked()


def ensure_unpacked(dest: Path | None = None) -> Path:
    """Unpack the shipped archive into `dest` (default: the cache) once; return the folder.

    Unpacking goes to a temporary sibling folder that is renamed into place, so concurrent first
    runs and a Ctrl-C half-way never leave a partial game folder that looks complete.
    """
    target = dest or cache_root() / "alfworld_data"
    if (target / GAMES_DIR).is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".alfworld-unpack-", dir=target.parent))
    try:
        archive = DATA_DIR / "alfworld" / ARCHIVE
        if not archive.is_file():
            raise ConfigError(f"the ALFWorld archive {archive} is missing from the package")
        with tarfile.open(archive, "r:gz") as tar:
            tar.extractall(scratch, filter="data")  # "data": no absolute paths or links out
        try:
            os.rename(scratch / "alfworld_data", target)
        except OSError:
            if not (target / GAMES_DIR).is_dir():  # lost a race to another process: fine
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def list_games(root: Path, split: str) -> list[GameFile]:
    """The solvable games of a split in a stable (sorted) order.

    ALFWorld itself lists games with os.walk, whose order depends on the file system; sorting the
    folder names gives every machine the same task order, so `--num_envs 10` means the same games.
    The filters are ALFWorld's own (AlfredTWEnv.collect_game_files): no movable/sliced
    variants, and only games whose file says they are solvable.
    """
    if split not in SPLITS:
        raise ConfigError(f"unknown ALFWorld split {split!r}; valid: {choices(SPLITS)}")
    split_dir = root / GAMES_DIR / split
    if not split_dir.is_dir():
        raise ConfigError(f"ALFWorld split folder {split_dir} does not exist")
    games = []
    for path in sorted(split_dir.glob("*/*/game.tw-pddl")):
        trial, task = path.parent, path.parent.parent
        if "movable" in task.name or "Sliced" in task.name:
            continue
        if not (trial / "traj_data.json").is_file():
            continue
        task_type = next((t for t in TASK_TYPES if task.name.startswith(t)), None)
        if task_type is None:
            continue
        if str(json.loads(path.read_text(encoding="utf-8")).get("solvable")) != "True":
            continue
        games.append(GameFile(task.name, trial.name, path, task_type))
    return games


if __name__ == "__main__":
    folder = ensure_unpacked(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
    counts = {split: len(list_games(folder, split)) for split in SPLITS}
    print(folder)
    print(", ".join(f"{split}: {n} games" for split, n in counts.items()))
