"""Types of the values rmqha's calls take and return (for annotations; plain dicts and str at
runtime)."""

import os
from typing import Literal, TypedDict

ConfigValue = str | int | bool | os.PathLike[str]
"""A config value: written into the config as a properties file would hold it."""

PutStatus = Literal[
    "PUT_OK",
    "FLUSH_DISK_TIMEOUT",
    "FLUSH_SLAVE_TIMEOUT",
    "SLAVE_NOT_AVAILABLE",
    "SERVICE_NOT_AVAILABLE",
    "MESSAGE_ILLEGAL",
    "PROPERTIES_SIZE_EXCEEDED",
    "OS_PAGE_CACHE_BUSY",
    "CREATE_MAPPED_FILE_FAILED",
    "UNKNOWN_ERROR",
]

GetMessageStatus = Literal[
    "FOUND",
    "NO_MATCHED_MESSAGE",
    "MESSAGE_WAS_REMOVING",
    "OFFSET_FOUND_NULL",
    "OFFSET_OVERFLOW_BADLY",
    "OFFSET_OVERFLOW_ONE",
    "OFFSET_TOO_SMALL",
    "NO_MATCHED_LOGIC_QUEUE",
    "NO_MESSAGE_IN_QUEUE",
]

BrokerRole = Literal["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"]


class SlaveInfo(TypedDict):
    """A slave connected to a master."""

    addr: str
    """The slave's address, host:port."""
    ack_offset: int
    """Highest offset the slave acked (-1 before its first report)."""
    lag_bytes: int
    """Bytes the slave is behind the master's max offset."""
    connected_ms: int
    """Milliseconds since the connection was accepted."""
    transferring: bool
    """Whether the master streams to it (its offset was accepted)."""
    last_report_ms: int
    """Milliseconds since the slave last sent anything (report, ack or heartbeat): grows
    while a frozen slave's lag_bytes stays small."""


class RefusedSlave(TypedDict):
    """A slave the master refused recently, and why."""

    addr: str
    requested_offset: int
    reason: str
    at_ms: int


class Offsets(TypedDict):
    """One snapshot of a broker's offsets and replication state."""

    role: BrokerRole
    max_offset: int
    min_offset: int
    flushed_offset: int
    slave_ack_offset: int
    dispatch_behind_bytes: int
    listen_port: int
    ha_port: int
    slaves: list[SlaveInfo]
    """Master: the connected slaves (empty on a slave)."""
    refused_slaves: list[RefusedSlave]
    master_address: str | None
    """Slave: the master's HA address (None on a master)."""
    connected: bool | None
    """Slave: whether it is connected to its master (None on a master)."""
    last_ha_error: str | None
    """Slave: why its last HA connection ended, if it did."""
