"""When the bytes were on the wire: a loopback packet capture that timestamps, in the kernel, every
HTTP request to a server port and every SSE packet the server sends back, so that a client's TTFT
can be split into the server's part (when the first token left the server) and the client's part
(how late the client read it).

Why: on a 2-core machine a CPU vLLM server sometimes delivers a whole answer in one burst. A client
that sees the whole answer in its first read either read late (its own scheduling) or the server
wrote late; only a clock outside both clients can tell. The kernel stamps each packet when it
passes the loopback device (SO_TIMESTAMPNS), so this capture's own scheduling does not move the
times it records.

Needs Linux and CAP_NET_RAW (root). Run it as a process of its own around a client run:

    python benchmarks/wire_timing.py --port 8000 --out wire.jsonl   # until SIGINT/SIGTERM

Each output line is one request (concurrency 1 or many: requests are told apart by the client's
port, and a keep-alive connection's requests by their POST): {"client_port", "post", "first_data",
"first_content", "done", "packets"}, times in seconds (CLOCK_REALTIME; only differences matter).
`first_content` is the first server packet holding a non-empty `"content"`; `done` the packet
with `[DONE]`. The last line is {"drops": N}: packets the kernel dropped (then some requests are
missing or merged). Used by benchmarks/vllm_bench_vs_specmon.py --wire.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import struct
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ETH_P_ALL = 0x0003
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_STATISTICS = 6
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
CONTENT = re.compile(rb'"content":\s*"[^"]')


@dataclass
class WireRequest:
    client_port: int
    post: float
    first_data: float | None = None
    first_content: float | None = None
    done: float | None = None
    packets: int = 0


def _parse(frame: bytes) -> tuple[int, int, bytes] | None:
    """(source port, destination port, TCP payload) of an IPv4 TCP frame on lo, else None."""
    if len(frame) < 14 + 20 or frame[12:14] != b"\x08\x00":
        return None
    ip = frame[14:]
    ihl = (ip[0] & 0x0F) * 4
    if ip[9] != 6:
        return None
    total = struct.unpack_from("!H", ip, 2)[0]
    tcp = ip[ihl:total]
    if len(tcp) < 20:
        return None
    sport, dport = struct.unpack_from("!HH", tcp, 0)
    offset = (tcp[12] >> 4) * 4
    return sport, dport, tcp[offset:]


def capture(port: int, out: Path) -> None:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind(("lo", 0))
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    # The capture may be starved of CPU while the server and a client fill both cores: a deep
    # buffer keeps the kernel from dropping packets meanwhile (drops are counted and reported).
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 256 * 2**20)
    sock.settimeout(0.2)
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    open_requests: dict[int, WireRequest] = {}
    with out.open("w", encoding="utf-8") as sink:

        def finish(req: WireRequest) -> None:
            sink.write(json.dumps(asdict(req)) + "\n")
            sink.flush()

        print("ready", flush=True)
        while not stop:
            try:
                frame, anc, _flags, addr = sock.recvmsg(262144, socket.CMSG_SPACE(16))
            except TimeoutError:
                continue
            except InterruptedError:
                continue
            if addr[2] == PACKET_OUTGOING:  # lo shows each packet twice: keep the delivery
                continue
            parsed = _parse(frame)
            if parsed is None or not parsed[2]:
                continue
            sport, dport, payload = parsed
            t = None
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", data[:16])
                    t = sec + nsec / 1e9
            if t is None:
                continue
            if dport == port and payload.startswith(b"POST "):
                if sport in open_requests:
                    finish(open_requests.pop(sport))
                open_requests[sport] = WireRequest(client_port=sport, post=t)
            elif sport == port and dport in open_requests:
                req = open_requests[dport]
                if b"data:" in payload:
                    req.packets += 1
                    if req.first_data is None:
                        req.first_data = t
                    if req.first_content is None and CONTENT.search(payload):
                        req.first_content = t
                    if b"[DONE]" in payload:
                        req.done = t
                        finish(open_requests.pop(dport))
        for req in open_requests.values():
            finish(req)
        _packets, drops = struct.unpack("II", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
        sink.write(json.dumps({"drops": drops}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True, help="the server's port")
    ap.add_argument("--out", type=Path, required=True, help="JSON lines, one per request")
    args = ap.parse_args()
    try:
        capture(args.port, args.out)
    except PermissionError:
        sys.exit("wire_timing: a packet capture needs root (CAP_NET_RAW)")


if __name__ == "__main__":
    main()
