#!/usr/bin/env python3
"""The local AWS emulator: moto_server, with each DynamoDB request applied whole before the next.

moto serves requests on threads and evaluates a DynamoDB condition and applies its write as two
steps, so two concurrent conditional updates of one item can both pass their condition. DynamoDB
applies a conditional write (and a transaction) to an item atomically; the project's conditional
writes, fences and work markers rely on that. Holding one lock around each DynamoDB request
restores it. Other services are untouched, and requests still interleave *between* each other,
so read-modify-write races across requests happen as they do on AWS.

    infra/local/emulator.py -H 127.0.0.1 -p 4566      (the arguments of moto_server)
"""

from __future__ import annotations

import sys
import threading

from moto import server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

_DYNAMODB = threading.Lock()
_dispatch = DomainDispatcherApplication.__call__


def _one_dynamodb_request_at_a_time(self, environ, start_response):
    # DynamoDB's JSON protocol names its operation in X-Amz-Target ("DynamoDB_20120810.UpdateItem").
    if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
        with _DYNAMODB:
            # The body is produced inside the lock, so the write is complete before it is released.
            return list(_dispatch(self, environ, start_response))
    return _dispatch(self, environ, start_response)


DomainDispatcherApplication.__call__ = _one_dynamodb_request_at_a_time

if __name__ == "__main__":
    server.main(sys.argv[1:])
