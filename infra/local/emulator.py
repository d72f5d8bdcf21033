#!/usr/bin/env python3
"""The local AWS emulator: moto_server, with each DynamoDB request applied whole before the next,
DynamoDB transactions that copy only the items they touch, and Queries that read one partition.

moto serves requests on threads and evaluates a DynamoDB condition and applies its write as two
steps, so two concurrent conditional updates of one item can both pass their condition. DynamoDB
applies a conditional write (and a transaction) to an item atomically; the project's conditional
writes, fences and work markers rely on that. Holding one lock around each DynamoDB request
restores it. Other services are untouched, and requests still interleave *between* each other,
so read-modify-write races across requests happen as they do on AWS.

moto 5.2.5's `DynamoDBBackend.transact_write_items` takes a backup for rollback by deep-copying
the *whole table* once per item of the transaction (`copy.deepcopy(self.tables[table_name])` in
its first loop). A transaction of 48 items over a table of 20,000 entries copies the table 48
times; the copies are freed, but the process keeps the high-water mark, so the emulator grew to
5-11 GB over one `tests/run` and past 20 GB when reused across runs (a bare moto under puts and
queries alone stays under 1 GB). Here the backup holds only the items the transaction names:
each one's attributes before it runs, put back (or deleted) if the transaction is cancelled.
With requests serialised by the lock above, nothing else can change those items meanwhile.

    infra/local/emulator.py -H 127.0.0.1 -p 4566      (the arguments of moto_server)
"""

from __future__ import annotations

import copy
import sys
import threading
import types

from moto import server
from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
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

# moto's transaction code reads `copy.deepcopy` through its module: while a transaction runs
# (one at a time, under the lock), a Table is "copied" as itself, so its rollback assignment is
# a no-op and the item backup below does the restoring.
_in_transaction = False


def _deepcopy(value, memo=None):
    if _in_transaction and isinstance(value, Table):
        return value
    return copy.deepcopy(value, memo)


dynamodb_models.copy = types.SimpleNamespace(deepcopy=_deepcopy, copy=copy.copy)
_transact_write_items = DynamoDBBackend.transact_write_items


def _key_of(backend, op_type, op):
    table = backend.tables.get(op.get("TableName"))
    if table is None:
        return None
    if op_type == "Put":
        attrs = op.get("Item") or {}
        if table.hash_key_attr not in attrs:
            return None
        key = {table.hash_key_attr: attrs[table.hash_key_attr]}
        if table.range_key_attr is not None and table.range_key_attr in attrs:
            key[table.range_key_attr] = attrs[table.range_key_attr]
        return key
    return op.get("Key")


def _transact_touching_only_its_items(self, transact_items):
    global _in_transaction
    backup = []
    for item in transact_items:
        try:
            op_type, op = next(iter(item.items()))
        except StopIteration:
            continue
        key = _key_of(self, op_type, op) if isinstance(op, dict) else None
        if key is None:
            continue
        try:
            current = self.get_item(op["TableName"], key)
        except Exception:  # an invalid key: moto reports it while running the transaction
            continue
        before = copy.deepcopy(current.to_json()["Attributes"]) if current is not None else None
        backup.append((op["TableName"], key, before))
    _in_transaction = True
    try:
        return _transact_write_items(self, transact_items)
    except Exception:
        for table_name, key, before in reversed(backup):
            if before is None:
                if self.get_item(table_name, key) is not None:
                    self.delete_item(table_name, key)
            else:
                self.put_item(table_name, before)
        raise
    finally:
        _in_transaction = False


DynamoDBBackend.transact_write_items = _transact_touching_only_its_items

# moto 5.2.5 answers a Query on the base table by sorting every item of the table and keeping
# those of the partition (`Table.query` over `Table.all_items()`): 60 ms per Query once a few
# thousand items are stored, whatever the partition holds, so a test run slows as it fills the
# table. DynamoDB reads the one partition. While a base-table Query runs (one DynamoDB request at
# a time, under the lock above), `all_items` yields that partition's items only, in the same
# order; queries on an index, and every other caller of `all_items` (Scan), are untouched.
_partition = None
_all_items = Table.all_items
_query = Table.query


def _items_of_the_queried_partition(self):
    if _partition is None or not self.range_key_attr:
        return _all_items(self)
    stored = self.items[_partition] if _partition in self.items else {}
    return sorted(stored.values(), key=lambda x: (x.hash_key, x.range_key))


def _query_reading_one_partition(self, hash_key, *args, **kwargs):
    global _partition
    index_name = kwargs["index_name"] if "index_name" in kwargs else (
        args[6] if len(args) > 6 else None)
    if index_name is not None or hash_key is None:
        return _query(self, hash_key, *args, **kwargs)
    _partition = hash_key
    try:
        return _query(self, hash_key, *args, **kwargs)
    finally:
        _partition = None


Table.all_items = _items_of_the_queried_partition
Table.query = _query_reading_one_partition

if __name__ == "__main__":
    server.main(sys.argv[1:])
