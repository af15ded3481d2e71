from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import rmqha

from _support import broker_config, slave_streaming, wait_until


@pytest.fixture
def master(tmp_path: Path) -> Iterator[rmqha.Broker]:
    """An ASYNC_MASTER without slaves."""
    with rmqha.start_master(broker_config(tmp_path / "master", "ASYNC_MASTER")) as m:
        yield m


@pytest.fixture
def sync_pair(tmp_path: Path) -> Iterator[tuple[rmqha.Broker, rmqha.Broker]]:
    """A SYNC_MASTER and a slave streaming from it, in this process."""
    with rmqha.start_master(broker_config(tmp_path / "master", "SYNC_MASTER", slaveTimeout=10000)) as m:
        cfg = broker_config(tmp_path / "slave", "SLAVE", haMasterAddress=f"127.0.0.1:{m.ha_port()}")
        with rmqha.start_slave(cfg) as s:
            assert wait_until(lambda: slave_streaming(m)), m.offsets()
            yield m, s
