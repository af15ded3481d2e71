"""Helpers shared by the tests, importable by spawned child processes too."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rmqha


def broker_config(store: Path | str, role: str, **extra: Any) -> dict[str, Any]:
    """A config on 127.0.0.1 with ports picked by the OS and small files, so tests are quick."""
    cfg: dict[str, Any] = {
        "storePathRootDir": str(store),
        "brokerRole": role,
        "bindAddress": "127.0.0.1",
        "brokerIP1": "127.0.0.1",
        "listenPort": 0,
        "haListenPort": 0,
        "mappedFileSizeCommitLog": 1 << 20,
        "mappedFileSizeConsumeQueue": 20 * 1000,
        "maxHashSlotNum": 64,
        "maxIndexNum": 256,
        "flushIntervalCommitLog": 50,
        "flushIntervalConsumeQueue": 50,
    }
    if role == "SLAVE":
        cfg["brokerId"] = 1
    cfg.update(extra)
    return cfg


def wait_until(cond: Callable[[], bool], timeout: float = 10.0, interval: float = 0.005) -> bool:
    """Polls `cond` until it holds or `timeout` seconds pass; returns whether it held."""
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def slave_streaming(master: rmqha.Broker) -> bool:
    """Whether a slave is connected and the master streams to it."""
    return any(s["transferring"] for s in master.offsets()["slaves"])


def body(i: int, size: int = 100) -> bytes:
    """The i-th test body: `msg-<i>-` padded with x to `size` bytes."""
    b = f"msg-{i}-".encode()
    return b + b"x" * max(0, size - len(b))


def master_process(store: str, conn: Any) -> None:
    """A SYNC_MASTER in a child process, driven over a multiprocessing Pipe.

    Sends ("ha_port", port); on ("put", n, queues) waits for a slave to stream to, puts n
    messages round-robin over the queues and sends ("put", [result tuples], offsets); on
    ("close",) closes and sends ("closed",). Any failure is sent as ("error", traceback).
    """
    try:
        with rmqha.start_master(broker_config(store, "SYNC_MASTER", slaveTimeout=10000)) as master:
            conn.send(("ha_port", master.ha_port()))
            while True:
                cmd = conn.recv()
                if cmd[0] == "put":
                    _, n, queues = cmd
                    if not wait_until(lambda: slave_streaming(master), timeout=20):
                        raise AssertionError(f"no slave streaming: {master.offsets()}")
                    results = []
                    for i in range(n):
                        r = master.put_message_sync(
                            "Repl", body(i), tags=f"tag{i % 3}", keys=[f"key-{i}"], queue_id=i % queues
                        )
                        results.append((r.status, r.msg_id, r.phy_offset, r.size, r.queue_id, r.queue_offset))
                    conn.send(("put", results, master.offsets()))
                elif cmd[0] == "close":
                    break
        conn.send(("closed",))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
