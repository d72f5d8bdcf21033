"""The HTTP server both local Bedrock Runtime stand-ins run (embedder.py, converse.py): bound to
127.0.0.1 (port 0 picks a free one), the bound port written to a file once listening (a test
waits for the file, which means "ready"), served until interrupted."""

from __future__ import annotations

import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def listen(handler: type[BaseHTTPRequestHandler], port: int, port_file: str | None,
           name: str) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    bound = server.server_address[1]
    if port_file:
        tmp = f"{port_file}.tmp"
        Path(tmp).write_text(f"{bound}\n")
        os.replace(tmp, port_file)
    print(f"{name}: listening http://127.0.0.1:{bound}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
