"""Seeded long ReAct sessions with planted facts ("needles") for the retention benchmark.

One session of ``n`` interactions, identical for every method and every machine (same
seed, same messages, same ids). One interaction: a user turn, often an AI tool call
(sometimes two parallel calls) with its ToolMessage(s), and the AI's answer. About 10 %
of tool results are failures (error text, ``status="error"``), about 8 % of
interactions carry a large dump of 40-110 log or JSON lines, some turns are chit-chat;
about 280 cl100k tokens per interaction on average. Every message has a stable unique
``id`` (as LangGraph gives them).

The vocabulary is realistic and deliberately overlapping: services, hosts, tables,
metrics, people, tickets and the very nouns the facts use ("database port", "backup
bucket", ...) appear all over the background text, so that a lexical search has to
work for it.

Facts (`Fact`) are planted at four depths (``early`` / ``middle`` / ``late`` /
``recent`` = within the last 5 interactions) in four kinds:

- ``plain``: stated once, in a sentence by the user or the AI;
- ``corrected``: stated, then corrected later with a new value (the new value wins;
  both are recorded, the depth is that of the new value);
- ``decoy``: stated next to look-alike facts with the same wording and another subject
  (``staging`` / ``dev`` instead of ``production``), one in the same message and one a
  few interactions away;
- ``buried``: one line (a log line or a JSON record) inside a large tool output.

Every value (and every old or decoy value) is a distinctive string that occurs exactly
once in the whole session (`Session.verify` checks it). Each fact has two queries: one in
the fact's own words and one paraphrased (other words, same meaning); a query is
appended as the final HumanMessage of the history (`Session.history_for`).

    from needles import make_session
    session = make_session(1_000, seed=0)
    for query in session.queries:
        history = session.history_for(query)      # the session + the query message
"""

from __future__ import annotations

import dataclasses
import json
import random
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

KINDS = ("plain", "corrected", "decoy", "buried")
DEPTHS = ("early", "middle", "late", "recent")
WORDINGS = ("own", "paraphrased")
#: Interactions counted as "recent" at the end of a session, and facts per kind there.
RECENT = 5
RECENT_PER_KIND = 1
#: Share of interactions that carry a large tool dump, and its size in lines.
DUMP_RATE = 0.08
DUMP_LINES = (40, 110)
FAILED_TOOL_RATE = 0.10
CHITCHAT_RATE = 0.08
TOOL_RATE = 0.55
PARALLEL_RATE = 0.15

# ------------------------------------------------------------------------- vocabulary

#: (name used in logs and by the facts' own wording, alias used by paraphrases)
SERVICES: tuple[tuple[str, str], ...] = (
    ("payments-api", "the payments service"),
    ("checkout-web", "the checkout frontend"),
    ("ledger-writer", "the accounting ledger job"),
    ("search-indexer", "the search indexing pipeline"),
    ("auth-gateway", "the login proxy"),
    ("notify-svc", "the notification sender"),
    ("inventory-sync", "the stock sync worker"),
    ("fraud-scorer", "the risk scoring model"),
    ("reporting-etl", "the nightly reporting job"),
    ("media-cdn", "the image delivery edge"),
    ("billing-worker", "the invoicing worker"),
    ("geo-router", "the location routing service"),
    ("session-cache", "the login session store"),
    ("orders-api", "the order management backend"),
)
SERVICE_NAMES = tuple(name for name, _ in SERVICES)
PEOPLE = (
    "Priya", "Marcus", "Chen", "Fatima", "Jonas", "Aiko", "Diego", "Lena", "Omar",
    "Sofia", "Ravi", "Hannah", "Kwame", "Elena", "Tomasz", "Yuki",
)  # fmt: skip
TABLES = (
    "orders_daily", "user_events", "payments_raw", "invoice_lines", "sessions_agg",
    "refunds_staging", "inventory_snapshot", "clickstream_hourly", "fraud_features",
    "ledger_balances", "shipment_status", "customer_dim", "dwd.orders_daily",
    "ods.payment_events",
)  # fmt: skip
METRICS = (
    "p99 latency", "error rate", "CPU usage", "heap usage", "queue depth",
    "consumer lag", "replication lag", "cache hit ratio", "5xx rate", "GC pause time",
    "disk IOPS", "connection pool saturation", "request rate", "memory RSS",
)  # fmt: skip
PROBLEMS = (
    "is timing out", "returns 502s", "got slow", "drops events", "shows duplicate rows",
    "keeps restarting", "leaks memory", "fails health checks", "lags behind",
    "throws deadlocks", "rejects logins", "writes partial batches",
)  # fmt: skip
HOST_ROLES = ("db", "web", "kafka", "etl-runner", "redis", "api", "worker", "es-data")
HOST_ENVS = ("prod", "stg", "dev")
LEVELS = ("INFO", "INFO", "INFO", "WARN", "DEBUG", "ERROR")
EVENTS = (
    "batch_committed", "cache_miss", "retry_scheduled", "lease_renewed", "rebalance",
    "checkpoint_written", "request_done", "slow_query", "gc_pause", "health_ok",
)  # fmt: skip
SETTINGS = (
    "pool size", "timeout ms", "max retries", "replica count", "batch size", "log level",
    "heap limit", "worker threads",
)  # fmt: skip
TOOLS = (
    "query_logs", "run_sql", "get_metrics", "describe_service", "search_runbook",
    "list_alerts", "get_ticket",
)  # fmt: skip
DUMP_TOOLS = ("query_logs", "dump_config", "run_sql")
CHITCHAT_USER = (
    "thanks!", "ok, makes sense.", "great, let's keep going.", "coffee break, back in 10.",
    "nice, that was quick.", "hm, interesting.", "cool.", "sounds good to me.",
    "sorry, got pulled into a meeting.", "perfect, thank you!",
)  # fmt: skip
CHITCHAT_AI = (
    "You're welcome! Tell me when you want to continue.",
    "Sure, I'll wait here.",
    "Glad it helped. What should we look at next?",
    "No problem, take your time.",
    "Happy to help.",
)

# ------------------------------------------------------------------------- fact subjects


@dataclass(frozen=True, slots=True)
class Attribute:
    """What a fact is about: its noun (own wording), a paraphrase and a value maker."""

    noun: str
    paraphrase: str  # placeholders: {alias} (the service's alias), {where} ("" or " in prod")
    value: Callable[[random.Random, str], str]  # (rng, service name) -> candidate value


def _alnum(rng: random.Random, k: int, alphabet: str = string.ascii_lowercase) -> str:
    """``k`` characters with at least one digit and one letter (never an English word)."""
    while True:
        text = "".join(rng.choices(alphabet + string.digits, k=k))
        if any(c.isdigit() for c in text) and any(c.isalpha() for c in text):
            return text


REGIONS = (
    "eu-west-3", "eu-central-2", "ap-southeast-2", "ap-northeast-3", "us-east-2",
    "us-west-1", "ca-central-1", "sa-east-1", "me-south-1", "af-south-1", "eu-north-1",
    "il-central-1", "europe-west4", "asia-east2", "us-central1", "australia-southeast1",
    "northamerica-northeast2", "southamerica-west1", "europe-southwest1", "me-west1",
    "asia-south2", "eu-south-2", "ap-east-1", "mx-central-1",
)  # fmt: skip
OWNERS = (
    "Ingrid Solberg", "Mateo Alvarez", "Nadia Petrova", "Kofi Mensah", "Astrid Lindqvist",
    "Rahul Deshmukh", "Chiara Bellini", "Tariq Haddad", "Mei-Ling Zhou", "Bruno Carvalho",
    "Zofia Nowak", "Emeka Okafor", "Sanne de Vries", "Hiroshi Tanaka", "Leila Ahmadi",
    "Pavel Horak", "Ayesha Siddiqui", "Felix Brandt", "Camila Rojas", "Dmitri Volkov",
    "Noor Rahman", "Lucia Ferrari", "Oskar Nilsson", "Amara Diallo", "Ilse Vermeulen",
    "Gustavo Pereira", "Yara Haddad", "Viktor Szabo", "Anika Sharma", "Jules Moreau",
)  # fmt: skip
TABLE_BASES = (
    "orders", "invoices", "sessions", "clicks", "refunds", "payouts", "shipments",
    "carts", "reviews", "ledger_entries", "devices", "coupons",
)  # fmt: skip
WORDS = (
    "ledger", "atlas", "falcon", "orbit", "harbor", "quartz", "nimbus", "cobalt", "ember",
    "juniper", "mosaic", "tundra",
)  # fmt: skip


def _short(service: str) -> str:
    return service.split("-", maxsplit=1)[0]


ATTRIBUTES: tuple[Attribute, ...] = (
    Attribute(
        "database port",
        "Which port should I use to reach the DB behind {alias}{where}?",
        lambda rng, svc: str(rng.randint(20000, 64999)),
    ),
    Attribute(
        "deployment region",
        "In which cloud zone is {alias}{where} hosted?",
        lambda rng, svc: rng.choice(REGIONS),
    ),
    Attribute(
        "incident ticket",
        "What's the reference of the outage case opened for {alias}{where}?",
        lambda rng, svc: f"INC-{rng.randint(10000, 99999)}",
    ),
    Attribute(
        "release build id",
        "Which commit hash is live for {alias}{where}?",
        lambda rng, svc: _alnum(rng, 7, "abcdef"),
    ),
    Attribute(
        "target table",
        "Where does {alias}{where} write its output rows?",
        lambda rng, svc: f"{rng.choice(TABLE_BASES)}_v{rng.randint(2, 19)}",
    ),
    Attribute(
        "backup bucket",
        "Where are the snapshots of {alias}{where} stored?",
        lambda rng, svc: f"s3://acme-{rng.choice(WORDS)}-{_alnum(rng, 4)}",
    ),
    Attribute(
        "primary host",
        "Which machine is the leader node for {alias}{where}?",
        lambda rng, svc: (
            f"{rng.choice(('pg', 'mq', 'node', 'vm'))}-{_alnum(rng, 3)}."
            f"{rng.choice(('fra1', 'ams2', 'iad3', 'sin1'))}.internal"
        ),
    ),
    Attribute(
        "on-call owner",
        "Who gets paged when {alias}{where} breaks?",
        lambda rng, svc: rng.choice(OWNERS),
    ),
    Attribute(
        "feature flag",
        "Which toggle gates the new code path in {alias}{where}?",
        lambda rng, svc: f"ff_{rng.choice(WORDS)}_{_alnum(rng, 3)}",
    ),
    Attribute(
        "Kafka topic",
        "Which stream does {alias}{where} publish its events to?",
        lambda rng, svc: (
            f"{_short(svc)}.{rng.choice(EVENTS).replace('_', '-')}.v{rng.randint(2, 9)}"
        ),
    ),
    Attribute(
        "Grafana dashboard",
        "Where can I see the graphs for {alias}{where}?",
        lambda rng, svc: f"grafana.acme.io/d/{_alnum(rng, 6)}",
    ),
    Attribute(
        "pinned SDK version",
        "Which release of the client library is {alias}{where} locked to?",
        lambda rng, svc: f"v{rng.randint(3, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 30)}",
    ),
    Attribute(
        "Slack channel",
        "Where does the team behind {alias}{where} chat?",
        lambda rng, svc: f"#team-{_short(svc)}-{_alnum(rng, 2)}",
    ),
    Attribute(
        "internal IP address",
        "What address does {alias}{where} listen on inside the VPC?",
        lambda rng, svc: f"10.{rng.randint(16, 250)}.{rng.randint(0, 255)}.{rng.randint(2, 254)}",
    ),
    Attribute(
        "vault secret path",
        "Where are the credentials of {alias}{where} kept?",
        lambda rng, svc: f"vault:kv/{_short(svc)}/{_alnum(rng, 6)}",
    ),
    Attribute(
        "runbook page",
        "Which doc explains how to recover {alias}{where}?",
        lambda rng, svc: f"RB-{_alnum(rng, 2, string.ascii_uppercase)}{rng.randint(100, 999)}",
    ),
)
NOUNS = tuple(a.noun for a in ATTRIBUTES)

PLAIN_TEMPLATES = (
    "Quick note for later: the {env}{noun} of {svc} is {value}.",
    "By the way, {svc}'s {env}{noun} is {value}, {person} confirmed it this morning.",
    "For the record, the {env}{noun} of {svc} is {value}.",
    "Heads-up: we settled on {value} as the {env}{noun} of {svc}.",
    "Please keep in mind that the {env}{noun} of {svc} is {value}.",
)
CORRECTION_TEMPLATES = (
    "Correction: the {noun} of {svc} has changed, it is {value} now; forget the earlier value.",
    "Update from {person}: the {noun} of {svc} was switched, it is {value} from now on.",
    "Small fix to what I said before: the {noun} of {svc} is actually {value}.",
)
DECOY_TEMPLATES = (
    (
        "Don't mix these up: the staging {noun} of {svc} is {decoy}, while the production "
        "{noun} of {svc} is {value}."
    ),
    (
        "Careful, there are two: the production {noun} of {svc} is {value} and the staging "
        "{noun} of {svc} is {decoy}."
    ),
)
DECOY_NEIGHBOUR = (
    "Also, the dev {noun} of {svc} is {decoy} (only for local testing).",
    "Side note: the dev {noun} of {svc} is {decoy}, nobody uses it in production.",
)
BURIED_TEMPLATES = (
    "{ts} INFO {svc} [{host}] config-loader: {noun} = {value} (source=consul, rev {small})",
    (
        '{{"ts": "{ts}", "service": "{svc}", "setting": "{noun}", "value": "{value}", '
        '"source": "consul"}}'
    ),
    "{ts} INFO {svc} [{host}] startup: resolved {noun} -> {value}",
)

# ------------------------------------------------------------------------- background text

HUMAN_TEMPLATES = (
    (
        "Can you check why {svc} {problem} since {clock}? {person} says it started after the "
        "{table} backfill."
    ),
    "Look at the {metric} for {svc} on {host}, it looks off compared to yesterday.",
    "Ticket {ticket}: {person} reports that {svc} {problem}. Please investigate.",
    (
        "What's the status of the {table} migration? {person} still has a question about the "
        "{noun} of {svc}."
    ),
    "Is the {noun} of {svc} documented anywhere? I couldn't find it in the runbook.",
    "Please compare the {metric} of {svc} and {svc2} over the last {small} hours.",
    "{person} wants to know if {ticket} is related to the {table} job.",
    "{aliased} {problem} again, can you take a look?",
    "Did anyone rotate the credentials of {alias} recently? {person} asked in standup.",
    "The graphs for {alias} look weird since {clock}, any idea?",
    "Which team chats about {alias}? I want to ask about the {noun} of {svc}.",
    "Why did the row count of {table} drop by {pct} % today?",
    "Can we roll back {svc} on {host}? It {problem} again.",
    "Run a quick check on {table}: are there duplicates for {date}?",
    "Who touched the {noun} settings of {svc} last week? {ticket} mentions a change.",
    "The alert for {metric} on {svc} fired {small} times tonight, is it flapping?",
)
AI_SENTENCES = (
    (
        "I looked at {svc}: the {metric} is at {num} on {host}, which is {cmp} than the "
        "7-day baseline."
    ),
    "The {table} table has {num} rows for {date}; the last load finished at {clock}.",
    "{person} owns {ticket}; I added a note about the {noun} of {svc} there.",
    (
        "The errors come from {svc} calling {svc2} with a {num} ms timeout; retries are capped "
        "at {small}."
    ),
    "I suggest we roll back {svc} on {host} and re-run the {table} job afterwards.",
    "Nothing suspicious in the {noun} settings of {svc}; they match the runbook.",
    "The {metric} of {svc2} went up by {pct} % right after the deploy at {clock}.",
    "Ticket {ticket} is still open and assigned to {person}.",
    "I could not confirm the {noun} of {svc} from the logs alone.",
    "{svc} restarted {small} times on {host} since {clock}, each time after an OOM kill.",
    "The {table} job depends on {svc2}, so its delay explains the missing rows.",
    "According to the runbook the {noun} of {svc} must not be changed without {person}.",
    "Consumer lag on the {svc} group is back to {num} messages.",
    "The query on {table} scanned {num} MB and took {small}.{small} s.",
    "I compared {svc} and {svc2}: only {svc2} shows the {metric} spike.",
    "Let's keep an eye on the {metric} of {svc} for the next {small} hours.",
    "{aliased} was restarted by {person} at {clock}.",
    "The snapshots of {alias} look complete for {date}.",
    "{person} got paged twice for {alias} last night because of the {metric}.",
    "The new code path in {alias} is still behind a toggle, so it is not the cause.",
    "{alias} publishes about {num} events per minute to its stream.",
    "The leader node for {alias} failed over at {clock} and came back healthy.",
    "The outage case for {alias} was closed by {person} on {date}.",
    "The DB behind {alias} has {small} replicas in the same cloud zone.",
)
SMALL_RESULTS = (
    (
        "{num} rows\nid | status | updated_at\n{num2} | ok | {date} {clock}\n{num3} | failed | "
        "{date} {clock}"
    ),
    (
        '{{"service": "{svc}", "metric": "{metric}", "window": "{small}h", "p50": {num}, '
        '"p99": {num2}}}'
    ),
    "{svc}: {small} pods running on {host}, last deploy {date} by {person}, {small} warnings",
    (
        "Runbook {svc}: step 1 check the {noun}; step 2 restart {svc} on {host}; step 3 "
        "escalate to {person}."
    ),
    "{small} alerts open for {svc}: {metric} high ({num}), {metric2} high ({num2})",
    "Ticket {ticket}: '{svc} {problem}', status in progress, assignee {person}",
)
FAILURES = (
    "Error: {tool} timed out after {small}0 s (host {host} unreachable)",
    "Error: permission denied for table {table}",
    "Error: 503 Service Unavailable from the {svc} metrics endpoint",
    "Error: connection reset by peer while reading from {host}",
    "Error: query cancelled, statement timeout ({num} ms) exceeded on {table}",
)
LOG_LINES = (
    "{ts} {level} {svc} [{host}] req-{num} latency_ms={num2} status={code}",
    "{ts} {level} {svc} [{host}] {metric} above threshold: {num}",
    "{ts} {level} {svc} [{host}] retrying call to {svc2} (attempt {small}/10)",
    "{ts} {level} {svc} [{host}] wrote {num} rows to {table}",
    "{ts} {level} {svc} [{host}] connection pool {small}/64 busy",
    "{ts} {level} {svc} [{host}] {event} in {num} ms",
    '{{"ts": "{ts}", "service": "{svc}", "host": "{host}", "event": "{event}", "rows": {num}}}',
    '{{"ts": "{ts}", "service": "{svc}", "setting": "{setting}", "value": "{small}"}}',
)
#: Dump lines that name a fact's noun without a value (look-alikes of buried facts).
NOUN_LOG_LINES = (
    "{ts} {level} {svc} [{host}] config check: {noun} unchanged",
    '{{"ts": "{ts}", "service": "{svc}", "setting": "{noun}", "status": "unchanged"}}',
)
NOUN_LOG_RATE = 0.05
AI_OPENERS = ("", "", "Let me check.", "Checking the logs.", "I'll look that up.", "One moment.")


def _fields(template: str) -> tuple[str, ...]:
    return tuple(name for _, name, _, _ in string.Formatter().parse(template) if name)


class _Filler:
    """Fills templates with random background values (fast: fields parsed once)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._fields: dict[str, tuple[str, ...]] = {}
        r = rng
        self.makers: dict[str, Callable[[], str]] = {
            "svc": lambda: r.choice(SERVICE_NAMES),
            "svc2": lambda: r.choice(SERVICE_NAMES),
            "alias": lambda: r.choice(SERVICES)[1],
            "aliased": lambda: "{1} ({0})".format(*r.choice(SERVICES)).capitalize(),
            "person": lambda: r.choice(PEOPLE),
            "table": lambda: r.choice(TABLES),
            "metric": lambda: r.choice(METRICS),
            "metric2": lambda: r.choice(METRICS),
            "problem": lambda: r.choice(PROBLEMS),
            "noun": lambda: r.choice(NOUNS),
            "host": lambda: f"{r.choice(HOST_ROLES)}-{r.choice(HOST_ENVS)}-{r.randint(1, 40):02d}",
            "ticket": lambda: f"{r.choice(('OPS', 'DATA', 'SRE'))}-{r.randint(100, 9999)}",
            "num": lambda: str(r.randint(2, 9999)),
            "num2": lambda: str(r.randint(2, 9999)),
            "num3": lambda: str(r.randint(2, 9999)),
            "small": lambda: str(r.randint(2, 9)),
            "pct": lambda: str(r.randint(3, 95)),
            "cmp": lambda: r.choice(("higher", "lower", "slightly higher", "about the same")),
            "clock": lambda: f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}",
            "date": lambda: f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
            "ts": lambda: f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}",
            "level": lambda: r.choice(LEVELS),
            "code": lambda: r.choice(("200", "200", "200", "500", "503", "429")),
            "event": lambda: r.choice(EVENTS),
            "setting": lambda: r.choice(SETTINGS),
            "tool": lambda: r.choice(TOOLS),
        }

    def fill(self, template: str, **fixed: str) -> str:
        names = self._fields.get(template)
        if names is None:
            names = self._fields[template] = _fields(template)
        makers = self.makers
        values = {n: fixed[n] if n in fixed else makers[n]() for n in names}
        return template.format(**values)

    def pick(self, templates: Sequence[str], **fixed: str) -> str:
        return self.fill(self.rng.choice(templates), **fixed)


# ------------------------------------------------------------------------- the session


@dataclass(frozen=True, slots=True)
class Fact:
    """One planted fact.

    Attributes:
        id: ``f00``, ``f01``, ...
        kind: ``plain`` | ``corrected`` | ``decoy`` | ``buried``.
        depth: ``early`` | ``middle`` | ``late`` | ``recent`` (of the current value).
        subject: What the fact is about, e.g. ``production database port of payments-api``.
        noun: The attribute's noun (``database port``).
        service: The service it belongs to (``payments-api``).
        value: The current value (the one a prompt must contain).
        old_value: The superseded value of a ``corrected`` fact, else None.
        decoys: Look-alike values of other subjects (``decoy`` facts), else empty.
        interaction: The interaction that states the current value.
        old_interaction: The interaction that states the old value (``corrected``).
        message_id: The id of the message holding the current value.
        queries: ``{"own": ..., "paraphrased": ...}``.
    """

    id: str
    kind: str
    depth: str
    subject: str
    noun: str
    service: str
    value: str
    old_value: str | None
    decoys: tuple[str, ...]
    interaction: int
    old_interaction: int | None
    message_id: str
    queries: dict[str, str]

    @property
    def values(self) -> tuple[str, ...]:
        """Every value planted for this fact (current, old, decoys)."""
        old = () if self.old_value is None else (self.old_value,)
        return (self.value, *old, *self.decoys)


@dataclass(frozen=True, slots=True)
class Query:
    """One question about a fact, asked as the final HumanMessage of the history."""

    fact: Fact
    wording: str  # "own" | "paraphrased"
    text: str
    id: str


@dataclass(slots=True)
class Session:
    """A generated session: its messages (oldest first), facts and queries."""

    n: int
    seed: int
    messages: list[BaseMessage]
    facts: list[Fact]
    queries: list[Query] = field(default_factory=list)

    def history_for(self, query: Query) -> list[BaseMessage]:
        """The history of the call that asks ``query``: the session + the query message."""
        return [*self.messages, HumanMessage(query.text, id=query.id)]

    def verify(self) -> None:
        """Check the planted values (raises ``AssertionError`` naming the first problem).

        Every planted value occurs exactly once in the whole session text (content and
        tool-call arguments), in the message the fact names; a corrected fact's new
        value comes later than its old one; decoys differ from the value.
        """
        texts = [message_text(m) for m in self.messages]
        index = {m.id: i for i, m in enumerate(self.messages)}
        whole = "\n".join(texts)
        for fact in self.facts:
            for value in fact.values:
                found = whole.count(value)
                if found != 1:
                    raise AssertionError(f"{fact.id}: value {value!r} occurs {found} times")
            position = index[fact.message_id]
            if fact.value not in texts[position]:
                raise AssertionError(f"{fact.id}: value not in message {fact.message_id}")
            if fact.kind == "corrected":
                assert fact.old_value is not None
                old_at = next(i for i, t in enumerate(texts) if fact.old_value in t)
                if not old_at < position:
                    raise AssertionError(f"{fact.id}: the correction comes before the old value")
            if fact.value in fact.decoys:
                raise AssertionError(f"{fact.id}: a decoy equals the value")


def message_text(message: BaseMessage) -> str:
    """The text a prompt check looks at: content plus tool-call arguments (JSON)."""
    content = message.content
    if isinstance(content, str):
        text = content
    else:
        text = "\n".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content)
    calls = message.__dict__.get("tool_calls")
    if calls:
        text += "\n" + "\n".join(
            f"{c['name']} {json.dumps(c['args'], ensure_ascii=False)}" for c in calls
        )
    return text


def depth_range(depth: str, n: int) -> tuple[int, int]:
    """Interactions ``[lo, hi)`` where a fact of ``depth`` is stated, in a session of ``n``."""
    last = n - RECENT  # first "recent" interaction
    if depth == "recent":
        return last, n
    bounds = {"early": (0.0, 0.25), "middle": (0.375, 0.625), "late": (0.75, 1.0)}[depth]
    lo = int(n * bounds[0])
    hi = min(int(n * bounds[1]), last)
    return lo, max(hi, lo + 1)


@dataclass(slots=True)
class _Insert:
    slot: str  # "human" | "ai" | "dump"
    text: str
    fact: int
    current: bool  # holds the fact's current value


class _Values:
    """Unique values: a new value is neither a substring nor a superstring of an old one."""

    def __init__(self) -> None:
        self.used: list[str] = []

    def new(self, make: Callable[[], str]) -> str:
        for _ in range(1000):
            value = make()
            if not any(value in u or u in value for u in self.used):
                self.used.append(value)
                return value
        raise RuntimeError("could not draw a unique value")  # pragma: no cover


def _plan_facts(
    rng: random.Random, n: int, per_cell: int
) -> tuple[list[Fact], dict[int, list[_Insert]]]:
    """Choose subjects, values and places of every fact; the texts to insert per interaction."""
    subjects = [(a, s) for a in range(len(ATTRIBUTES)) for s in range(len(SERVICES))]
    rng.shuffle(subjects)
    values = _Values()
    filler = _Filler(rng)
    inserts: dict[int, list[_Insert]] = {}
    taken: set[int] = set()
    plans: list[Fact] = []

    def place(lo: int, hi: int) -> int:
        hi = max(min(hi, n), lo + 1)
        for _ in range(30):
            i = rng.randrange(lo, hi)
            if i not in taken:
                taken.add(i)
                return i
        return rng.randrange(lo, hi)  # a small session: share an interaction

    def add(i: int, insert: _Insert) -> None:
        inserts.setdefault(i, []).append(insert)

    cells = [
        (kind, depth)
        for depth in DEPTHS
        for kind in KINDS
        for _ in range(RECENT_PER_KIND if depth == "recent" else per_cell)
    ]
    for number, (kind, depth) in enumerate(cells):
        attr_i, svc_i = subjects[number % len(subjects)]
        attr = ATTRIBUTES[attr_i]
        svc, alias = SERVICES[svc_i]
        value = values.new(lambda attr=attr, svc=svc: attr.value(rng, svc))
        lo, hi = depth_range(depth, n)
        at = place(max(lo, 1) if kind == "corrected" else lo, hi)
        env = "production " if kind == "decoy" else ""
        where = " in prod" if kind == "decoy" else ""
        plan = Fact(
            id=f"f{number:02d}",
            kind=kind,
            depth=depth,
            subject=f"{env}{attr.noun} of {svc}",
            noun=attr.noun,
            service=svc,
            value=value,
            old_value=None,
            decoys=(),
            interaction=at,
            old_interaction=None,
            message_id="",  # set once the messages exist
            queries={
                "own": f"What is the {env}{attr.noun} of {svc}?",
                "paraphrased": attr.paraphrase.format(alias=alias, where=where),
            },
        )
        fixed = {"noun": attr.noun, "svc": svc, "value": value}
        slot = rng.choice(("human", "ai"))
        if kind == "plain":
            add(at, _Insert(slot, filler.pick(PLAIN_TEMPLATES, env="", **fixed), number, True))
        elif kind == "corrected":
            old = values.new(lambda attr=attr, svc=svc: attr.value(rng, svc))
            old_at = place(0, at)
            plan = dataclasses.replace(plan, old_value=old, old_interaction=old_at)
            first = filler.pick(PLAIN_TEMPLATES, env="", noun=attr.noun, svc=svc, value=old)
            add(old_at, _Insert(rng.choice(("human", "ai")), first, number, False))
            add(at, _Insert(slot, filler.pick(CORRECTION_TEMPLATES, **fixed), number, True))
        elif kind == "decoy":
            staging = values.new(lambda attr=attr, svc=svc: attr.value(rng, svc))
            dev = values.new(lambda attr=attr, svc=svc: attr.value(rng, svc))
            plan = dataclasses.replace(plan, decoys=(staging, dev))
            add(
                at,
                _Insert(slot, filler.pick(DECOY_TEMPLATES, decoy=staging, **fixed), number, True),
            )
            near = min(max(at + rng.choice((-3, -2, -1, 1, 2)), 0), n - 1)
            if near == at:
                near = at - 1 if at > 0 else at + 1
            neighbour = filler.pick(DECOY_NEIGHBOUR, noun=attr.noun, svc=svc, decoy=dev)
            add(near, _Insert(rng.choice(("human", "ai")), neighbour, number, False))
        else:  # buried
            line = filler.pick(BURIED_TEMPLATES, **fixed)
            add(at, _Insert("dump", line, number, True))
        plans.append(plan)
    return plans, inserts


def _insert_sentence(rng: random.Random, text: str, sentence: str) -> str:
    """``sentence`` put between the sentences of ``text`` (at a random boundary)."""
    parts = text.split(". ")
    k = rng.randint(0, len(parts))
    if k == len(parts):
        return f"{text} {sentence}"
    if k == 0:
        return f"{sentence} {text}"
    return ". ".join(parts[:k]) + ". " + sentence + " " + ". ".join(parts[k:])


def _dump(filler: _Filler, rng: random.Random, svc: str, buried: list[str]) -> str:
    lines = [
        filler.pick(
            NOUN_LOG_LINES if rng.random() < NOUN_LOG_RATE else LOG_LINES,
            svc=svc if rng.random() < 0.7 else rng.choice(SERVICE_NAMES),
        )
        for _ in range(rng.randint(*DUMP_LINES))
    ]
    for line in buried:
        lines.insert(rng.randint(1, len(lines) - 1), line)
    return "\n".join(lines)


def make_session(n: int, *, seed: int = 0, per_cell: int = 3) -> Session:
    """A session of ``n`` interactions with ``per_cell`` facts per (kind, depth) cell.

    16 cells (4 kinds x 4 depths); the ``recent`` cells hold `RECENT_PER_KIND` fact each
    (more would make the last 5 interactions unrealistically dense: every buried fact
    brings a 40-110 line dump). ``per_cell=3`` plants 40 facts, 80 queries.
    Same ``(n, seed, per_cell)``, same session (messages, ids, facts, queries).

    Raises:
        ValueError: ``n`` is smaller than 20 or ``per_cell`` smaller than 1.
    """
    if n < 20:
        raise ValueError(f"n must be >= 20 interactions, got {n}")
    if per_cell < 1:
        raise ValueError(f"per_cell must be >= 1, got {per_cell}")
    rng = random.Random(f"needles-{seed}-{n}-{per_cell}")
    plans, inserts = _plan_facts(rng, n, per_cell)
    filler = _Filler(rng)
    messages: list[BaseMessage] = []
    holder: dict[int, str] = {}  # fact number -> id of the message with its current value
    prefix = f"s{seed}n{n}"
    # buried facts force a dump: the other interactions get fewer, so ~8 % of all have one
    forced = sum(any(x.slot == "dump" for x in todo) for todo in inserts.values())
    dump_rate = max(0.0, (DUMP_RATE * n - forced) / (n - forced))
    for i in range(n):
        todo = inserts.get(i, ())
        by_slot: dict[str, list[_Insert]] = {"human": [], "ai": [], "dump": []}
        for insert in todo:
            by_slot[insert.slot].append(insert)
        has_dump = bool(by_slot["dump"]) or rng.random() < dump_rate
        chitchat = not todo and not has_dump and rng.random() < CHITCHAT_RATE
        uses_tools = has_dump or (not chitchat and rng.random() < TOOL_RATE)

        human_text = rng.choice(CHITCHAT_USER) if chitchat else filler.pick(HUMAN_TEMPLATES)
        for insert in by_slot["human"]:
            human_text = _insert_sentence(rng, human_text, insert.text)
        human_id = f"{prefix}-{i}-u"
        messages.append(HumanMessage(human_text, id=human_id))
        for insert in by_slot["human"]:
            if insert.current:
                holder[insert.fact] = human_id

        if uses_tools:
            parallel = 2 if rng.random() < PARALLEL_RATE else 1
            dump_at = rng.randrange(parallel) if has_dump else -1
            calls = []
            results: list[ToolMessage] = []
            for k in range(parallel):
                call_id = f"{prefix}-{i}-call{k}"
                svc = rng.choice(SERVICE_NAMES)
                if k == dump_at:
                    name = rng.choice(DUMP_TOOLS)
                    args: dict[str, object] = {"service": svc, "since": f"{rng.randint(1, 48)}h"}
                    text = _dump(filler, rng, svc, [x.text for x in by_slot["dump"]])
                    status = "success"
                    tool_id = f"{prefix}-{i}-t{k}"
                    for insert in by_slot["dump"]:
                        holder[insert.fact] = tool_id
                else:
                    name = rng.choice(TOOLS)
                    args = {"service": svc, "question": filler.pick(HUMAN_TEMPLATES, svc=svc)}
                    if rng.random() < FAILED_TOOL_RATE:
                        text = filler.pick(FAILURES, tool=name)
                        status = "error"
                    else:
                        text = filler.pick(SMALL_RESULTS, svc=svc)
                        status = "success"
                calls.append({"name": name, "args": args, "id": call_id})
                results.append(
                    ToolMessage(
                        text,
                        tool_call_id=call_id,
                        name=name,
                        status=status,
                        id=f"{prefix}-{i}-t{k}",
                    )
                )
            messages.append(
                AIMessage(rng.choice(AI_OPENERS), tool_calls=calls, id=f"{prefix}-{i}-c")
            )
            messages.extend(results)

        if chitchat:
            ai_text = rng.choice(CHITCHAT_AI)
        else:
            ai_text = " ".join(filler.pick(AI_SENTENCES) for _ in range(rng.randint(1, 3)))
        for insert in by_slot["ai"]:
            ai_text = _insert_sentence(rng, ai_text, insert.text)
        ai_id = f"{prefix}-{i}-a"
        messages.append(AIMessage(ai_text, id=ai_id))
        for insert in by_slot["ai"]:
            if insert.current:
                holder[insert.fact] = ai_id

    facts = [dataclasses.replace(p, message_id=holder[k]) for k, p in enumerate(plans)]
    queries = [
        Query(fact=f, wording=w, text=f.queries[w], id=f"{prefix}-q-{f.id}-{w}")
        for f in facts
        for w in WORDINGS
    ]
    return Session(n=n, seed=seed, messages=messages, facts=facts, queries=queries)
