"""The other process of test_multiprocess.py: one agent named "child" with one
registered buffer, driven by line commands on stdin, one reply line each.

    python peer.py TRANSPORT BYTES [METADATA_LISTEN]

First line out: "ready <metadata hex> <buffer address> <metadata port>". Commands:
fill SEED | verify SEED | notif SEED (waits for one notification, then checks the
buffer at once) | quit.
"""
import sys
import time

import kvlane
from kvtest import first_mismatch, pattern


def main():
    transport, size = sys.argv[1], int(sys.argv[2])
    listen = sys.argv[3] if len(sys.argv) > 3 else ""
    agent = kvlane.Agent("child", transports=[transport], metadata_listen=listen)
    buf = bytearray(size)
    region = agent.register_memory(buf)
    print("ready", agent.export_metadata().hex(), region.addr, agent.metadata_port, flush=True)
    for line in sys.stdin:
        cmd, *args = line.split()
        if cmd == "quit":
            break
        seed = int(args[0])
        if cmd == "fill":
            buf[:] = pattern(seed, size)
            reply = "ok"
        elif cmd == "verify":
            bad = first_mismatch(buf, pattern(seed, size))
            reply = "ok" if bad < 0 else f"bad {bad}"
        elif cmd == "notif":
            got, deadline = [], time.monotonic() + 20
            while not got and time.monotonic() < deadline:
                got = agent.take_notifications()
            bad = first_mismatch(buf, pattern(seed, size))  # before anything else happens
            reply = f"bad {bad}" if bad >= 0 else "ok " + ",".join(f"{p}:{m.hex()}" for p, m in got)
        else:
            reply = f"unknown command {cmd}"
        print(reply, flush=True)
    agent.close()


if __name__ == "__main__":
    main()
