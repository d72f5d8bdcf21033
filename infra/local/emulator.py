#!/usr/bin/env python3
"""The local AWS emulator: moto_server, with each DynamoDB request applied whole before the next,
DynamoDB transactions that copy only the items they touch, Queries that read one partition, and
SQS sends that do not count the queue's messages.

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

import bisect
import copy
import os
import sys
import threading
import types

from moto import server
from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import RESULT_SIZE_LIMIT, Table
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.sqs import models as sqs_models

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

# moto 5.2.5 answers a Query by sorting every item of the table and then keeping those of the
# queried partition (`Table.query` over `Table.all_items()`): 60 ms per Query once a few
# thousand items are stored, whatever the partition holds, so a test run slows as it fills the
# table. DynamoDB reads the one partition. While a Query runs (one DynamoDB request at a time,
# under the lock above), `all_items` yields only what the Query can match:
# - on the base table, that partition's items, in the same order;
# - on an index, the items whose index key attributes equal the Query's (unsorted: moto sorts
#   an index Query's matches by their full keys afterwards, so the order it is given is moot).
# Every other caller of `all_items` (Scan) is untouched.
_partition = None
_index_conditions = None
_all_items = Table.all_items
_query = Table.query


def _items_the_query_can_match(self):
    if _index_conditions:
        out = []
        for hash_set in self.items.values():
            for item in (hash_set.values() if self.range_key_attr else [hash_set]):
                attrs = item.attrs
                # As moto's own check: an item without the attribute is not in the index.
                if all(name in attrs and attrs[name] == value
                       for name, value in _index_conditions):
                    out.append(item)
        return out
    if _partition is None or not self.range_key_attr:
        return _all_items(self)
    stored = self.items[_partition] if _partition in self.items else {}
    return sorted(stored.values(), key=lambda x: (x.hash_key, x.range_key))


def _argument(args, kwargs, name, position):
    return kwargs[name] if name in kwargs else (args[position] if len(args) > position else None)


def _query_reading_what_it_can_match(self, hash_key, *args, **kwargs):
    global _partition, _index_conditions
    index_name = _argument(args, kwargs, "index_name", 6)
    if index_name is not None:
        _index_conditions = _argument(args, kwargs, "hash_key_conditions", 9) or None
    elif hash_key is not None:
        _partition = hash_key
    try:
        return _query(self, hash_key, *args, **kwargs)
    finally:
        _partition = None
        _index_conditions = None


Table.all_items = _items_the_query_can_match
Table.query = _query_reading_what_it_can_match

# With EMULATOR_SORTED_PARTITIONS=1 (the search scale bench sets it), a base-table Query reads its
# partition through a sorted list of its sort keys kept beside the partition, found by bisection:
# moto 5.2.5 sorts the partition and walks it item by item on every Query page, which at a
# 1,000,000-entry ref (two million items in one partition) made each page take seconds. The
# sorted keys are rebuilt only after the partition's key set changed (an insert or a delete;
# an update leaves the keys, and the items are read from the partition itself). What a page
# holds is moto's: the matching items in key order (reversed when not forward) after the start
# key, up to the Limit or 1 MB, then its filter and projection, and a LastEvaluatedKey where
# moto gives one (tests/python/test_emulator_sorted_partitions.py holds the two alike). Anything
# else (an index, a legacy filter, a key type other than S or N) goes to moto's own Query.
class _TrackedPartition(dict):
    """A partition that counts the changes of its key set."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.keys_version = 0
        self.sorted_version = -1
        self.sorted_keys = []
        self.sorted_values = []

    def __setitem__(self, key, value):
        if key not in self:
            self.keys_version += 1
        super().__setitem__(key, value)

    def __delitem__(self, key):
        self.keys_version += 1
        super().__delitem__(key)

    def pop(self, *args):
        self.keys_version += 1
        return super().pop(*args)

    def popitem(self):
        self.keys_version += 1
        return super().popitem()

    def clear(self):
        self.keys_version += 1
        super().clear()

    def setdefault(self, key, default=None):
        if key not in self:
            self.keys_version += 1
        return super().setdefault(key, default)

    def update(self, *args, **kwargs):
        self.keys_version += 1
        super().update(*args, **kwargs)

    def ordered(self):
        if self.sorted_version != self.keys_version:
            self.sorted_keys = sorted(self.keys(), key=lambda k: k.cast_value)
            self.sorted_values = [k.cast_value for k in self.sorted_keys]
            self.sorted_version = self.keys_version
        return self.sorted_keys, self.sorted_values


def _key_bounds(values, comparison, objs):
    """The [lo, hi) slice of the sorted key values a range condition admits (None: unsupported)."""
    n = len(values)
    if comparison is None:
        return 0, n
    if any(not (o.is_number() or o.type == "S") for o in objs):
        return None
    v = [o.cast_value for o in objs]
    symbols = {"=": "EQ", "<": "LT", "<=": "LE", ">": "GT", ">=": "GE"}
    comparison = symbols.get(comparison, comparison.upper())
    if comparison == "EQ":
        return bisect.bisect_left(values, v[0]), bisect.bisect_right(values, v[0])
    if comparison == "LT":
        return 0, bisect.bisect_left(values, v[0])
    if comparison == "LE":
        return 0, bisect.bisect_right(values, v[0])
    if comparison == "GT":
        return bisect.bisect_right(values, v[0]), n
    if comparison == "GE":
        return bisect.bisect_left(values, v[0]), n
    if comparison == "BETWEEN":
        return bisect.bisect_left(values, v[0]), bisect.bisect_right(values, v[1])
    if comparison == "BEGINS_WITH" and isinstance(v[0], str) and v[0]:
        prefix = v[0]
        after = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return bisect.bisect_left(values, prefix), bisect.bisect_left(values, after)
    return None


def _sorted_partition_query(self, hash_key, range_comparison, range_objs, limit,
                            exclusive_start_key, scan_index_forward, projection_expressions,
                            index_name=None, consistent_read=False, filter_expression=None,
                            hash_key_conditions=None, range_key_conditions=None,
                            **filter_kwargs):
    partition = self.items.get(hash_key)  # `get` adds no partition to the defaultdict
    usable = (index_name is None and self.range_key_attr and not filter_kwargs
              and len(range_key_conditions or []) <= 1
              and isinstance(partition, _TrackedPartition))
    bounds = None
    if usable:
        keys, values = partition.ordered()
        bounds = _key_bounds(values, range_comparison, range_objs or [])
    if bounds is None:
        return _query_reading_what_it_can_match(
            self, hash_key, range_comparison, range_objs, limit, exclusive_start_key,
            scan_index_forward, projection_expressions, index_name, consistent_read,
            filter_expression, hash_key_conditions=hash_key_conditions,
            range_key_conditions=range_key_conditions, **filter_kwargs)
    lo, hi = bounds
    if exclusive_start_key is not None and self.range_key_attr in exclusive_start_key:
        start = DynamoType(exclusive_start_key[self.range_key_attr]).cast_value
        if scan_index_forward is False:
            hi = min(hi, bisect.bisect_left(values, start))
        else:
            lo = max(lo, bisect.bisect_right(values, start))
    order = range(hi - 1, lo - 1, -1) if scan_index_forward is False else range(lo, hi)
    results, size, last_evaluated_key = [], 0, None
    for i in order:
        item = partition[keys[i]]
        if results and (len(results) == limit or size + item.size() > RESULT_SIZE_LIMIT):
            last_evaluated_key = self._get_last_evaluated_key(results[-1], None)
            break
        results.append(item)
        size += item.size()
    else:
        # moto ends a page at its Limit when any item of the partition follows, matching or not.
        beyond = lo > 0 if scan_index_forward is False else hi < len(keys)
        if results and len(results) == limit and beyond:
            last_evaluated_key = self._get_last_evaluated_key(results[-1], None)
    scanned = len(results)
    results = copy.deepcopy(results)
    if filter_expression is not None:
        results = [item for item in results if filter_expression.expr(item)]
    if projection_expressions:
        results = [r.project(projection_expressions) for r in results]
    return results, scanned, last_evaluated_key


if os.environ.get("EMULATOR_SORTED_PARTITIONS") == "1":
    _table_init = Table.__init__

    def _table_with_tracked_partitions(self, *args, **kwargs):
        _table_init(self, *args, **kwargs)
        if self.range_key_attr:
            self.items.default_factory = _TrackedPartition

    Table.__init__ = _table_with_tracked_partitions
    Table.query = _sorted_partition_query

# moto 5.2.5's SendMessage reads one setting of the queue (ContentBasedDeduplication) through
# `Queue.attributes`, which also counts the queue's visible, in-flight and delayed messages by
# walking every message (three walks, a clock read per message); ReceiveMessage does the same
# once per message it hands out, to read MessageRetentionPeriod. A queue nobody drains (the
# provisioned all-events tap receives every event of a test run) made each PutEvents cost
# O(messages): over one `tests/run` that was most of the emulator's CPU. While SendMessage runs,
# the counts are left out of `attributes` (none of its reads is a count), and the retention
# check reads the one setting; GetQueueAttributes still counts.
_settings_only = threading.local()


def _count_unless_settings_only(count):
    def get(self):
        return None if getattr(_settings_only, "on", False) else count.fget(self)
    return property(get)


for _count in ("approximate_number_of_messages", "approximate_number_of_messages_not_visible",
               "approximate_number_of_messages_delayed"):
    setattr(sqs_models.Queue, _count, _count_unless_settings_only(getattr(sqs_models.Queue, _count)))
_send_message = sqs_models.SQSBackend.send_message


def _send_message_reading_settings_only(self, *args, **kwargs):
    _settings_only.on = True
    try:
        return _send_message(self, *args, **kwargs)
    finally:
        _settings_only.on = False


def _retained(self, queue_name, message):
    retain_until = self.get_queue(queue_name).message_retention_period \
        + message.sent_timestamp / 1000
    return retain_until > sqs_models.unix_time()


sqs_models.SQSBackend.send_message = _send_message_reading_settings_only
sqs_models.SQSBackend.is_message_valid_based_on_retention_period = _retained


# moto's SIGTERM handler calls `sys.exit`, and the interpreter then waits for the request threads,
# which SDK clients keep alive on pooled connections: the server ignored SIGTERM until `down`
# killed it 10 s later. Nothing here needs an orderly exit (every table lives in this process),
# so SIGTERM and SIGINT end it at once.
def _exit_now(signum, frame):
    os._exit(0)


server.signal_handler = _exit_now

if __name__ == "__main__":
    server.main(sys.argv[1:])
