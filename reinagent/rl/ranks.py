"""Which process of a multi-process launch this is (`accelerate launch`, `torchrun`), and where it writes.

TRL's GRPOTrainer runs data-parallel under a launcher: each process plays its own share of the
step's tasks (TRL's sampler deals whole groups to each), rewards are gathered for the advantages,
gradients are all-reduced. The output directory is shared, so its parts are owned:

    rank 0        everything a one-process run writes: train_metrics.jsonl, rollouts/, checkpoint/,
                  trainer/checkpoint-N (TRL saves from the main process)
    rank N > 0    its own episodes and metrics rows in ranks/rank-N/ (rollouts/, train_metrics.jsonl),
                  so no episode is lost and no two processes append to one file
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

# the variables torchrun / accelerate (WORLD_SIZE) and MPI launchers set for the number of processes
WORLD_VARS = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


def launched_world() -> int:
    """How many processes the launcher started (1 when run plainly)."""
    for name in WORLD_VARS:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 1


@dataclass(frozen=True)
class Rank:
    index: int = 0
    world: int = 1
    state: object = None  # accelerate's PartialState when world > 1 (it owns the process group)

    @property
    def main(self) -> bool:
        return self.index == 0

    def own_dir(self, out: Path) -> Path:
        """Where this process writes its episodes and metrics rows."""
        return out if self.main else out / "ranks" / f"rank-{self.index}"

    @contextlib.contextmanager
    def main_first(self) -> Iterator[None]:
        """Rank 0 prepares the shared output directory before the others write into it."""
        if self.state is None:
            yield
        else:
            with self.state.main_process_first():
                yield


def current_rank() -> Rank:
    """This process's rank; under a launcher it starts accelerate's process group (gloo on a CPU,
    nccl on GPUs), which TRL's trainer then uses."""
    if launched_world() <= 1:
        return Rank()
    import torch
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available())
    return Rank(state.process_index, state.num_processes, state)
