#!/usr/bin/python3
"""rdv_stranger.py N COUNT PROG [ARG...]: a start without a launcher (as
tests/rdv_run.sh does) that strangers crowd. Rank 0 starts alone; COUNT
connections reach its rendezvous port before any other rank starts: garbage,
HTTP requests, hellos with a wrong magic, version, world size or rank,
forged ranks (every field right but the proof of the job key), oversized
hellos, idle connections held open and slow ones that send a byte now and
then (slowloris). Each must have been greeted by rank 0's challenge (so it
came during the start). Then ranks 1..N-1 start while a thread goes on
sending forged ranks and garbage, and holds the idle ones open, until the
ranks exit.

Exit status: the first failing rank's, else 3 when fewer than COUNT
strangers were greeted before the other ranks started, else 0. The last
line on stderr counts what happened."""
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time

MAGIC = b"CADRERV1"
VERSION = 1
CHALLENGE = 32
HELLO = 8 + 4 * 4 + 8 + 16 + 64 + 16  # struct rdv_hello


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_rank(r, n, port, prog):
    env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port))
    return subprocess.Popen(prog, env=env)


def connect(port, deadline):
    """A connection to the port, waiting for rank 0 to listen; None at the deadline."""
    while time.time() < deadline:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            time.sleep(0.02)
    return None


def read_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def hello(magic=MAGIC, version=VERSION, size=0, rank=1):
    h = magic[:8].ljust(8, b"\0") + struct.pack("!IIII", version, size, rank, 4242)
    h += os.urandom(8) + os.urandom(16) + b"stranger".ljust(64, b"\0") + os.urandom(16)
    assert len(h) == HELLO
    return h


def payload(kind, n):
    if kind == 0:
        return os.urandom(random.randint(1, 300))
    if kind == 1:
        return b"GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: stranger\r\n\r\n"
    if kind == 2:  # a forged rank: every field right, the proof not
        return hello(size=n, rank=random.randint(1, n - 1))
    if kind == 3:
        return hello(size=n + 1)
    if kind == 4:
        return hello(size=n, rank=random.choice([0, n, n + 7, 0xFFFFFFFF]))
    if kind == 5:
        return hello(version=VERSION + 1, size=n)
    if kind == 6:
        return hello(magic=b"CADRERV0", size=n)
    return MAGIC + os.urandom(1 << 16)  # 7: oversized


def one(port, n, kind, deadline, held, stats):
    """One stranger; True when rank 0 greeted it."""
    s = connect(port, deadline)
    if s is None:
        return False
    try:
        s.settimeout(10)
        if kind >= 8:  # idle (8) or slowloris (9): greeted, then held open
            ok = read_exact(s, CHALLENGE)[:8] == MAGIC
            held.append((s, kind))
            return ok
        ch = read_exact(s, CHALLENGE)
        if ch[:8] != MAGIC:
            s.close()
            return False
        try:
            s.sendall(payload(kind, n))
            s.settimeout(2)
            answer = s.recv(512)  # a refusal, or nothing (closed)
            if answer[:4] == struct.pack("!I", 1):
                stats["acked"] += 1  # a stranger admitted: must never happen
        except OSError:
            pass
        s.close()
        return True
    except OSError:
        s.close()
        return False


def main():
    n, count = int(sys.argv[1]), int(sys.argv[2])
    prog = sys.argv[3:]
    port = free_port()
    stats = {"acked": 0, "later": 0}
    held = []
    t0 = time.time()
    rank0 = start_rank(0, n, port, prog)
    deadline = time.time() + 60
    greeted = 0
    for i in range(count):
        greeted += one(port, n, i % 10, deadline, held, stats)
    for s, kind in held:  # the slow ones send their first byte
        if kind == 9:
            try:
                s.send(MAGIC[:1])
            except OSError:
                pass
    before = greeted
    t1 = time.time()
    others = [start_rank(r, n, port, prog) for r in range(1, n)]
    done = threading.Event()

    def pester():
        i = 0
        while not done.is_set():
            if one(port, n, i % 8, time.time() + 0.2, held, stats):
                stats["later"] += 1
            i += 1

    t = threading.Thread(target=pester)
    t.start()
    rcs = [p.wait() for p in [rank0] + others]
    t2 = time.time()
    done.set()
    t.join()
    for s, _ in held:
        s.close()
    print("rdv_stranger: %d of %d strangers greeted before ranks 1-%d started, %d more during "
          "their start, %d admitted, %d held open; %.1f s, then %.1f s" % (
              before, count, n - 1, stats["later"], stats["acked"], len(held), t1 - t0, t2 - t1),
          file=sys.stderr)
    for rc in rcs:
        if rc != 0:
            return rc if rc > 0 else 128 - rc
    if stats["acked"]:
        return 4
    return 0 if before == count else 3


if __name__ == "__main__":
    sys.exit(main())
