"""Error paths: each failure raises its RmqhaError subclass with the context it has; a closed
broker raises ClosedError from every call."""

from __future__ import annotations

import gc
import socket
from pathlib import Path
from typing import Any

import pytest

import rmqha

from _support import broker_config


def test_the_hierarchy() -> None:
    for cls in (
        rmqha.ConfigError,
        rmqha.StoreError,
        rmqha.PutError,
        rmqha.InvalidArgumentError,
        rmqha.NotMasterError,
        rmqha.NotSlaveError,
        rmqha.RemotingError,
        rmqha.ClosedError,
    ):
        assert issubclass(cls, rmqha.RmqhaError)
        assert cls.__module__ == "rmqha"
    assert issubclass(rmqha.RmqhaError, Exception)
    assert issubclass(rmqha.ConfigWarning, UserWarning)


def test_start_master_refuses_a_slave_config(tmp_path: Path) -> None:
    with pytest.raises(rmqha.NotMasterError, match="SLAVE"):
        rmqha.start_master(broker_config(tmp_path, "SLAVE", haMasterAddress="127.0.0.1:1"))


def test_start_slave_refuses_a_master_config(tmp_path: Path) -> None:
    with pytest.raises(rmqha.NotSlaveError, match="SYNC_MASTER"):
        rmqha.start_slave(broker_config(tmp_path, "SYNC_MASTER"))


def test_a_slave_needs_its_masters_address(tmp_path: Path) -> None:
    with pytest.raises(rmqha.ConfigError, match="haMasterAddress"):
        rmqha.start_slave(broker_config(tmp_path, "SLAVE"))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("listenPort", "not-a-port"),
        ("listenPort", 70000),
        ("brokerRole", "LEADER"),
        ("bindAddress", "nowhere"),
    ],
)
def test_an_invalid_value_names_its_key(tmp_path: Path, key: str, value: Any) -> None:
    with pytest.raises(rmqha.ConfigError) as e:
        rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER", **{key: value}))
    assert e.value.key == key
    assert e.value.value == str(value)
    assert key in str(e.value)


@pytest.mark.parametrize("value", [1.5, None, ["a"], b"bytes"])
def test_a_value_of_the_wrong_type_is_a_type_error(tmp_path: Path, value: Any) -> None:
    with pytest.raises(TypeError, match="slaveTimeout"):
        rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER", slaveTimeout=value))


def test_a_key_must_be_a_string(tmp_path: Path) -> None:
    cfg: dict[Any, Any] = broker_config(tmp_path, "ASYNC_MASTER")
    cfg[1] = "x"
    with pytest.raises(TypeError, match="keys must be str"):
        rmqha.start_master(cfg)


def test_an_unknown_key_is_a_warning(tmp_path: Path) -> None:
    with pytest.warns(rmqha.ConfigWarning, match="noSuchKey"):
        broker = rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER", noSuchKey="1"))
    broker.close()


def test_a_taken_port_is_a_remoting_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(rmqha.RemotingError):
            rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER", listenPort=port))


def test_a_store_in_use_is_a_store_error(tmp_path: Path) -> None:
    with rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER")), pytest.raises(rmqha.StoreError):
        rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER"))


def test_a_store_that_cannot_be_made_names_the_path(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"not a directory")
    with pytest.raises(rmqha.StoreError) as caught:
        rmqha.start_master(broker_config(blocker / "store", "ASYNC_MASTER"))
    assert caught.value.path == str(blocker / "store")
    assert str(blocker / "store") in str(caught.value)


def test_a_metadata_file_that_cannot_be_written_names_the_path(tmp_path: Path) -> None:
    (tmp_path / "config").write_bytes(b"a file where the config directory belongs")
    with pytest.raises(rmqha.StoreError) as caught:
        rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER"))
    assert caught.value.path is not None
    assert caught.value.path.startswith(str(tmp_path / "config"))


def test_put_on_a_slave_raises_put_error(tmp_path: Path, master: rmqha.Broker) -> None:
    cfg = broker_config(tmp_path / "slave", "SLAVE", haMasterAddress=f"127.0.0.1:{master.ha_port()}")
    with rmqha.start_slave(cfg) as slave:
        with pytest.raises(rmqha.PutError, match="SLAVE") as e:
            slave.put_message_sync("T", b"x")
        assert e.value.status == "SERVICE_NOT_AVAILABLE"
        assert slave.max_offset() == 0


def test_a_negative_queue_id_or_asking_for_no_messages_is_refused(master: rmqha.Broker) -> None:
    # INVALID_ARGUMENT, as in C and Node.
    with pytest.raises(rmqha.InvalidArgumentError, match="queue_id -7 is negative"):
        master.put_message_sync("T", b"x", queue_id=-7)
    assert master.max_offset() == 0
    with pytest.raises(rmqha.InvalidArgumentError, match="max_msgs 0"):
        master.get_messages("T", 0, 0, 0)


def test_an_illegal_message_raises_put_error(tmp_path: Path) -> None:
    with rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER", maxMessageSize=1024)) as m:
        with pytest.raises(rmqha.PutError) as e:
            m.put_message_sync("T", b"x" * 2048)
        assert e.value.status == "MESSAGE_ILLEGAL"
        with pytest.raises(rmqha.PutError) as e:
            m.put_message_sync("", b"x")
        assert e.value.status == "MESSAGE_ILLEGAL"
        assert m.max_offset() == 0


def test_bad_argument_types_are_type_errors(master: rmqha.Broker) -> None:
    with pytest.raises(TypeError, match="body"):
        master.put_message_sync("T", 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        master.put_message_sync("T", b"x", keys=[1])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        master.put_message_sync("T", b"x", properties={"a": 1})  # type: ignore[dict-item]
    assert master.max_offset() == 0


def test_a_key_with_a_space_or_an_empty_key_is_invalid(master: rmqha.Broker) -> None:
    # KEYS is stored space-separated: "order 1" would be indexed as "order" and "1".
    with pytest.raises(rmqha.InvalidArgumentError, match="space"):
        master.put_message_sync("T", b"x", keys=["order 1"])
    with pytest.raises(rmqha.InvalidArgumentError, match="empty"):
        master.put_message_sync("T", b"x", keys=["a", ""])
    assert master.max_offset() == 0
    # One string is the C form: keys separated by spaces.
    r = master.put_message_sync("T", b"x", keys=" a  b ")
    m = master.message_by_id(r.msg_id)
    assert m is not None and m.keys == ["a", "b"]


def test_a_negative_consumer_offset_is_invalid(master: rmqha.Broker) -> None:
    with pytest.raises(rmqha.InvalidArgumentError, match="negative"):
        master.commit_consumer_offset("G", "T", 0, -1)


def test_load_properties_errors_name_the_file_and_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.properties"
    with pytest.raises(rmqha.ConfigError) as e:
        rmqha.load_properties(missing)
    assert e.value.path == str(missing)
    bad = tmp_path / "bad.properties"
    bad.write_text("# a comment\nbrokerRole=SYNC_MASTER\nlistenPort=abc\n")
    with pytest.raises(rmqha.ConfigError) as e:
        rmqha.load_properties(bad)
    assert (e.value.path, e.value.line, e.value.key) == (str(bad), 3, "listenPort")


CALLS: list[tuple[str, tuple[Any, ...]]] = [
    ("put_message_sync", ("T", b"x")),
    ("get_messages", ("T", 0, 0, 1)),
    ("query_by_key", ("T", "k")),
    ("message_by_id", ("00" * 16,)),
    ("max_offset", ()),
    ("min_offset", ()),
    ("flushed_offset", ()),
    ("slave_ack_offset", ()),
    ("listen_port", ()),
    ("ha_port", ()),
    ("queue_min_offset", ("T", 0)),
    ("queue_max_offset", ("T", 0)),
    ("queue_offset_by_time", ("T", 0, 0)),
    ("offsets", ()),
    ("consumer_offset", ("G", "T", 0)),
    ("commit_consumer_offset", ("G", "T", 0, 1)),
    ("config", ()),
]


def test_every_call_after_close_raises_closed_error(tmp_path: Path) -> None:
    broker = rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER"))
    assert not broker.closed
    broker.close()
    assert broker.closed
    broker.close()  # idempotent
    assert "closed" in repr(broker)
    for name, args in CALLS:
        with pytest.raises(rmqha.ClosedError):
            getattr(broker, name)(*args)


def test_an_unclean_stop_raises_store_error_from_close(tmp_path: Path) -> None:
    broker = rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER"))
    # The delay offsets' temporary file cannot be made: a directory holds its name.
    (tmp_path / "config" / "delayOffset.json.tmp").mkdir(parents=True)
    with pytest.raises(rmqha.StoreError, match="stopped uncleanly: config tables not persisted"):
        broker.close()
    # Stopped all the same: the store opens again.
    assert broker.closed
    broker.close()  # reported once
    (tmp_path / "config" / "delayOffset.json.tmp").rmdir()
    rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER")).close()


def test_an_unclean_stop_at_the_end_of_a_with_block(tmp_path: Path) -> None:
    blocker = tmp_path / "config" / "delayOffset.json.tmp"
    # A block that ends normally: the stop's failure is raised.
    with pytest.raises(rmqha.StoreError, match="stopped uncleanly"):
        with rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER")):
            blocker.mkdir(parents=True)
    blocker.rmdir()
    # A block that raises: its own exception goes on (an except for it still catches it),
    # and the unclean stop is a warning.
    with pytest.warns(RuntimeWarning, match="stopped uncleanly"), pytest.raises(KeyError, match="own"):
        with rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER")):
            blocker.mkdir(parents=True)
            raise KeyError("the block's own")


def test_the_with_block_closes_even_on_an_exception(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER")) as broker:
        raise RuntimeError("boom")
    assert broker.closed
    with pytest.raises(rmqha.ClosedError):
        broker.max_offset()
    # The store lock is released: the same store opens again.
    rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER")).close()


def test_a_broker_dropped_without_close_shuts_down(tmp_path: Path) -> None:
    broker = rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER"))
    port = broker.listen_port()
    del broker
    gc.collect()
    # Its store lock and its port are free again.
    rmqha.start_master(broker_config(tmp_path, "ASYNC_MASTER", listenPort=port)).close()


def test_a_config_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match="mapping"):
        rmqha.start_master([("brokerRole", "ASYNC_MASTER")])  # type: ignore[arg-type]
