#!/usr/bin/env bash
# GRPO on the `arithmetic` benchmark with the embedded SmolLM2-135M-Instruct, on CPU:
# held-out success (test split, greedy) before and after training, with 95% intervals. The
# prompt is the bare question (react_format = false): replies are a few tokens, so it fits minutes.
# Usage: scripts/rl_demo.sh [WORK_DIR] [STEPS] [LEARNING_RATE]   (output also in WORK_DIR/rl_demo_output.txt;
# one run's output is committed as docs/rl_demo_output.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-runs/rl_demo}
STEPS=${2:-8}
LR=${3:-2e-5}
RL="${REINAGENT:-.venv/bin/reinagent} rl"
mkdir -p "$WORK"
OUT="$WORK/rl_demo_output.txt"
cat > "$WORK/rl.toml" <<TOML
[rl]
env_name = "arithmetic"
model = "local"
max_turns = 1
max_response_length = 8
react_format = false
rollout_strategy = "StandardReAct"
max_workers = 16
output_dir = "$WORK/train"
method = "grpo"
trainer = "trl"
group_size = 4
batch_size = 4
max_steps = $STEPS
learning_rate = $LR
kl_coef = 0.02
temperature = 1.0
overwrite = true
TOML
sed "s|^model = \"local\"|model = \"local:$WORK/train/checkpoint\"|" "$WORK/rl.toml" > "$WORK/rl-trained.toml"
{
  echo "# scripts/rl_demo.sh $WORK $STEPS $LR   ($(date -u +%Y-%m-%dT%H:%MZ), git $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "# machine: $(nproc) CPU cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
  echo "# (shared and busy while this ran: other jobs held the cores, so the timings are pessimistic)"
  START=$(date +%s)
  echo "== before training (embedded SmolLM2-135M-Instruct) =="
  $RL eval --config "$WORK/rl.toml" --split test
  echo "== GRPO (TRL's GRPOTrainer): $STEPS steps x 4 tasks x G=4 episodes on the train split, learning rate $LR =="
  $RL train --config "$WORK/rl.toml"
  echo "== after training =="
  $RL eval --config "$WORK/rl-trained.toml" --split test
  echo "# wall time $(( $(date +%s) - START )) s; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
} 2>&1 | grep -v -e "Loading weights" -e "Writing model shards" | tee "$OUT"
