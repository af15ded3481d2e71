"""Type stubs of the native module rmqha._rmqha (re-exported by the rmqha package)."""

import os
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Literal, Self, TypedDict, final

from typing_extensions import Buffer

__version__: str

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

def start_master(config: Mapping[str, ConfigValue]) -> Broker:
    """Starts a master (brokerRole ASYNC_MASTER or SYNC_MASTER).

    Raises ConfigError for an invalid value (naming the key) or a SLAVE role, StoreError when
    the store cannot be opened, RemotingError when a port cannot be bound. Unknown keys are
    reported as ConfigWarning.
    """

def start_slave(config: Mapping[str, ConfigValue]) -> Broker:
    """Starts a slave (brokerRole SLAVE, brokerId > 0, haMasterAddress = master's HA host:port)."""

def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Reads a broker.properties file: the keys it sets (canonical spelling), values as str.

    Raises ConfigError (with .path and .line) for an unreadable file or an invalid value.
    """

@final
class PutResult:
    """The store's answer to a put."""

    @property
    def status(self) -> PutStatus:
        """PUT_OK, or for a stored message whose durability fell short FLUSH_DISK_TIMEOUT,
        FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE."""
    @property
    def stored(self) -> bool:
        """Whether the message is in the CommitLog."""
    @property
    def msg_id(self) -> str:
        """RocketMQ's offset message id (hex); empty when nothing was stored."""
    @property
    def phy_offset(self) -> int: ...
    @property
    def queue_id(self) -> int: ...
    @property
    def queue_offset(self) -> int: ...
    @property
    def size(self) -> int:
        """Bytes written."""
    @property
    def msg_num(self) -> int: ...
    @property
    def store_timestamp(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...

@final
class Message:
    """A stored message."""

    @property
    def topic(self) -> str: ...
    @property
    def queue_id(self) -> int: ...
    @property
    def queue_offset(self) -> int: ...
    @property
    def phy_offset(self) -> int: ...
    @property
    def store_size(self) -> int: ...
    @property
    def body(self) -> bytes: ...
    @property
    def tags(self) -> str | None: ...
    @property
    def keys(self) -> list[str]: ...
    @property
    def properties(self) -> dict[str, str]:
        """Every property of the record (TAGS, KEYS, UNIQ_KEY, user properties), a fresh dict."""
    @property
    def flag(self) -> int: ...
    @property
    def sys_flag(self) -> int: ...
    @property
    def reconsume_times(self) -> int: ...
    @property
    def store_timestamp(self) -> int: ...
    @property
    def born_timestamp(self) -> int: ...
    @property
    def store_host(self) -> str: ...
    @property
    def born_host(self) -> str: ...
    @property
    def msg_id(self) -> str: ...

@final
class GetMessagesResult:
    """The result of Broker.get_messages."""

    @property
    def status(self) -> GetMessageStatus: ...
    @property
    def next_begin_offset(self) -> int: ...
    @property
    def min_offset(self) -> int: ...
    @property
    def max_offset(self) -> int: ...
    @property
    def suggest_pulling_from_slave(self) -> bool: ...
    @property
    def messages(self) -> list[Message]: ...

@final
class Broker:
    """A running broker; close it with close() or a with block."""

    def put_message_sync(
        self,
        topic: str,
        body: bytes | str | Buffer,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        properties: Mapping[str, str] | None = None,
        queue_id: int = 0,
    ) -> PutResult:
        """Puts a message; returns when the answer is final for the broker's role.

        Raises PutError (with .status) when nothing was stored, e.g. on a slave or for an
        illegal message. Ctrl-C interrupts a wait for a slave's ack; the message stays stored.
        """
    def get_messages(self, topic: str, queue_id: int, offset: int, max_msgs: int = 32) -> GetMessagesResult: ...
    def query_by_key(self, topic: str, key: str, max: int = 32) -> list[Message]:
        """Messages of topic whose KEYS (or UNIQ_KEY) hold key, newest first."""
    def message_by_id(self, msg_id: str) -> Message | None: ...
    def max_offset(self) -> int: ...
    def min_offset(self) -> int: ...
    def flushed_offset(self) -> int: ...
    def slave_ack_offset(self) -> int: ...
    def listen_port(self) -> int: ...
    def ha_port(self) -> int: ...
    def queue_min_offset(self, topic: str, queue_id: int) -> int: ...
    def queue_max_offset(self, topic: str, queue_id: int) -> int: ...
    def offsets(self) -> Offsets: ...
    def consumer_offset(self, group: str, topic: str, queue_id: int) -> int: ...
    def commit_consumer_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None: ...
    def config(self) -> dict[str, str]:
        """Every config key with its effective value, as strings."""
    @property
    def closed(self) -> bool: ...
    def close(self) -> None:
        """Shuts down gracefully (flush, stop services, join threads). Idempotent."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        _exc_type: type[BaseException] | None = None,
        _exc: BaseException | None = None,
        _tb: TracebackType | None = None,
    ) -> bool: ...

class RmqhaError(Exception):
    """Base class of every error rmqha raises."""

class ConfigError(RmqhaError):
    key: str | None
    value: str | None
    path: str | None
    line: int | None

class StoreError(RmqhaError):
    path: str | None

class PutError(RmqhaError):
    status: PutStatus

class InvalidArgumentError(RmqhaError): ...
class NotMasterError(RmqhaError): ...
class NotSlaveError(RmqhaError): ...
class RemotingError(RmqhaError): ...
class ClosedError(RmqhaError): ...
class ConfigWarning(UserWarning): ...
