"""rmqha: Apache RocketMQ's broker storage and master/slave HA, embeddable.

Start a master or a slave inside your process from a dict of RocketMQ property keys
(the keys of a ``broker.properties`` file)::

    import rmqha

    with rmqha.start_master({
        "storePathRootDir": "/var/lib/rmqha/master",
        "brokerRole": "SYNC_MASTER",
        "listenPort": 10911,
    }) as master:
        r = master.put_message_sync("TopicTest", b"hello", tags="TagA", keys=["order-1"])
        print(r.status, r.msg_id)

A slave names its master's HA address::

    slave = rmqha.start_slave({
        "storePathRootDir": "/var/lib/rmqha/slave",
        "brokerRole": "SLAVE",
        "brokerId": 1,
        "haMasterAddress": "10.0.0.1:10912",
    })

Blocking calls release the GIL; a put waiting for a slave's ack can be interrupted with
Ctrl-C. Failures raise subclasses of :class:`RmqhaError`; a put whose message was stored but
without the durability asked for returns a :class:`PutResult` whose ``status`` says so.
"""

from rmqha._rmqha import (
    Broker,
    ClosedError,
    ConfigError,
    ConfigWarning,
    GetMessagesResult,
    InvalidArgumentError,
    Message,
    NotMasterError,
    NotSlaveError,
    PutError,
    PutResult,
    RemotingError,
    RmqhaError,
    StoreError,
    __version__,
    load_properties,
    start_master,
    start_slave,
)
from rmqha._types import (
    BrokerRole,
    ConfigValue,
    GetMessageStatus,
    Offsets,
    PutStatus,
    RefusedSlave,
    SlaveInfo,
)

__all__ = [
    "Broker",
    "BrokerRole",
    "ClosedError",
    "ConfigError",
    "ConfigValue",
    "ConfigWarning",
    "GetMessageStatus",
    "GetMessagesResult",
    "InvalidArgumentError",
    "Message",
    "NotMasterError",
    "NotSlaveError",
    "Offsets",
    "PutError",
    "PutResult",
    "PutStatus",
    "RefusedSlave",
    "RemotingError",
    "RmqhaError",
    "SlaveInfo",
    "StoreError",
    "__version__",
    "load_properties",
    "start_master",
    "start_slave",
]
