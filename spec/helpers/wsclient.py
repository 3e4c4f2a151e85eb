"""WebSocket clients for the serve specs (Debian's python3-websockets).

    python3 spec/helpers/wsclient.py broadcast URL N
        N clients join (URL?name=cI); c0 says "hello"; prints how many heard it.
    python3 spec/helpers/wsclient.py hold URL N
        N clients join and print "ready", then follow lines on stdin:
        "say" (client I sends "from cI"), "send I TEXT", "expect K..." (wait
        until client I got K_I messages after its welcome, or every client K), "closed" (wait until the server
        closed them all); the last two print, as JSON, the messages and the
        close each client got. Anything else (or the end of stdin) ends it.
    python3 spec/helpers/wsclient.py raw HOST PORT PATH CASE
        one connection speaking raw RFC 6455 frames: prints what came back.

Every result is one JSON line on stdout; every wait has a timeout, so a
server that never answers fails the spec instead of hanging it.

With EUTAXY_SYNC_LOG set, hold also adds to that file a line "sent TEXT"
before each send and "got MESSAGE" as each message arrives, beside the
"sync" lines of a server that preloads spec/helpers/synclog.c.
"""
import asyncio
import base64
import json
import os
import socket
import struct
import sys

import websockets

TIMEOUT = 30


def log(line):
    path = os.environ.get("EUTAXY_SYNC_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


async def join(url, name):
    ws = await asyncio.wait_for(websockets.connect(f"{url}?name={name}", max_size=None,
                                                   open_timeout=TIMEOUT, ping_interval=None), TIMEOUT)
    welcome = await asyncio.wait_for(ws.recv(), TIMEOUT)
    return ws, welcome


async def broadcast(url, n):
    clients = await asyncio.gather(*(join(url, f"c{i}") for i in range(n)))
    await clients[0][0].send("hello")

    async def hear(ws):
        while True:
            m = await asyncio.wait_for(ws.recv(), TIMEOUT)
            if m == "c0: hello":
                return 1

    heard = await asyncio.gather(*(hear(ws) for ws, _ in clients))
    welcomed = sum(1 for _, w in clients if w.startswith("welcome c"))
    for ws, _ in clients:
        await ws.close()
    print(json.dumps({"connected": len(clients), "welcomed": welcomed, "heard": sum(heard)}), flush=True)


async def hold(url, n):
    clients = [ws for ws, _ in await asyncio.gather(*(join(url, f"c{i}") for i in range(n)))]
    got = [[] for _ in clients]
    closes = [None for _ in clients]
    arrived = asyncio.Condition()

    async def listen(i, ws):
        try:
            async for m in ws:
                got[i].append(m if isinstance(m, str) else "binary:" + m.hex())
                log("got " + got[i][-1])
                async with arrived:
                    arrived.notify_all()
        except websockets.ConnectionClosed:
            pass
        closes[i] = {"code": ws.close_code, "reason": ws.close_reason}

    listeners = [asyncio.ensure_future(listen(i, ws)) for i, ws in enumerate(clients)]

    def report():
        print(json.dumps({"got": got, "closes": closes}), flush=True)

    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    while True:
        cmd = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
        if cmd == "say":
            for i, ws in enumerate(clients):
                await ws.send(f"from c{i}")
            print("said", flush=True)
        elif cmd.startswith("send "):
            _, i, text = cmd.split(" ", 2)
            log("sent " + text)
            await clients[int(i)].send(text)
            print("sent", flush=True)
        elif cmd.startswith("expect "):
            ks = [int(k) for k in cmd.split(" ")[1:]]
            ks = ks * len(got) if len(ks) == 1 else ks
            try:
                async with arrived:
                    await asyncio.wait_for(arrived.wait_for(
                        lambda: all(len(g) >= k for g, k in zip(got, ks))), TIMEOUT)
            except asyncio.TimeoutError:
                pass
            report()
        elif cmd == "closed":
            await asyncio.wait(listeners, timeout=TIMEOUT)
            report()
        else:
            break
    for ws in clients:
        await ws.close()


def frame(opcode, payload, fin=True, mask=True, rsv=0):
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    n = len(payload)
    m = 0x80 if mask else 0
    if n < 126:
        head += bytes([m | n])
    elif n < 65536:
        head += bytes([m | 126]) + struct.pack("!H", n)
    else:
        head += bytes([m | 127]) + struct.pack("!Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def parse_frames(data):
    """The whole frames at the start of data, and the bytes left."""
    frames = []
    while len(data) >= 2:
        op, n = data[0] & 0x0F, data[1] & 0x7F
        i = 2
        if n == 126:
            if len(data) < 4:
                break
            n, i = struct.unpack("!H", data[2:4])[0], 4
        elif n == 127:
            if len(data) < 10:
                break
            n, i = struct.unpack("!Q", data[2:10])[0], 10
        if len(data) < i + n:
            break
        frames.append((op, data[i:i + n]))
        data = data[i + n:]
    return frames, data


def read_frames(sock, until=None):
    """Frames the server sent until it closed, or until one frame satisfies
    until (then what was read so far): [(opcode, payload)]."""
    data, frames = b"", []
    sock.settimeout(TIMEOUT)
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        data += chunk
        more, data = parse_frames(data)
        frames += more
        if until and any(until(op, p) for op, p in more):
            break
    return frames


def raw(host, port, path, case):
    sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            break
        head += chunk
    status = int(head.split(b" ", 2)[1]) if head else 0
    if case == "fragmented":
        sock.sendall(frame(1, b"frag", fin=False) + frame(0, b"men", fin=False) + frame(0, b"ted"))
    elif case == "ping-in-fragment":
        sock.sendall(frame(1, b"pi", fin=False) + frame(9, b"are you there") + frame(0, b"ng"))
    elif case == "unmasked":
        sock.sendall(frame(1, b"hello", mask=False))
    elif case == "reserved-bits":
        sock.sendall(frame(1, b"hello", rsv=0x40))
    elif case == "oversized":
        sock.sendall(frame(2, b"x" * 70000))
    elif case == "bad-utf8":
        sock.sendall(frame(1, b"\xff\xfe"))
    frames = []
    if case in ("fragmented", "ping-in-fragment"):
        # the room answers with a line: wait for it (or a close) before closing
        frames = read_frames(sock, lambda op, p: op == 8 or (op == 1 and p.startswith(b"raw: ")))
    sock.sendall(frame(8, struct.pack("!H", 1000) + b"bye"))
    frames += read_frames(sock)
    out = {"status": status, "frames": []}
    for op, payload in frames:
        if op == 8:
            code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
            out["frames"].append({"close": code, "reason": payload[2:].decode(errors="replace")})
        elif op == 10:
            out["frames"].append({"pong": payload.decode(errors="replace")})
        else:
            out["frames"].append({"op": op, "data": payload.decode(errors="replace")})
    print(json.dumps(out), flush=True)


def main():
    cmd = sys.argv[1]
    if cmd == "broadcast":
        asyncio.run(broadcast(sys.argv[2], int(sys.argv[3])))
    elif cmd == "hold":
        asyncio.run(hold(sys.argv[2], int(sys.argv[3])))
    elif cmd == "raw":
        raw(*sys.argv[2:6])
    else:
        sys.exit("wsclient.py: unknown command " + cmd)


if __name__ == "__main__":
    main()
