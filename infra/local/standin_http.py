"""The HTTP plumbing both local Bedrock Runtime stand-ins share (embedder.py, converse.py): the
AWS REST-JSON error shape, a handler that answers it and `/health`, and a server bound to
127.0.0.1 (port 0 picks a free one) that writes its bound port to a file once listening (a test
waits for the file, which means "ready") and serves until interrupted. Only what each stand-in
does with a request body differs, so that is all each of them writes."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def unknown_operation() -> ApiError:
    return ApiError(404, "UnknownOperationException", "Unknown operation")


def json_object(body: bytes, fields: set[str], invalid: Callable[[str], ApiError], *,
                not_json: str, not_object: str, root: str = "") -> dict:
    """The request body as a JSON object of no members but `fields`; otherwise raises
    `invalid(...)`, in each API's own words (`root` prefixes the extraneous-key message)."""
    try:
        request = json.loads(body)
    except ValueError:
        raise invalid(not_json) from None
    if not isinstance(request, dict):
        raise invalid(not_object)
    extra = sorted(set(request) - fields)
    if extra:
        raise invalid(f"{root}extraneous key [{extra[0][:64]}] is not permitted")
    return request


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect
    disable_nagle_algorithm = True  # headers and body go out in two writes: no delayed-ACK stall

    def log_message(self, format, *args):  # noqa: A002  (http.server's own lines: silenced)
        pass

    def send(self, status: int, body: bytes, content_type: str, headers: dict | None = None):
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (its timeout): nothing to answer

    def send_api_error(self, err: ApiError) -> None:
        self.send(err.status, json.dumps({"message": err.message}).encode(), "application/json",
                  {"x-amzn-ErrorType": err.code})

    def answered_get(self, status: int) -> None:
        """Called after every GET with the status it was answered with (a stand-in may log it)."""

    def do_GET(self):  # noqa: N802
        if urlsplit(self.path).path == "/health":
            self.send(200, b"ok", "text/plain")
            self.answered_get(200)
        else:
            err = unknown_operation()
            self.send_api_error(err)
            self.answered_get(err.status)

    def read_post(self, route: re.Pattern) -> tuple[re.Match, bytes]:
        """The match of `route` on the path and the body of a POST; raises ApiError (bad
        Content-Length, unknown path) for the caller to answer."""
        if hasattr(socket, "TCP_QUICKACK"):  # ACK the headers now: botocore leaves Nagle on and
            # sends the body in a second write, which would otherwise wait for a delayed ACK
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True  # the body's end is unknown
            raise ApiError(400, "ValidationException", "Bad Content-Length") from None
        body = self.rfile.read(length) if length > 0 else b""
        match = route.match(urlsplit(self.path).path)
        if not match:
            raise unknown_operation()
        return match, body


def command_line(doc: str, what: str, port: int) -> tuple[argparse.ArgumentParser,
                                                        argparse.ArgumentParser]:
    """The parser of `serve --port N [--port-file PATH]` and its `serve` subparser, for the
    stand-in's own options."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help=f"serve the {what} stand-in")
    run.add_argument("--port", type=int, default=port,
                     help=f"0 picks a free port (default {port})")
    run.add_argument("--port-file", help="write the bound port here once listening")
    return parser, run


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
