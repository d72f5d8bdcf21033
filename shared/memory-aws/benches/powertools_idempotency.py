#!/usr/bin/env python3
"""The contender of benches/idempotency_cost.rs: what Powertools for AWS Lambda (Python)
idempotency costs per call on the same emulator, in the same table format.

Cases, each of N calls that store one item of about 200 bytes (shaped like a wop-memory entry
item) to one partition with a conditional PutItem:
  (a) a plain boto3 put_item;
  (b) the same put inside @idempotent_function (DynamoDBPersistenceLayer), fresh keys;
  (c) replays of (b): same key, same payload, answered from the idempotency record.
The idempotency key is the request's `idempotencyKey`; payload validation covers its entries,
as wop-memory refuses a key reused with another payload.

Requests are counted per operation with botocore event hooks on the one client both the put
and Powertools use (retries off, as in wop-memory). Capacity is asked for (ReturnConsumedCapacity
TOTAL, column "reported") but moto reports a constant, so WCU/RCU are computed from DynamoDB's
published rules exactly as the Rust bench does: standard writes 1 WCU per started KB, a failed
conditional write still consumes WCU, strongly consistent reads 1 RCU per started 4 KB; each
write is sized by the largest its item is in the run (request item, or read back after the case
with an unmetered client). ReturnValuesOnConditionCheckFailure (Powertools uses it on replays)
costs no read units. Latency is wall time of one call.

Tables: a fresh empty copy of MEMORY_TABLE (keys and indexes) per case for the puts, and a fresh
Powertools table (partition key `id`) for (b)/(c); all are deleted at the end. A fresh tenant
per run. Entry content is never printed.

Run (emulator up: eval "$(infra/local/up)"):
    .venv/bin/python shared/memory-aws/benches/powertools_idempotency.py
IDEMPOTENCY_BENCH_PUTS sets the calls per case (default 200).
"""

from __future__ import annotations

import math
import os
import secrets
import sys
import time
from datetime import datetime, timezone
from typing import Any, Callable

import boto3
from botocore.config import Config

import aws_lambda_powertools
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

DEFAULT_PUTS = 200
WARM_UP_PUTS = 10
CONTENT_BYTES = 200
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class LambdaContext:
    """Stands in for the Lambda context, so Powertools sets its in-progress expiry as it would
    in a function: 60 s left, wop-memory's default lease when no deadline is known."""

    function_name = "idempotency-bench"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 60_000


def ulid() -> str:
    """A ULID (48-bit milliseconds, 80 random bits), like wop-memory's entry ids."""
    value = (int(time.time() * 1000) << 80) | secrets.randbits(80)
    return "".join(CROCKFORD[(value >> (5 * i)) & 31] for i in reversed(range(26)))


# ---- metering -----------------------------------------------------------------------------------


class Meter:
    """Records every call of one client: operation, request, outcome, reported capacity, time.
    Calls are made one at a time, so one pending slot pairs a request with its response."""

    def __init__(self, client: Any) -> None:
        self.calls: list[dict[str, Any]] = []
        self.pending: tuple[str, dict[str, Any], float] | None = None
        self.overlapped = False
        events = client.meta.events
        events.register("provide-client-params.dynamodb.*", self._before)
        events.register("after-call.dynamodb.*", self._after)

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if "ReturnConsumedCapacity" in model.input_shape.members:
            params["ReturnConsumedCapacity"] = "TOTAL"
        if self.pending is not None:
            self.overlapped = True
        self.pending = (model.name, dict(params), time.perf_counter())

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if self.pending is None:
            return
        op, request, started = self.pending
        self.pending = None
        error = None
        if http_response.status_code >= 300:
            error = parsed.get("Error", {}).get("Code") or f"HTTP {http_response.status_code}"
        consumed = parsed.get("ConsumedCapacity")
        items = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        reported = sum(float(c.get("CapacityUnits", 0)) for c in items)
        self.calls.append(
            {
                "op": op,
                "request": request,
                "error": error,
                "reported": reported,
                "elapsed": time.perf_counter() - started,
            }
        )

    def take(self) -> list[dict[str, Any]]:
        if self.overlapped:
            raise RuntimeError("calls overlapped; the meter pairs them one at a time")
        calls, self.calls = self.calls, []
        return calls


# ---- DynamoDB's item-size and capacity rules ----------------------------------------------------


def number_size(n: str) -> int:
    mantissa = n.lower().split("e")[0]
    digits = "".join(c for c in mantissa if c.isdigit()).strip("0")
    return math.ceil(max(len(digits), 1) / 2) + 1


def value_size(v: dict[str, Any]) -> int:
    (kind, inner), = v.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        return number_size(inner)
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in inner)
    if kind == "NS":
        return sum(number_size(s) for s in inner)
    if kind == "BS":
        return sum(len(b) for b in inner)
    if kind == "L":
        return 3 + sum(1 + value_size(e) for e in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(e) for k, e in inner.items())
    return 0


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(size: int) -> float:
    return float(max(math.ceil(size / 1024), 1))


def read_units(size: int, consistent: bool) -> float:
    units = float(max(math.ceil(size / 4096), 1))
    return units if consistent else units / 2


def actions(call: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """What one call touches: (table, key or item, item written if a put)."""

    def single(body: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any] | None] | None:
        table = body.get("TableName")
        item = body.get("Item")
        key = body.get("Key") or item
        return (table, key, item) if table and key else None

    if call["op"] == "TransactWriteItems":
        found = [single(next(iter(a.values()))) for a in call["request"].get("TransactItems", [])]
    else:
        found = [single(call["request"])]
    return [a for a in found if a]


# ---- the bench ----------------------------------------------------------------------------------


def percentile(sorted_seconds: list[float], p: float) -> float:
    if not sorted_seconds:
        return 0.0
    rank = min(max(math.ceil(p * len(sorted_seconds)), 1), len(sorted_seconds))
    return sorted_seconds[rank - 1] * 1000


def content(n: int) -> str:
    text = f"benchmark entry {n:06}: "
    while len(text) < CONTENT_BYTES:
        text += "lorem ipsum dolor sit amet "
    return text[:CONTENT_BYTES]


class Bench:
    def __init__(self, source_table: str) -> None:
        config = Config(retries={"total_max_attempts": 1})
        self.client = boto3.client("dynamodb", config=config)
        self.meter = Meter(self.client)
        self.plain = boto3.client("dynamodb")  # unmetered: admin and read-back
        self.source_table = source_table
        self.schemas: dict[str, list[str]] = {}
        self.created: list[str] = []

    def wait_active(self, name: str) -> None:
        for _ in range(100):
            if self.plain.describe_table(TableName=name)["Table"]["TableStatus"] == "ACTIVE":
                return
            time.sleep(0.1)
        raise RuntimeError(f"table {name} did not become active")

    def clone_memory_table(self, name: str) -> None:
        """A fresh empty table defined like the memory table (keys and indexes)."""
        t = self.plain.describe_table(TableName=self.source_table)["Table"]
        args: dict[str, Any] = {
            "TableName": name,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": t["KeySchema"],
            "AttributeDefinitions": t["AttributeDefinitions"],
        }
        indexes = [
            {"IndexName": g["IndexName"], "KeySchema": g["KeySchema"], "Projection": g["Projection"]}
            for g in t.get("GlobalSecondaryIndexes", [])
        ]
        if indexes:
            args["GlobalSecondaryIndexes"] = indexes
        self.plain.create_table(**args)
        self.created.append(name)
        self.wait_active(name)

    def create_powertools_table(self, name: str) -> None:
        """The table Powertools' DynamoDBPersistenceLayer expects: partition key `id`."""
        self.plain.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        )
        self.created.append(name)
        self.wait_active(name)

    def drop_tables(self) -> None:
        for name in self.created:
            try:
                self.plain.delete_table(TableName=name)
            except Exception as e:  # noqa: BLE001 - report and go on deleting the others
                print(f"could not delete bench table {name}: {e}", file=sys.stderr)
        self.created = []

    def key_names(self, table: str) -> list[str]:
        if table not in self.schemas:
            t = self.plain.describe_table(TableName=table)["Table"]
            self.schemas[table] = [k["AttributeName"] for k in t["KeySchema"]]
        return self.schemas[table]

    def plain_put(self, data_table: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """The job itself: store one entry-shaped item only if its id is new."""

        def put(request: dict[str, Any]) -> dict[str, Any]:
            entry = request["entries"][0]
            entry_id = ulid()
            now = datetime.now(timezone.utc)
            created_at = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
            item = {
                "pk": {"S": f"{request['tenantId']}#{request['agent']}"},
                "sk": {"S": f"E#{entry_id}"},
                "id": {"S": entry_id},
                "content": {"S": entry["content"]},
                "tags": {"L": []},
                "createdAt": {"S": created_at},
                "createdAtMs": {"N": str(int(now.timestamp() * 1000))},
                "tier": {"S": "transactional"},
                "rev": {"S": secrets.token_hex(16)},
            }
            self.client.put_item(
                TableName=data_table, Item=item, ConditionExpression="attribute_not_exists(pk)"
            )
            return {"written": [{"id": entry_id, "createdAt": created_at}]}

        return put

    def keyed_put(
        self, data_table: str, idempotency_table: str, executions: list[int]
    ) -> Callable[..., dict[str, Any]]:
        persistence = DynamoDBPersistenceLayer(table_name=idempotency_table, boto3_client=self.client)
        config = IdempotencyConfig(
            event_key_jmespath="idempotencyKey",
            payload_validation_jmespath="entries",
            raise_on_no_idempotency_key=True,
        )
        config.register_lambda_context(LambdaContext())
        put = self.plain_put(data_table)

        @idempotent_function(
            data_keyword_argument="request", persistence_store=persistence, config=config
        )
        def keyed(request: dict[str, Any]) -> dict[str, Any]:
            executions[0] += 1
            return put(request)

        return keyed

    def case(self, name: str, call: Callable[[dict[str, Any]], Any], requests: list[dict[str, Any]]) -> dict[str, Any]:
        self.meter.take()
        latencies = []
        for r in requests:
            started = time.perf_counter()
            call(r)
            latencies.append(time.perf_counter() - started)
        calls = self.meter.take()
        # Read every touched item back once, unmetered, to size it.
        sizes: dict[tuple[str, str], int] = {}

        def item_id(table: str, key_or_item: dict[str, Any]) -> tuple[str, str]:
            return table, repr([(n, key_or_item.get(n)) for n in self.key_names(table)])

        for c in calls:
            for table, key, _ in actions(c):
                ident = item_id(table, key)
                if ident not in sizes:
                    only_key = {n: key[n] for n in self.key_names(table)}
                    got = self.plain.get_item(TableName=table, Key=only_key, ConsistentRead=True)
                    sizes[ident] = item_size(got["Item"]) if "Item" in got else 0
        result = {
            "name": name,
            "puts": len(requests),
            "by_op": {},
            "requests": len(calls),
            "failed": 0,
            "wcu": 0.0,
            "rcu": 0.0,
            "reported": 0.0,
            "unmodelled": 0,
            "largest": 0,
            "latencies": sorted(latencies),
        }
        for c in calls:
            # Powertools' own calls are told apart from the job's by their table.
            records = any(t.endswith("-records") for t, _, _ in actions(c))
            label = f"{c['op']} [records]" if records else c["op"]
            count, spent = result["by_op"].get(label, (0, 0.0))
            result["by_op"][label] = (count + 1, spent + c["elapsed"])
            result["reported"] += c["reported"]
            if c["error"] in ("ConditionalCheckFailedException", "TransactionCanceledException"):
                result["failed"] += 1
            touched = actions(c)
            if not touched:
                result["unmodelled"] += 1
            for table, key, item in touched:
                size = max(sizes.get(item_id(table, key), 0), item_size(item) if item else 0)
                result["largest"] = max(result["largest"], size)
                if c["op"] in ("PutItem", "UpdateItem", "DeleteItem"):
                    result["wcu"] += write_units(size)
                elif c["op"] == "TransactWriteItems":
                    result["wcu"] += 2 * write_units(size)
                elif c["op"] == "GetItem":
                    result["rcu"] += read_units(size, bool(c["request"].get("ConsistentRead")))
                else:
                    result["unmodelled"] += 1
        return result


def row(tool: str, r: dict[str, Any]) -> str:
    per = lambda x: x / max(r["puts"], 1)  # noqa: E731
    ops = ", ".join(
        f"{op} {per(n):.2f} × {spent * 1000 / max(n, 1):.1f} ms"
        for op, (n, spent) in sorted(r["by_op"].items())
    )
    return (
        f"| {tool} | {r['name']} | {r['puts']} | {per(r['requests']):.2f} | {ops} | "
        f"{per(r['failed']):.2f} | {per(r['wcu']):.2f} | {per(r['rcu']):.2f} | "
        f"{per(r['reported']):.2f} | {percentile(r['latencies'], 0.50):.2f} | "
        f"{percentile(r['latencies'], 0.95):.2f} |"
    )


def delta_row(tool: str, name: str, a: dict[str, Any], b: dict[str, Any]) -> str:
    def d(field: str) -> float:
        return b[field] / max(b["puts"], 1) - a[field] / max(a["puts"], 1)

    def dp(q: float) -> float:
        return percentile(b["latencies"], q) - percentile(a["latencies"], q)

    return (
        f"| {tool} | {name} | | {d('requests'):+.2f} | | {d('failed'):+.2f} | {d('wcu'):+.2f} | "
        f"{d('rcu'):+.2f} | {d('reported'):+.2f} | {dp(0.50):+.2f} | {dp(0.95):+.2f} |"
    )


def main() -> int:
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        print('powertools_idempotency needs the emulator: eval "$(infra/local/up)" first', file=sys.stderr)
        return 2
    try:
        puts = int(os.environ.get("IDEMPOTENCY_BENCH_PUTS", DEFAULT_PUTS))
    except ValueError:
        puts = DEFAULT_PUTS
    puts = puts if puts > 0 else DEFAULT_PUTS
    source = os.environ.get("MEMORY_TABLE") or "wop-memory-entries"
    run = ulid().lower()
    tenant = f"bench-pt-{run}"
    bench = Bench(source)

    def requests(agent: str, count: int, keyed: bool) -> list[dict[str, Any]]:
        return [
            {
                "tenantId": tenant,
                "agent": agent,
                "entries": [{"content": content(n)}],
                **({"idempotencyKey": f"bench-{run}-{agent}-{n}"} if keyed else {}),
            }
            for n in range(count)
        ]

    try:
        names = {case: f"idem-bench-{run}-pt-{case}" for case in ("warm-up", "plain", "keyed")}
        for name in names.values():
            bench.clone_memory_table(name)
        warm_records, keyed_records = f"{names['warm-up']}-records", f"{names['keyed']}-records"
        bench.create_powertools_table(warm_records)
        bench.create_powertools_table(keyed_records)

        # Warm-up (connections, the emulator's code paths) in tables of its own; not reported.
        executions = [0]
        warm = bench.keyed_put(names["warm-up"], warm_records, executions)
        warm_requests = requests("warm-up", WARM_UP_PUTS, keyed=True)
        bench.case("warm-up", lambda r: warm(request=r), warm_requests)
        bench.case("warm-up replay", lambda r: warm(request=r), warm_requests)

        plain = bench.plain_put(names["plain"])
        a = bench.case("(a) plain put_item", plain, requests("plain", puts, keyed=False))

        executions = [0]
        keyed = bench.keyed_put(names["keyed"], keyed_records, executions)
        keyed_requests = requests("keyed", puts, keyed=True)
        b = bench.case("(b) @idempotent_function, fresh keys", lambda r: keyed(request=r), keyed_requests)
        if executions[0] != puts:
            raise RuntimeError(f"(b): the function ran {executions[0]} times for {puts} fresh keys")
        c = bench.case("(c) @idempotent_function replay", lambda r: keyed(request=r), keyed_requests)
        if executions[0] != puts:
            raise RuntimeError("(c): a replay ran the function again")
    finally:
        bench.drop_tables()

    tool = f"Powertools {getattr(aws_lambda_powertools, '__version__', '')}".strip()
    print(
        f"#### Powertools for AWS Lambda (Python) idempotency: `@idempotent_function` + "
        f"`DynamoDBPersistenceLayer` ({puts} calls per case, 1 item with {CONTENT_BYTES} bytes of "
        f"content, one partition, a fresh copy of {source} per case, {endpoint})\n"
    )
    print(
        "| tool | case | puts | requests/put | by operation: calls/put × mean time | "
        "failed conditions/put | WCU/put (computed) | RCU/put (computed) | "
        "CU/put reported by emulator | p50 ms | p95 ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in (a, b, c):
        print(row(tool, r))
    print(delta_row(tool, "Δ (b) − (a): a key's extra", a, b))
    print(delta_row(tool, "Δ (c) − (a): replay vs unkeyed", a, c))
    largest = max(r["largest"] for r in (a, b, c))
    unmodelled = sum(r["unmodelled"] for r in (a, b, c))
    print(
        "\nWCU/RCU computed from DynamoDB's published rules (standard write 1 WCU/KB, failed "
        "conditional write still charged, consistent read 1 RCU/4 KB, "
        "ReturnValuesOnConditionCheckFailure free); largest item touched: "
        f"{largest} bytes."
        + (f" {unmodelled} calls had no capacity rule and are missing from the figures." if unmodelled else "")
    )
    print(
        '"Reported" is what the endpoint returned for ReturnConsumedCapacity=TOTAL (moto: a '
        "constant per successful single-item call, nothing for failed conditions). "
        '"[records]" marks calls on Powertools\' idempotency table; the others are the job\'s put.'
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
