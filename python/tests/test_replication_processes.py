"""A SYNC_MASTER in a spawned child process and a slave in this one: what the master's puts
report PUT_OK is on the slave, byte for byte, and the slave's offsets say so."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import rmqha

from _support import body, broker_config, master_process, wait_until

N = 200
QUEUES = 4


def recv(conn: Any, timeout: float = 30.0) -> tuple[Any, ...]:
    assert conn.poll(timeout), "the master process did not answer in time"
    msg: tuple[Any, ...] = conn.recv()
    assert msg[0] != "error", f"master process failed:\n{msg[1]}"
    return msg


def test_master_and_slave_in_two_processes_replicate(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=master_process, args=(str(tmp_path / "master"), child), daemon=True)
    proc.start()
    try:
        _, ha_port = recv(parent)
        master_addr = f"127.0.0.1:{ha_port}"
        with rmqha.start_slave(
            broker_config(tmp_path / "slave", "SLAVE", haMasterAddress=master_addr)
        ) as slave:
            parent.send(("put", N, QUEUES))
            _, results, master_offsets = recv(parent)

            assert [r[0] for r in results] == ["PUT_OK"] * N
            end = max(phy + size for _, _, phy, size, _, _ in results)
            assert master_offsets["max_offset"] == end
            # A SYNC_MASTER's PUT_OK means the slave acked: it holds every byte already.
            assert slave.max_offset() >= end
            assert master_offsets["slave_ack_offset"] == end
            (info,) = master_offsets["slaves"]
            assert info["ack_offset"] == end and info["lag_bytes"] == 0 and info["connected_ms"] >= 0
            assert 0 <= info["last_report_ms"] <= info["connected_ms"], info

            # The slave records an ack as sent just after sending it, so the master may have
            # answered the put a moment before the slave's own offsets() shows it.
            assert wait_until(lambda: slave.slave_ack_offset() == end)
            so = slave.offsets()
            assert so["role"] == "SLAVE"
            assert so["connected"] is True
            assert so["master_address"] == master_addr
            assert so["max_offset"] == end
            assert so["slave_ack_offset"] == end
            assert so["slaves"] == []

            # The slave's ConsumeQueues are built by its own dispatcher.
            per_queue = N // QUEUES
            assert wait_until(
                lambda: all(slave.queue_max_offset("Repl", q) == per_queue for q in range(QUEUES))
            )
            for q in range(QUEUES):
                assert slave.queue_min_offset("Repl", q) == 0
                messages: list[rmqha.Message] = []
                while len(messages) < per_queue:
                    # A batch is capped (maxTransferCountOnMessageInMemory), so page on.
                    got = slave.get_messages("Repl", q, len(messages), per_queue)
                    assert got.status == "FOUND" and got.messages, got
                    assert (got.min_offset, got.max_offset) == (0, per_queue)
                    messages += got.messages
                expected = [r for r in results if r[4] == q]
                for m, (_, msg_id, phy, size, queue_id, queue_offset) in zip(messages, expected, strict=True):
                    i = int(m.keys[0].removeprefix("key-"))
                    assert m.body == body(i)
                    assert (m.msg_id, m.phy_offset, m.store_size) == (msg_id, phy, size)
                    assert (m.topic, m.queue_id, m.queue_offset) == ("Repl", queue_id, queue_offset)
                    assert m.tags == f"tag{i % 3}"

            # Lookups by key and id work on the slave too (its IndexFile is its own).
            _, msg_id7, phy7, *_ = results[7]
            by_id = slave.message_by_id(msg_id7)
            assert by_id is not None and by_id.phy_offset == phy7 and by_id.body == body(7)
            assert wait_until(lambda: len(slave.query_by_key("Repl", "key-7")) == 1)

            parent.send(("close",))
            recv(parent)
            assert wait_until(lambda: slave.offsets()["connected"] is False)
        proc.join(timeout=20)
        assert proc.exitcode == 0
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=10)
