"""A signed delivery's answer while slow clients hold connections: the web server as `issue-sorter run` starts it.

    REDIS_URL=redis://127.0.0.1:6379/6 .venv/bin/python -m bench.slow_clients --slow 20 --pings 50

Starts `issue-sorter web` (issue_sorter.run.WEB_COMMAND, as docker-compose.yml runs it too) on loopback, then
sends `--pings` signed `ping` deliveries one after another with no slow client (the reference), and again while
`--slow` connections each send a header byte every 2 s (a slowloris client), and prints the latency of each set.
"""

from __future__ import annotations

import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.service import CLI, arguments, environment, post, print_report, started
from issue_sorter.run import WEB_COMMAND

BODY = b'{"zen": "Design for failure.", "hook_id": 1}'


def ping(base: str) -> float:
    """Seconds to a signed ping's answer (inf when it is not 200 within 30 s)."""
    sent = time.perf_counter()
    return time.perf_counter() - sent if post(base, "ping", BODY, "bench") == 200 else float("inf")


def pings(base: str, count: int) -> dict:
    seconds = sorted(ping(base) for _ in range(count))
    return {"n": count, "p50_ms": round(statistics.median(seconds) * 1000, 1),
            "max_ms": round(seconds[-1] * 1000, 1), "answered": sum(s != float("inf") for s in seconds)}


def trickle(port: int, count: int, stop: threading.Event) -> None:
    """`count` connections, each sending part of a request's headers, then a byte every 2 s, reconnecting
    whenever the server closes one."""
    socks = [None] * count
    while not stop.is_set():
        for index in range(count):
            try:
                if socks[index] is None:
                    socks[index] = socket.create_connection(("127.0.0.1", port))
                    socks[index].sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                socks[index].sendall(b"a")
            except OSError:
                socks[index] = None
        stop.wait(2)
    for sock in socks:
        if sock is not None:
            sock.close()


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__, model=False)
    parser.add_argument("--slow", type=int, default=20, help="slow connections held open")
    parser.add_argument("--pings", type=int, default=50, help="signed pings in each set")
    args = parser.parse_args(argv)
    if not os.environ.get("REDIS_URL"):
        raise SystemExit("set REDIS_URL to a Redis database of its own")
    workdir = Path(tempfile.mkdtemp(prefix="slow-clients-"))
    env = environment(None, workdir)
    base, stop = f"http://127.0.0.1:{env['PORT']}", threading.Event()
    with started({"web": [*CLI, *WEB_COMMAND]}, env, workdir):
        try:
            deadline = time.monotonic() + 60
            while ping(base) == float("inf") and time.monotonic() < deadline:
                time.sleep(0.5)
            report = {"web_command": WEB_COMMAND, "slow_clients": args.slow, "alone": pings(base, args.pings)}
            threading.Thread(target=trickle, args=(int(env["PORT"]), args.slow, stop), daemon=True).start()
            time.sleep(3)  # every slow client connected and trickling
            report["with_slow_clients"] = pings(base, args.pings)
        finally:
            stop.set()
    print_report(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
