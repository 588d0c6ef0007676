#!/usr/bin/env bash
# GRPO on `arithmetic20` (sums and differences of 0..19: 500 train / 300 held-out test problems)
# with the embedded SmolLM2-135M-Instruct on CPU, through TRL's GRPOTrainer. The base model and the
# trained one are evaluated greedily on the same 300 held-out tasks; the last line pairs them task
# by task: `held-out success: B% -> A% on N tasks, McNemar p = P` (exact McNemar test).
# The prompt is the bare question (react_format = false): replies are a few tokens.
# Usage: scripts/rl_demo.sh [OUTDIR] [STEPS] [LEARNING_RATE] [GROUP_SIZE]
#   (output also in OUTDIR/rl_demo_output.txt; a run's output is committed as docs/rl_demo_output.txt)
#   TRAIN_PRECISION=bf16: the trainer under bf16 autocast over fp32 master weights (default fp32)
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-runs/rl_demo}
STEPS=${2:-40}
LR=${3:-1e-5}
GROUP=${4:-8}
RL="${REINAGENT:-.venv/bin/reinagent} rl"
# Training needs the `rl` extra (trl, datasets, ...), which ./run_reinagent.sh does not install:
# say so in a second, not after the 2-minute evaluation of the base model.
"${PYTHON:-.venv/bin/python}" - <<'PY'
import sys
from reinagent.errors import ConfigError
from reinagent.rl.policy import require_extra
try:
    require_extra("train")
except ConfigError as err:
    print(f"error: {err}", file=sys.stderr)
    sys.exit(2)
PY
mkdir -p "$WORK"
OUT="$WORK/rl_demo_output.txt"
cat > "$WORK/rl.toml" <<TOML
[rl]
env_name = "arithmetic20"
model = "local"
max_turns = 1
max_response_length = 8
react_format = false
rollout_strategy = "StandardReAct"
max_workers = 32
output_dir = "$WORK/train"
method = "grpo"
trainer = "trl"
group_size = $GROUP
batch_size = 4
max_steps = $STEPS
save_steps = $STEPS
learning_rate = $LR
kl_coef = 0.04
train_precision = "${TRAIN_PRECISION:-fp32}"
temperature = ${TEMPERATURE:-1.0}
dynamic_sampling = ${DYNAMIC_SAMPLING:-2}
overwrite = true
TOML
sed "s|^model = \"local\"|model = \"local:$WORK/train/checkpoint\"|" "$WORK/rl.toml" > "$WORK/rl-trained.toml"
{
  echo "# scripts/rl_demo.sh $WORK $STEPS $LR $GROUP   ($(date -u +%Y-%m-%dT%H:%MZ), git $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "# machine: $(nproc) CPU cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
  START=$(date +%s)
  echo "== before training: the embedded SmolLM2-135M-Instruct, greedy, held-out test split =="
  $RL eval --config "$WORK/rl.toml" --split test --save "$WORK/base.json"
  echo "== GRPO (TRL's GRPOTrainer): $STEPS steps x 4 tasks x G=$GROUP episodes on the train split, learning rate $LR =="
  $RL train --config "$WORK/rl.toml"
  echo "== after training: the trained checkpoint, greedy, the same held-out tasks =="
  $RL eval --config "$WORK/rl-trained.toml" --split test --save "$WORK/trained.json" --baseline "$WORK/base.json"
  echo "# wall time $(( $(date +%s) - START )) s; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
} 2>&1 | grep --line-buffered -v -e "Loading weights" -e "Writing model shards" -e "^  rollouts: " | tee "$OUT"
# the paired comparison is the last line
grep "^held-out success: " "$OUT" | tail -1
