"""Type stubs of the native module rmqha._rmqha (re-exported by the rmqha package)."""

import os
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Literal, Self, final

from typing_extensions import Buffer

from rmqha._types import ConfigValue, GetMessageStatus, Offsets, PutStatus

__all__ = [
    "Broker",
    "ClosedError",
    "ConfigError",
    "ConfigWarning",
    "GetMessagesResult",
    "InvalidArgumentError",
    "Message",
    "NotMasterError",
    "NotSlaveError",
    "PutError",
    "PutResult",
    "RemotingError",
    "RmqhaError",
    "StoreError",
    "__version__",
    "load_properties",
    "start_master",
    "start_slave",
]

__version__: str

def start_master(config: Mapping[str, ConfigValue]) -> Broker:
    """Starts a master (brokerRole ASYNC_MASTER or SYNC_MASTER).

    Raises ConfigError for an invalid value (naming the key), NotMasterError for a SLAVE role,
    StoreError when the store cannot be opened or the HA port (haListenPort) cannot be bound,
    RemotingError when the remoting port (listenPort) cannot be bound.
    Unknown keys are reported as ConfigWarning.
    """

def start_slave(config: Mapping[str, ConfigValue]) -> Broker:
    """Starts a slave (brokerRole SLAVE, brokerId > 0, haMasterAddress = master's HA host:port).

    Raises NotSlaveError for a master role, ConfigError for an invalid value.
    """

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
    def __eq__(self, other: object, /) -> bool: ...

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

        keys: a list of keys, or one string that is split at spaces (RocketMQ stores KEYS
        space-separated, so "a b" is the two keys "a" and "b"). A key in a list that is
        empty or holds a space raises InvalidArgumentError: it could never be found.

        Raises PutError (with .status) when nothing was stored, e.g. on a slave or for an
        illegal message; InvalidArgumentError for a negative queue_id (as C and Node).
        Ctrl-C interrupts a wait for a slave's ack; the message stays stored.
        """
    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msgs: int = 32,
        *,
        tags: str | None = None,
        sql: str | None = None,
    ) -> GetMessagesResult:
        """Up to max_msgs messages of a queue from a ConsumeQueue offset. With tags (a tag
        expression, "a || b"; "*" passes all) or sql (a SQL92 expression over the message's
        properties), only the messages it passes; what it skips does not count toward
        max_msgs, and status NO_MATCHED_MESSAGE with next_begin_offset past the scanned
        window means nothing passed there. InvalidArgumentError for both at once, or SQL that
        does not compile (the message names the column)."""
    def query_by_key(
        self, topic: str, key: str, max: int = 32, begin: int = 0, end: int | None = None
    ) -> list[Message]:
        """Messages of topic whose KEYS (or UNIQ_KEY) hold key, newest first, stored from
        begin to end ms since the epoch (both included; end=None: no bound). InvalidArgumentError
        when begin is after end."""
    def message_by_id(self, msg_id: str) -> Message | None: ...
    def max_offset(self) -> int: ...
    def min_offset(self) -> int: ...
    def flushed_offset(self) -> int: ...
    def slave_ack_offset(self) -> int: ...
    def listen_port(self) -> int: ...
    def ha_port(self) -> int: ...
    def queue_min_offset(self, topic: str, queue_id: int) -> int: ...
    def queue_max_offset(self, topic: str, queue_id: int) -> int: ...
    def queue_offset_by_time(
        self, topic: str, queue_id: int, timestamp_ms: int, boundary: Literal["lower", "upper"] = "lower"
    ) -> int:
        """A queue's offset by store time (ms): "lower" the first message stored at or after
        it (the max offset when every message is older), "upper" the last at or before it."""
    def offsets(self) -> Offsets: ...
    def metrics(self) -> str:
        """The broker's metrics as Prometheus text (exposition format 0.0.4): offsets, each
        slave's ack offset and lag, put counters by status, and a histogram of how long puts
        waited for a flush or a slave."""
    def consumer_offset(self, group: str, topic: str, queue_id: int) -> int: ...
    def commit_consumer_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None: ...
    def set_master_address(self, ha_address: str) -> None:
        """Slave: replicates from another master (its HA "host:port") from now on.

        Raises NotSlaveError on a master, InvalidArgumentError for an address that is not
        host:port. The new master must hold the same log, or it refuses the slave.
        """
    def config(self) -> dict[str, str]:
        """Every config key with its effective value, as strings. Secrets (haAuthSecret,
        aclSecretKey) read "<hidden>" when set; passing that back as a config is refused."""
    @property
    def closed(self) -> bool: ...
    def close(self) -> None:
        """Shuts down gracefully (flush, stop services, join threads). Idempotent.

        Raises StoreError when the stop was not clean (config tables not persisted, a failed
        final flush); the broker is stopped all the same. Only the call that stopped the
        broker raises it. At the end of a with block that raised, the block's exception goes
        on and the unclean stop is a RuntimeWarning."""
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
