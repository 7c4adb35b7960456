"""What one wake-up across processes costs on this machine: a loopback TCP ping-pong, two ways.

A request through a gateway crosses processes twice as often as a request sent to the instance
directly (client, gateway, instance, gateway, client), and each crossing wakes a process. On a VM
whose idle vCPUs halt, waking a process on the other vCPU can take most of a millisecond; on the
same vCPU it takes microseconds. :func:`ping_pong` measures both (the echoing child pinned to the
other CPU, then to the same one), so a gateway's tail can be read against the machine's own.
"""

from __future__ import annotations

import os
import socket
import time

__all__ = ["ping_pong"]


def _echo(port: int, cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})
    conn = socket.create_connection(("127.0.0.1", port))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while data := conn.recv(4096):
        conn.sendall(data)
    os._exit(0)


def _round_trips(n: int, same_cpu: bool) -> list[float]:
    cpus = sorted(os.sched_getaffinity(0))
    mine, theirs = cpus[0], cpus[0] if same_cpu or len(cpus) == 1 else cpus[1]
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        before = os.sched_getaffinity(0)
        pid = os.fork()
        if pid == 0:
            _echo(srv.getsockname()[1], theirs)
        try:
            os.sched_setaffinity(0, {mine})
            conn, _ = srv.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            msg, out = b"x" * 400, []
            with conn:
                for _ in range(n):
                    t0 = time.perf_counter()
                    conn.sendall(msg)
                    conn.recv(4096)
                    out.append(time.perf_counter() - t0)
        finally:
            os.sched_setaffinity(0, before)
            os.waitpid(pid, 0)
    return sorted(out)


def ping_pong(n: int = 3000) -> dict[str, float]:
    """Round-trip p50/p99 (µs) of a 400-byte loopback ping-pong across two CPUs and on one."""
    out: dict[str, float] = {}
    for name, same in (("cross_cpu", False), ("same_cpu", True)):
        rtt = _round_trips(n, same)
        out[f"{name}_p50_us"] = round(rtt[len(rtt) // 2] * 1e6, 1)
        out[f"{name}_p99_us"] = round(rtt[int(len(rtt) * 0.99)] * 1e6, 1)
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(ping_pong()))
