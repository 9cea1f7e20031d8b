"""A Chinese evaluation set of our own making: a data-platform team's long chat session.

    .venv/bin/python benchmarks/zh_session.py --policy policies/long-session.yaml --tokens 4000

`load_zh_session` builds a deterministic session of about 2,000 messages (a seeded
generator, nothing read from outside): user and assistant turns about tables, jobs,
dashboards and on-call chores, some SQL / shell tool calls with their outputs, and
filler chatter that keeps naming the same subjects. Fourteen facts are planted in it
(two inside tool outputs); six are corrected later in the session, and the newest value
is the right one. Every fact is asked twice: once in the fact's own words
(``own-words``) and once paraphrased (``paraphrased``: other words, same meaning).

Scoring (`value_kept`): a question counts when its current value occurs in the text of
the composed prompt (contents and tool-call arguments).

The CLI composes, for every question asked as the last HumanMessage after the whole
session, the prompt of two methods within ``--tokens`` cl100k_base tokens, and prints the
share of questions whose current value is in it:

- ``long-session``: the policy file given (its window set so that exactly ``--tokens``
  are available), composed with `PolicyEngine.compose` as a user would, one engine
  (warm index) for all questions;
- ``bm25-turns``: a plain reference, rank-bm25 ``BM25Okapi`` over whole messages cut
  into words by rjieba (lower-cased, tokens without a letter or digit dropped), the
  best-scoring messages packed best first after the system prompt and the question,
  shown in session order.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from windows import budget_variant

ROOT = Path(__file__).resolve().parents[1]
SEED = 20240618
#: Messages the session reaches (it stops at the end of the interaction that passes it).
MESSAGES = 2000
SYSTEM_PROMPT = "你是数据平台团队的值班助手，回答要简洁准确。"

Kind = Literal["own-words", "paraphrased"]


@dataclass(frozen=True, slots=True)
class Fact:
    """One planted fact: where it is stated, its value, and its correction (if any)."""

    id: str
    statement: str  # the sentence that states it, with {value}
    value: str  # the first value stated
    own_words: str  # the question in the statement's words
    paraphrased: str  # the question in other words
    correction: str | None = None  # the later sentence that corrects it, with {value}
    corrected: str | None = None  # the value after the correction
    tool: str | None = None  # stated inside this tool's output instead of a chat turn
    ask: str = ""  # what the user asks that makes the tool print it


@dataclass(frozen=True, slots=True)
class Question:
    """One question of the set.

    Attributes:
        id: Stable id (``<fact id>/<kind>``), also the id of its HumanMessage.
        fact: The fact's id.
        text: The question as the user asks it.
        value: The current value (the corrected one for a corrected fact).
        stale: The superseded value of a corrected fact, else None.
        kind: ``own-words`` or ``paraphrased``.
    """

    id: str
    fact: str
    text: str
    value: str
    stale: str | None
    kind: Kind


FACTS: tuple[Fact, ...] = (
    Fact(
        "owner",
        "用户画像表 ads.user_profile 的负责人是{value}，有数据问题直接找他。",
        "王磊",
        "用户画像表 ads.user_profile 的负责人是谁？",
        "客户标签那张宽表出了问题应该找哪位同事？",
        "更正一下：用户画像表 ads.user_profile 的负责人换成{value}了，原来的同事调去做实时数仓。",
        "李娜",
    ),
    Fact(
        "schedule",
        "数仓每日调度的开始时间定在凌晨{value}，避开业务高峰。",
        "三点半",
        "数仓每日调度的开始时间是几点？",
        "每天的批处理作业几点启动？",
        "数仓每日调度的开始时间从明天起改到凌晨{value}，上游同步太慢了。",
        "四点一刻",
    ),
    Fact(
        "backfill",
        "dwd.orders_daily 的回刷起始分区是 dt={value}，之前的数据不用动。",
        "2024-05-27",
        "dwd.orders_daily 的回刷起始分区是哪个？",
        "订单日表补数据要从哪一天补起？",
    ),
    Fact(
        "retention",
        "Kafka 主题 ods_clickstream 的保留时间设置为 {value}。",
        "96 小时",
        "Kafka 主题 ods_clickstream 的保留时间设置为多少？",
        "点击流那个 topic 里的消息能留多久？",
    ),
    Fact(
        "memory",
        "夜间 ETL 作业 etl_nightly 的 executor 内存调成了 {value}。",
        "12g",
        "夜间 ETL 作业 etl_nightly 的 executor 内存是多少？",
        "晚上跑批的 Spark 任务每个执行器分配多大内存？",
        "etl_nightly 还是 OOM，executor 内存再加到 {value}。",
        "20g",
    ),
    Fact(
        "alerts",
        "数据质量告警统一发到飞书群「{value}」。",
        "数仓值班七组",
        "数据质量告警统一发到哪个飞书群？",
        "数据校验失败的通知会推送到哪里？",
    ),
    Fact(
        "metastore",
        "hive.metastore.uris = thrift://{value}",
        "10.24.8.17:9083",
        "hive.metastore.uris 配置的是什么地址？",
        "元数据服务连的是哪个 IP 和端口？",
        "Hive 元数据库迁移完成，hive.metastore.uris 现在是 thrift://{value}。",
        "10.31.2.45:9083",
        tool="run_shell",
        ask="看一下 Hive 客户端的配置文件。",
    ),
    Fact(
        "ods_days",
        "ods 层原始日志保留 {value}，之后自动清理。",
        "400 天",
        "ods 层原始日志保留多少天？",
        "最底层的原始埋点数据多久会被删掉？",
    ),
    Fact(
        "refresh",
        "GMV 看板的刷新频率是每 {value}一次。",
        "15 分钟",
        "GMV 看板的刷新频率是多少？",
        "成交额大屏多久更新一次数字？",
        "老板要求更实时，GMV 看板的刷新频率改成每 {value}一次。",
        "10 分钟",
    ),
    Fact(
        "store_key",
        "dim_store 维表的主键是 {value}，不要用门店编码做关联。",
        "store_sk",
        "dim_store 维表的主键是哪个字段？",
        "门店维度表靠哪一列唯一确定一行记录？",
    ),
    Fact(
        "launch",
        "新版推荐特征管道计划在 {value}上线。",
        "7 月 18 日",
        "新版推荐特征管道计划哪天上线？",
        "推荐系统的新特征流水线什么时候发布？",
        "新版推荐特征管道延期了，上线时间改为 {value}。",
        "7 月 29 日",
    ),
    Fact(
        "checkpoint",
        "execution.checkpointing.interval: {value}",
        "45s",
        "flink_order_sink 的 execution.checkpointing.interval 是多少？",
        "订单实时写入任务多久做一次状态快照？",
        tool="run_shell",
        ask="查一下 flink_order_sink 的配置。",
    ),
    Fact(
        "account",
        "BI 报表连接数据库用的是只读账号 {value}。",
        "bi_reader_ro",
        "BI 报表连接数据库用的是哪个账号？",
        "做报表的同学查库用什么用户名？",
    ),
    Fact(
        "cost",
        "上个月数据平台的云资源费用是 {value}元。",
        "38.6 万",
        "上个月数据平台的云资源费用是多少？",
        "我们上月在云上一共花了多少钱？",
    ),
)

PEOPLE = ("小陈", "小周", "阿杰", "老赵", "小吴", "Mia", "Kevin", "小孙")
TABLES = (
    "ads.user_profile",
    "dwd.orders_daily",
    "dim_store",
    "dws.trade_summary",
    "ods_clickstream",
    "dwd.refund_detail",
    "ads.gmv_dashboard",
    "dim_sku",
)
JOBS = ("etl_nightly", "flink_order_sink", "sync_mysql_orders", "dq_check_daily", "export_bi")
SUBJECTS = (
    "用户画像表",
    "数仓每日调度",
    "回刷",
    "Kafka 主题",
    "夜间 ETL 作业",
    "数据质量告警",
    "Hive 元数据",
    "ods 层原始日志",
    "GMV 看板",
    "dim_store 维表",
    "推荐特征管道",
    "checkpoint",
    "BI 报表",
    "云资源费用",
)
USER_CHAT = (
    "{who}问{subject}今天是不是有点慢，你帮忙看下？",
    "{table} 昨天的数据量比前天少了一些，正常吗？",
    "早上好，今天有什么需要注意的吗？",
    "{job} 跑完了吗？下游在等。",
    "我下午要开会，{subject}的事情先放一放。",
    "{who}说{table} 有重复数据，能确认一下吗？",
    "周报里{subject}这一块帮我写两句。",
    "谢谢，辛苦了！",
    "{subject}的文档在哪里？我找不到了。",
    "今天值班是谁？{job} 刚才报了一个警告。",
    "明天要做一次演练，{subject}相关的同学都要参加。",
    "好的，我知道了。",
    "{table} 的字段注释能补一下吗？",
    "这个需求排到下周吧，{who}那边还没确认口径。",
)
ASSISTANT_CHAT = (
    "收到，我看了一下{subject}，目前没有异常。",
    "{table} 的数据量波动在正常范围内，和上周同期差不多。",
    "好的，{job} 已经在跑了，预计半小时内完成。",
    "我已经把{subject}的情况同步给{who}了。",
    "{table} 没有发现重复主键，可能是下游去重逻辑的问题。",
    "周报这部分我整理好了，主要是{subject}的稳定性改进。",
    "不客气，有问题随时找我。",
    "文档在团队空间的「数据平台/{subject}」目录下。",
    "今天值班的是{who}，{job} 的警告是重试后恢复的，不影响结果。",
    "好的，演练的通知我发到群里了。",
    "明白。",
    "{table} 的字段注释我补了一部分，剩下的等{who}确认。",
    "了解，需求先挂起，等口径确认后再排期。",
)
TOOL_ASKS = (
    ("run_sql", "帮我查一下 {table} 最近几天的行数。"),
    ("run_shell", "看一下 {job} 最近一次运行的日志。"),
    ("run_sql", "{table} 有没有空值比较多的字段？"),
    ("run_shell", "查一下 {job} 的配置。"),
)


def _fill(rng: random.Random, template: str) -> str:
    return template.format(
        who=rng.choice(PEOPLE),
        subject=rng.choice(SUBJECTS),
        table=rng.choice(TABLES),
        job=rng.choice(JOBS),
    )


def _tool_output(rng: random.Random, tool: str, ask: str, planted: str | None) -> str:
    """A SQL result or a log / config dump (of the job the ask names); ``planted`` goes
    into its middle."""
    job = next((j for j in JOBS if j in ask), rng.choice(JOBS))
    if tool == "run_sql":
        lines = ["dt         | 行数     | 空值率"]
        day = rng.randrange(1, 20)
        lines += [
            f"2024-06-{day + i:02d} | {rng.randrange(100_000, 2_000_000):>8} | "
            f"{rng.randrange(0, 60) / 10:.1f}%"
            for i in range(rng.randrange(4, 9))
        ]
    elif "配置" in ask:
        lines = [
            "$ cat /etc/hive/conf/hive-client.properties"
            if "Hive" in ask
            else f"$ cat conf/{job}.properties",
            f"job.name = {job}",
            f"parallelism.default: {rng.randrange(2, 33)}",
            f"taskmanager.numberOfTaskSlots: {rng.randrange(1, 9)}",
            f"state.backend: {rng.choice(('rocksdb', 'hashmap'))}",
            f"restart-strategy.fixed-delay.attempts: {rng.randrange(2, 11)}",
            f"yarn.application.queue: root.{rng.choice(('etl', 'bi', 'rt'))}",
        ]
    else:
        lines = [f"$ tail -n 8 logs/{job}.log"]
        lines += [
            f"2024-06-{rng.randrange(1, 29):02d} {rng.randrange(0, 24):02d}:"
            f"{rng.randrange(0, 60):02d}:{rng.randrange(0, 60):02d} "
            + rng.choice(
                (
                    "INFO 任务开始执行",
                    "INFO 读取上游分区完成",
                    "WARN 重试第 1 次：连接超时",
                    "INFO 写入目标表完成",
                    "INFO 任务执行成功",
                    "INFO 提交 YARN 应用",
                )
            )
            for _ in range(rng.randrange(5, 9))
        ]
    if planted is not None:
        lines.insert(len(lines) // 2 + 1, planted)
    return "\n".join(lines)


def _plan(rng: random.Random, interactions: int) -> dict[int, tuple[Fact, str]]:
    """``{interaction: (fact, value)}``: each fact stated early or mid-session, its
    correction (if any) at least 150 interactions later."""
    free = list(range(5, interactions - 40))
    rng.shuffle(free)
    planned: dict[int, tuple[Fact, str]] = {}
    for fact in FACTS:
        first = next(i for i in free if i not in planned and i < interactions * 0.6)
        planned[first] = (fact, fact.value)
        free.remove(first)
        if fact.corrected is not None:
            later = next(i for i in free if i not in planned and i > first + 150)
            planned[later] = (fact, fact.corrected)
            free.remove(later)
    return planned


def load_zh_session(
    *, seed: int = SEED, messages: int = MESSAGES
) -> tuple[list[BaseMessage], list[Question]]:
    """The session (about ``messages`` messages, stable ids) and its questions (two per
    fact, own words then paraphrased, in `FACTS` order). Deterministic for a seed."""
    rng = random.Random(seed)
    interactions = messages * 10 // 27  # ~2.7 messages per interaction
    planned = _plan(rng, interactions)
    out: list[BaseMessage] = []
    i = 0
    while len(out) < messages:
        fact, value = planned.get(i, (None, ""))
        sentence = None
        if fact is not None:
            template = fact.statement if value == fact.value else str(fact.correction)
            sentence = template.format(value=value)
        if fact is not None and fact.tool is not None and value == fact.value:
            _tool_turn(rng, out, i, fact.tool, ask=fact.ask, planted=sentence)
        elif rng.random() < 0.3:
            tool, ask = rng.choice(TOOL_ASKS)
            _tool_turn(rng, out, i, tool, ask=_fill(rng, ask))
            if sentence is not None:
                out.append(AIMessage(sentence, id=f"i{i}-note"))
        else:
            asks = _fill(rng, rng.choice(USER_CHAT))
            reply = _fill(rng, rng.choice(ASSISTANT_CHAT))
            if sentence is not None:  # a fact is told by the user or by the assistant
                if rng.random() < 0.5:
                    asks = f"{asks} 另外，{sentence}"
                else:
                    lead = "" if sentence.startswith("更正") else "补充一点："
                    reply = f"{reply} {lead}{sentence}"
            out += [HumanMessage(asks, id=f"i{i}-user"), AIMessage(reply, id=f"i{i}-reply")]
        i += 1
    _check(out)
    return out, _questions()


def _check(messages: Sequence[BaseMessage]) -> None:
    """Every value occurs only where it is stated (a filler line never holds one)."""
    whole = "\n".join(message_text(m) for m in messages)
    for fact in FACTS:
        for value in filter(None, (fact.value, fact.corrected)):
            if whole.count(value) != 1:
                raise AssertionError(f"{fact.id}: {value!r} occurs {whole.count(value)} times")


def _tool_turn(
    rng: random.Random,
    out: list[BaseMessage],
    i: int,
    tool: str,
    *,
    ask: str,
    planted: str | None = None,
) -> None:
    call_id = f"call-{i}"
    command = "SELECT ..." if tool == "run_sql" else "cat / tail"
    out.append(HumanMessage(ask, id=f"i{i}-user"))
    out.append(
        AIMessage(
            "",
            tool_calls=[{"name": tool, "args": {"command": command}, "id": call_id}],
            id=f"i{i}-call",
        )
    )
    body = _tool_output(rng, tool, ask, planted)
    out.append(ToolMessage(body, tool_call_id=call_id, name=tool, id=f"i{i}-tool"))
    out.append(AIMessage(_fill(rng, rng.choice(ASSISTANT_CHAT[:6])), id=f"i{i}-reply"))


def _questions() -> list[Question]:
    questions: list[Question] = []
    for fact in FACTS:
        value = fact.corrected or fact.value
        stale = fact.value if fact.corrected else None
        asked: tuple[tuple[Kind, str], ...] = (
            ("own-words", fact.own_words),
            ("paraphrased", fact.paraphrased),
        )
        for kind, text in asked:
            questions.append(Question(f"{fact.id}/{kind}", fact.id, text, value, stale, kind))
    return questions


def message_text(message: BaseMessage) -> str:
    """A message's text as a prompt check reads it: content plus tool-call arguments."""
    content = message.content
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        text += "\n" + "\n".join(
            f"{c['name']} {json.dumps(c['args'], ensure_ascii=False)}" for c in calls
        )
    return text


def prompt_text(messages: Sequence[BaseMessage]) -> str:
    """The text of a composed prompt: every message's `message_text`."""
    return "\n".join(message_text(m) for m in messages)


def value_kept(prompt_text: str, question: Question) -> bool:
    """Whether the question's current value is in the prompt's text."""
    return question.value in prompt_text


# ------------------------------------------------------------------------------ methods

_TOKEN = re.compile(r"\w", re.UNICODE)


def bm25_words(text: str) -> list[str]:
    """Words for the reference BM25: rjieba's cut of the lower-cased text, tokens that
    hold a letter or digit (independent of ctxpolicy's own segmentation)."""
    import rjieba

    return [w for w in (t.strip() for t in rjieba.cut(text.lower())) if _TOKEN.search(w)]


class BM25Turns:
    """rank-bm25 over whole messages, best first, packed within the budget."""

    HEADER = "此前会话中的相关消息（按时间顺序）："

    def __init__(self, messages: Sequence[BaseMessage], tokens: int) -> None:
        from rank_bm25 import BM25Okapi

        from ctxpolicy.tokens import get_tokenizer

        self.texts = [message_text(m) for m in messages]
        self.bm25 = BM25Okapi([bm25_words(t) or ["_"] for t in self.texts])
        self.tok = get_tokenizer("cl100k_base")
        self.tokens = tokens

    def compose(self, question: Question) -> list[BaseMessage]:
        system, asked = SystemMessage(SYSTEM_PROMPT), HumanMessage(question.text, id=question.id)
        scores = self.bm25.get_scores(bm25_words(question.text))
        order = sorted(range(len(scores)), key=lambda k: (-scores[k], k))
        left = self.tokens - self.tok.count_messages([system, SystemMessage(self.HEADER), asked])
        chosen: list[int] = []
        for k in order:
            if scores[k] <= 0 or left <= 0:
                break
            cost = self.tok.count(self.texts[k]) + 1
            if cost <= left:
                chosen.append(k)
                left -= cost
        chosen.sort()
        while True:
            body = "\n".join([self.HEADER, *(self.texts[k] for k in chosen)])
            prompt = [system, SystemMessage(body), asked] if chosen else [system, asked]
            if self.tok.count_messages(prompt) <= self.tokens or not chosen:
                return prompt
            chosen.pop()


class LongSession:
    """The policy as a user runs it: `PolicyEngine.compose` over the whole session."""

    def __init__(self, path: Path, messages: Sequence[BaseMessage], tokens: int) -> None:
        from ctxpolicy import PolicyEngine
        from ctxpolicy.loading import load_policy

        self.engine = PolicyEngine(budget_variant(load_policy(path), tokens))
        self.messages = list(messages)

    def compose(self, question: Question) -> list[BaseMessage]:
        history = [*self.messages, HumanMessage(question.text, id=question.id)]
        result = self.engine.compose(
            process="react", system_prompt=SYSTEM_PROMPT, state={"messages": history}
        )
        return list(result.messages)


def score(method: Any, questions: Sequence[Question], tokens: int) -> dict[str, Any]:
    """Shares of questions (by kind) whose current value the method's prompts keep."""
    from ctxpolicy.tokens import get_tokenizer

    tok = get_tokenizer("cl100k_base")
    kept: dict[str, list[bool]] = {"own-words": [], "paraphrased": []}
    stale_only = over = 0
    start = time.perf_counter()
    for question in questions:
        prompt = method.compose(question)
        text = prompt_text(prompt)
        kept[question.kind].append(value_kept(text, question))
        if question.stale and question.stale in text and not value_kept(text, question):
            stale_only += 1
        over += tok.count_messages(prompt) > tokens
    every = kept["own-words"] + kept["paraphrased"]
    return {
        "own-words": 100 * sum(kept["own-words"]) / len(kept["own-words"]),
        "paraphrased": 100 * sum(kept["paraphrased"]) / len(kept["paraphrased"]),
        "all": 100 * sum(every) / len(every),
        "stale-only": stale_only,
        "over budget": over,
        "ms per question": 1000 * (time.perf_counter() - start) / len(questions),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", type=Path, default=ROOT / "policies" / "long-session.yaml")
    parser.add_argument("--tokens", type=int, default=4000, help="tokens available per prompt")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--messages", type=int, default=MESSAGES)
    args = parser.parse_args(argv)
    if args.tokens < 500:
        parser.error(f"--tokens must be at least 500, got {args.tokens}")
    if not args.policy.is_file():
        parser.error(f"--policy {args.policy}: no such file")
    messages, questions = load_zh_session(seed=args.seed, messages=args.messages)
    corrected = sum(q.stale is not None for q in questions) // 2
    print(
        f"Chinese data-platform session: {len(messages)} messages, {len(FACTS)} facts "
        f"({corrected} corrected), {len(questions)} questions; {args.tokens} tokens per prompt"
    )
    rows = {
        "long-session": LongSession(args.policy, messages, args.tokens),
        "bm25-turns": BM25Turns(messages, args.tokens),
    }
    print(
        f"{'method':<14} {'own words':>10} {'paraphrased':>12} {'all':>7} {'stale-only':>11}"
        f" {'over budget':>12} {'ms/question':>12}"
    )
    for name, method in rows.items():
        r = score(method, questions, args.tokens)
        print(
            f"{name:<14} {r['own-words']:>9.1f}% {r['paraphrased']:>11.1f}% {r['all']:>6.1f}% "
            f"{r['stale-only']:>11} {r['over budget']:>12} {r['ms per question']:>12.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
