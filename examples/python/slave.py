"""A slave embedded in a Python program: replicates from the master whose HA address it is
given, and prints its offsets and the messages it receives, until Ctrl-C.

    python examples/python/slave.py 127.0.0.1:<master's HA port> --store /tmp/rmqha-slave
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

import rmqha


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "master",
        help="the master's HA address, host:port (or just the port, on 127.0.0.1)",
    )
    p.add_argument("--store", help="store directory (default: a new temporary one, removed at exit)")
    p.add_argument("--config", help="a broker.properties file to start from")
    p.add_argument(
        "--file-size",
        type=int,
        default=64 << 20,
        help="CommitLog file size unless --config sets it (RocketMQ's default, 1 GiB, is heavy for a demo)",
    )
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on")
    p.add_argument("--listen-port", type=int, default=0, help="remoting port (0: any free one)")
    p.add_argument("--topic", default="Demo")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between reports")
    p.add_argument("--seconds", type=float, default=0, help="stop after this long (0: never)")
    p.add_argument(
        "--messages",
        type=int,
        default=0,
        help="stop after this many messages (0: never)",
    )
    args = p.parse_args()
    master = args.master if ":" in args.master else f"127.0.0.1:{args.master}"

    # A store of our own (no --store) is removed at exit, once the broker is closed.
    own_store = None if args.store else tempfile.mkdtemp(prefix="rmqha-slave-")
    config: dict[str, rmqha.ConfigValue] = {"mappedFileSizeCommitLog": args.file_size}
    if args.config:
        config.update(rmqha.load_properties(args.config))
    config.update(
        storePathRootDir=args.store or own_store,
        brokerRole="SLAVE",
        brokerId=1,
        bindAddress=args.bind,
        listenPort=args.listen_port,
        haMasterAddress=master,
    )

    try:
        with rmqha.start_slave(config) as slave:
            print(f"slave of {master} store={config['storePathRootDir']}", flush=True)
            next_offset = 0  # in the topic's queue 0, where the master example puts
            deadline = time.monotonic() + args.seconds if args.seconds else None
            try:
                while (deadline is None or time.monotonic() < deadline) and (
                    args.messages == 0 or next_offset < args.messages
                ):
                    o = slave.offsets()
                    print(
                        f"connected={o['connected']} max_offset={o['max_offset']} "
                        f"acked={o['slave_ack_offset']} last_error={o['last_ha_error']}",
                        flush=True,
                    )
                    while True:
                        got = slave.get_messages(args.topic, 0, next_offset, 32)
                        if not got.messages:
                            break
                        for m in got.messages:
                            print(
                                f"  replicated {m.msg_id} q{m.queue_id}@{m.queue_offset}: {m.body.decode()!r}"
                            )
                        next_offset = got.messages[-1].queue_offset + 1
                    time.sleep(args.interval)
            except KeyboardInterrupt:
                print("stopping")
        print("closed")
    finally:
        if own_store:
            shutil.rmtree(own_store, ignore_errors=True)
            print(f"removed {own_store}")


if __name__ == "__main__":
    main()
