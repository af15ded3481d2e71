"""A SYNC_MASTER embedded in a Python program: prints its HA port, then puts a message every
interval and prints the result, until Ctrl-C.

    python examples/python/master.py --store /tmp/rmqha-master
    # in another shell, with the HA port it printed:
    python examples/python/slave.py 127.0.0.1:<ha port> --store /tmp/rmqha-slave
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

import rmqha


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", help="store directory (default: a new temporary one, removed at exit)")
    p.add_argument("--config", help="a broker.properties file to start from")
    p.add_argument(
        "--file-size",
        type=int,
        default=64 << 20,
        help="CommitLog file size unless --config sets it (RocketMQ's default, 1 GiB, is heavy for a demo)",
    )
    p.add_argument("--role", default="SYNC_MASTER", choices=["SYNC_MASTER", "ASYNC_MASTER"])
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on")
    p.add_argument("--listen-port", type=int, default=0, help="remoting port (0: any free one)")
    p.add_argument("--ha-port", type=int, default=0, help="HA port for slaves (0: any free one)")
    p.add_argument("--topic", default="Demo")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between puts")
    p.add_argument("--count", type=int, default=0, help="stop after this many puts (0: never)")
    p.add_argument(
        "--wait-for-slave",
        type=float,
        default=0,
        metavar="SECONDS",
        help="wait this long for a slave first",
    )
    args = p.parse_args()

    # A store of our own (no --store) is removed at exit, once the broker is closed.
    own_store = None if args.store else tempfile.mkdtemp(prefix="rmqha-master-")
    config: dict[str, rmqha.ConfigValue] = {"mappedFileSizeCommitLog": args.file_size}
    if args.config:
        config.update(rmqha.load_properties(args.config))
    config.update(
        storePathRootDir=args.store or own_store,
        brokerRole=args.role,
        bindAddress=args.bind,
        brokerIP1=args.bind if args.bind != "0.0.0.0" else "127.0.0.1",
        listenPort=args.listen_port,
        haListenPort=args.ha_port,
    )

    try:
        with rmqha.start_master(config) as master:
            print(f"master {args.role} store={config['storePathRootDir']}")
            print(f"listen port: {master.listen_port()}")
            print(f"HA port: {master.ha_port()}", flush=True)
            i = 0
            try:
                deadline = time.monotonic() + args.wait_for_slave
                while (
                    not any(s["transferring"] for s in master.offsets()["slaves"])
                    and time.monotonic() < deadline
                ):
                    time.sleep(0.05)
                while args.count == 0 or i < args.count:
                    r = master.put_message_sync(
                        args.topic,
                        f"message {i} at {time.time():.3f}".encode(),
                        tags="demo",
                        keys=[f"demo-{i}"],
                    )
                    slaves = ", ".join(
                        f"{s['addr']} ack={s['ack_offset']}" for s in master.offsets()["slaves"]
                    )
                    print(
                        f"put {i}: {r.status} msg_id={r.msg_id} queue_offset={r.queue_offset} "
                        f"max_offset={master.max_offset()} slaves=[{slaves}]",
                        flush=True,
                    )
                    i += 1
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
