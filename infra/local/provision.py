#!/usr/bin/env python3
"""Provision wop-memory's data plane on a LocalStack-compatible endpoint (LocalStack or moto).

Idempotent: every step accepts "already exists". The DynamoDB table definition is read from
template.yaml's MemoryTable resource (single source of truth), so the local and the deployed
tables cannot drift.

Environment (all optional):
  AWS_ENDPOINT_URL   endpoint to provision (default http://127.0.0.1:4566)
  AWS_REGION         region (else AWS_DEFAULT_REGION, else us-east-1)
  MEMORY_TABLE       table name          (default wop-memory-entries)
  ARCHIVE_BUCKET     bucket name         (default wop-memory-archives)
  EVENT_BUS_NAME     custom bus name     (default wop-memory)
  EVENTS_QUEUE_NAME  events tap queue    (default wop-memory-events-tap)
  OAP_SIGNING_SECRET the exchange door's signing seed secret (default wop-memory/oap-signing-seed)
  PASS_QUEUE_PREFIX  pass queues are {prefix}-dream-jobs and {prefix}-consolidate-jobs
                     (default wop-memory); exported as DREAM_QUEUE_URL / CONSOLIDATE_QUEUE_URL

Creates: the table (+ GSIs, TTL), the bucket (versioning as in the template), the custom event
bus, an SQS "tap" queue and a rule `wop-memory-tap` on the bus delivering every
`{"source": ["wop-memory"]}` event to the queue, so tests can read the events back.

Output: stdout carries only the resulting settings, as JSON (default) or, with
`--format exports`, as `export NAME=value` lines (shell-quoted). Progress goes to stderr.
Exit status: 0 on success, 2 if the endpoint is unreachable, 1 on any other failure.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import yaml
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cfn_yaml  # noqa: E402  (template.yaml's loading, shared with tests/template_policies.py)

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = REPO_ROOT / "template.yaml"
TABLE_RESOURCE = "MemoryTable"
BUCKET_RESOURCE = "ArchiveBucket"
TAP_RULE_NAME = "wop-memory-tap"
TAP_TARGET_ID = "events-tap-queue"
EVENT_PATTERN = {"source": ["wop-memory"]}
WAIT_SECONDS = 60


class ProvisionError(Exception):
    """A failure with a message fit for the operator."""


def log(msg: str) -> None:
    print(f"provision: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# template.yaml
# --------------------------------------------------------------------------------------------


class Intrinsic:
    """A CloudFormation short-form tag (!Ref, !Sub, !If, ...) kept as an opaque marker."""

    def __init__(self, tag: str, value: Any) -> None:
        self.tag, self.value = tag, value

    def __repr__(self) -> str:
        return f"{self.tag} {self.value!r}"


CfnLoader = cfn_yaml.cfn_loader(lambda suffix, value: Intrinsic("!" + suffix, value))


def _reject_intrinsics(value: Any, where: str) -> None:
    """The local provisioner can only use literal values; fail loudly on anything dynamic."""
    if isinstance(value, Intrinsic):
        raise ProvisionError(f"{where} uses {value!r}; keep it literal in template.yaml")
    if isinstance(value, dict):
        for key, sub in value.items():
            if isinstance(key, str) and (key == "Ref" or key.startswith("Fn::")):
                raise ProvisionError(f"{where} uses {key}; keep it literal in template.yaml")
            _reject_intrinsics(sub, f"{where}.{key}")
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            _reject_intrinsics(sub, f"{where}[{i}]")


def load_resources() -> dict[str, Any]:
    try:
        with TEMPLATE.open(encoding="utf-8") as fh:
            doc = yaml.load(fh, Loader=CfnLoader)  # noqa: S506 - SafeLoader subclass
    except OSError as exc:
        raise ProvisionError(f"cannot read {TEMPLATE}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ProvisionError(f"cannot parse {TEMPLATE}: {exc}") from exc
    resources = (doc or {}).get("Resources") or {}
    if not isinstance(resources, dict):
        raise ProvisionError(f"{TEMPLATE}: Resources is not a mapping")
    return resources


def table_definition(resources: dict[str, Any]) -> dict[str, Any]:
    """CreateTable arguments (minus TableName) taken from the MemoryTable resource."""
    res = resources.get(TABLE_RESOURCE)
    if not res or res.get("Type") != "AWS::DynamoDB::Table":
        raise ProvisionError(f"template.yaml has no AWS::DynamoDB::Table named {TABLE_RESOURCE}")
    props = res.get("Properties") or {}
    spec: dict[str, Any] = {}
    for key in ("AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "BillingMode",
                "TimeToLiveSpecification"):
        if key in props:
            _reject_intrinsics(props[key], f"{TABLE_RESOURCE}.{key}")
            spec[key] = props[key]
    for key in ("AttributeDefinitions", "KeySchema"):
        if key not in spec:
            raise ProvisionError(f"{TABLE_RESOURCE} has no {key} in template.yaml")
    spec.setdefault("BillingMode", "PROVISIONED")
    if spec["BillingMode"] != "PAY_PER_REQUEST":
        raise ProvisionError(f"{TABLE_RESOURCE}: only BillingMode PAY_PER_REQUEST is supported here")
    return spec


def bucket_versioning(resources: dict[str, Any]) -> str | None:
    res = resources.get(BUCKET_RESOURCE) or {}
    status = ((res.get("Properties") or {}).get("VersioningConfiguration") or {}).get("Status")
    _reject_intrinsics(status, f"{BUCKET_RESOURCE}.VersioningConfiguration.Status")
    return status


# --------------------------------------------------------------------------------------------
# AWS steps
# --------------------------------------------------------------------------------------------


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def wait_for(what: str, check) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not check():
        if time.monotonic() > deadline:
            raise ProvisionError(f"timed out after {WAIT_SECONDS}s waiting for {what}")
        time.sleep(0.5)


def _key_schema(schema: list[dict[str, str]]) -> list[tuple[str, str]]:
    return [(k["AttributeName"], k["KeyType"]) for k in schema]


def ensure_table(ddb, name: str, spec: dict[str, Any]) -> None:
    create = {k: v for k, v in spec.items() if k != "TimeToLiveSpecification"}
    try:
        desc = ddb.describe_table(TableName=name)["Table"]
        log(f"table {name} exists")
    except ClientError as exc:
        if error_code(exc) != "ResourceNotFoundException":
            raise
        log(f"creating table {name}")
        try:
            ddb.create_table(TableName=name, **create)
        except ClientError as exc2:
            if error_code(exc2) != "ResourceInUseException":
                raise
        desc = None

    if desc is not None:
        if _key_schema(desc["KeySchema"]) != _key_schema(spec["KeySchema"]):
            raise ProvisionError(
                f"table {name} has key schema {desc['KeySchema']}, template.yaml wants "
                f"{spec['KeySchema']}; delete the table (or restart the emulator: "
                "infra/local/down && infra/local/up)")
        existing = {g["IndexName"]: g for g in desc.get("GlobalSecondaryIndexes", [])}
        attrs = {a["AttributeName"]: a for a in spec["AttributeDefinitions"]}
        for gsi in spec.get("GlobalSecondaryIndexes", []):
            have = existing.get(gsi["IndexName"])
            if have is None:
                log(f"adding index {gsi['IndexName']} to table {name}")
                used = {k["AttributeName"] for k in gsi["KeySchema"]}
                ddb.update_table(
                    TableName=name,
                    AttributeDefinitions=[attrs[a] for a in sorted(used)],
                    GlobalSecondaryIndexUpdates=[{"Create": gsi}],
                )
            elif (_key_schema(have["KeySchema"]) != _key_schema(gsi["KeySchema"])
                  or have["Projection"].get("ProjectionType")
                  != gsi["Projection"].get("ProjectionType")):
                raise ProvisionError(
                    f"index {gsi['IndexName']} on table {name} differs from template.yaml; "
                    "delete the table (or restart the emulator: infra/local/down && infra/local/up)")

    wanted = {g["IndexName"] for g in spec.get("GlobalSecondaryIndexes", [])}

    def active() -> bool:
        t = ddb.describe_table(TableName=name)["Table"]
        indexes = {g["IndexName"]: g.get("IndexStatus", "ACTIVE")
                   for g in t.get("GlobalSecondaryIndexes", [])}
        return t["TableStatus"] == "ACTIVE" and all(indexes.get(i) == "ACTIVE" for i in wanted)

    wait_for(f"table {name} and its indexes to become ACTIVE", active)

    ttl = spec.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled") in (True, "true", "True"):
        attr = ttl["AttributeName"]
        cur = ddb.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {})
        status, cur_attr = cur.get("TimeToLiveStatus"), cur.get("AttributeName")
        if status in ("ENABLED", "ENABLING") and cur_attr == attr:
            log(f"table {name}: TTL on '{attr}' already enabled")
        elif status in ("ENABLED", "ENABLING"):
            raise ProvisionError(
                f"table {name} has TTL on '{cur_attr}', template.yaml wants '{attr}'")
        else:
            log(f"table {name}: enabling TTL on '{attr}'")
            ddb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"AttributeName": attr, "Enabled": True})


def ensure_bucket(s3, name: str, region: str, versioning: str | None) -> None:
    try:
        s3.head_bucket(Bucket=name)
        log(f"bucket {name} exists")
    except ClientError as exc:
        if error_code(exc) not in ("404", "NoSuchBucket", "NotFound"):
            raise
        log(f"creating bucket {name}")
        kwargs: dict[str, Any] = {"Bucket": name}
        if region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
        try:
            s3.create_bucket(**kwargs)
        except ClientError as exc2:
            if error_code(exc2) not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise
    if versioning:
        cur = s3.get_bucket_versioning(Bucket=name).get("Status")
        if cur != versioning:
            log(f"bucket {name}: versioning -> {versioning}")
            s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": versioning})


def ensure_bus(events, name: str) -> str:
    try:
        arn = events.create_event_bus(Name=name)["EventBusArn"]
        log(f"created event bus {name}")
        return arn
    except ClientError as exc:
        if error_code(exc) != "ResourceAlreadyExistsException":
            raise
    log(f"event bus {name} exists")
    return events.describe_event_bus(Name=name)["Arn"]


def ensure_queue(sqs, name: str) -> tuple[str, str]:
    url = sqs.create_queue(QueueName=name)["QueueUrl"]  # idempotent for equal attributes
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"]
    log(f"queue {name} ready")
    return url, arn


def ensure_signing_secret(secrets, name: str) -> str:
    """The exchange door's Ed25519 signing seed: 32 random bytes as hex, created once and never
    printed (only the secret's name is exported)."""
    try:
        secrets.describe_secret(SecretId=name)
        log(f"secret {name} exists")
    except ClientError as exc:
        if error_code(exc) != "ResourceNotFoundException":
            raise
        secrets.create_secret(Name=name, SecretString=os.urandom(32).hex())
        log(f"secret {name} created")
    return name


def ensure_tap(events, sqs, bus: str, queue_url: str, queue_arn: str) -> None:
    rule_arn = events.put_rule(
        Name=TAP_RULE_NAME,
        EventBusName=bus,
        EventPattern=json.dumps(EVENT_PATTERN),
        State="ENABLED",
        Description="Copies every wop-memory event to the local events tap queue",
    )["RuleArn"]
    policy = {
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "AllowEventBridgeTap",
            "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": queue_arn,
            "Condition": {"ArnEquals": {"aws:SourceArn": rule_arn}},
        }],
    }
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"Policy": json.dumps(policy)})
    resp = events.put_targets(
        Rule=TAP_RULE_NAME, EventBusName=bus, Targets=[{"Id": TAP_TARGET_ID, "Arn": queue_arn}])
    if resp.get("FailedEntryCount"):
        raise ProvisionError(f"put_targets failed: {resp.get('FailedEntries')}")
    log(f"rule {TAP_RULE_NAME} on bus {bus} -> queue {queue_arn.rsplit(':', 1)[-1]}")


# --------------------------------------------------------------------------------------------


def check_endpoint(endpoint: str) -> None:
    """Any HTTP answer (even 4xx/5xx) means something is listening."""
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
        opener.open(endpoint, timeout=3).close()
    except urllib.error.HTTPError:
        pass
    except (urllib.error.URLError, OSError) as exc:
        raise ConnectionError(f"endpoint {endpoint} is unreachable ({exc}); "
                              "start it with infra/local/up") from exc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--format", choices=("json", "exports"), default="json",
                        help="stdout format of the resulting settings (default: json)")
    args = parser.parse_args()

    endpoint = os.environ.get("AWS_ENDPOINT_URL") or "http://127.0.0.1:4566"
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    table = os.environ.get("MEMORY_TABLE") or "wop-memory-entries"
    bucket = os.environ.get("ARCHIVE_BUCKET") or "wop-memory-archives"
    bus = os.environ.get("EVENT_BUS_NAME") or "wop-memory"
    queue = os.environ.get("EVENTS_QUEUE_NAME") or "wop-memory-events-tap"
    prefix = os.environ.get("PASS_QUEUE_PREFIX") or "wop-memory"

    try:
        check_endpoint(endpoint)
        resources = load_resources()
        spec = table_definition(resources)
        versioning = bucket_versioning(resources)

        session = boto3.session.Session(
            region_name=region,
            aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID") or "test",
            aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY") or "test",
            aws_session_token=os.environ.get("AWS_SESSION_TOKEN") or None,
        )
        cfg = Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 3},
                     s3={"addressing_style": "path"})

        def client(service: str):
            return session.client(service, endpoint_url=endpoint, config=cfg)

        log(f"endpoint {endpoint}, region {region}")
        ensure_table(client("dynamodb"), table, spec)
        ensure_bucket(client("s3"), bucket, region, versioning)
        events, sqs = client("events"), client("sqs")
        ensure_bus(events, bus)
        queue_url, queue_arn = ensure_queue(sqs, queue)
        ensure_tap(events, sqs, bus, queue_url, queue_arn)
        # Pass queues between each scheduled pass's fan-out and the per-ref runs.
        signing_secret = ensure_signing_secret(
            client("secretsmanager"),
            os.environ.get("OAP_SIGNING_SECRET") or "wop-memory/oap-signing-seed")
        pass_queues = {
            f"{kind.upper()}_QUEUE_URL": ensure_queue(sqs, f"{prefix}-{kind}-jobs")[0]
            for kind in ("dream", "consolidate")
        }
    except (ConnectionError, EndpointConnectionError) as exc:
        log(f"ERROR: {exc}")
        return 2
    except ProvisionError as exc:
        log(f"ERROR: {exc}")
        return 1
    except ClientError as exc:
        op = exc.operation_name
        log(f"ERROR: {op} failed: {error_code(exc)}: {exc.response.get('Error', {}).get('Message')}")
        return 1

    settings = {
        "MEMORY_TABLE": table,
        "ARCHIVE_BUCKET": bucket,
        "EVENT_BUS_NAME": bus,
        "EVENTS_QUEUE_URL": queue_url,
        "OAP_SIGNING_SECRET": signing_secret,
        **pass_queues,
    }
    if args.format == "json":
        print(json.dumps(settings, indent=2))
    else:
        for key, value in settings.items():
            print(f"export {key}={shlex.quote(value)}")
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
