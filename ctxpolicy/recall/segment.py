"""Words of Chinese and mixed zh/en text, for recall's indexes and queries.

Full-text tokenizers split on spaces and punctuation, so a run of Han characters (a
whole Chinese clause) would be one token and a Chinese question would match nothing.
Here each Han run is cut into words with rjieba (jieba's dictionary and algorithm in
Rust; the dictionary ships inside its wheel, it writes no cache, prints nothing and
downloads nothing), in search mode: a long word also yields its dictionary sub-words
(``数据仓库`` -> ``数据 仓库 数据仓库``), so a question naming a part still finds it.
Everything else (Latin words, numbers, punctuation) is left exactly as it is: English
text is indexed and ranked as before. rjieba is imported on the first Han run only
(~0.1 s, once per process).

See docs/recall.md, "Chinese and mixed text".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator

#: A run of Han characters (CJK unified ideographs, extension A, compatibility
#: ideographs, extensions B-F).
HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef]+")

#: Chinese words too common to help a search: particles, pronouns, measure words,
#: question words and the verbs of asking (the counterparts of
#: `ctxpolicy.recall.index.STOPWORDS`).
ZH_STOPWORDS = frozenset(
    """
    的 了 是 在 吗 呢 吧 啊 呀 嘛 哦 嗯 么 着 过 地 得 之 而 与 和 及 或 跟 同 也 都 就 还 又
    把 被 给 对 从 到 向 让 由 于 为 以 将 并 但 却 则 即 若 如果 因为 所以 但是 而且 然后
    什么 哪 哪个 哪些 哪里 哪儿 哪一 怎么 怎样 怎么样 如何 为什么 为何 谁 多少 几 几个 是否
    是不是 有没有 能不能 会不会 要不要 我 你 您 他 她 它 我们 你们 他们 她们 它们 咱们 大家
    自己 这 那 这个 那个 这些 那些 这里 那里 这样 那样 这边 那边 一个 一下 一些 有 没有 没
    不 很 太 最 更 能 会 要 可以 应该 需要 请 请问 告诉 提醒 记得 知道 说 问 一直 现在 目前
    当前 之前 以前 刚才 已经 个 些 上 下 中 里 时 时候 多久 多长 多大 哪位 哪张 那张 这张 每个
    一次 做 用 弄 搞 次 位 张 条 件 种
    """.split()  # noqa: SIM905 - a word list reads best as text
)

_WORD = re.compile(r"\w+", re.UNICODE)


def has_han(text: str) -> bool:
    """Whether ``text`` holds a Han character (only then is anything segmented)."""
    return HAN_RUN.search(text) is not None


@functools.cache
def _cutter() -> Callable[[str], list[str]]:
    """rjieba's search-mode cut, imported once (its dictionary loads on import)."""
    import rjieba

    cut: Callable[[str], list[str]] = rjieba.cut_for_search
    return cut


def han_words(run: str) -> list[str]:
    """The words of one run of Han characters (search mode; order kept, no blanks)."""
    return [word for word in (w.strip() for w in _cutter()(run)) if word]


def segment_text(text: str) -> str:
    """``text`` with every Han run replaced by its words, space-separated and set apart.

    Text without a Han character is returned unchanged (the same object), so what a
    tokenizer makes of English text does not move.
    """
    if not has_han(text):
        return text
    return HAN_RUN.sub(lambda run: " " + " ".join(han_words(run.group())) + " ", text)


def iter_words(text: str) -> Iterator[str]:
    """The lower-case words of ``text`` in order: ``\\w+`` runs, Han runs cut into words."""
    for word in _WORD.findall(text.lower()):
        if not has_han(word):
            yield word
            continue
        start = 0
        for run in HAN_RUN.finditer(word):
            if run.start() > start:
                yield word[start : run.start()]
            yield from han_words(run.group())
            start = run.end()
        if start < len(word):
            yield word[start:]


def words(text: str) -> list[str]:
    """The lower-case words of ``text`` (see `iter_words`)."""
    return list(iter_words(text))


__all__ = ["HAN_RUN", "ZH_STOPWORDS", "han_words", "has_han", "iter_words", "segment_text", "words"]
