# The two commands of the README:
#   make demo   - the main job: a SYNC_MASTER and a SLAVE replicating on temporary directories
#   make test   - every test (Rust, C, Python, Node), installing what they need first
#
# Other targets: lint, bench-store, bench-ha, header, install-c.

CARGO ?= cargo

.PHONY: demo test test-deps test-rust test-python test-node lint bench-store bench-ha header install-c

# DEMO_BIN runs the demo on a binary already built (CI passes the test build's
# target/debug/rmqha, which saves a release build of the whole workspace).
DEMO_BIN ?=
demo:
	@if [ -n "$(DEMO_BIN)" ]; then \
		echo "$(DEMO_BIN) demo"; $(DEMO_BIN) demo; \
	else \
		echo "$(CARGO) run --release -p rmqha-cli -- demo"; $(CARGO) run --release -p rmqha-cli -- demo; \
	fi

# Node before Python: maturin builds pyo3 with its own settings, after which the workspace
# build that the Node step reuses would compile pyo3 and the Python crate again.
test: test-deps test-rust test-node test-python

# Installs what the tests need on a fresh machine.
test-deps:
	./scripts/install-test-deps.sh

# One debug build serves the Rust, C (ffi crate) and CLI tests, the Node addon and the demo in
# CI: `cargo build --workspace --all-targets` resolves features as the test build does, so the
# test build that follows finds every crate built. cargo-nextest runs each test in its own
# process and kills one that passes its time limit (.config/nextest.toml); without it, cargo
# test runs them with no limit.
test-rust:
	$(CARGO) build --workspace --all-targets
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
		$(CARGO) nextest run --workspace --no-fail-fast && $(CARGO) test --workspace --doc; \
	else \
		echo "cargo-nextest not found: running cargo test, with no per-test time limit"; \
		$(CARGO) test --workspace --no-fail-fast; \
	fi

# The Python package installed with pip (as a user would) into a venv under target/, built
# with the dev profile to keep CI quick; `pip install ./python` alone builds a release wheel.
PY_VENV := target/py-venv
test-python:
	MATURIN_PEP517_ARGS="--profile dev" $(PY_VENV)/bin/python -m pip install -q --force-reinstall --no-deps ./python
	$(PY_VENV)/bin/python -m pytest -q python/tests

# The Node addon in a debug build. On Linux x86-64 (glibc) it is the cdylib of the workspace
# build above, copied where napi's loader (node/index.js) looks for it: `napi build` passes
# `--target`, which puts every crate in another directory and compiles all of them again
# (about 3 minutes of CI on two cores). Elsewhere `npm run build:debug` builds it.
test-node:
	@if [ "$$(uname -sm)" = "Linux x86_64" ] && ldd --version 2>&1 | grep -qiE 'glibc|gnu libc'; then \
		echo "Node addon: the workspace build's librmqha_node.so as node/rmqha.linux-x64-gnu.node"; \
		$(CARGO) build --workspace --all-targets && \
		cp "$${CARGO_TARGET_DIR:-target}/debug/librmqha_node.so" node/rmqha.linux-x64-gnu.node; \
	else \
		cd node && npm run build:debug; \
	fi
	cd node && npm test

# Installs the C library (release build), its header and a pkg-config file under PREFIX
# (default /usr/local); LIBDIR, INCLUDEDIR and DESTDIR as GNU makefiles take them.
install-c:
	$(CARGO) build --release -p rmqha-ffi
	./scripts/install-c.sh "$${CARGO_TARGET_DIR:-target}/release"

# Regenerates include/rmqha.h (a test fails when it drifts).
header:
	RMQHA_BLESS=1 $(CARGO) test -p rmqha-ffi --test header

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench-store:
	$(CARGO) run --release -p rmqha-cli -- bench store

bench-ha:
	$(CARGO) run --release -p rmqha-cli -- bench ha
