"""`reinagent rl train` under a 2-process launch (accelerate launch, torchrun's launcher, gloo on
the CPU): both ranks train their own tasks through TRL's GRPOTrainer, rank 0 writes the same
checkpoint a one-process run writes, rank 1 its episodes under ranks/rank-1 (rl/ranks.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from reinagent.errors import ConfigError
from reinagent.rl import RLAgent

from .test_rl import _toml, tiny_model  # noqa: F401  (the module-scoped tiny model fixture)

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("accelerate")


def test_our_own_loops_refuse_a_multi_process_launch(tiny_model, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("WORLD_SIZE", "2")
    agent = RLAgent(model=f"local:{tiny_model}", env_name="arithmetic", max_turns=1, max_response_length=4,
                    num_tasks=2, batch_size=1, group_size=2, max_steps=1, trainer="reinagent", threads=1,
                    output_dir=str(tmp_path / "out"))
    with pytest.raises(ConfigError, match="trains through TRL only"):
        agent.train()
    assert not (tmp_path / "out").exists()


def test_rank_dirs(monkeypatch, tmp_path):
    from reinagent.rl.ranks import Rank, current_rank, launched_world

    for name in ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert launched_world() == 1 and current_rank() == Rank()
    assert Rank().own_dir(tmp_path) == tmp_path
    assert Rank(1, 2).own_dir(tmp_path) == tmp_path / "ranks" / "rank-1"
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    assert launched_world() == 4


@pytest.mark.slow
def test_two_process_launch_trains_and_writes_one_checkpoint(tiny_model, tmp_path):  # noqa: F811
    config = _toml(tmp_path, f"local:{tiny_model}", max_turns=1, max_steps=1, save_steps=1)
    # accelerate's CPU launcher is mpirun; --multi_gpu is its torchrun launcher, which on a machine
    # without GPUs starts CPU processes (accelerate then picks MULTI_CPU with gloo)
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
              "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
              "-m", "reinagent.cli", "rl", "train", "--config", str(config)]
    done = subprocess.run(launch, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    out = tmp_path / "out"
    assert (out / "checkpoint" / "rl.json").is_file()
    trainer = out / "trainer" / "checkpoint-1"
    assert (trainer / "trainer_state.json").is_file()
    assert {p.name for p in trainer.glob("rng_state_*.pth")} == {"rng_state_0.pth", "rng_state_1.pth"}  # two ranks
    from reinagent.store import read_records

    tasks = []
    for own in (out, out / "ranks" / "rank-1"):  # each rank its episodes and its metrics row
        records = read_records(own / "rollouts")
        assert len(records) == 4 and {r.trial for r in records} == {1}
        tasks.append({r.task_id.split("@")[0] for r in records})
        rows = [json.loads(line) for line in (own / "train_metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == [1] and rows[0]["trainer"] == "trl"
    assert not tasks[0] & tasks[1]  # TRL's sampler dealt each rank its own tasks
    from reinagent.rl.policy import load_policy

    model, _ = load_policy(f"local:{out / 'checkpoint'}")
    assert sum(p.numel() for p in model.parameters()) > 0
