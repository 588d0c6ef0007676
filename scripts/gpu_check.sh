#!/usr/bin/env bash
# One short check of RL training on a CUDA GPU: `reinagent rl train` (method reflect, then grpo;
# TRL's trainer, train_precision = "bf16") and perf/rl_throughput.py (fp32 and bf16) on a
# RANDOMLY INITIALISED model with SmolLM2-135M-Instruct's config and tokenizer, built on the
# machine (scripts/random_model.py). Random weights: the figures are speed and plumbing only, never
# learning (rewards stay 0, and a reply never ends early, so every reply runs to its token limit).
#
# Usage: scripts/gpu_check.sh CONFIG_DIR [OUTDIR]
#   CONFIG_DIR  a folder with config.json, generation_config.json and the tokenizer files
#               (copied from the dequantised embedded model's cache folder, weights left out)
#   OUTDIR      where gpu_check.log goes (default $OUT, else /tmp/gpu_check)
# Environment: WHEELS (a folder of wheels installed first with pip --no-deps --target /tmp/site,
#   for a machine without the rl extra), DEVICE (cuda; cpu to try this script without a GPU),
#   STEPS (3), PERF_STEPS (4), PY (python3), PEAK_TFLOPS (989: an H100/H200's dense bf16 peak),
#   REFLECTION_TOKENS (64), RESPONSE_TOKENS (32), LIMIT_SCALE (1: multiplies each part's time limit),
#   BUDGET (390: seconds for everything; a part's limit is cut to what is left, and a part with
#   under 20 s left is skipped).
# The wheels carried to a machine whose image has torch, transformers and accelerate but not the rest
# of the rl extra (cp312; `pip download --no-deps --only-binary=:all: --python-version 3.12 ...`):
#   pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
#   typing_extensions==4.16.0 trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 gguf==0.19.0
#   math-verify==0.9.0 latex2sympy2_extended==1.11.0 antlr4-python3-runtime==4.13.2 tenacity==9.2.1
# Every part runs under `timeout` and a failed part does not stop the next one; each part prints
# its exit status and seconds. Everything printed is also in OUTDIR/gpu_check.log.
set -u -o pipefail
cd "$(dirname "$0")/.."
CONFIG_DIR=$(realpath "${1:?usage: scripts/gpu_check.sh CONFIG_DIR [OUTDIR]}")
OUTDIR=${2:-${OUT:-/tmp/gpu_check}}
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-3}
PERF_STEPS=${PERF_STEPS:-4}
PY=${PY:-python3}
PEAK=${PEAK_TFLOPS:-989}
SCALE=${LIMIT_SCALE:-1}
BUDGET=${BUDGET:-390}  # seconds for the whole script: the device call's limit minus a margin
WORK=$(mktemp -d /tmp/gpu_check.XXXXXX)
MODEL="$WORK/random-smollm2-135m"
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
START=$(date +%s)

part() {  # NAME LIMIT_S COMMAND...: run one part under a time limit (cut to what is left of BUDGET), say how it ended
  local name=$1 limit=$(( $2 * SCALE )) left t0 rc
  shift 2
  left=$(( BUDGET - ($(date +%s) - START) ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 20 ]; then
    echo; echo "== $name: skipped (${left}s of the ${BUDGET}s budget left)"; RESULTS+=("$name: skipped"); return
  fi
  echo
  echo "== $name (limit ${limit}s, at +$(( $(date +%s) - START ))s): $*"
  t0=$(date +%s%N)
  timeout --kill-after=10 "$limit" "$@"
  rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "== $name: exit $rc$([ $rc = 124 ] && echo ' (time limit)') after $((ms / 1000)).$(( ms % 1000 / 100 ))s"
  RESULTS+=("$name: exit $rc")
}

toml() {  # METHOD: the [rl] table of one training run (scripts/reflect_demo.sh's, smaller)
  cat <<TOML
[rl]
env_name = "arithmetic20"
model = "local:$MODEL"
max_turns = 1
max_response_length = $RESPONSE_TOKENS
react_format = true
max_workers = 32
output_dir = "$WORK/train-$1"
method = "$1"
reflect_loss = "both"
reflection_max_tokens = $REFLECTION_TOKENS
first_trial_temperature = 0.0
trainer = "trl"
group_size = 4
batch_size = 4
max_steps = $STEPS
save_steps = $STEPS
learning_rate = 1e-5
kl_coef = 0.04
temperature = 0.7
dynamic_sampling = 0
train_precision = "bf16"
TOML
}

train() {  # METHOD: train, then show what the checkpoint holds and where the weights were
  toml "$1" > "$WORK/$1.toml"
  cat "$WORK/$1.toml"
  $PY -m reinagent.cli rl train --config "$WORK/$1.toml" || return
  ls -la "$WORK/train-$1/checkpoint"
  $PY - "$WORK/train-$1" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = [json.loads(line) for line in (out / "train_metrics.jsonl").read_text().splitlines()]
for r in rows:
    print("metrics row:", {k: r[k] for k in ("step", "loss", "kl", "grad_norm", "tokens_per_s", "rollout_tokens_per_s",
                                             "rollout_s", "train_s") if k in r})
state = json.loads(next((out / "trainer").glob("checkpoint-*/trainer_state.json")).read_text())
print("trainer_state: global_step", state["global_step"], "| log:", state["log_history"][-1])
EOF
}

RESULTS=()
RESPONSE_TOKENS=${RESPONSE_TOKENS:-32} REFLECTION_TOKENS=${REFLECTION_TOKENS:-64}
{
  echo "# scripts/gpu_check.sh ($(date -u +%Y-%m-%dT%H:%M:%SZ)) device=$DEVICE steps=$STEPS perf_steps=$PERF_STEPS"
  echo "# RANDOM WEIGHTS (SmolLM2-135M-Instruct's config and tokenizer, seed 0): speed and plumbing only, no learning"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || echo "nvidia-smi: not available"
  echo "# $(nproc) CPU cores; $($PY -V 2>&1)"
  if [ -n "${WHEELS:-}" ]; then
    part "install wheels" 45 $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site "$WHEELS"/*.whl
    export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
  else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  fi
  $PY - <<'EOF'
import importlib.metadata as md
versions = []
for name in ("torch", "transformers", "accelerate", "trl", "datasets", "pydantic", "huggingface_hub", "tokenizers",
             "pyarrow", "fsspec", "gguf", "math-verify"):
    try:
        versions.append(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        versions.append(f"{name} MISSING")
print("# versions:", ", ".join(versions))
import torch
print("# torch.cuda.is_available():", torch.cuda.is_available(),
      "|", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")
EOF
  part "build random model" 45 $PY scripts/random_model.py "$CONFIG_DIR" "$MODEL"
  export -f toml train
  export MODEL WORK STEPS PY RESPONSE_TOKENS REFLECTION_TOKENS
  part "rl train reflect (bf16)" 100 bash -c 'train reflect'
  part "rl train grpo (bf16)" 75 bash -c 'train grpo' 
  for precision in fp32 bf16; do
    part "rl_throughput $precision" 60 $PY perf/rl_throughput.py --model "local:$MODEL" --device "$DEVICE" \
      --peak-tflops "$PEAK" --train-precision "$precision" --steps "$PERF_STEPS"
  done
  # with the time left: a larger step (16 tasks x G=8 = 128 sequences), bf16
  part "rl_throughput bf16, 16 x 8" 90 $PY perf/rl_throughput.py --model "local:$MODEL" --device "$DEVICE" \
    --peak-tflops "$PEAK" --train-precision bf16 --steps "$PERF_STEPS" --batch-size 16 --group-size 8
  echo
  echo "# summary (random weights): ${RESULTS[*]/%/;}"
  echo "# wall time $(( $(date +%s) - START ))s"
} 2>&1 | grep --line-buffered -v -e "Loading weights" -e "Writing model shards" | tee "$OUTDIR/gpu_check.log"
rm -rf "$WORK"
