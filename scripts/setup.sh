#!/usr/bin/env bash
# Set up streamfold in .venv: a Java 17 runtime (apt-get, only if `java` is missing or too old),
# a Python virtual environment with the pinned packages, and streamfold itself (editable).
# Idempotent: a second run checks and does nothing more.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV=.venv
STAMP="$VENV/.setup-stamp"

say() { printf '[setup] %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    say "need root to run: $*"; exit 1; fi
}

java_major() {
  command -v java >/dev/null 2>&1 || { echo 0; return; }
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

# 1. Java 17 (Spark 4.3 runs on Java 17 or 21).
if [ "$(java_major)" -lt 17 ]; then
  command -v apt-get >/dev/null 2>&1 || { say "Java 17 is missing and apt-get is not available: install a Java 17 runtime"; exit 1; }
  say "installing a Java 17 runtime with apt-get"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi
say "java: $(java -version 2>&1 | head -n 1)"

# 2. The virtual environment with pinned packages.
want="$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && "$VENV/bin/python" -c "import streamfold, pyspark" 2>/dev/null; then
  say "environment is up to date ($VENV)"
  exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
  if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
    command -v apt-get >/dev/null 2>&1 || { say "python venv support is missing"; exit 1; }
    say "installing python3-venv with apt-get"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq python3-venv >/dev/null
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
  fi
fi
say "installing pinned packages into $VENV (first time: about a minute)"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements.lock
log="$VENV/setup-install.log"
if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -e . >"$log" 2>&1; then
  cat "$log"; say "installing streamfold failed"; exit 1
fi
echo "$want" > "$STAMP"
say "done: $("$VENV/bin/python" -c 'import pyspark, sqlglot, pandas; print("pyspark", pyspark.__version__, "· sqlglot", sqlglot.__version__, "· pandas", pandas.__version__)')"
