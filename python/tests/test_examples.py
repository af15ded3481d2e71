"""The examples run: the master prints its HA port, the slave given it replicates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"
MASTER_ARGS = ["--count", "3", "--interval", "0.05", "--wait-for-slave", "30"]
SLAVE_ARGS = ["--messages", "3", "--interval", "0.05", "--seconds", "30"]


def test_master_and_slave_examples(tmp_path: Path) -> None:
    master = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "master.py"), "--store", str(tmp_path / "m"), *MASTER_ARGS],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert master.stdout is not None
        head = []
        for line in master.stdout:
            head.append(line)
            if line.startswith("HA port: "):
                break
        ha_port = int(head[-1].split(": ")[1]) if head else None
        assert ha_port, "the master example printed no HA port"
        slave = subprocess.run(
            [
                sys.executable,
                str(EXAMPLES / "slave.py"),
                str(ha_port),
                "--store",
                str(tmp_path / "s"),
                *SLAVE_ARGS,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert slave.returncode == 0, slave.stderr
        assert slave.stdout.count("replicated ") == 3, slave.stdout
        out, _ = master.communicate(timeout=60)
        out = "".join(head) + out
        assert master.returncode == 0
        # A SYNC_MASTER that waited for its slave: every put is acked.
        assert out.count(": PUT_OK ") == 3, out
        assert out.rstrip().endswith("closed")
        # A store the user named is kept.
        assert (tmp_path / "m" / "commitlog").is_dir() and (tmp_path / "s" / "commitlog").is_dir()
    finally:
        if master.poll() is None:
            master.kill()
            master.wait()


def test_a_store_of_the_examples_own_is_removed_at_exit() -> None:
    """Without --store the example makes a temporary store, and removes it once closed."""
    run = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "master.py"),
            "--role",
            "ASYNC_MASTER",
            "--count",
            "2",
            "--interval",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    store = Path(run.stdout.split("store=", 1)[1].split()[0])
    assert run.stdout.count(": PUT_OK ") == 2, run.stdout
    assert f"removed {store}" in run.stdout, run.stdout
    assert not store.exists(), f"{store} is left behind"


def test_the_slave_examples_own_store_is_removed_too() -> None:
    """The slave example without --store, against a port nobody listens on, for a moment."""
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "slave.py"), "127.0.0.1:1", "--seconds", "0.3", "--interval", "0.05"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    store = Path(run.stdout.split("store=", 1)[1].split()[0])
    assert "connected=False" in run.stdout, run.stdout
    assert f"removed {store}" in run.stdout, run.stdout
    assert not store.exists(), f"{store} is left behind"
