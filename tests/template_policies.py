#!/usr/bin/env python3
"""Static checks on template.yaml: least-privilege IAM per function, the API's JWT guard (on every
route but the public capability document), the build / runtime / logging settings every function
must carry, and the background plumbing
(Scheduler schedules and their role, the memory.written rule, pass queues with redrive to DLQs,
async-invoke failure destinations, alarms on every function and DLQ, table / bucket protection).

Run with the project venv (PyYAML):  .venv/bin/python tests/template_policies.py [TEMPLATE]
TEMPLATE defaults to <repo>/template.yaml. Prints one line per check and `N passed, N failed` as
the last line; exits 1 if any check failed (2 if the template cannot be read).

IAM is compared exactly: each function's allowed (action, resource) pairs must equal EXPECTED
below - nothing missing, nothing extra. A new function in the template fails until its expected
policy is added here, so no function ships unchecked.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "infra" / "local"))
import cfn_yaml  # noqa: E402  (template.yaml's loading, shared with infra/local/provision.py)

# --------------------------------------------------------------------------------------------
# Expectations. Resources are written in ${Logical.Attr} form: !GetAtt MemoryTable.Arn and
# !Sub ${MemoryTable.Arn} both normalise to "${MemoryTable.Arn}".
# --------------------------------------------------------------------------------------------
TABLE = "${MemoryTable.Arn}"
SUBJECT_INDEX = "${MemoryTable.Arn}/index/bySubject"
DIRTY_INDEX = "${MemoryTable.Arn}/index/byDirtyRef"
DUE_INDEX = "${MemoryTable.Arn}/index/byDue"
BUCKET = "${ArchiveBucket.Arn}"
OBJECTS = "${ArchiveBucket.Arn}/*"
BUS = "${EventBus.Arn}"
BACKGROUND_DLQ = "BackgroundDLQ"
BACKGROUND_DLQ_ARN = "${BackgroundDLQ.Arn}"
DREAM_JOBS = "${DreamJobsQueue.Arn}"
CONSOLIDATE_JOBS = "${ConsolidateJobsQueue.Arn}"
SCHEDULER_ROLE = "SchedulerRole"
# The embedding model, granted only when one is configured: a statement under `!If [Cond, ...]`
# is compared as "<resource> if <Cond>", so both the resource and the condition are pinned.
EMBED_MODEL = ("arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/${EmbeddingModelId}"
               " if HasEmbeddingModel")
# The model of abstractive dreams (Converse is authorised as bedrock:InvokeModel), the same way.
ABSTRACTIVE_MODEL = ("arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/${AbstractiveModelId}"
                 " if HasAbstractiveModel")
# Each optional model: its parameter, the condition its grants hang on, the functions granted.
# Off by default: the parameter defaults to "" and the condition is exactly "not empty".
MODEL_SWITCHES = {
    "EmbeddingModelId": ("HasEmbeddingModel", EMBED_MODEL,
                         {"MemoryReadFunction", "MemoryWriteFunction", "MemoryMcpFunction",
                          "MemoryDreamFunction"}),
    "AbstractiveModelId": ("HasAbstractiveModel", ABSTRACTIVE_MODEL, {"MemoryDreamFunction"}),
}

EVENT_SOURCE = "wop-memory"
API = "MemoryHttpApi"
API_PREFIX = "/v1/host/wop-memory"
JWT_AUTHORIZER = "JwtAuthorizer"
# The only routes served without the JWT authorizer (Auth.Authorizer NONE): the capability
# document says nothing tenant-specific. Every other HttpApi route uses JWT_AUTHORIZER.
# The OAP exchange door adds its two public documents and the grantee's query, whose credential
# is a grant this host signed (checked by the function, not by the JWT issuer).
PUBLIC_ROUTES = {("GET", f"{API_PREFIX}/capabilities"),
                 ("GET", "/.well-known/oap-memory.json"), ("GET", "/.well-known/did.json"),
                 ("POST", "/oap/memory/query")}
# The OpenIntent door's routes use its own Lambda authorizer (API keys), nothing else does.
KEY_AUTHORIZER = "IntentKeyAuthorizer"
KEY_ROUTES = {("ANY", "/api/v1/{proxy+}")}
KEY_AUTHORIZER_FUNCTION = "MemoryIntentAuthFunction"
# The only items the authorizer may read: API key records, outside every tenant's partitions.
KEY_RECORDS = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["@apikey#*"]}}
# The meter's writes (docs/metering.md): a function that otherwise updates nothing may update only
# the usage partitions.
USAGE_PARTITIONS = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["*#@usage", "@usage#*"]}}
METER_ONLY = ("MemoryForgetFunction", "MemoryCommitmentsFunction")
# memory-read's one update: the meter's, and a search's count on its tenant's quota counters.
READ_UPDATES = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["*#@usage", "@usage#*",
                                                                     "*#@quota"]}}


def pairs(actions: list[str], resource: str) -> set[tuple[str, str]]:
    return {(a, resource) for a in actions}


# What the SQS event source mapping polls with, and what a producer / failure destination needs.
SQS_CONSUME = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
               "sqs:ChangeMessageVisibility"]
SQS_SEND = ["sqs:SendMessage"]
# Item-level rights of a background pass that rewrites entries in conditional transactions.
PASS_ITEM_ACTIONS = ["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem",
                     "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"]


EXPECTED: dict[str, dict[str, Any]] = {
    "MemoryReadFunction": {
        "binary": "memory-read",
        "memory": 256,
        # BatchGetItem: a tag-filtered page fetches the entries its tag postings name.
        "iam": pairs(["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"], TABLE)
        # Searches per minute: an ADD on the tenant's quota counter (only "*#@quota" keys).
        | pairs(["dynamodb:UpdateItem"], TABLE)
        # Search reads the refs' index objects (and lists, so an absent manifest is a 404).
        | pairs(["s3:ListBucket"], BUCKET)
        | pairs(["s3:GetObject"], OBJECTS)
        # Semantic / hybrid search embed the query.
        | pairs(["bedrock:InvokeModel"], EMBED_MODEL)
        # The meter's writes, on the usage partitions only (METER_ONLY).
        | pairs(["dynamodb:UpdateItem"], TABLE),
        "routes": {
            ("GET", f"{API_PREFIX}/usage"),
            ("GET", f"{API_PREFIX}/entries"),
            ("GET", f"{API_PREFIX}/entries/{{id}}"),
            ("GET", f"{API_PREFIX}/search"),
            ("GET", f"{API_PREFIX}/capabilities"),
        },
    },
    "MemoryWriteFunction": {
        "binary": "memory-write",
        "memory": 256,
        # UpdateItem: the per-ref work marker (sk W#dream / W#consolidate) in the put transaction.
        # GetItem: the tenant's quota limits and the counters a put left (docs/quotas.md).
        "iam": pairs(
            ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
             "dynamodb:ConditionCheckItem", "dynamodb:GetItem"],
            TABLE,
        )
        | pairs(["events:PutEvents"], BUS)
        # Each new entry's (redacted) content is embedded when a model is configured.
        | pairs(["bedrock:InvokeModel"], EMBED_MODEL)
        # ... and what missed the write's budget is queued for memory-dream's embed pass.
        | pairs(SQS_SEND, DREAM_JOBS + " if HasEmbeddingModel"),
        "env": {"EMBED_QUEUE_URL": {"Fn::If": ["HasEmbeddingModel", {"Ref": "DreamJobsQueue"}, ""]}},
        "routes": set(),
    },
    "MemoryForgetFunction": {
        "binary": "memory-forget",
        "memory": 256,
        "iam": pairs(["dynamodb:Query"], SUBJECT_INDEX)
        # PutItem: the exchange door's forget notice. UpdateItem: the meter's, on the usage
        # partitions only (METER_ONLY).
        | pairs(["dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:UpdateItem"], TABLE)
        | pairs(["s3:ListBucket", "s3:ListBucketVersions"], BUCKET)
        | pairs(
            [
                "s3:GetObject",
                "s3:PutObject",
                "s3:PutObjectTagging",
                "s3:DeleteObject",
                "s3:DeleteObjectVersion",
            ],
            OBJECTS,
        )
        | pairs(["events:PutEvents"], BUS),
        # ANY: the function answers non-POST methods with its own 405 envelope (Allow: POST).
        "routes": {("ANY", f"{API_PREFIX}/forget")},
    },
    "MemoryMcpFunction": {
        "binary": "memory-mcp",
        "memory": 256,
        "env": {"REDACTION_SECRETS": {"Ref": "RedactionSecrets"}},
        # The union of memory-read (reads, tag pages), memory-write (the SR-1 writer, conditional
        # rewrites of memory-tool files) and memory-forget (memory_forget), and nothing else.
        "iam": pairs(["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query",
                      "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
                      "dynamodb:ConditionCheckItem"], TABLE)
        | pairs(["dynamodb:Query"], SUBJECT_INDEX)
        | pairs(["s3:ListBucket", "s3:ListBucketVersions"], BUCKET)
        | pairs(["s3:GetObject", "s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject",
                 "s3:DeleteObjectVersion"], OBJECTS)
        | pairs(["events:PutEvents"], BUS)
        | pairs(["bedrock:InvokeModel"], EMBED_MODEL),
        # ANY on both: the MCP transport and the memory-tool route answer other methods (405).
        "routes": {("ANY", f"{API_PREFIX}/mcp"), ("ANY", f"{API_PREFIX}/memory-tool")},
    },
    "MemoryIntentFunction": {
        "binary": "memory-intent",
        "memory": 256,
        "env": {"REDACTION_SECRETS": {"Ref": "RedactionSecrets"},
                "INTENT_WORKING_CAPACITY": {"Ref": "IntentWorkingCapacity"},
                "INTENT_EPISODIC_CAPACITY": {"Ref": "IntentEpisodicCapacity"},
                "INTENT_VERSIONS_KEPT": {"Ref": "IntentVersionsKept"}},
        # Keyed entries, claims, counters, versions and eviction order (conditional
        # transactions, no batch or table-level action), task archives, lifecycle events.
        "iam": pairs(["dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem",
                      "dynamodb:UpdateItem", "dynamodb:DeleteItem",
                      "dynamodb:ConditionCheckItem"], TABLE)
        | pairs(["s3:ListBucket", "s3:ListBucketVersions"], BUCKET)
        | pairs(["s3:GetObject", "s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject",
                 "s3:DeleteObjectVersion"], OBJECTS)
        | pairs(["events:PutEvents"], BUS),
        "routes": KEY_ROUTES,
    },
    "MemoryExchangeFunction": {
        "binary": "memory-exchange",
        "memory": 256,
        "env": {"OAP_PUBLIC_URL": {"Ref": "ExchangePublicUrl"},
                "OAP_SIGNING_SECRET": {"Ref": "ExchangeSigningSecret"}},
        # Grant records and the receipt log (conditional transactions), the granter's entries,
        # the signing seed (that one secret only), grant lifecycle events.
        "iam": pairs(["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query",
                      "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
                      "dynamodb:ConditionCheckItem"], TABLE)
        # Bundles (the code writes them under {tenant}/oap/exports/ only).
        | pairs(["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"], OBJECTS)
        | pairs(["secretsmanager:GetSecretValue"], "${ExchangeSigningSecret}")
        | pairs(["events:PutEvents"], BUS),
        "routes": {("GET", "/.well-known/oap-memory.json"), ("GET", "/.well-known/did.json"),
                   ("POST", "/oap/memory/query"), ("POST", "/oap/memory/grant"),
                   ("POST", "/oap/memory/grant/{id}/revoke"), ("GET", "/oap/memory/receipts"),
                   ("POST", "/oap/memory/export"), ("POST", "/oap/memory/import")},
    },
    "MemoryIntentAuthFunction": {
        "binary": "memory-intent-auth",
        "memory": 128,
        # One GetItem of an API key record (the leading-key condition is checked below).
        "iam": pairs(["dynamodb:GetItem"], TABLE),
        "routes": set(),
    },
    "MemoryDreamFunction": {
        "binary": "memory-dream",
        "memory": 512,
        "env": {"PASS_QUEUE_URL": {"Ref": "DreamJobsQueue"},
                "EMBEDDING_MODEL_ID": {"Ref": "EmbeddingModelId"},
                "ABSTRACTIVE_MODEL_ID": {"Ref": "AbstractiveModelId"},
                "ABSTRACTIVE_TIMEOUT_MS": {"Ref": "AbstractiveTimeoutMs"}},
        "iam": pairs(["dynamodb:Query"], TABLE)
        | pairs(["dynamodb:Query"], DIRTY_INDEX)
        | pairs(PASS_ITEM_ACTIONS, TABLE)
        # The index pass reads the entries its change records name.
        | pairs(["dynamodb:BatchGetItem"], TABLE)
        | pairs(["s3:ListBucket", "s3:ListBucketVersions"], BUCKET)
        # ... and deletes retired segments and old manifest versions with every version.
        | pairs(["s3:GetObject", "s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject",
                 "s3:DeleteObjectVersion"], OBJECTS)
        | pairs(["events:PutEvents"], BUS)
        | pairs(SQS_SEND + SQS_CONSUME, DREAM_JOBS)
        | pairs(SQS_SEND, BACKGROUND_DLQ_ARN)
        # Abstractive dreams (Converse) on the configured model only, when one is configured.
        | pairs(["bedrock:InvokeModel"], ABSTRACTIVE_MODEL)
        # The embed pass, on the embedding model only, when one is configured.
        | pairs(["bedrock:InvokeModel"], EMBED_MODEL),
        "routes": set(),
    },
    "MemoryConsolidateFunction": {
        "binary": "memory-consolidate",
        "memory": 256,
        "env": {"PASS_QUEUE_URL": {"Ref": "ConsolidateJobsQueue"}},
        "iam": pairs(["dynamodb:Query"], TABLE)
        | pairs(["dynamodb:Query"], DIRTY_INDEX)
        | pairs(PASS_ITEM_ACTIONS, TABLE)
        | pairs(["events:PutEvents"], BUS)
        | pairs(SQS_SEND + SQS_CONSUME, CONSOLIDATE_JOBS)
        | pairs(SQS_SEND, BACKGROUND_DLQ_ARN),
        "routes": set(),
    },
    "MemoryCommitmentsFunction": {
        "binary": "memory-commitments",
        "memory": 256,
        "env": {
            "DEFAULT_TIME_ZONE": {"Ref": "CommitmentTimeZone"},
            "TENANT_TIME_ZONES": {"Ref": "TenantTimeZones"},
            "ENQUEUE_RUNS": "true",
        },
        "iam": pairs(["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"], TABLE)
        # The meter's writes, on the usage partitions only (METER_ONLY).
        | pairs(["dynamodb:UpdateItem"], TABLE)
        | pairs(["dynamodb:Query"], DUE_INDEX)
        | pairs(["events:PutEvents"], BUS)
        | pairs(SQS_SEND, BACKGROUND_DLQ_ARN),
        "routes": set(),
    },
}

# Functions EventBridge Scheduler invokes (asynchronously): the exact Input, and the schedule's
# time window. Each gets exactly one schedule run by SchedulerRole, dead-lettering to BackgroundDLQ.
SCHEDULED: dict[str, dict[str, Any]] = {
    "MemoryDreamFunction": {
        "input": {"action": "fan-out"},
        "window": {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 60},
        "timezone": "DreamTimeZone",
    },
    # memory-dream's second schedule: the embed sweep, only with an embedding model.
    "MemoryDreamFunction/embed": {
        "input": {"action": "fan-out", "pass": "embed"},
        "window": {"Mode": "OFF"},
        "expression": "rate(5 minutes)",
        "condition": "HasEmbeddingModel",
    },
    # memory-dream's fourth schedule: the hourly usage rollup (docs/metering.md).
    "MemoryDreamFunction/usage-rollup": {
        "input": {"action": "usage-rollup"},
        "window": {"Mode": "OFF"},
        "expression": "rate(1 hour)",
    },
    # memory-dream's third schedule: the search index sweep.
    "MemoryDreamFunction/index": {
        "input": {"action": "fan-out", "pass": "index"},
        "window": {"Mode": "OFF"},
        "expression": "rate(5 minutes)",
    },
    "MemoryConsolidateFunction": {
        "input": {"action": "fan-out"},
        "window": {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 60},
        "timezone": "ConsolidateTimeZone",
    },
    "MemoryCommitmentsFunction": {
        "input": {"action": "tick"},
        "window": {"Mode": "OFF"},
        "expression": "rate(1 minute)",
    },
    # The exchange door's expiry sweep; its input names the door's public URL (the parameter,
    # or the API's execute-api URL), so it is an !If of two !Sub templates, both checked.
    "MemoryExchangeFunction": {
        "input": {"op": "sweep", "publicUrl": "https://<url>"},
        "window": {"Mode": "OFF"},
        "expression": "rate(1 hour)",
    },
}


def input_variants(raw: Any) -> list[Any]:
    """A schedule's Input as JSON: a literal string, or each branch of an !If of !Sub templates
    (their ${...} placeholders read as one URL)."""
    if isinstance(raw, str):
        texts = [raw]
    elif isinstance(raw, dict) and isinstance(raw.get("Fn::If"), list) and len(raw["Fn::If"]) == 3:
        texts = [b.get("Fn::Sub") if isinstance(b, dict) else b for b in raw["Fn::If"][1:]]
    else:
        return [None]
    out = []
    for t in texts:
        if not isinstance(t, str):
            out.append(None)
            continue
        t = re.sub(r"https://\$\{[^}]*\}(\.execute-api\.\$\{[^}]*\}\.\$\{[^}]*\})?", "https://<url>", t)
        t = re.sub(r"\$\{ExchangePublicUrl\}", "https://<url>", t)
        try:
            out.append(json.loads(t))
        except json.JSONDecodeError:
            out.append(None)
    return out

# Pass queue -> (consumer function, its dead-letter queue).
JOB_QUEUES: dict[str, tuple[str, str]] = {
    "DreamJobsQueue": ("MemoryDreamFunction", "DreamJobsDLQ"),
    "ConsolidateJobsQueue": ("MemoryConsolidateFunction", "ConsolidateJobsDLQ"),
}
JOB_MAX_RECEIVE = 5
DLQ_RETENTION = 14 * 24 * 3600

# Functions invoked asynchronously (Scheduler, EventBridge): failures go to BackgroundDLQ.
ASYNC_FUNCTIONS = ("MemoryDreamFunction", "MemoryConsolidateFunction", "MemoryCommitmentsFunction")
ASYNC_MAX_RETRIES = 2

# The rule feeding memory.written events to the commitments function.
WRITTEN_PATTERN = {"source": [EVENT_SOURCE], "detail-type": ["memory.written"]}
WRITTEN_TARGET = "MemoryCommitmentsFunction"

# Functions whose Throttles metric must be alarmed (the latency-sensitive read API).
THROTTLE_ALARMED = ("MemoryReadFunction",)

REQUIRED_ENV = {"MEMORY_TABLE", "ARCHIVE_BUCKET", "EVENT_BUS_NAME", "TENANT_CLAIM"}

# memory-read must not be able to change anything.
WRITE_LIKE = re.compile(
    r"(Put|Delete|Update|Write|Create|Transact|ConditionCheck|PartiQL|Restore|Import|Tag)",
    re.IGNORECASE,
)
# memory-write must not be able to touch tables as a whole or read in bulk.
TABLE_LEVEL = re.compile(
    r"^dynamodb:(Delete\w*Table\w*|UpdateTable\w*|CreateTable\w*|Scan|BatchWriteItem|"
    r"PartiQL\w*|RestoreTable\w*|UpdateTimeToLive|DeleteBackup|ImportTable|ExportTable\w*)$",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------------------------
# Loading (CloudFormation short-form tags become their long form).
# --------------------------------------------------------------------------------------------
def _long_form(suffix: str, value: Any) -> Any:
    """!Ref / !GetAtt / !Sub / ... as {"Ref": ..} / {"Fn::X": ..}."""
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


CfnLoader = cfn_yaml.cfn_loader(_long_form)


def load(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as fh:
        doc = yaml.load(fh, Loader=CfnLoader)  # noqa: S506 - SafeLoader subclass
    if not isinstance(doc, dict) or not isinstance(doc.get("Resources"), dict):
        raise ValueError(f"{path}: no Resources mapping")
    return doc


def merge_globals(glob: Any, local: Any) -> Any:
    """SAM Globals semantics: maps merge (resource wins), lists concatenate, scalars override."""
    if isinstance(glob, dict) and isinstance(local, dict):
        out = dict(glob)
        for k, v in local.items():
            out[k] = merge_globals(glob[k], v) if k in glob else v
        return out
    if isinstance(glob, list) and isinstance(local, list):
        return glob + local
    return local


def norm_resource(value: Any) -> str:
    """A policy Resource as a comparable string; raises on forms this checker cannot pin down."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        (key, arg), = value.items()
        if key == "Ref" and isinstance(arg, str):
            return "${" + arg + "}"
        if key == "Fn::GetAtt":
            parts = arg.split(".", 1) if isinstance(arg, str) else arg
            if isinstance(parts, list) and len(parts) == 2 and all(isinstance(p, str) for p in parts):
                return "${" + parts[0] + "." + parts[1] + "}"
        if key == "Fn::Sub" and isinstance(arg, str):
            return arg
    raise ValueError(f"unsupported Resource form {value!r}")


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


# --------------------------------------------------------------------------------------------
# Checks.
# --------------------------------------------------------------------------------------------
class Report:
    def __init__(self, quiet: bool = False) -> None:
        self.passed = 0
        self.failed = 0
        self.quiet = quiet

    def check(self, ok: bool, what: str, detail: str = "") -> bool:
        if ok:
            self.passed += 1
            if not self.quiet:
                print(f"  PASS  {what}")
        else:
            self.failed += 1
            if not self.quiet:
                print(f"  FAIL  {what}" + (f"\n          {detail}" if detail else ""))
        return ok

    def section(self, title: str) -> None:
        print(f"\n{title}")


def granted(st: dict[str, Any], where: str, problems: list[str]) -> tuple[list[Any], list[str]]:
    """The actions and normalised resources a plain statement allows: none for a Deny (it only
    narrows what is allowed), none and a problem when a resource cannot be read."""
    if st.get("Effect") != "Allow":
        return [], []
    try:
        resources = [norm_resource(r) for r in as_list(st.get("Resource"))]
    except ValueError as exc:
        problems.append(f"{where}: {exc}")
        return [], []
    return as_list(st.get("Action")), resources


def allowed_pairs(name: str, props: dict[str, Any], rep: Report) -> set[tuple[str, str]] | None:
    """The (action, resource) pairs a function's inline Policies allow, or None if malformed."""
    problems: list[str] = []
    got: set[tuple[str, str]] = set()
    if "Role" in props:
        problems.append("sets Role (an external role bypasses these checks); use inline Policies")
    policies = props.get("Policies", [])
    for i, pol in enumerate(as_list(policies)):
        if not (isinstance(pol, dict) and "Statement" in pol):
            problems.append(
                f"Policies[{i}] is {pol!r:.80}: only inline policy documents are allowed "
                "(no managed policies, no SAM policy templates)"
            )
            continue
        for j, st in enumerate(as_list(pol["Statement"])):
            where = f"Policies[{i}].Statement[{j}]"
            condition = ""
            if isinstance(st, dict) and set(st) == {"Fn::If"}:
                branches = st["Fn::If"]
                if not (isinstance(branches, list) and len(branches) == 3
                        and isinstance(branches[0], str)
                        and branches[2] == {"Ref": "AWS::NoValue"}):
                    problems.append(f"{where}: a conditional statement must be "
                                    "!If [Condition, statement, !Ref AWS::NoValue]")
                    continue
                condition, st = f" if {branches[0]}", branches[1]
            if not isinstance(st, dict):
                problems.append(f"{where} is not a mapping")
                continue
            if "NotAction" in st or "NotResource" in st or "NotPrincipal" in st:
                problems.append(f"{where} uses NotAction/NotResource/NotPrincipal")
                continue
            actions, resources = granted(st, where, problems)
            for action in actions:
                if not isinstance(action, str):
                    problems.append(f"{where}: non-string Action {action!r}")
                    continue
                for res in resources:
                    got.add((action, res + condition))
    rep.check(not problems, f"{name}: IAM is inline statements only", "; ".join(problems))
    return None if problems else got


def wildcard_problems(got: set[tuple[str, str]]) -> list[str]:
    out = []
    for action, res in sorted(got):
        if "*" in action or "?" in action:
            out.append(f"wildcard action {action}")
        if res == "*" or (("*" in res) and not res.endswith("/*")) or res.count("*") > 1:
            out.append(f"wildcard resource {res} (for {action})")
        if res.endswith("/*") and not res.startswith(BUCKET):
            out.append(f"wildcard sub-resource {res} (for {action}); only bucket objects may use /*")
    return out


def route_of(ev_props: dict[str, Any]) -> tuple[str, str]:
    """(METHOD, path) of an HttpApi event; SAM's method names are case-insensitive."""
    return (str(ev_props.get("Method", "")).upper(), ev_props.get("Path"))


def route_authorizer(ev_props: dict[str, Any]) -> Any:
    """The authorizer an HttpApi event ends up with: its own Auth.Authorizer, else the API's
    DefaultAuthorizer (JwtAuthorizer; check_api checks that default). AuthorizationScopes only
    narrow a JWT route; an Auth of any other shape is returned whole, so it never passes as a
    name."""
    auth = ev_props.get("Auth")
    if auth is None:
        return JWT_AUTHORIZER
    if not isinstance(auth, dict) or set(auth) - {"Authorizer", "AuthorizationScopes"}:
        return auth
    if "AuthorizationScopes" in auth and auth.get("Authorizer", JWT_AUTHORIZER) != JWT_AUTHORIZER:
        return auth
    return auth.get("Authorizer", JWT_AUTHORIZER)


def check_function(
    name: str, res: dict[str, Any], glob: dict[str, Any], resources: dict[str, Any], rep: Report
) -> None:
    exp = EXPECTED[name]
    props = merge_globals(glob, res.get("Properties") or {})
    meta = res.get("Metadata") or {}
    rep.section(f"{name} (binary {exp['binary']})")

    rep.check(props.get("Runtime") == "provided.al2023", f"{name}: Runtime provided.al2023",
              f"got {props.get('Runtime')!r}")
    rep.check(props.get("Architectures") == ["arm64"], f"{name}: Architectures [arm64]",
              f"got {props.get('Architectures')!r}")
    rep.check(props.get("Handler") == "bootstrap", f"{name}: Handler bootstrap",
              f"got {props.get('Handler')!r}")
    rep.check(props.get("CodeUri") == ".", f"{name}: CodeUri . (the Cargo workspace)",
              f"got {props.get('CodeUri')!r}")
    rep.check(
        meta.get("BuildMethod") == "rust-cargolambda"
        and (meta.get("BuildProperties") or {}).get("Binary") == exp["binary"],
        f"{name}: Metadata BuildMethod rust-cargolambda, Binary {exp['binary']}",
        f"got {meta!r}",
    )
    rep.check(props.get("MemorySize") == exp["memory"], f"{name}: MemorySize {exp['memory']}",
              f"got {props.get('MemorySize')!r}")
    timeout = props.get("Timeout")
    rep.check(isinstance(timeout, int) and 1 <= timeout <= 900, f"{name}: Timeout set ({timeout}s)",
              f"got {timeout!r}")
    env = ((props.get("Environment") or {}).get("Variables") or {})
    missing = REQUIRED_ENV - set(env)
    rep.check(not missing, f"{name}: environment has {', '.join(sorted(REQUIRED_ENV))}",
              f"missing {sorted(missing)}")
    for var, want_val in (exp.get("env") or {}).items():
        rep.check(env.get(var) == want_val, f"{name}: {var} = {want_val!r}", f"got {env.get(var)!r}")

    logging = props.get("LoggingConfig") or {}
    json_logs = logging.get("LogFormat") == "JSON" or env.get("AWS_LAMBDA_LOG_FORMAT") == "JSON"
    rep.check(json_logs, f"{name}: JSON log format", f"LoggingConfig={logging!r}")
    lg_ref = logging.get("LogGroup")
    lg_name = lg_ref.get("Ref") if isinstance(lg_ref, dict) else None
    lg = resources.get(lg_name) if isinstance(lg_name, str) else None
    ok_lg = isinstance(lg, dict) and lg.get("Type") == "AWS::Logs::LogGroup"
    retention = (lg.get("Properties") or {}).get("RetentionInDays") if ok_lg else None
    rep.check(ok_lg and retention is not None,
              f"{name}: LoggingConfig.LogGroup -> {lg_name} (AWS::Logs::LogGroup with RetentionInDays)",
              f"LogGroup={lg_ref!r}, resource={lg!r:.120}")

    # Routes: exactly the expected HttpApi events, all on MemoryHttpApi; only PUBLIC_ROUTES opt
    # out of the JWT authorizer (check_api checks the same across all functions).
    routes: set[tuple[str, str]] = set()
    event_problems: list[str] = []
    for ev_name, ev in (props.get("Events") or {}).items():
        ev_props = ev.get("Properties") or {}
        if ev.get("Type") != "HttpApi":
            event_problems.append(f"{ev_name}: unexpected event type {ev.get('Type')!r}")
            continue
        if ev_props.get("ApiId") != {"Ref": API}:
            event_problems.append(f"{ev_name}: ApiId is {ev_props.get('ApiId')!r}, not !Ref {API}")
        route = route_of(ev_props)
        authorizer = route_authorizer(ev_props)
        want_authorizer = ("NONE" if route in PUBLIC_ROUTES
                           else KEY_AUTHORIZER if route in KEY_ROUTES else JWT_AUTHORIZER)
        if authorizer != want_authorizer:
            event_problems.append(f"{ev_name} ({route[0]} {route[1]}): authorizer {authorizer!r}, "
                                  f"expected {want_authorizer!r}")
        routes.add(route)
    rep.check(not event_problems,
              f"{name}: events all on {API}, {JWT_AUTHORIZER} on every route but the public ones",
              "; ".join(event_problems))
    want_routes = exp["routes"]
    rep.check(
        routes == want_routes,
        f"{name}: routes = {sorted(f'{m} {p}' for m, p in want_routes) or 'none (direct invoke)'}",
        f"missing {sorted(want_routes - routes)}, extra {sorted(routes - want_routes)}",
    )

    got = allowed_pairs(name, props, rep)
    if got is None:
        return
    wild = wildcard_problems(got)
    rep.check(not wild, f"{name}: no wildcard action or resource", "; ".join(wild))
    want = exp["iam"]
    missing_p, extra_p = want - got, got - want
    rep.check(
        not missing_p and not extra_p,
        f"{name}: IAM allows exactly {len(want)} action/resource pairs",
        "missing: " + (", ".join(f"{a} on {r}" for a, r in sorted(missing_p)) or "-")
        + " | extra: " + (", ".join(f"{a} on {r}" for a, r in sorted(extra_p)) or "-"),
    )
    for action, resource in sorted(want & got):
        print(f"          {action:<30} {resource}")

    actions = {a for a, _ in got}
    if name == "MemoryReadFunction":
        # Reads of the table and of the search indexes' objects, and (only with a model
        # configured) embedding the search query.
        reads = {("s3:GetObject", OBJECTS), ("s3:ListBucket", BUCKET),
                 ("bedrock:InvokeModel", EMBED_MODEL)}
        counted = ("dynamodb:UpdateItem", TABLE)
        bad = sorted(a for a, r in got if (a, r) != counted and
                     (WRITE_LIKE.search(a.split(":", 1)[-1]) or
                      not (a.startswith("dynamodb:") or (a, r) in reads)))
        rep.check(not bad, f"{name}: no write, delete or action beyond DynamoDB reads, index "
                  "object reads, the meter's and the quota counters' updates and the configured "
                  "embedding model", f"found {bad}")
        # Its one update is fenced to the usage and quota partitions.
        updates = [st.get("Condition") for pol in as_list(props.get("Policies", []))
                   if isinstance(pol, dict) for st in as_list(pol.get("Statement", []))
                   if isinstance(st, dict) and "dynamodb:UpdateItem" in as_list(st.get("Action"))]
        rep.check(updates == [READ_UPDATES], f"{name}: updates only usage items and quota "
                  "counters (dynamodb:LeadingKeys *#@usage, @usage#*, *#@quota)",
                  f"conditions {updates!r}")
        idx = sorted(r for _, r in got if "/index/" in r)
        rep.check(not idx, f"{name}: no index access (base-table reads only)", f"found {idx}")
    if name in METER_ONLY:
        # Its one update is the meter's, on the usage partitions only.
        conds = [st.get("Condition") for pol in as_list(props.get("Policies", []))
                 if isinstance(pol, dict) for st in as_list(pol.get("Statement", []))
                 if isinstance(st, dict) and "dynamodb:UpdateItem" in as_list(st.get("Action"))]
        rep.check(conds == [USAGE_PARTITIONS], f"{name}: UpdateItem only on the usage partitions "
                  "(dynamodb:LeadingKeys *#@usage, @usage#*)", f"conditions {conds!r}")
    if name == KEY_AUTHORIZER_FUNCTION:
        conds = [st.get("Condition") for pol in as_list(props.get("Policies", []))
                 if isinstance(pol, dict) for st in as_list(pol.get("Statement", []))
                 if isinstance(st, dict)]
        rep.check(conds == [KEY_RECORDS], f"{name}: reads only API key records "
                  "(dynamodb:LeadingKeys @apikey#*)", f"conditions {conds!r}")
    if name in ("MemoryWriteFunction", "MemoryMcpFunction", "MemoryIntentFunction",
                "MemoryExchangeFunction"):
        bad = sorted(a for a in actions if TABLE_LEVEL.match(a))
        rep.check(not bad, f"{name}: no table-level or bulk action (Delete/UpdateTable, Scan, BatchWriteItem)",
                  f"found {bad}")
    if name == "MemoryForgetFunction":
        q = sorted(r for a, r in got if a == "dynamodb:Query")
        rep.check(q == [SUBJECT_INDEX], f"{name}: Query only on the bySubject index", f"Query on {q}")
    # Any PutEvents grant must be pinned to the wop-memory event source.
    if "events:PutEvents" in actions:
        ok = True
        for pol in as_list(props.get("Policies", [])):
            for st in as_list(pol.get("Statement", [])) if isinstance(pol, dict) else []:
                if "events:PutEvents" in as_list(st.get("Action")):
                    cond = (st.get("Condition") or {}).get("StringEquals") or {}
                    ok = ok and cond.get("events:source") == EVENT_SOURCE
        rep.check(ok, f"{name}: events:PutEvents conditioned on events:source = {EVENT_SOURCE}")


def check_api(resources: dict[str, Any], params: dict[str, Any], rep: Report) -> None:
    rep.section(f"{API} (AWS::Serverless::HttpApi)")
    api = resources.get(API)
    if not rep.check(isinstance(api, dict) and api.get("Type") == "AWS::Serverless::HttpApi",
                     f"{API} exists and is an AWS::Serverless::HttpApi"):
        return
    props = api.get("Properties") or {}
    auth = props.get("Auth") or {}
    default = auth.get("DefaultAuthorizer")
    authz = (auth.get("Authorizers") or {}).get(default) if isinstance(default, str) else None
    rep.check(isinstance(authz, dict), f"{API}: DefaultAuthorizer set ({default})", f"Auth={auth!r}")
    if isinstance(authz, dict):
        jwt = authz.get("JwtConfiguration") or {}
        rep.check(authz.get("IdentitySource") == "$request.header.Authorization",
                  f"{API}: authorizer identity source $request.header.Authorization",
                  f"got {authz.get('IdentitySource')!r}")
        rep.check(jwt.get("issuer") == {"Ref": "JwtIssuer"} and jwt.get("audience") == {"Ref": "JwtAudience"},
                  f"{API}: JWT authorizer issuer/audience from JwtIssuer/JwtAudience", f"got {jwt!r}")
    rep.check(params.get("JwtAudience", {}).get("Type") == "CommaDelimitedList"
              and params.get("JwtIssuer", {}).get("Type") == "String",
              "parameters JwtIssuer (String) and JwtAudience (CommaDelimitedList)")

    als = props.get("AccessLogSettings") or {}
    dest = als.get("DestinationArn")
    dest_name = dest.get("Fn::GetAtt", [None])[0] if isinstance(dest, dict) else None
    lg = resources.get(dest_name) if isinstance(dest_name, str) else None
    rep.check(
        isinstance(lg, dict) and lg.get("Type") == "AWS::Logs::LogGroup"
        and (lg.get("Properties") or {}).get("RetentionInDays") is not None,
        f"{API}: access logs to a log group with retention ({dest_name})", f"AccessLogSettings={als!r:.160}",
    )
    fmt = als.get("Format")
    try:
        parsed = json.loads(fmt) if isinstance(fmt, str) else None
    except json.JSONDecodeError:
        parsed = None
    rep.check(isinstance(parsed, dict), f"{API}: access log format is a JSON object", f"Format={fmt!r:.120}")
    if isinstance(fmt, str):
        risky = [v for v in ("$context.path", "$input", "$context.requestOverride", "body")
                 if v in fmt]
        rep.check(not risky, f"{API}: access log carries no body, raw path or query", f"found {risky}")
    drs = props.get("DefaultRouteSettings") or {}
    rep.check("ThrottlingRateLimit" in drs and "ThrottlingBurstLimit" in drs,
              f"{API}: default route throttling (rate + burst)", f"DefaultRouteSettings={drs!r}")

    # Routes, across every function: the public ones exactly, everything else behind the JWT
    # authorizer; and no route defined outside the SAM events (which this check would not see).
    rep.check(default == JWT_AUTHORIZER, f"{API}: DefaultAuthorizer is {JWT_AUTHORIZER}",
              f"got {default!r}")
    rep.check("DefinitionBody" not in props and "DefinitionUri" not in props,
              f"{API}: no OpenAPI DefinitionBody / DefinitionUri (routes come from function events only)")
    raw = sorted(k for k, v in resources.items()
                 if isinstance(v, dict) and str(v.get("Type", "")).startswith("AWS::ApiGatewayV2::"))
    rep.check(not raw, "no raw AWS::ApiGatewayV2::* resources (routes come from function events only)",
              f"found {raw}")
    public: set[tuple[str, str]] = set()
    guarded: set[tuple[str, str]] = set()
    keyed: set[tuple[str, str]] = set()
    others: list[str] = []
    for fname, fres in resources.items():
        if not isinstance(fres, dict) or fres.get("Type") != "AWS::Serverless::Function":
            continue
        for ev_name, ev in ((fres.get("Properties") or {}).get("Events") or {}).items():
            if not isinstance(ev, dict) or ev.get("Type") != "HttpApi":
                continue
            ev_props = ev.get("Properties") or {}
            route = route_of(ev_props)
            authorizer = route_authorizer(ev_props)
            if authorizer == "NONE":
                public.add(route)
            elif authorizer == JWT_AUTHORIZER:
                guarded.add(route)
            elif authorizer == KEY_AUTHORIZER and route in KEY_ROUTES:
                keyed.add(route)
            else:
                others.append(f"{fname}.{ev_name}: {authorizer!r}")
    rep.check(public == PUBLIC_ROUTES,
              f"{API}: the only routes without an authorizer are "
              f"{', '.join(sorted(f'{m} {p}' for m, p in PUBLIC_ROUTES))}",
              f"public routes: {sorted(public)}")
    rep.check(keyed == KEY_ROUTES, f"{API}: {KEY_AUTHORIZER} guards exactly the OpenIntent routes",
              f"got {sorted(keyed)}")
    key_authz = (auth.get("Authorizers") or {}).get(KEY_AUTHORIZER) or {}
    identity = key_authz.get("Identity") or {}
    rep.check(
        getatt(key_authz.get("FunctionArn"), "Arn") == KEY_AUTHORIZER_FUNCTION
        and key_authz.get("EnableSimpleResponses") is True
        and str(key_authz.get("AuthorizerPayloadFormatVersion")) == "2.0"
        and identity.get("Headers") == ["X-API-Key", "X-Agent-ID"]
        and identity.get("ReauthorizeEvery") == {"Ref": "IntentAuthorizerCacheSeconds"},
        f"{API}: {KEY_AUTHORIZER} is {KEY_AUTHORIZER_FUNCTION}, simple responses, payload 2.0, "
        "identity X-API-Key + X-Agent-ID cached IntentAuthorizerCacheSeconds",
        f"got {key_authz!r:.200}")
    want_guarded = (set().union(*(e["routes"] for e in EXPECTED.values())) - PUBLIC_ROUTES
                    - KEY_ROUTES)
    rep.check(not others and guarded == want_guarded,
              f"{API}: every other route ({len(want_guarded)}) uses {JWT_AUTHORIZER}",
              f"other authorizers: {others}; missing {sorted(want_guarded - guarded)}, "
              f"extra {sorted(guarded - want_guarded)}")


# --------------------------------------------------------------------------------------------
# Background plumbing: schedules, rule, queues, failure destinations, alarms, data protection.
# --------------------------------------------------------------------------------------------
def getatt(value: Any, attr: str) -> str | None:
    """The logical name in !GetAtt X.<attr> (or ${X.<attr>} in a plain !Sub), else None."""
    try:
        norm = norm_resource(value)
    except ValueError:
        return None
    m = re.fullmatch(r"\$\{([A-Za-z0-9]+)\." + re.escape(attr) + r"\}", norm)
    return m.group(1) if m else None


def ref(value: Any) -> str | None:
    """The logical name / parameter in !Ref X, else None."""
    return value.get("Ref") if isinstance(value, dict) and len(value) == 1 else None


def of_type(resources: dict[str, Any], cfn_type: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in resources.items() if isinstance(v, dict) and v.get("Type") == cfn_type}


def props_of(res: dict[str, Any] | None) -> dict[str, Any]:
    return (res or {}).get("Properties") or {}


def role_pairs(role: dict[str, Any]) -> tuple[set[tuple[str, str]], list[str]]:
    """(action, resource) pairs an AWS::IAM::Role's inline Policies allow, and problems found."""
    got: set[tuple[str, str]] = set()
    problems: list[str] = []
    rp = props_of(role)
    if rp.get("ManagedPolicyArns"):
        problems.append(f"ManagedPolicyArns {rp['ManagedPolicyArns']!r}")
    for i, pol in enumerate(as_list(rp.get("Policies", []))):
        doc = pol.get("PolicyDocument") if isinstance(pol, dict) else None
        if not isinstance(doc, dict):
            problems.append(f"Policies[{i}] has no PolicyDocument")
            continue
        for j, st in enumerate(as_list(doc.get("Statement", []))):
            if not isinstance(st, dict) or "NotAction" in st or "NotResource" in st:
                problems.append(f"Policies[{i}].Statement[{j}] is not a plain statement")
                continue
            actions, resources = granted(st, f"Policies[{i}].Statement[{j}]", problems)
            got.update((str(action), res) for action in actions for res in resources)
    return got, problems


def check_scheduler(resources: dict[str, Any], params: dict[str, Any], rep: Report) -> None:
    rep.section("EventBridge Scheduler schedules and SchedulerRole")
    schedules = of_type(resources, "AWS::Scheduler::Schedule")
    by_target: dict[str, list[str]] = {}
    for sname, sched in schedules.items():
        target = getatt((props_of(sched).get("Target") or {}).get("Arn"), "Arn")
        # A function's second schedule is told apart by the pass its Input names.
        # A function's second schedule is told apart by the pass its Input names, or by the
        # usage rollup's action.
        kind = next((v.get("pass") or (v.get("action") if v.get("action") == "usage-rollup" else None)
                     for v in input_variants((props_of(sched).get("Target") or {}).get("Input"))
                     if isinstance(v, dict)), None)
        by_target.setdefault(f"{target}/{kind}" if kind else (target or "?"), []).append(sname)
    stray = sorted(k for k in by_target if k not in SCHEDULED)
    rep.check(not stray, "schedules target only the scheduled functions "
              f"({', '.join(sorted(SCHEDULED))})", f"also targeted: {stray} {by_target}")

    for fn, want in SCHEDULED.items():
        names = by_target.get(fn, [])
        if not rep.check(len(names) == 1, f"{fn}: exactly one Scheduler schedule", f"found {names}"):
            continue
        sname = names[0]
        sp = props_of(schedules[sname])
        tgt = sp.get("Target") or {}
        raw = tgt.get("Input")
        variants = input_variants(raw)
        rep.check(all(v == want["input"] for v in variants),
                  f"{sname}: Input is {json.dumps(want['input'])}", f"got {raw!r}")
        rep.check(getatt(tgt.get("RoleArn"), "Arn") == SCHEDULER_ROLE,
                  f"{sname}: runs as {SCHEDULER_ROLE}", f"RoleArn={tgt.get('RoleArn')!r}")
        rep.check(getatt((tgt.get("DeadLetterConfig") or {}).get("Arn"), "Arn") == BACKGROUND_DLQ,
                  f"{sname}: DeadLetterConfig -> {BACKGROUND_DLQ}",
                  f"DeadLetterConfig={tgt.get('DeadLetterConfig')!r}")
        retry = tgt.get("RetryPolicy") or {}
        rep.check(isinstance(retry.get("MaximumRetryAttempts"), int)
                  and isinstance(retry.get("MaximumEventAgeInSeconds"), int),
                  f"{sname}: RetryPolicy (attempts + event age)", f"RetryPolicy={retry!r}")
        window = sp.get("FlexibleTimeWindow")
        rep.check(window == want["window"], f"{sname}: FlexibleTimeWindow {want['window']}",
                  f"got {window!r}")
        if "timezone" in want:
            tz_param = want["timezone"]
            rep.check(ref(sp.get("ScheduleExpressionTimezone")) == tz_param
                      and (params.get(tz_param) or {}).get("Default") == "UTC",
                      f"{sname}: ScheduleExpressionTimezone from parameter {tz_param} (default UTC)",
                      f"got {sp.get('ScheduleExpressionTimezone')!r}, parameter {params.get(tz_param)!r}")
        if "expression" in want:
            rep.check(sp.get("ScheduleExpression") == want["expression"],
                      f"{sname}: ScheduleExpression {want['expression']}",
                      f"got {sp.get('ScheduleExpression')!r}")
        rep.check(sp.get("State", "ENABLED") == "ENABLED", f"{sname}: State ENABLED",
                  f"got {sp.get('State')!r}")
        rep.check(schedules[sname].get("Condition") == want.get("condition"),
                  f"{sname}: Condition {want.get('condition')}",
                  f"got {schedules[sname].get('Condition')!r}")

    role = resources.get(SCHEDULER_ROLE)
    if not rep.check(isinstance(role, dict) and role.get("Type") == "AWS::IAM::Role",
                     f"{SCHEDULER_ROLE} exists and is an AWS::IAM::Role"):
        return
    trust = as_list((props_of(role).get("AssumeRolePolicyDocument") or {}).get("Statement", []))
    principals = [((st.get("Principal") or {}).get("Service"), st.get("Action")) for st in trust
                  if isinstance(st, dict) and st.get("Effect") == "Allow"]
    rep.check(principals == [("scheduler.amazonaws.com", "sts:AssumeRole")],
              f"{SCHEDULER_ROLE}: only scheduler.amazonaws.com may assume it", f"got {principals!r}")
    got, problems = role_pairs(role)
    rep.check(not problems, f"{SCHEDULER_ROLE}: inline statements only", "; ".join(problems))
    functions = {fn.split("/")[0] for fn in SCHEDULED}
    want = {("lambda:InvokeFunction", "${" + fn + ".Arn}") for fn in functions} | pairs(
        SQS_SEND, BACKGROUND_DLQ_ARN)
    rep.check(got == want,
              f"{SCHEDULER_ROLE}: exactly lambda:InvokeFunction on the {len(functions)} scheduled "
              f"functions + sqs:SendMessage on {BACKGROUND_DLQ}",
              f"missing {sorted(want - got)}, extra {sorted(got - want)}")


def check_written_rule(resources: dict[str, Any], rep: Report) -> None:
    rep.section("memory.written rule -> memory-commitments")
    rules = {k: v for k, v in of_type(resources, "AWS::Events::Rule").items()
             if props_of(v).get("EventPattern") == WRITTEN_PATTERN}
    if not rep.check(len(rules) == 1, f"exactly one rule with pattern {json.dumps(WRITTEN_PATTERN)}",
                     f"found {sorted(rules)}"):
        return
    (rname, rule), = rules.items()
    rp = props_of(rule)
    rep.check(ref(rp.get("EventBusName")) == "EventBus", f"{rname}: on the custom bus (EventBus)",
              f"EventBusName={rp.get('EventBusName')!r}")
    rep.check(rp.get("State", "ENABLED") == "ENABLED", f"{rname}: State ENABLED")
    targets = as_list(rp.get("Targets") or [])
    tgt_fns = [getatt(tg.get("Arn"), "Arn") for tg in targets if isinstance(tg, dict)]
    if not rep.check(tgt_fns == [WRITTEN_TARGET], f"{rname}: single target {WRITTEN_TARGET}",
                     f"targets {tgt_fns!r}"):
        return
    tgt = targets[0]
    rep.check(getatt((tgt.get("DeadLetterConfig") or {}).get("Arn"), "Arn") == BACKGROUND_DLQ,
              f"{rname}: target DeadLetterConfig -> {BACKGROUND_DLQ}",
              f"DeadLetterConfig={tgt.get('DeadLetterConfig')!r}")
    rep.check(isinstance((tgt.get("RetryPolicy") or {}).get("MaximumRetryAttempts"), int),
              f"{rname}: target RetryPolicy", f"RetryPolicy={tgt.get('RetryPolicy')!r}")

    perms = [k for k, v in of_type(resources, "AWS::Lambda::Permission").items()
             if getatt(props_of(v).get("SourceArn"), "Arn") == rname]
    ok = len(perms) == 1
    if ok:
        pp = props_of(resources[perms[0]])
        fn = pp.get("FunctionName")
        ok = (pp.get("Principal") == "events.amazonaws.com"
              and pp.get("Action") == "lambda:InvokeFunction"
              and (getatt(fn, "Arn") or ref(fn)) == WRITTEN_TARGET)
    rep.check(ok, f"{rname}: Lambda permission for events.amazonaws.com scoped to the rule ARN",
              f"permissions with SourceArn = {rname}: {perms}")

    # EventBridge sends rule dead letters as the service principal: the DLQ's policy must allow it,
    # for this rule only.
    allowed = False
    for qp in of_type(resources, "AWS::SQS::QueuePolicy").values():
        qprops = props_of(qp)
        if BACKGROUND_DLQ not in [ref(q) for q in as_list(qprops.get("Queues", []))]:
            continue
        for st in as_list((qprops.get("PolicyDocument") or {}).get("Statement", [])):
            cond = (st.get("Condition") or {}).get("ArnEquals") or {}
            if (st.get("Effect") == "Allow"
                    and (st.get("Principal") or {}).get("Service") == "events.amazonaws.com"
                    and "sqs:SendMessage" in as_list(st.get("Action"))
                    and getatt(cond.get("aws:SourceArn"), "Arn") == rname):
                allowed = True
    rep.check(allowed, f"{BACKGROUND_DLQ} queue policy lets events.amazonaws.com send for {rname} only")


def queue_encrypted(qprops: dict[str, Any]) -> bool:
    return qprops.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in qprops


def check_queues(resources: dict[str, Any], rep: Report) -> set[str]:
    """Checks pass queues, DLQs and failure destinations; returns the logical names of all DLQs."""
    rep.section("SQS pass queues, dead-letter queues, async failure destinations")
    queues = of_type(resources, "AWS::SQS::Queue")
    unencrypted = sorted(k for k, v in queues.items() if not queue_encrypted(props_of(v)))
    rep.check(not unencrypted, "every SQS queue is encrypted at rest (SSE)", f"unencrypted: {unencrypted}")
    # Every queue the template uses as a dead-letter target, wherever it is named: redrive
    # targets, Scheduler / rule-target DeadLetterConfig, async OnFailure destinations, and any
    # queue whose logical name ends in DLQ. Each must be a real DLQ and carry an alarm.
    dlqs: set[str] = {BACKGROUND_DLQ} | {k for k in queues if k.upper().endswith("DLQ")}
    for v in queues.values():
        dlqs.add(getatt((props_of(v).get("RedrivePolicy") or {}).get("deadLetterTargetArn"), "Arn") or "")
    for v in of_type(resources, "AWS::Scheduler::Schedule").values():
        tgt = props_of(v).get("Target") or {}
        dlqs.add(getatt((tgt.get("DeadLetterConfig") or {}).get("Arn"), "Arn") or "")
    for v in of_type(resources, "AWS::Events::Rule").values():
        for tgt in as_list(props_of(v).get("Targets") or []):
            dlqs.add(getatt(((tgt or {}).get("DeadLetterConfig") or {}).get("Arn"), "Arn") or "")
    for v in of_type(resources, "AWS::Lambda::EventInvokeConfig").values():
        dest = (props_of(v).get("DestinationConfig") or {}).get("OnFailure") or {}
        dlqs.add(getatt(dest.get("Destination"), "Arn") or "")
    dlqs.discard("")
    mappings = of_type(resources, "AWS::Lambda::EventSourceMapping")
    functions = of_type(resources, "AWS::Serverless::Function")

    for qname, (fn, dlq) in JOB_QUEUES.items():
        dlqs.add(dlq)
        q = queues.get(qname)
        if not rep.check(q is not None, f"{qname} exists (AWS::SQS::Queue)"):
            continue
        qp = props_of(q)
        redrive = qp.get("RedrivePolicy") or {}
        rep.check(getatt(redrive.get("deadLetterTargetArn"), "Arn") == dlq
                  and redrive.get("maxReceiveCount") == JOB_MAX_RECEIVE,
                  f"{qname}: RedrivePolicy -> {dlq} after {JOB_MAX_RECEIVE} receives",
                  f"RedrivePolicy={redrive!r}")
        fn_timeout = props_of(functions.get(fn)).get("Timeout")
        vis = qp.get("VisibilityTimeout", 30)
        rep.check(isinstance(fn_timeout, int) and isinstance(vis, int) and vis >= 6 * fn_timeout,
                  f"{qname}: VisibilityTimeout {vis}s >= 6 x {fn} timeout ({fn_timeout}s)")
        maps = [k for k, v in mappings.items()
                if getatt(props_of(v).get("EventSourceArn"), "Arn") == qname]
        ok = len(maps) == 1
        if ok:
            mp = props_of(mappings[maps[0]])
            ok = (ref(mp.get("FunctionName")) == fn and mp.get("BatchSize") == 10
                  and mp.get("FunctionResponseTypes") == ["ReportBatchItemFailures"]
                  and mp.get("Enabled", True) is True)
        rep.check(ok, f"{qname}: one event source mapping -> {fn}, BatchSize 10, "
                  "ReportBatchItemFailures", f"mappings {maps}")

    for dlq in sorted(dlqs):
        dp = props_of(queues.get(dlq))
        rep.check(dlq in queues and dp.get("MessageRetentionPeriod") == DLQ_RETENTION
                  and "RedrivePolicy" not in dp,
                  f"{dlq}: dead-letter queue with 14-day retention",
                  f"MessageRetentionPeriod={dp.get('MessageRetentionPeriod')!r}")

    configs = of_type(resources, "AWS::Lambda::EventInvokeConfig")
    for fn in ASYNC_FUNCTIONS:
        found = [props_of(v) for v in configs.values() if ref(props_of(v).get("FunctionName")) == fn]
        ok = len(found) == 1
        if ok:
            c = found[0]
            dest = ((c.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
            ok = (c.get("MaximumRetryAttempts") == ASYNC_MAX_RETRIES
                  and getatt(dest, "Arn") == BACKGROUND_DLQ
                  and c.get("Qualifier") == "$LATEST")
        rep.check(ok, f"{fn}: EventInvokeConfig MaximumRetryAttempts {ASYNC_MAX_RETRIES}, "
                  f"OnFailure -> {BACKGROUND_DLQ}", f"configs {found!r:.200}")
        if fn in EXPECTED:
            rep.check(("sqs:SendMessage", BACKGROUND_DLQ_ARN) in EXPECTED[fn]["iam"],
                      f"{fn}: role may send to its OnFailure destination")
    return dlqs


def check_alarms(resources: dict[str, Any], conditions: dict[str, Any], dlqs: set[str],
                 rep: Report) -> None:
    rep.section("CloudWatch alarms")
    alarms = of_type(resources, "AWS::CloudWatch::Alarm")

    def find(namespace: str, metric: str, dim: str, target: str, attr: str | None) -> list[str]:
        out = []
        for k, v in alarms.items():
            ap = props_of(v)
            dims = ap.get("Dimensions") or []
            if ap.get("Namespace") != namespace or ap.get("MetricName") != metric or len(dims) != 1:
                continue
            val = dims[0].get("Value")
            hit = getatt(val, attr) if attr else ref(val)
            if (dims[0].get("Name") == dim and hit == target
                    and ap.get("ComparisonOperator") == "GreaterThanThreshold"
                    and ap.get("Threshold") == 0 and ap.get("Period") == 300
                    and ap.get("EvaluationPeriods") == 1):
                out.append(k)
        return out

    for fn in sorted(EXPECTED):
        found = [k for k in find("AWS/Lambda", "Errors", "FunctionName", fn, None)
                 if props_of(alarms[k]).get("Statistic") == "Sum"]
        rep.check(len(found) == 1, f"{fn}: Errors alarm (Sum > 0 over 5 min)", f"found {found}")
    for fn in THROTTLE_ALARMED:
        found = find("AWS/Lambda", "Throttles", "FunctionName", fn, None)
        rep.check(len(found) == 1, f"{fn}: Throttles alarm (> 0 over 5 min)", f"found {found}")
    for dlq in sorted(dlqs):
        found = find("AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", dlq, "QueueName")
        rep.check(len(found) == 1, f"{dlq}: ApproximateNumberOfMessagesVisible > 0 alarm",
                  f"found {found}")

    cond = conditions.get("HasAlarmTopic")
    rep.check(cond == {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}]},
              "condition HasAlarmTopic = AlarmTopicArn is set", f"got {cond!r}")
    want_actions = {"Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]}
    bad = sorted(k for k, v in alarms.items() if props_of(v).get("AlarmActions") != want_actions)
    rep.check(not bad, "every alarm notifies AlarmTopicArn only when it is set", f"not so: {bad}")
    unnamed = sorted(
        k for k, v in alarms.items()
        if not (isinstance(props_of(v).get("AlarmName"), dict)
                and str(props_of(v)["AlarmName"].get("Fn::Sub", "")).startswith("wop-memory-${Stage}-")))
    rep.check(not unnamed, "every alarm is named wop-memory-${Stage}-...", f"not so: {unnamed}")


def check_data_protection(resources: dict[str, Any], rep: Report) -> None:
    rep.section("MemoryTable / ArchiveBucket protection")
    tp = props_of(resources.get("MemoryTable"))
    rep.check((tp.get("PointInTimeRecoverySpecification") or {}).get("PointInTimeRecoveryEnabled") is True,
              "MemoryTable: point-in-time recovery")
    rep.check((tp.get("SSESpecification") or {}).get("SSEEnabled") is True, "MemoryTable: SSE enabled")
    ttl = tp.get("TimeToLiveSpecification") or {}
    rep.check(ttl.get("Enabled") is True and ttl.get("AttributeName") == "ttl",
              "MemoryTable: TTL on attribute ttl", f"got {ttl!r}")
    bp = props_of(resources.get("ArchiveBucket"))
    pab = bp.get("PublicAccessBlockConfiguration") or {}
    rep.check(all(pab.get(k) is True for k in ("BlockPublicAcls", "BlockPublicPolicy",
                                                 "IgnorePublicAcls", "RestrictPublicBuckets")),
              "ArchiveBucket: all four public-access blocks on", f"got {pab!r}")
    sse = (bp.get("BucketEncryption") or {}).get("ServerSideEncryptionConfiguration") or []
    rep.check(bool(sse), "ArchiveBucket: default encryption")
    rep.check((bp.get("VersioningConfiguration") or {}).get("Status") == "Enabled",
              "ArchiveBucket: versioning enabled")
    rules = (bp.get("LifecycleConfiguration") or {}).get("Rules") or []
    rep.check(any(r.get("ExpirationInDays") is not None for r in rules)
              and any("NoncurrentVersionExpiration" in r for r in rules),
              "ArchiveBucket: lifecycle expires archives and noncurrent versions")


def check_model_switches(resources: dict[str, Any], params: dict[str, Any],
                         conditions: dict[str, Any], rep: Report) -> None:
    """Every optional Bedrock model is off by default, its grants hang on a condition that is
    exactly "the parameter is not empty", and only the functions that call it are granted."""
    rep.section("Optional Bedrock models")
    for param, (condition, resource, granted) in MODEL_SWITCHES.items():
        p = params.get(param) or {}
        rep.check(p.get("Type") == "String" and p.get("Default") == "",
                  f"{param}: a String parameter, empty by default (model off)", f"got {p!r}")
        want = {"Fn::Not": [{"Fn::Equals": [{"Ref": param}, ""]}]}
        rep.check(conditions.get(condition) == want,
                  f"{condition}: !Not [!Equals [!Ref {param}, \"\"]]",
                  f"got {conditions.get(condition)!r}")
        holders = set()
        for name, res in resources.items():
            if res.get("Type") not in ("AWS::Serverless::Function", "AWS::Lambda::Function"):
                continue
            # Malformed policies are reported by check_function; here they grant nothing.
            got = allowed_pairs(name, res.get("Properties") or {}, Report(quiet=True)) or set()
            if ("bedrock:InvokeModel", resource) in got:
                holders.add(name)
        rep.check(holders == granted, f"{param}: bedrock:InvokeModel on it granted to "
                  f"{', '.join(sorted(granted))} only", f"granted to {sorted(holders)}")


# --------------------------------------------------------------------------------------------
# Tenant-scoped credentials (docs/guarantees.md "Tenant isolation in three layers"):
# TenantAccessRole, who may assume it, and that every statement of its policy pins the caller's
# tenant.
# --------------------------------------------------------------------------------------------
TENANT_ROLE = "TenantAccessRole"
TENANT_ASSUME_POLICY = "TenantAccessAssumePolicy"
TENANT_SWITCH = ("TenantScopedCredentials", "UseTenantCredentials")
# The functions that make their tenant data calls with the tenant's credentials.
TENANT_SCOPED = ("MemoryReadFunction", "MemoryWriteFunction", "MemoryForgetFunction",
                 "MemoryDreamFunction", "MemoryConsolidateFunction", "MemoryCommitmentsFunction",
                 "MemoryMcpFunction", "MemoryIntentFunction", "MemoryExchangeFunction")
TENANT_ROLE_ENV = {"Fn::If": ["UseTenantCredentials", {"Fn::GetAtt": ["TenantAccessRole", "Arn"]},
                              ""]}
TENANT_TAG = "${aws:PrincipalTag/tenant}"
TENANT_OBJECTS = "${ArchiveBucket.Arn}/${!aws:PrincipalTag/tenant}/*"
LEADING_KEYS = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{TENANT_TAG}#*"]},
                "Null": {"dynamodb:LeadingKeys": "false"}}
TENANT_PREFIX = {"StringLike": {"s3:prefix": [f"{TENANT_TAG}/*"]}}
TENANT_ROLE_IAM = (
    pairs(["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem",
           "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"], TABLE)
    | pairs(["dynamodb:Query"], SUBJECT_INDEX)
    | pairs(["s3:GetObject", "s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject",
             "s3:DeleteObjectVersion"], TENANT_OBJECTS)
    | pairs(["s3:ListBucket", "s3:ListBucketVersions"], BUCKET)
)


def tenant_pin_problems(st: Any) -> list[str]:
    """Why a TenantAccessRole statement does not confine itself to the session's tenant: every
    DynamoDB statement carries the LeadingKeys condition (and only on the table or bySubject),
    every S3 object statement names only objects under the tenant's prefix, every S3 listing
    carries the s3:prefix condition; nothing else is allowed."""
    if not isinstance(st, dict) or st.get("Effect") != "Allow":
        return [] if isinstance(st, dict) and st.get("Effect") == "Deny" else [f"{st!r:.60}"]
    if set(st) & {"NotAction", "NotResource", "NotPrincipal"}:
        return [f"{st.get('Sid')}: NotAction / NotResource"]
    actions = [str(a) for a in as_list(st.get("Action"))]
    try:
        resources = [norm_resource(r) for r in as_list(st.get("Resource"))]
    except ValueError as exc:
        return [f"{st.get('Sid')}: {exc}"]
    sid, cond = st.get("Sid"), st.get("Condition")
    out: list[str] = []
    if all(a.startswith("dynamodb:") for a in actions):
        if cond != LEADING_KEYS:
            out.append(f"{sid}: DynamoDB without the LeadingKeys condition on the tenant tag")
        if not set(resources) <= {TABLE, SUBJECT_INDEX}:
            out.append(f"{sid}: DynamoDB resource beyond the table and bySubject: {resources}")
    elif all(a in ("s3:ListBucket", "s3:ListBucketVersions") for a in actions):
        if cond != TENANT_PREFIX or resources != [BUCKET]:
            out.append(f"{sid}: listing not pinned to s3:prefix {TENANT_TAG}/*")
    elif all(a.startswith("s3:") for a in actions):
        if resources != [TENANT_OBJECTS] or cond is not None:
            out.append(f"{sid}: objects beyond {TENANT_OBJECTS}: {resources}")
    else:
        out.append(f"{sid}: actions beyond DynamoDB and S3: {actions}")
    return out


def check_tenant_access(resources: dict[str, Any], params: dict[str, Any],
                        conditions: dict[str, Any], glob: dict[str, Any], rep: Report) -> None:
    rep.section(f"{TENANT_ROLE}: tenant-scoped credentials")
    param, condition = TENANT_SWITCH
    p = params.get(param) or {}
    rep.check(p.get("Default") == "true" and p.get("AllowedValues") == ["true", "false"],
              f"{param}: \"true\" / \"false\", on by default", f"got {p!r}")
    rep.check(conditions.get(condition) == {"Fn::Equals": [{"Ref": param}, "true"]},
              f"{condition}: !Equals [!Ref {param}, \"true\"]", f"got {conditions.get(condition)!r}")
    role = resources.get(TENANT_ROLE)
    if not rep.check(isinstance(role, dict) and role.get("Type") == "AWS::IAM::Role"
                     and role.get("Condition") == condition,
                     f"{TENANT_ROLE}: an AWS::IAM::Role under {condition}"):
        return
    rp = props_of(role)
    fn_roles = {"${" + f + "Role.Arn}" for f in TENANT_SCOPED}
    trust = as_list((rp.get("AssumeRolePolicyDocument") or {}).get("Statement", []))
    want_cond = {"StringLike": {"aws:RequestTag/tenant": "?*"},
                 "ForAllValues:StringEquals": {"aws:TagKeys": ["tenant"]}}
    ok = False
    if len(trust) == 1 and isinstance(trust[0], dict):
        st = trust[0]
        principal = st.get("Principal") or {}
        try:
            aws = {norm_resource(x) for x in as_list(principal.get("AWS"))}
        except ValueError:
            aws = set()
        ok = (st.get("Effect") == "Allow" and set(principal) == {"AWS"} and aws == fn_roles
              and sorted(as_list(st.get("Action"))) == ["sts:AssumeRole", "sts:TagSession"]
              and st.get("Condition") == want_cond)
    rep.check(ok, f"{TENANT_ROLE}: trusted by the {len(TENANT_SCOPED)} function roles only, "
              "sts:AssumeRole + sts:TagSession, a non-empty tenant tag and no other tag required",
              f"got {trust!r:.300}")
    got, problems = role_pairs(role)
    rep.check(not problems, f"{TENANT_ROLE}: inline statements only", "; ".join(problems))
    missing_p, extra_p = TENANT_ROLE_IAM - got, got - TENANT_ROLE_IAM
    rep.check(not missing_p and not extra_p,
              f"{TENANT_ROLE}: allows exactly {len(TENANT_ROLE_IAM)} action/resource pairs",
              f"missing {sorted(missing_p)} | extra {sorted(extra_p)}")
    statements = [st for pol in as_list(rp.get("Policies", [])) if isinstance(pol, dict)
                  for st in as_list((pol.get("PolicyDocument") or {}).get("Statement", []))]
    pins = [msg for st in statements for msg in tenant_pin_problems(st)]
    rep.check(bool(statements) and not pins,
              f"{TENANT_ROLE}: every statement's condition or resource pins the session's tenant",
              "; ".join(pins))
    # The pin check itself must catch a statement that forgets the tenant.
    planted = [
        {"Sid": "NoCondition", "Effect": "Allow", "Action": "dynamodb:GetItem",
         "Resource": {"Fn::GetAtt": ["MemoryTable", "Arn"]}},
        {"Sid": "AnyIndex", "Effect": "Allow", "Action": "dynamodb:Query",
         "Resource": {"Fn::Sub": "${MemoryTable.Arn}/index/*"}, "Condition": LEADING_KEYS},
        {"Sid": "AllObjects", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": {"Fn::Sub": "${ArchiveBucket.Arn}/*"}},
        {"Sid": "AnyPrefix", "Effect": "Allow", "Action": "s3:ListBucket",
         "Resource": {"Fn::GetAtt": ["ArchiveBucket", "Arn"]}},
        {"Sid": "Events", "Effect": "Allow", "Action": "events:PutEvents",
         "Resource": {"Fn::GetAtt": ["EventBus", "Arn"]}},
    ]
    caught = [st["Sid"] for st in planted if tenant_pin_problems(st)]
    rep.check(len(caught) == len(planted), "the pin check reports planted unpinned statements",
              f"caught only {caught}")

    # Who may assume it: exactly the tenant-scoped function roles, through one separate policy (an
    # inline statement would make the roles name each other), and no other IAM policy resource.
    policies = of_type(resources, "AWS::IAM::Policy")
    rep.check(set(policies) == {TENANT_ASSUME_POLICY},
              f"the only AWS::IAM::Policy resource is {TENANT_ASSUME_POLICY}", f"got {sorted(policies)}")
    ap = policies.get(TENANT_ASSUME_POLICY)
    if ap is not None:
        pp = props_of(ap)
        roles = {ref(r) for r in as_list(pp.get("Roles"))}
        doc_pairs, doc_problems = role_pairs({"Properties": {"Policies": [pp]}})
        want_pairs = pairs(["sts:AssumeRole", "sts:TagSession"], "${TenantAccessRole.Arn}")
        rep.check(ap.get("Condition") == condition
                  and roles == {f + "Role" for f in TENANT_SCOPED}
                  and not doc_problems and doc_pairs == want_pairs,
                  f"{TENANT_ASSUME_POLICY}: sts:AssumeRole + sts:TagSession on {TENANT_ROLE} "
                  f"for the {len(TENANT_SCOPED)} function roles, under {condition}",
                  f"roles {sorted(r or '?' for r in roles)}, pairs {sorted(doc_pairs)}")
    # TENANT_ROLE_ARN: the role on the tenant-scoped functions (empty when off), absent elsewhere.
    for name, res in sorted(resources.items()):
        if res.get("Type") != "AWS::Serverless::Function":
            continue
        props = merge_globals(glob, res.get("Properties") or {})
        env = (props.get("Environment") or {}).get("Variables") or {}
        if name in TENANT_SCOPED:
            rep.check(env.get("TENANT_ROLE_ARN") == TENANT_ROLE_ENV,
                      f"{name}: TENANT_ROLE_ARN = {TENANT_ROLE} when {condition}, else empty",
                      f"got {env.get('TENANT_ROLE_ARN')!r}")
        else:
            rep.check("TENANT_ROLE_ARN" not in env, f"{name}: no TENANT_ROLE_ARN (not tenant-scoped)",
                      f"got {env.get('TENANT_ROLE_ARN')!r}")


# The metering line's counts that Contributor Insights ranks tenants by, and the quota metrics
# the pressure alarms watch: each must be a name the Rust code emits (a rename there fails here).
INSIGHT_VALUES = {"WriteUnits", "ReadUnits", "S3BytesIn", "BedrockTokens"}
QUOTA_METRICS = ("QuotaRefused", "QuotaNearLimit")
DASHBOARD_METRICS = ("ErrorAnswered", "StoreRetries")


def emitted_names() -> str:
    """Every Rust source under shared/ and functions/, as one text to look metric names up in."""
    return "\n".join(p.read_text(errors="replace")
                     for d in ("shared", "functions") for p in (REPO_ROOT / d).rglob("*.rs"))


def sub_text(value: Any) -> str:
    """The template text of a `!Sub` string (its `${...}` left as written)."""
    if isinstance(value, dict) and "Fn::Sub" in value:
        sub = value["Fn::Sub"]
        return sub[0] if isinstance(sub, list) else str(sub)
    return str(value)


def check_observability(resources: dict[str, Any], functions: dict[str, Any], rep: Report) -> None:
    rep.section("Dashboard, per-tenant Contributor Insights, quota alarms")
    code = emitted_names()
    names = {k: sub_text(props_of(v).get("FunctionName")) for k, v in functions.items()}
    boards = of_type(resources, "AWS::CloudWatch::Dashboard")
    rep.check(len(boards) == 1, "one CloudWatch dashboard", f"found {sorted(boards)}")
    widgets: list[dict[str, Any]] = []
    for k, v in boards.items():
        try:
            widgets = json.loads(sub_text(props_of(v).get("DashboardBody")))["widgets"]
        except (ValueError, KeyError, TypeError) as exc:
            rep.check(False, f"{k}: body is JSON with widgets", str(exc))
    text = [json.dumps(w) for w in widgets]
    for logical, fn in sorted(names.items()):
        want = {
            "invocations, errors, throttles": ('"Invocations", "FunctionName", "' + fn, '"Errors"',
                                               '"Throttles"'),
            "duration p50 and p99": ('"Duration", "FunctionName", "' + fn, '"p50"', '"p99"'),
            "answered errors by code": ("ErrorAnswered", "Function=\\\"" + fn),
            "store retries": ('"StoreRetries", "Function", "' + fn,),
        }
        for what, needles in want.items():
            hit = any(all(n in t for n in needles) for t in text)
            rep.check(hit, f"dashboard: {logical} {what}")
    for metric in DASHBOARD_METRICS + QUOTA_METRICS + tuple(sorted(INSIGHT_VALUES)):
        rep.check(f'"{metric}"' in code, f"metric {metric} is emitted by the Rust code")

    rules = of_type(resources, "AWS::CloudWatch::InsightRule")
    seen = set()
    for k, v in sorted(rules.items()):
        body = json.loads(sub_text(props_of(v).get("RuleBody")))
        contribution = body.get("Contribution") or {}
        value = str(contribution.get("ValueOf", "")).removeprefix("$.")
        seen.add(value)
        groups = body.get("LogGroupNames") or []
        covers = all(any(g.endswith("*") and f"/aws/lambda/{fn}".startswith(g[:-1]) for g in groups)
                     for fn in names.values())
        rep.check(contribution.get("Keys") == ["$.tenant"] and body.get("LogFormat") == "JSON"
                  and body.get("AggregateOn") == "Sum" and covers,
                  f"{k}: ranks $.tenant by the sum of {value} over every function's logs")
        ref_ok = any(f"${{{k}.RuleName}}" in t for t in text)
        rep.check(ref_ok, f"{k}: shown on the dashboard")
    rep.check(seen == INSIGHT_VALUES, "Contributor Insights: top tenants by write units, read units, "
              "bytes and Bedrock tokens", f"got {sorted(seen)}")

    alarms = of_type(resources, "AWS::CloudWatch::Alarm")
    for metric in QUOTA_METRICS:
        found = []
        for k, v in alarms.items():
            stats = [m.get("MetricStat", {}).get("Metric", {}) for m in props_of(v).get("Metrics") or []]
            fns = {ref(d.get("Value")) for s in stats if s.get("MetricName") == metric
                   and s.get("Namespace") == "WopMemory" for d in s.get("Dimensions") or []}
            if fns:
                found.append((k, fns))
        ok = len(found) == 1 and {"MemoryWriteFunction", "MemoryReadFunction"} <= found[0][1]
        rep.check(ok, f"{metric}: one alarm over the write and read paths (and the other doors)",
                  f"found {found}")


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else REPO_ROOT / "template.yaml"
    try:
        doc = load(path)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"template_policies: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    resources: dict[str, Any] = doc["Resources"]
    glob = ((doc.get("Globals") or {}).get("Function")) or {}
    params = doc.get("Parameters") or {}
    rep = Report()
    print(f"template_policies: {path}")

    functions = {k: v for k, v in resources.items() if v.get("Type") in
                 ("AWS::Serverless::Function", "AWS::Lambda::Function")}
    rep.section("Function inventory")
    unknown = sorted(set(functions) - set(EXPECTED))
    rep.check(not unknown, "every function in the template has an expected policy here",
              f"unchecked: {unknown} - add them to EXPECTED in tests/template_policies.py")
    absent = sorted(set(EXPECTED) - set(functions))
    rep.check(not absent, f"expected functions present: {', '.join(sorted(EXPECTED))}", f"absent: {absent}")
    for name in sorted(set(functions) & set(EXPECTED)):
        if functions[name].get("Type") != "AWS::Serverless::Function":
            rep.check(False, f"{name}: is an AWS::Serverless::Function")
            continue
        check_function(name, functions[name], glob, resources, rep)

    check_api(resources, params, rep)
    check_scheduler(resources, params, rep)
    check_written_rule(resources, rep)
    dlqs = check_queues(resources, rep)
    check_alarms(resources, doc.get("Conditions") or {}, dlqs, rep)
    check_model_switches(resources, params, doc.get("Conditions") or {}, rep)
    check_tenant_access(resources, params, doc.get("Conditions") or {}, glob, rep)
    check_data_protection(resources, rep)
    check_observability(resources, functions, rep)
    print(f"\n{rep.passed} passed, {rep.failed} failed")
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
