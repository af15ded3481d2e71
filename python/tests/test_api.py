"""The Python surface in one process: puts, reads, lookups, offsets, consumer offsets,
config files, persistence across a restart, and what the wheel ships."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

import rmqha

from _support import body, broker_config, slave_streaming, wait_until

REPO = Path(__file__).resolve().parents[2]


def test_version_is_the_crates() -> None:
    workspace = tomllib.loads((REPO / "Cargo.toml").read_text())
    assert rmqha.__version__ == workspace["workspace"]["package"]["version"]


def test_the_package_ships_its_type_information() -> None:
    pkg = Path(rmqha.__file__).parent
    assert (pkg / "py.typed").is_file()
    assert (pkg / "_rmqha.pyi").is_file()


def test_put_and_read_back(master: rmqha.Broker) -> None:
    r = master.put_message_sync(
        "Api", b"hello", tags="TagA", keys=["k1", "k2"], properties={"color": "red"}, queue_id=2
    )
    assert r.status == "PUT_OK" and r.stored
    assert (r.phy_offset, r.queue_id, r.queue_offset, r.msg_num) == (0, 2, 0, 1)
    assert r.size > len(b"hello")
    assert re.fullmatch(r"[0-9A-F]{32}", r.msg_id)
    assert "PUT_OK" in repr(r)

    r2 = master.put_message_sync("Api", "héllo", keys="k3", queue_id=2)
    assert (r2.phy_offset, r2.queue_offset) == (r.size, 1)
    r3 = master.put_message_sync("Api", bytearray(b"ba"), queue_id=2)
    r4 = master.put_message_sync("Api", memoryview(b"mv"), queue_id=2)
    assert master.max_offset() == r4.phy_offset + r4.size == r.size + r2.size + r3.size + r4.size

    assert wait_until(lambda: master.queue_max_offset("Api", 2) == 4)
    assert master.queue_min_offset("Api", 2) == 0
    got = master.get_messages("Api", 2, 0, 10)
    assert got.status == "FOUND"
    assert (got.next_begin_offset, got.min_offset, got.max_offset) == (4, 0, 4)
    assert got.suggest_pulling_from_slave is False
    assert [m.body for m in got.messages] == [b"hello", "héllo".encode(), b"ba", b"mv"]
    m = got.messages[0]
    assert (m.topic, m.queue_id, m.queue_offset, m.phy_offset) == ("Api", 2, 0, 0)
    assert (m.tags, m.keys, m.msg_id, m.store_size) == ("TagA", ["k1", "k2"], r.msg_id, r.size)
    assert m.properties["color"] == "red" and m.properties["TAGS"] == "TagA"
    assert m.store_timestamp >= m.born_timestamp > 0
    assert m.store_host == f"127.0.0.1:{master.listen_port()}"
    assert got.messages[1].keys == ["k3"] and got.messages[1].tags is None

    assert master.get_messages("Api", 2, 4, 10).status == "OFFSET_OVERFLOW_ONE"
    assert master.get_messages("Api", 2, 9, 10).status == "OFFSET_OVERFLOW_BADLY"
    assert master.get_messages("Nothing", 0, 0, 10).status == "NO_MATCHED_LOGIC_QUEUE"
    assert master.queue_max_offset("Nothing", 0) == 0


def test_reads_selected_by_tags_or_sql92(master: rmqha.Broker) -> None:
    colors = ["red", "blue", "green"]
    for i in range(30):
        r = master.put_message_sync(
            "Sel", f"m{i}".encode(), tags=colors[i % 3], properties={"price": str(i)}, queue_id=0
        )
        assert r.status == "PUT_OK"
    assert wait_until(lambda: master.queue_max_offset("Sel", 0) == 30)

    def offsets(got: rmqha.GetMessagesResult) -> list[int]:
        assert all(m.body == f"m{m.queue_offset}".encode() for m in got.messages)
        return [m.queue_offset for m in got.messages]

    # Skipped messages do not count toward max_msgs: four reds, not the reds among four.
    got = master.get_messages("Sel", 0, 0, 4, tags="red")
    assert got.status == "FOUND" and offsets(got) == [0, 3, 6, 9] and got.next_begin_offset == 10
    got = master.get_messages("Sel", 0, 0, 32, tags="red || green")
    assert offsets(got) == [i for i in range(30) if i % 3 != 1]
    got = master.get_messages("Sel", 0, 0, 32, sql="TAGS = 'blue' AND price BETWEEN 10 AND 20")
    assert offsets(got) == [10, 13, 16, 19]
    assert offsets(master.get_messages("Sel", 0, 0, 32, tags="*")) == list(range(30))
    # Nothing passes: NO_MATCHED_MESSAGE, and next_begin_offset past what was scanned.
    got = master.get_messages("Sel", 0, 0, 32, sql="price > 100")
    assert (got.status, got.messages, got.next_begin_offset) == ("NO_MATCHED_MESSAGE", [], 30)
    with pytest.raises(rmqha.InvalidArgumentError, match="not both"):
        master.get_messages("Sel", 0, 0, 32, tags="red", sql="price > 1")
    with pytest.raises(rmqha.InvalidArgumentError, match="column 8"):
        master.get_messages("Sel", 0, 0, 32, sql="price >")
    with pytest.raises(TypeError):
        master.get_messages("Sel", 0, 0, 32, "red")  # type: ignore[misc]


def test_lookups_by_id_and_key(master: rmqha.Broker) -> None:
    results = [master.put_message_sync("Keys", f"b{i}".encode(), keys=[f"order-{i % 2}"]) for i in range(6)]
    by_id = master.message_by_id(results[3].msg_id)
    assert by_id is not None and by_id.body == b"b3" and by_id.phy_offset == results[3].phy_offset
    assert master.message_by_id("not an id") is None
    assert wait_until(lambda: len(master.query_by_key("Keys", "order-1")) == 3)
    # Newest first, at most `max`.
    assert [m.body for m in master.query_by_key("Keys", "order-1")] == [b"b5", b"b3", b"b1"]
    assert [m.body for m in master.query_by_key("Keys", "order-1", max=2)] == [b"b5", b"b3"]
    assert master.query_by_key("Keys", "nobody") == []
    # Within store times (ms, both ends included).
    found = master.query_by_key("Keys", "order-1")
    newest, oldest = found[0].store_timestamp, found[-1].store_timestamp
    assert all(m.store_timestamp == newest for m in master.query_by_key("Keys", "order-1", begin=newest, end=newest))
    assert master.query_by_key("Keys", "order-1", begin=newest, end=newest)[0].body == b"b5"
    assert master.query_by_key("Keys", "order-1", end=oldest - 1) == []
    assert len(master.query_by_key("Keys", "order-1", begin=oldest)) == 3
    with pytest.raises(rmqha.InvalidArgumentError, match="after end"):
        master.query_by_key("Keys", "order-1", begin=5, end=4)


def test_a_delayed_message_is_delivered_when_due(master: rmqha.Broker) -> None:
    r = master.put_message_sync("Later", b"in a second", tags="TagD", properties={"DELAY": "1"})
    assert r.status == "PUT_OK"
    scheduled = master.message_by_id(r.msg_id)
    assert scheduled is not None and scheduled.topic == "SCHEDULE_TOPIC_XXXX"
    assert scheduled.properties["REAL_TOPIC"] == "Later"
    assert wait_until(lambda: master.queue_max_offset("Later", 0) == 1, timeout=15)
    got = master.get_messages("Later", 0, 0, 10).messages[0]
    assert (got.body, got.tags) == (b"in a second", "TagD") and "DELAY" not in got.properties
    assert got.store_timestamp >= scheduled.store_timestamp + 1000
    with pytest.raises(rmqha.PutError, match="soon"):
        master.put_message_sync("Later", b"x", properties={"DELAY": "soon"})


def test_queue_offset_by_store_time(master: rmqha.Broker) -> None:
    for i in range(5):
        master.put_message_sync("Time", f"t{i}".encode())
    assert wait_until(lambda: master.queue_max_offset("Time", 0) == 5)
    times = [m.store_timestamp for m in master.get_messages("Time", 0, 0, 10).messages]
    # Lower: the first message stored at or after the time; upper: the last at or before it.
    for ts in {times[0] - 1, *times, times[-1] + 1}:
        lower = next((i for i, t in enumerate(times) if t >= ts), len(times))
        upper = max((i for i, t in enumerate(times) if t <= ts), default=0)
        assert master.queue_offset_by_time("Time", 0, ts) == lower
        assert master.queue_offset_by_time("Time", 0, ts, boundary="lower") == lower
        assert master.queue_offset_by_time("Time", 0, ts, boundary="UPPER") == upper
    assert master.queue_offset_by_time("Nothing", 0, times[0]) == 0
    with pytest.raises(rmqha.InvalidArgumentError, match="sideways"):
        master.queue_offset_by_time("Time", 0, 0, boundary="sideways")


def test_offsets_of_a_master(master: rmqha.Broker) -> None:
    r = master.put_message_sync("Off", b"x" * 100)
    o = master.offsets()
    assert o["role"] == "ASYNC_MASTER"
    assert o["max_offset"] == master.max_offset() == r.phy_offset + r.size
    assert o["min_offset"] == master.min_offset() == 0
    assert o["listen_port"] == master.listen_port() > 0
    assert o["ha_port"] == master.ha_port() > 0
    assert o["slave_ack_offset"] == master.slave_ack_offset() == -1
    assert o["slaves"] == [] and o["refused_slaves"] == []
    assert o["master_address"] is None and o["connected"] is None
    # ASYNC_FLUSH flushes once flushCommitLogLeastPages are dirty, or every thorough interval.
    assert 0 <= master.flushed_offset() <= master.max_offset()
    assert wait_until(lambda: master.offsets()["dispatch_behind_bytes"] == 0)


def test_a_sync_master_without_slave_answers_slave_not_available(tmp_path: Path) -> None:
    with rmqha.start_master(broker_config(tmp_path, "SYNC_MASTER")) as m:
        r = m.put_message_sync("T", b"x")
        assert (r.status, r.stored) == ("SLAVE_NOT_AVAILABLE", True)
        assert wait_until(lambda: m.queue_max_offset("T", 0) == 1)
        assert m.get_messages("T", 0, 0, 1).messages[0].msg_id == r.msg_id


def test_metrics_count_the_puts_and_their_answers(tmp_path: Path) -> None:
    with rmqha.start_master(broker_config(tmp_path, "SYNC_MASTER")) as m:
        for _ in range(3):
            assert m.put_message_sync("T", b"x").status == "SLAVE_NOT_AVAILABLE"
        with pytest.raises(rmqha.PutError):
            m.put_message_sync("bad topic", b"x")
        lines = m.metrics().splitlines()
        assert 'rmqha_puts_waited_total{status="SLAVE_NOT_AVAILABLE"} 3' in lines
        assert 'rmqha_puts_refused_total{status="MESSAGE_ILLEGAL"} 1' in lines
        assert "rmqha_puts_stored_total 3" in lines
        assert f"rmqha_commitlog_max_offset_bytes {m.max_offset()}" in lines
        assert "# TYPE rmqha_put_wait_seconds histogram" in lines


def test_sync_flush_waits_for_the_disk(tmp_path: Path) -> None:
    with rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER", flushDiskType="SYNC_FLUSH")) as m:
        r = m.put_message_sync("T", b"x")
        assert r.status == "PUT_OK"
        assert m.flushed_offset() >= r.phy_offset + r.size


def test_consumer_offsets_persist_across_a_restart(tmp_path: Path) -> None:
    cfg = broker_config(tmp_path, "ASYNC_MASTER")
    with rmqha.start_master(cfg) as m:
        assert m.consumer_offset("G", "T", 0) == -1
        # An offset names a position in its queue: 7 needs 7 messages there.
        for i in range(7):
            m.put_message_sync("T", b"m%d" % i)
        for i in range(3):
            m.put_message_sync("T", b"n%d" % i, queue_id=1)
        assert wait_until(lambda: (m.queue_max_offset("T", 0), m.queue_max_offset("T", 1)) == (7, 3))
        with pytest.raises(rmqha.InvalidArgumentError, match="past the end"):
            m.commit_consumer_offset("G", "T", 0, 8)
        with pytest.raises(rmqha.InvalidArgumentError, match="does not exist"):
            m.commit_consumer_offset("G", "T", 2, 0)
        m.commit_consumer_offset("G", "T", 0, 7)
        m.commit_consumer_offset("G", "T", 1, 3)
        assert m.consumer_offset("G", "T", 0) == 7
        r = m.put_message_sync("T", b"kept")
    with rmqha.start_master(cfg) as m:
        assert (m.consumer_offset("G", "T", 0), m.consumer_offset("G", "T", 1)) == (7, 3)
        assert m.max_offset() == r.phy_offset + r.size
        assert m.message_by_id(r.msg_id).body == b"kept"  # type: ignore[union-attr]


def test_a_commit_log_over_two_directories(tmp_path: Path) -> None:
    """storePathCommitLog with `;` (RocketMQ 4.9.2): files take turns across the sorted
    directories, and every message comes back after a restart."""
    d1, d2 = tmp_path / "disk1" / "commitlog", tmp_path / "disk2" / "commitlog"
    cfg = broker_config(
        tmp_path / "store", "ASYNC_MASTER", storePathCommitLog=f"{d2};{d1}", mappedFileSizeCommitLog=65536
    )
    with rmqha.start_master(cfg) as m:
        acked = [m.put_message_sync("Dirs", body(i, 500), queue_id=0) for i in range(600)]
        assert all(r.status == "PUT_OK" for r in acked)
    last = acked[-1].phy_offset // 65536
    for n in range(last + 1):
        name = f"{n * 65536:020d}"
        home, other = (d1, d2) if n % 2 == 0 else (d2, d1)
        assert (home / name).is_file() and not (other / name).exists(), name
    assert not (tmp_path / "store" / "commitlog").exists()
    with rmqha.start_master(cfg) as m:
        assert m.max_offset() == acked[-1].phy_offset + acked[-1].size
        for i in (0, 299, 599):
            got = m.message_by_id(acked[i].msg_id)
            assert got is not None and got.body == body(i, 500)


def test_load_properties_feeds_start_master(tmp_path: Path) -> None:
    props = tmp_path / "broker.properties"
    props.write_text(
        "brokerClusterName = DefaultCluster\n"
        "brokerName=broker-a\n"
        "brokerRole=ASYNC_MASTER\n"
        "mapedFileSizeCommitLog=1048576\n"  # the old spelling
        f"storePathRootDir={tmp_path / 'store'}\n"
    )
    cfg = rmqha.load_properties(props)
    assert cfg == {
        "brokerClusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerRole": "ASYNC_MASTER",
        "mappedFileSizeCommitLog": "1048576",
        "storePathRootDir": str(tmp_path / "store"),
    }
    cfg.update(
        bindAddress="127.0.0.1", listenPort="0", haListenPort="0", maxHashSlotNum="64", maxIndexNum="256"
    )
    with rmqha.start_master(cfg) as m:
        effective = m.config()
        assert effective["listenPort"] == str(m.listen_port())
        assert effective["mappedFileSizeCommitLog"] == "1048576"
        assert effective["brokerRole"] == "ASYNC_MASTER"
        assert (tmp_path / "store" / "commitlog").is_dir()


def test_config_values_may_be_ints_bools_and_paths(tmp_path: Path) -> None:
    cfg = broker_config(tmp_path, "ASYNC_MASTER", storePathRootDir=tmp_path / "p", messageIndexEnable=False)
    with rmqha.start_master(cfg) as m:
        c = m.config()
        assert c["storePathRootDir"] == str(tmp_path / "p")
        assert c["messageIndexEnable"] == "false"
        assert c["mappedFileSizeCommitLog"] == str(1 << 20)
        assert repr(m).startswith("<rmqha.Broker ASYNC_MASTER")


def test_a_slave_follows_its_master_to_new_ports(tmp_path: Path) -> None:
    """set_master_address: the master restarts on its store with new ports, and the slave,
    told the new HA address, replicates from it; a SYNC put is PUT_OK with its bytes on the
    slave at the return."""
    master_cfg = broker_config(tmp_path / "master", "SYNC_MASTER", slaveTimeout=10000)
    m = rmqha.start_master(master_cfg)
    try:
        slave_cfg = broker_config(tmp_path / "slave", "SLAVE", haMasterAddress=f"127.0.0.1:{m.ha_port()}")
        with rmqha.start_slave(slave_cfg) as s:
            assert wait_until(lambda: slave_streaming(m)), m.offsets()
            first = m.put_message_sync("Moves", b"before")
            assert first.status == "PUT_OK"
            with pytest.raises(rmqha.NotSlaveError):
                m.set_master_address("127.0.0.1:1")
            with pytest.raises(rmqha.InvalidArgumentError, match="no-port"):
                s.set_master_address("no-port")
            m.close()
            m = rmqha.start_master(master_cfg)
            new_address = f"127.0.0.1:{m.ha_port()}"
            s.set_master_address(new_address)
            assert s.offsets()["master_address"] == new_address
            assert wait_until(lambda: slave_streaming(m)), m.offsets()
            second = m.put_message_sync("Moves", b"after")
            assert second.status == "PUT_OK"
            assert second.phy_offset == first.phy_offset + first.size
            assert s.max_offset() == second.phy_offset + second.size
            assert s.offsets()["connected"]
    finally:
        m.close()


def test_ha_auth_secret_keeps_out_a_slave_without_it(tmp_path: Path) -> None:
    """haAuthSecret passes through the config dict like any key: a slave with the master's
    secret replicates (PUT_OK with its bytes on the slave); one with another is refused, and
    both sides say why."""
    secret = "a secret of some length"
    m_cfg = broker_config(tmp_path / "m", "SYNC_MASTER", haAuthSecret=secret, slaveTimeout=5000)
    with rmqha.start_master(m_cfg) as m:
        # A running broker's config never shows the secret, and the placeholder it shows
        # cannot be passed back as one.
        shown = m.config()
        assert shown["haAuthSecret"] == "<hidden>" and secret not in repr(shown)
        with pytest.raises(rmqha.ConfigError, match="placeholder"):
            rmqha.start_slave({**shown, "brokerRole": "SLAVE", "storePathRootDir": str(tmp_path / "x")})
        ha = f"127.0.0.1:{m.ha_port()}"
        with rmqha.start_slave(broker_config(tmp_path / "s", "SLAVE", haMasterAddress=ha, haAuthSecret=secret)) as s:
            assert wait_until(lambda: slave_streaming(m)), m.offsets()
            r = m.put_message_sync("Auth", b"kept on both")
            assert r.status == "PUT_OK"
            assert s.max_offset() >= r.phy_offset + r.size
        other = broker_config(tmp_path / "o", "SLAVE", haMasterAddress=ha, haAuthSecret="some other secret!!")
        with rmqha.start_slave(other) as o:
            assert wait_until(lambda: "haAuthSecret values differ" in (o.offsets()["last_ha_error"] or ""))
            assert wait_until(lambda: any("secrets differ" in r["reason"] for r in m.offsets()["refused_slaves"]))
            assert o.max_offset() == 0
