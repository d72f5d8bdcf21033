"""The emulator's optional sorted-partition Query (infra/local/emulator.py,
EMULATOR_SORTED_PARTITIONS=1, which the search scale bench turns on) answers every Query as moto's
own does: two emulators, one with it and one without, take the same writes and deletes through
boto3's real DynamoDB client, and every Query (each key condition, both directions, a Limit with
its pages, a projection, a filter) must come back the same, page for page, between the writes.

Independent of the rest of the suite: it uses none of conftest.py's fixtures; it starts its own
two emulator processes on free ports and stops them.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

EMULATOR = Path(__file__).resolve().parents[2] / "infra" / "local" / "emulator.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Emulator:
    def __init__(self, work: Path, sorted_partitions: bool):
        self.port = free_port()
        env = dict(os.environ)
        env.pop("EMULATOR_SORTED_PARTITIONS", None)
        if sorted_partitions:
            env["EMULATOR_SORTED_PARTITIONS"] = "1"
        self.log = work / f"emulator-{self.port}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(EMULATOR), "-H", "127.0.0.1", "-p", str(self.port)],
                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"emulator did not start:\n{self.log.read_text()}", pytrace=False)
                time.sleep(0.1)
        self.client = boto3.client(
            "dynamodb", endpoint_url=f"http://127.0.0.1:{self.port}", region_name="us-east-1",
            aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="dummy-secret")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    work = tmp_path_factory.mktemp("emulators")
    fast, plain = Emulator(work, True), Emulator(work, False)
    try:
        yield fast.client, plain.client
    finally:
        fast.stop()
        plain.stop()


def query_all(client, **kwargs) -> list[list[dict]]:
    pages, start = [], None
    while True:
        args = dict(TableName="t", **kwargs)
        if start:
            args["ExclusiveStartKey"] = start
        answer = client.query(**args)
        pages.append(answer["Items"])
        start = answer.get("LastEvaluatedKey")
        if not start:
            return pages


def test_every_query_answers_as_moto_does(pair):
    fast, plain = pair
    for c in pair:
        c.create_table(
            TableName="t", BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                       {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                  {"AttributeName": "sk", "AttributeType": "S"}])
    rnd = random.Random(7)
    writes = []
    for _ in range(600):
        sk = rnd.choice(["E#", "X#", "M#", "P#", "Z"]) + "%06d" % rnd.randrange(100_000)
        writes.append(("put", rnd.choice(["r1", "r1", "r1", "r2"]), sk, rnd.randrange(1, 2_000)))
    for _ in range(100):
        _, pk, sk, _ = writes[rnd.randrange(len(writes))]
        writes.append(("delete", pk, sk, 0))
    conditions = [
        ("pk = :p", {}),
        ("pk = :p AND begins_with(sk, :a)", {":a": {"S": "X#"}}),
        ("pk = :p AND sk > :a", {":a": {"S": "M#050000"}}),
        ("pk = :p AND sk >= :a", {":a": {"S": "P#"}}),
        ("pk = :p AND sk < :a", {":a": {"S": "M#"}}),
        ("pk = :p AND sk <= :a", {":a": {"S": "E#050000"}}),
        ("pk = :p AND sk BETWEEN :a AND :b", {":a": {"S": "E#010000"}, ":b": {"S": "P#000500"}}),
        ("pk = :p AND sk = :a", {":a": {"S": writes[3][2]}}),
    ]
    checked = 0
    for start in range(0, len(writes), 350):
        for kind, pk, sk, size in writes[start:start + 350]:
            for c in pair:
                if kind == "put":
                    c.put_item(TableName="t", Item={"pk": {"S": pk}, "sk": {"S": sk},
                                                    "v": {"S": "v" * size}, "n": {"N": str(size)}})
                else:
                    c.delete_item(TableName="t", Key={"pk": {"S": pk}, "sk": {"S": sk}})
        shapes = itertools.product(conditions, [True, False], [None, 40], [None, "sk"],
                                   [None, "n > :k"])
        for (condition, values), forward, limit, projection, condition_filter in shapes:
            kwargs = dict(KeyConditionExpression=condition, ScanIndexForward=forward,
                          ConsistentRead=True,
                          ExpressionAttributeValues={":p": {"S": "r1"}, **values})
            if limit:
                kwargs["Limit"] = limit
            if projection:
                kwargs["ProjectionExpression"] = projection
            if condition_filter:
                kwargs["FilterExpression"] = condition_filter
                kwargs["ExpressionAttributeValues"][":k"] = {"N": "1000"}
            assert query_all(fast, **kwargs) == query_all(plain, **kwargs), kwargs
            checked += 1
    assert checked == 2 * len(conditions) * 16
    # A Limit that ends exactly at the last match: moto still answers a LastEvaluatedKey when
    # any item of the partition follows (here the Z and P# items after X#, the E# ones before),
    # and then an empty page.
    prefix = {":p": {"S": "r1"}, ":a": {"S": "X#"}}
    matches = sum(map(len, query_all(plain, KeyConditionExpression=
                                     "pk = :p AND begins_with(sk, :a)",
                                     ExpressionAttributeValues=prefix)))
    assert matches > 0
    for forward in (True, False):
        kwargs = dict(KeyConditionExpression="pk = :p AND begins_with(sk, :a)",
                      ExpressionAttributeValues=prefix, Limit=matches, ScanIndexForward=forward)
        pages = query_all(plain, **kwargs)
        assert [len(p) for p in pages] == [matches, 0]
        assert query_all(fast, **kwargs) == pages
