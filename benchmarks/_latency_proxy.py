"""A TCP proxy that delays every chunk by a fixed time each way: a database on another machine.

Run as a separate process (so that its work does not take the benchmark's GIL)::

    python benchmarks/_latency_proxy.py <listen port> <target host> <target port> <delay ms>

It prints ``ready`` once it listens. Each direction of each connection keeps its order: a chunk
read at time t is written at t + delay, after the chunks read before it.
"""

from __future__ import annotations

import asyncio
import sys
import time


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def send() -> None:
        while True:
            due, chunk = await queue.get()
            if not chunk:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(chunk)
            await writer.drain()
        writer.close()

    sender = asyncio.create_task(send())
    try:
        while True:
            chunk = await reader.read(65536)
            queue.put_nowait((time.monotonic() + delay, chunk))
            if not chunk:
                break
    finally:
        await sender


async def main(port: int, host: str, target: int, delay: float) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(host, target)
        await asyncio.gather(
            _pipe(client_r, server_w, delay),
            _pipe(server_r, client_w, delay),
            return_exceptions=True,
        )

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    port, host, target, delay_ms = sys.argv[1:5]
    asyncio.run(main(int(port), host, int(target), float(delay_ms) / 1000))
