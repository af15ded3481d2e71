"""Blocking calls release the GIL: eight threads' SYNC_MASTER puts overlap; a put waiting
for a slave's ack answers Ctrl-C; close() ends a put still waiting."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import rmqha

from _support import body, broker_config, slave_streaming, wait_until

THREADS = 8
PER_THREAD = 100


def test_eight_threads_put_concurrently_into_a_sync_master(
    sync_pair: tuple[rmqha.Broker, rmqha.Broker],
) -> None:
    master, slave = sync_pair
    barrier = threading.Barrier(THREADS)
    durations: list[float] = []
    results: list[rmqha.PutResult] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def producer(t: int) -> None:
        try:
            barrier.wait(timeout=10)
            for i in range(PER_THREAD):
                start = time.perf_counter()
                r = master.put_message_sync("Conc", body(i, 200), keys=[f"t{t}-{i}"], queue_id=t)
                took = time.perf_counter() - start
                with lock:
                    durations.append(took)
                    results.append(r)
        except BaseException as e:
            with lock:
                errors.append(e)

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(THREADS)]
    start = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    wall = time.perf_counter() - start
    assert not errors, errors
    assert not any(th.is_alive() for th in threads)

    assert len(results) == THREADS * PER_THREAD
    assert {r.status for r in results} == {"PUT_OK"}
    assert len({r.phy_offset for r in results}) == len(results)
    for t in range(THREADS):
        assert sorted(r.queue_offset for r in results if r.queue_id == t) == list(range(PER_THREAD))
    # Each call spends most of its time waiting for the slave's ack with the GIL released, so
    # the calls overlap: the wall time is well under the sum of the calls' times (a held GIL
    # would make them run one after another and the two about equal).
    assert wall < sum(durations) / 2, f"wall {wall:.3f}s, sum of calls {sum(durations):.3f}s"
    # SYNC_MASTER: every PUT_OK is on the slave.
    assert slave.max_offset() >= max(r.phy_offset + r.size for r in results)
    assert wait_until(lambda: all(slave.queue_max_offset("Conc", t) == PER_THREAD for t in range(THREADS)))


class FakeSlave:
    """An HA connection that reports offset 0 once and never acks again, so a SYNC_MASTER put
    waits for its ack until slaveTimeout."""

    def __init__(self, master: rmqha.Broker) -> None:
        self.sock = socket.create_connection(("127.0.0.1", master.ha_port()), timeout=5)
        self.sock.sendall(struct.pack(">q", 0))

    def close(self) -> None:
        self.sock.close()


def test_python_threads_run_while_a_put_waits_for_its_slave(tmp_path: Path) -> None:
    # A put that waits a whole slaveTimeout for an ack that never comes; a Python thread ticks
    # meanwhile. Were the GIL held through the wait, it could not tick until the put returned.
    with rmqha.start_master(broker_config(tmp_path, "SYNC_MASTER", slaveTimeout=600)) as master:
        fake = FakeSlave(master)
        try:
            assert wait_until(lambda: slave_streaming(master))
            ticks: list[float] = []
            stop = threading.Event()

            def ticker() -> None:
                while not stop.is_set():
                    ticks.append(time.monotonic())
                    sum(range(1000))  # pure Python work, holding the GIL

            t = threading.Thread(target=ticker)
            t.start()
            assert wait_until(lambda: len(ticks) > 0)
            start = time.monotonic()
            r = master.put_message_sync("Wait", b"no ack")
            end = time.monotonic()
            stop.set()
            t.join(timeout=10)
            # Stored; the missing ack is a status of the result, not an exception.
            assert r.status == "FLUSH_SLAVE_TIMEOUT" and r.stored
            assert end - start >= 0.5
            during = [x for x in ticks if start + 0.1 < x < end - 0.1]
            assert len(during) > 10, f"{len(during)} ticks while the put waited {end - start:.2f}s"
        finally:
            fake.close()


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt for the test's duration. Python installs that handler
    only if SIGINT was not ignored at startup, and a shell ignores SIGINT in the jobs it starts
    in the background without job control (`./.ci/run &` from a script): there the SIGINT
    below did nothing and the put waited out its slaveTimeout."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@pytest.mark.usefixtures("ctrl_c_raises")
def test_ctrl_c_interrupts_a_put_waiting_for_a_slave(tmp_path: Path) -> None:
    with rmqha.start_master(broker_config(tmp_path, "SYNC_MASTER", slaveTimeout=60000)) as master:
        fake = FakeSlave(master)
        try:
            assert wait_until(lambda: slave_streaming(master))
            sent = threading.Event()
            # What the helper did and when (seconds after `start`), printed if the put is not
            # interrupted.
            events: list[tuple[str, float]] = []

            def interrupt() -> None:
                events.append(("helper running", time.monotonic() - start))
                # Once the message is stored the put is waiting for the ack.
                # A generous deadline: on a loaded machine this thread may wait long for the GIL.
                if wait_until(lambda: master.max_offset() > 0, timeout=50):
                    events.append((f"saw max_offset {master.max_offset()}", time.monotonic() - start))
                    sent.set()
                    os.kill(os.getpid(), signal.SIGINT)
                    events.append(("sent SIGINT", time.monotonic() - start))
                else:
                    events.append(("gave up waiting for the put to be stored", time.monotonic() - start))

            t = threading.Thread(target=interrupt)
            start = time.monotonic()
            t.start()
            result: object = "interrupted"
            with contextlib.suppress(KeyboardInterrupt):
                result = master.put_message_sync("Wait", b"never acked")
            took = time.monotonic() - start
            t.join(timeout=10)
            assert result == "interrupted", f"the put returned {result!r} after {took:.1f}s; helper: {events}"
            assert sent.is_set()
            assert took < 10, f"Ctrl-C answered after {took:.1f}s (slaveTimeout 60s); helper: {events}"
            # The message stays stored; only its final status was not waited for.
            assert wait_until(lambda: master.queue_max_offset("Wait", 0) == 1)
            assert master.get_messages("Wait", 0, 0, 1).messages[0].body == b"never acked"
        finally:
            fake.close()


def test_close_ends_a_put_waiting_for_a_slave(tmp_path: Path) -> None:
    master = rmqha.start_master(broker_config(tmp_path, "SYNC_MASTER", slaveTimeout=60000))
    fake = FakeSlave(master)
    try:
        assert wait_until(lambda: slave_streaming(master))
        outcome: list[object] = []

        def put() -> None:
            try:
                outcome.append(master.put_message_sync("Wait", b"x"))
            except rmqha.RmqhaError as e:
                outcome.append(e)

        t = threading.Thread(target=put)
        t.start()
        assert wait_until(lambda: master.max_offset() > 0)
        start = time.monotonic()
        master.close()
        t.join(timeout=20)
        assert not t.is_alive()
        assert time.monotonic() - start < 20
        (r,) = outcome
        # Stored, but no slave acked it before the broker went away.
        assert isinstance(r, rmqha.PutResult) and r.stored and r.status == "FLUSH_SLAVE_TIMEOUT", r
    finally:
        fake.close()
        master.close()


def test_a_forked_child_cannot_write_and_the_parent_goes_on(
    sync_pair: tuple[rmqha.Broker, rmqha.Broker],
) -> None:
    """A child forked while the brokers run shares their mapped files but none of their
    threads. Its puts are refused (one used to overwrite a record the parent acknowledged
    after the fork), and closing the brokers in it leaves the parent's running."""
    master, slave = sync_pair
    for i in range(10):
        assert master.put_message_sync("Fork", b"parent-%d" % i).status == "PUT_OK"
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, close, and leave without running the parent's cleanup
        os.close(read_end)
        try:
            master.put_message_sync("Fork", b"child")
            verdict = b"stored"
        except rmqha.PutError as e:
            verdict = e.status.encode() + (b" fork" if "fork" in str(e) else b" ?")
        os.write(write_end, verdict)
        slave.close()
        master.close()
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as r:
        verdict = r.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert verdict == b"SERVICE_NOT_AVAILABLE fork"
    # The slave is still connected (the child closed none of the parent's sockets), and every
    # message is where its put was acknowledged.
    for i in range(10, 20):
        assert master.put_message_sync("Fork", b"parent-%d" % i).status == "PUT_OK"
    assert wait_until(lambda: master.queue_max_offset("Fork", 0) == 20)
    got = master.get_messages("Fork", 0, 0, 32)
    assert [m.body for m in got.messages] == [b"parent-%d" % i for i in range(20)]


def test_a_close_racing_another_returns_once_the_store_is_released(tmp_path: Path) -> None:
    # A second close() returned at once while the first was still shutting down, so
    # starting a broker on the same store right after it failed as locked.
    for _ in range(3):
        broker = rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER"))
        for i in range(2000):
            broker.put_message_sync("Close", body(i, 200))
        first = threading.Thread(target=broker.close)
        first.start()
        assert wait_until(lambda b=broker: b.closed)
        broker.close()
        rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER")).close()
        first.join()
