#!/usr/bin/env bash
# Set up streamfold in .venv: a Java 17 runtime (apt-get, only if `java` is missing or too old),
# a Python virtual environment with the pinned packages, and streamfold itself (editable); then
# the studio's page (Node.js and npm from apt-get if missing, `npm ci` from web/package-lock.json,
# an esbuild bundle into streamfold/studio/static/) and Debian's Chromium for its browser tests
# (skipped with STREAMFOLD_SKIP_BROWSER=1; the tests then say they were skipped and why).
# Idempotent: a second run checks and does nothing more.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV=.venv
STAMP="$VENV/.setup-stamp"

say() { printf '[setup] %s\n' "$*"; }

APT_UPDATED=
apt_install() {
  command -v apt-get >/dev/null 2>&1 || { say "apt-get is not available: install $* by hand"; return 1; }
  if [ -z "$APT_UPDATED" ]; then as_root apt-get update -qq; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

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
  apt_install openjdk-17-jre-headless
fi
say "java: $(java -version 2>&1 | head -n 1)"

# 2. The virtual environment with pinned packages.
want="$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)"
python_env() {
if [ ! -x "$VENV/bin/python" ]; then
  if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
    command -v apt-get >/dev/null 2>&1 || { say "python venv support is missing"; exit 1; }
    say "installing python3-venv with apt-get"
    apt_install python3-venv
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
say "python: $("$VENV/bin/python" -c 'import pyspark, sqlglot, pandas; print("pyspark", pyspark.__version__, "· sqlglot", sqlglot.__version__, "· pandas", pandas.__version__)')"
}
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && "$VENV/bin/python" -c "import streamfold, pyspark" 2>/dev/null; then
  say "python environment is up to date ($VENV)"
else
  python_env
fi

# 3. The studio's page: npm packages from the lock file, bundled by esbuild. Rebuilt only when the
#    lock file, the package list or a source file changed (or the bundle is missing).
WEB=web
BUNDLE=streamfold/studio/static/app.js
web_hash() { cat "$WEB/package.json" "$WEB/package-lock.json" $(find "$WEB/src" -type f | sort) | sha256sum | cut -d' ' -f1; }
if [ -f "$BUNDLE" ] && [ "$(cat "$BUNDLE.stamp" 2>/dev/null)" = "$(web_hash)" ]; then
  say "studio page is up to date ($BUNDLE)"
else
  if ! command -v npm >/dev/null 2>&1; then
    say "installing Node.js and npm with apt-get (for the studio's page)"
    apt_install nodejs npm
  fi
  lock="$(sha256sum "$WEB/package-lock.json" | cut -d' ' -f1)"
  if [ "$(cat "$WEB/node_modules/.lock-stamp" 2>/dev/null)" != "$lock" ]; then
    say "npm ci in $WEB (node $(node --version))"
    (cd "$WEB" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$lock" > "$WEB/node_modules/.lock-stamp"
  fi
  (cd "$WEB" && npm run --silent build)
  web_hash > "$BUNDLE.stamp"
  say "studio page built ($BUNDLE, $(( $(wc -c < "$BUNDLE") / 1024 )) KB)"
fi

# 4. streamfold's JVM helpers (prepared plans): a small jar compiled with the Janino compiler Spark
#    ships (no JDK needed), cached per source text and PySpark version; a no-op when up to date.
"$VENV/bin/python" -m streamfold.runtime.jvm
# 4b. An archive of the classes Spark's driver loads (Java's class-data sharing), made once per
#     PySpark version and Java runtime by a training run of about half a minute: every JVM
#     streamfold starts maps it and reaches its first answer seconds sooner. A no-op when made.
"$VENV/bin/python" -m streamfold.bench.jvm_training

# 5. Chromium for the studio's browser tests (Debian's package; Playwright drives it, and never
#    downloads a browser of its own).
if [ -x /usr/bin/chromium ]; then
  say "chromium: $(/usr/bin/chromium --version 2>/dev/null | head -n 1)"
elif [ -n "${STREAMFOLD_SKIP_BROWSER:-}" ]; then
  say "chromium is missing and STREAMFOLD_SKIP_BROWSER is set: the browser tests will be skipped"
else
  say "installing Debian's chromium with apt-get (for the studio's browser tests)"
  apt_install chromium || say "chromium could not be installed: the browser tests will be skipped"
fi
# 6. PostgreSQL for the PostgreSQL sink's tests (Debian's package: the tests start a throw-away
#    cluster with its initdb, as the unprivileged `postgres` user when run as root).
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
if [ -n "$(pg_bin)" ] && [ -x "$(pg_bin)/initdb" ]; then
  say "postgresql: $("$(pg_bin)/postgres" --version)"
else
  say "installing Debian's postgresql with apt-get (for the PostgreSQL sink's tests)"
  apt_install postgresql || say "postgresql could not be installed: the PostgreSQL sink's tests will be skipped"
fi
# 7. PostgreSQL's JDBC driver, for scripts/bench_sink_paths.py (Spark's executors writing the
#    staging table, measured against the driver's COPY). Nothing else loads it.
if [ ! -f /usr/share/java/postgresql.jar ]; then
  say "installing Debian's libpostgresql-jdbc-java with apt-get (for the sink paths' bench)"
  apt_install libpostgresql-jdbc-java || say "libpostgresql-jdbc-java could not be installed: bench_sink_paths.py will not run"
fi
say "done"
