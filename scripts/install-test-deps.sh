#!/usr/bin/env bash
# Installs what `make test` needs on a fresh machine. Idempotent.
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
command -v valgrind >/dev/null 2>&1 || need_apt+=(valgrind)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
# Debian and Ubuntu ship `python3 -m venv` without ensurepip unless python3-venv is installed.
python3 -c 'import ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
  fi
fi

# A virtualenv for the Python tests, with pytest and the build backend (maturin), and PyPI's
# `rocketmq` 0.4.4, whose wheel bundles Apache rocketmq-client-cpp: the stock client of
# cli/tests/remote_cpp_client.rs.
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ ! -x "$root/target/py-venv/bin/python" ]; then
  python3 -m venv "$root/target/py-venv"
fi
"$root/target/py-venv/bin/python" -m pip install -q --upgrade pip
"$root/target/py-venv/bin/python" -m pip install -q pytest "maturin>=1.9.4,<2" "rocketmq==0.4.4"

# The Node package's build tool (@napi-rs/cli), without building the addon yet: `make test`
# builds it in debug mode so it reuses the Rust test build.
(cd "$(dirname "$0")/../node" && npm ci --ignore-scripts --no-audit --no-fund)
