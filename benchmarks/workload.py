"""Seeded synthetic chat histories for the benchmarks (the same input for every contender).

A history of ``n`` messages: Human and AI turns alternate; about 1 AI turn in 6 is a
tool call followed by its ToolMessage; text mixes English, Chinese and code; each
message holds roughly 20-400 tokens. Every message's text is distinct, so no contender
profits from repeated content. Same seed, same history, on any machine.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage


def _words(text: str) -> list[str]:
    return text.split()


ENGLISH = _words(
    "the pipeline reads each record from the warehouse and checks its schema before the "
    "transform step writes partitioned output to the lake while the scheduler retries "
    "failed tasks with exponential backoff and reports metrics to the dashboard so that "
    "analysts can see freshness latency and row counts for every table in the catalog"
)
CHINESE = _words(
    "数据 管道 读取 每条 记录 检查 模式 转换 写入 分区 输出 调度器 重试 失败 任务 指标 "
    "仪表盘 分析师 新鲜度 延迟 行数 表格 目录 血缘 质量 规则 告警 同步 增量 全量"
)
CODE = [
    "def run(task):",
    "    return task.execute()",
    "SELECT id, name FROM users WHERE active = 1;",
    "for row in rows: total += row['amount']",
    "if not ok: raise RuntimeError('retry')",
    "df = spark.read.parquet(path)",
    "x = {k: v for k, v in items}",
    "await client.post(url, json=payload)",
]
TOOLS = ("sql_query", "search_docs", "get_lineage", "run_job")


def _text(rng: random.Random, target_tokens: int, serial: int) -> str:
    """About ``target_tokens`` tokens of mixed English / Chinese / code (unique by ``serial``)."""
    parts = [f"#{serial}"]
    tokens = 4
    while tokens < target_tokens:
        kind = rng.random()
        if kind < 0.55:
            words = rng.choices(ENGLISH, k=rng.randint(4, 12))
            parts.append(" ".join(words) + ".")
            tokens += len(words) + 1
        elif kind < 0.8:
            words = rng.choices(CHINESE, k=rng.randint(3, 8))
            parts.append("".join(words) + "。")
            tokens += 3 * len(words) + 1
        else:
            lines = rng.choices(CODE, k=rng.randint(1, 3))
            parts.append("\n" + "\n".join(lines) + "\n")
            tokens += 11 * len(lines)
    return " ".join(parts)


def iter_messages(n: int, *, seed: int = 0, start: int = 0) -> Iterator[BaseMessage]:
    """Yield ``n`` messages of the workload (see the module docstring)."""
    rng = random.Random(seed * 1_000_003 + start)
    serial = start
    produced = 0
    human_turn = True
    while produced < n:
        serial += 1
        size = rng.randint(20, 400)
        if human_turn:
            yield HumanMessage(_text(rng, size, serial))
            produced += 1
        elif rng.random() < 1 / 6 and produced + 2 <= n:
            call_id = f"call_{seed}_{serial}"
            args = {"query": _text(rng, rng.randint(5, 30), serial), "limit": rng.randint(1, 50)}
            yield AIMessage(
                "", tool_calls=[{"name": rng.choice(TOOLS), "args": args, "id": call_id}]
            )
            yield ToolMessage(_text(rng, size, serial), tool_call_id=call_id)
            produced += 2
        else:
            yield AIMessage(_text(rng, size, serial))
            produced += 1
        human_turn = not human_turn


def make_history(n: int, *, seed: int = 0) -> list[BaseMessage]:
    """The benchmark history of ``n`` messages (starts on a HumanMessage, structurally valid)."""
    return list(iter_messages(n, seed=seed))


def make_next_turn(history_len: int, *, seed: int = 0, turn: int = 0) -> list[BaseMessage]:
    """Two new messages (Human, AI) that continue a history; distinct for every ``turn``."""
    rng = random.Random(f"{seed}-{history_len}-{turn}")
    serial = 10_000_000 + history_len * 1_000 + turn * 2
    return [
        HumanMessage(_text(rng, rng.randint(20, 400), serial)),
        AIMessage(_text(rng, rng.randint(20, 400), serial + 1)),
    ]
