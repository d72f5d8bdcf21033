#!/usr/bin/env python3
"""Static checks on template.yaml: least-privilege IAM per function, the API's JWT guard, and the
build / runtime / logging settings every function must carry.

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

# --------------------------------------------------------------------------------------------
# Expectations. Resources are written in ${Logical.Attr} form: !GetAtt MemoryTable.Arn and
# !Sub ${MemoryTable.Arn} both normalise to "${MemoryTable.Arn}".
# --------------------------------------------------------------------------------------------
TABLE = "${MemoryTable.Arn}"
SUBJECT_INDEX = "${MemoryTable.Arn}/index/bySubject"
BUCKET = "${ArchiveBucket.Arn}"
OBJECTS = "${ArchiveBucket.Arn}/*"
BUS = "${EventBus.Arn}"

EVENT_SOURCE = "wop-memory"
API = "MemoryHttpApi"
API_PREFIX = "/v1/host/wop-memory"


def pairs(actions: list[str], resource: str) -> set[tuple[str, str]]:
    return {(a, resource) for a in actions}


EXPECTED: dict[str, dict[str, Any]] = {
    "MemoryReadFunction": {
        "binary": "memory-read",
        "iam": pairs(["dynamodb:GetItem", "dynamodb:Query"], TABLE),
        "routes": {
            ("GET", f"{API_PREFIX}/entries"),
            ("GET", f"{API_PREFIX}/entries/{{id}}"),
            ("GET", f"{API_PREFIX}/capabilities"),
        },
    },
    "MemoryWriteFunction": {
        "binary": "memory-write",
        "iam": pairs(["dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"], TABLE)
        | pairs(["events:PutEvents"], BUS),
        "routes": set(),
    },
    "MemoryForgetFunction": {
        "binary": "memory-forget",
        "iam": pairs(["dynamodb:Query"], SUBJECT_INDEX)
        | pairs(["dynamodb:DeleteItem"], TABLE)
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
        "routes": {("POST", f"{API_PREFIX}/forget")},
    },
}

REQUIRED_ENV = {"MEMORY_TABLE", "ARCHIVE_BUCKET", "EVENT_BUS_NAME", "TENANT_CLAIM"}

# memory-read must not be able to change anything.
WRITE_LIKE = re.compile(
    r"(Put|Delete|Update|Write|Create|Batch|Transact|ConditionCheck|PartiQL|Restore|Import|Tag)",
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
class CfnLoader(yaml.SafeLoader):
    """SafeLoader that turns !Ref / !GetAtt / !Sub / ... into {"Ref": ..} / {"Fn::X": ..}."""


def _construct_intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


CfnLoader.add_multi_constructor("!", _construct_intrinsic)


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
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, ok: bool, what: str, detail: str = "") -> bool:
        if ok:
            self.passed += 1
            print(f"  PASS  {what}")
        else:
            self.failed += 1
            print(f"  FAIL  {what}" + (f"\n          {detail}" if detail else ""))
        return ok

    def section(self, title: str) -> None:
        print(f"\n{title}")


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
            if not isinstance(st, dict):
                problems.append(f"{where} is not a mapping")
                continue
            if "NotAction" in st or "NotResource" in st or "NotPrincipal" in st:
                problems.append(f"{where} uses NotAction/NotResource/NotPrincipal")
                continue
            if st.get("Effect") != "Allow":
                continue  # Deny statements only narrow what is allowed
            try:
                resources = [norm_resource(r) for r in as_list(st.get("Resource"))]
            except ValueError as exc:
                problems.append(f"{where}: {exc}")
                continue
            for action in as_list(st.get("Action")):
                if not isinstance(action, str):
                    problems.append(f"{where}: non-string Action {action!r}")
                    continue
                for res in resources:
                    got.add((action, res))
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
    rep.check(props.get("MemorySize") == 256, f"{name}: MemorySize 256",
              f"got {props.get('MemorySize')!r}")
    timeout = props.get("Timeout")
    rep.check(isinstance(timeout, int) and 1 <= timeout <= 900, f"{name}: Timeout set ({timeout}s)",
              f"got {timeout!r}")
    env = ((props.get("Environment") or {}).get("Variables") or {})
    missing = REQUIRED_ENV - set(env)
    rep.check(not missing, f"{name}: environment has {', '.join(sorted(REQUIRED_ENV))}",
              f"missing {sorted(missing)}")

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

    # Routes: exactly the expected HttpApi events, all on MemoryHttpApi, none opting out of auth.
    routes: set[tuple[str, str]] = set()
    event_problems: list[str] = []
    for ev_name, ev in (props.get("Events") or {}).items():
        ev_props = ev.get("Properties") or {}
        if ev.get("Type") != "HttpApi":
            event_problems.append(f"{ev_name}: unexpected event type {ev.get('Type')!r}")
            continue
        if ev_props.get("ApiId") != {"Ref": API}:
            event_problems.append(f"{ev_name}: ApiId is {ev_props.get('ApiId')!r}, not !Ref {API}")
        auth = ev_props.get("Auth") or {}
        if auth.get("Authorizer") not in (None, "JwtAuthorizer"):
            event_problems.append(f"{ev_name}: overrides Auth.Authorizer ({auth.get('Authorizer')!r})")
        routes.add((str(ev_props.get("Method", "")).upper(), ev_props.get("Path")))
    rep.check(not event_problems, f"{name}: events all on {API}, none bypass the JWT authorizer",
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
        bad = sorted(a for a in actions if WRITE_LIKE.search(a.split(":", 1)[-1]) or
                     not a.startswith("dynamodb:"))
        rep.check(not bad, f"{name}: no write, delete or non-DynamoDB action", f"found {bad}")
        idx = sorted(r for _, r in got if "/index/" in r)
        rep.check(not idx, f"{name}: no index access (base-table reads only)", f"found {idx}")
    if name == "MemoryWriteFunction":
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
    print(f"\n{rep.passed} passed, {rep.failed} failed")
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
