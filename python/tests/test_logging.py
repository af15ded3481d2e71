"""What the broker's own threads log reaches the host's stderr, at the level RMQHA_LOG names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# A master whose HA port gets a "slave" asking for an offset far past the master's end: the
# master's connection thread refuses it and logs why, off the Python thread.
CHILD = r"""
import socket, struct, sys
import rmqha
from _support import broker_config, wait_until

with rmqha.start_master(broker_config(sys.argv[1], "ASYNC_MASTER")) as m:
    s = socket.create_connection(("127.0.0.1", m.ha_port()))
    s.sendall(struct.pack(">q", 1 << 40))
    assert wait_until(lambda: m.offsets()["refused_slaves"]), m.offsets()
    s.close()
print("done")
"""


def run_child(store: Path, **env: str) -> subprocess.CompletedProcess[str]:
    child_env = {k: v for k, v in os.environ.items() if k not in ("RMQHA_LOG", "RUST_LOG")}
    child_env.update(env)
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), child_env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(store)], capture_output=True, text=True, timeout=60, env=child_env
    )


def test_a_background_threads_warning_reaches_stderr(tmp_path: Path) -> None:
    run = run_child(tmp_path / "a")
    assert run.returncode == 0 and "done" in run.stdout, run.stderr
    line = next((l for l in run.stderr.splitlines() if "refusing HA slave" in l), None)
    assert line is not None, run.stderr
    assert "WARN" in line and f"asking for offset {1 << 40}" in line, line


def test_rmqha_log_off_silences_it(tmp_path: Path) -> None:
    run = run_child(tmp_path / "b", RMQHA_LOG="off")
    assert run.returncode == 0 and "done" in run.stdout, run.stderr
    assert "refusing HA slave" not in run.stderr, run.stderr
