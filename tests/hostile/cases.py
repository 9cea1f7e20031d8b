"""The hostile inputs: the committed corpus plus cases generated at test time.

A committed case is a file (or a folder whose entry is ``main.yaml``) under
``corpus/`` named ``<expected>__<description>``, where ``<expected>`` is ``valid`` or
the rule of an error the validator must report. Generated cases are big or binary
(random bytes, truncations, mutations, NUL, CRLF, BOM, 10,000 layers, a 1 MB line,
deep nesting) and are written to a temporary folder, never committed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ctxpolicy.diagnostics import MAX_DEPTH, MAX_FILE_BYTES

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
POLICIES = ROOT / "policies"
BASE = (POLICIES / "base.yaml").read_bytes()
TEAM_TOML = (POLICIES / "teams" / "analytics.toml").read_bytes()
HEADER = b"version: 1\nname: hostile\n"

#: ``expected`` of a generated case whose outcome may be valid or invalid (e.g. a
#: truncation that happens to end on a line boundary): the API and the CLI must agree.
ANY = "any"
#: ``expected`` of a case that must be invalid, whatever the rule.
INVALID = "invalid"


@dataclass(frozen=True)
class Case:
    """One hostile input.

    Attributes:
        name: Unique id (the pytest parameter id).
        files: Relative path -> content, written into a fresh folder.
        target: The file given to the loader and the CLI.
        expected: ``valid``, a rule, `INVALID` or `ANY`.
    """

    name: str
    files: Mapping[str, bytes]
    target: str
    expected: str

    def write(self, folder: Path) -> Path:
        """Write the files under ``folder``; return the target's path."""
        for name, content in self.files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        return folder / self.target


def committed_cases() -> list[Case]:
    """Every case of ``corpus/``."""
    cases = []
    for entry in sorted(CORPUS.iterdir()):
        if "__" not in entry.name:
            continue  # README
        expected = entry.name.split("__", 1)[0]
        if entry.is_dir():
            files = {
                p.relative_to(entry).as_posix(): p.read_bytes()
                for p in sorted(entry.rglob("*"))
                if p.is_file()
            }
            cases.append(Case(f"corpus/{entry.name}", files, "main.yaml", expected))
        else:
            cases.append(
                Case(f"corpus/{entry.name}", {entry.name: entry.read_bytes()}, entry.name, expected)
            )
    return cases


def _with_templates(files: dict[str, bytes]) -> dict[str, bytes]:
    """base.yaml needs its template file next to it."""
    files.setdefault("templates/todo.j2", (POLICIES / "templates" / "todo.j2").read_bytes())
    return files


def _garbage(rnd: random.Random, count: int) -> Iterator[Case]:
    for n in range(count):
        size = rnd.choice((1, 7, 64, 512, 4096))
        data = bytes(rnd.randrange(256) for _ in range(size))
        suffix = ".toml" if n % 2 else ".yaml"
        yield Case(f"garbage-{n:02d}{suffix}", {f"p{suffix}": data}, f"p{suffix}", INVALID)
    # garbage that is valid UTF-8 but still nonsense
    for n in range(count // 2):
        text = "".join(
            chr(rnd.choice((rnd.randrange(32, 127), rnd.randrange(0x80, 0x3000))))
            for _ in range(rnd.randrange(1, 400))
        )
        yield Case(f"garbage-text-{n:02d}", {"p.yaml": text.encode()}, "p.yaml", INVALID)


def _truncations(offsets: int) -> Iterator[Case]:
    for source, suffix, label in ((BASE, ".yaml", "base"), (TEAM_TOML, ".toml", "analytics")):
        step = max(1, len(source) // offsets)
        for cut in range(0, len(source), step):
            files = {f"p{suffix}": source[:cut]}
            if suffix == ".toml":  # analytics.toml extends ../base.yaml
                files = {f"teams/p{suffix}": source[:cut], "base.yaml": BASE}
                target = f"teams/p{suffix}"
            else:
                target = f"p{suffix}"
            yield Case(f"truncated-{label}-at-{cut}", _with_templates(files), target, ANY)


def _mutate(rnd: random.Random, source: bytes) -> bytes:
    data = bytearray(source)
    for _ in range(rnd.randint(1, 8)):
        pos = rnd.randrange(len(data) or 1)
        op = rnd.random()
        if op < 0.3:
            if data:
                data[pos] = rnd.randrange(256)
        elif op < 0.5:
            del data[pos : pos + rnd.randint(1, 40)]
        elif op < 0.7:
            data[pos:pos] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 6)))
        elif op < 0.85:  # duplicate a random slice (duplicate keys, repeated blocks)
            start = rnd.randrange(len(data) or 1)
            data[pos:pos] = data[start : start + rnd.randint(1, 200)]
        else:  # swap indentation
            tokens = (b"  ", b"\t", b"\n", b"- ", b": ", b"{", b"[", b"&a ", b"*a")
            data[pos:pos] = rnd.choice(tokens)
    return bytes(data)


def _mutations(rnd: random.Random, count: int) -> Iterator[Case]:
    for n in range(count):
        yield Case(
            f"mutated-base-{n:03d}", _with_templates({"p.yaml": _mutate(rnd, BASE)}), "p.yaml", ANY
        )
    for n in range(count // 3):
        files = {"teams/p.toml": _mutate(rnd, TEAM_TOML), "base.yaml": BASE}
        yield Case(f"mutated-analytics-{n:03d}", _with_templates(files), "teams/p.toml", ANY)


def _encodings() -> Iterator[Case]:
    for path in sorted(POLICIES.rglob("*")):
        if path.suffix not in (".yaml", ".toml"):
            continue
        rel = path.relative_to(POLICIES).as_posix()
        siblings = {
            p.relative_to(POLICIES).as_posix(): p.read_bytes()
            for p in POLICIES.rglob("*")
            if p.is_file()
        }
        raw = path.read_bytes()
        for label, data in (
            ("crlf", raw.replace(b"\n", b"\r\n")),
            ("bom", b"\xef\xbb\xbf" + raw),
            ("bom-crlf", b"\xef\xbb\xbf" + raw.replace(b"\n", b"\r\n")),
        ):
            # decision: a UTF-8 BOM and CRLF line endings are accepted (editors on
            # Windows write them); the policy is exactly the one without them.
            yield Case(f"{label}-{rel}", {**siblings, rel: data}, rel, "valid")
    for label, data in (
        ("utf16", "version: 1\nname: hostile\n".encode("utf-16")),
        ("utf32", "version: 1\nname: hostile\n".encode("utf-32")),
        ("latin1", "version: 1\nname: h\xf6stile\n".encode("latin-1")),
        ("overlong-utf8", HEADER + b"description: \xc0\xaf\n"),
        ("lone-continuation", HEADER + b"description: \x80\n"),
    ):
        yield Case(f"encoding-{label}", {"p.yaml": data}, "p.yaml", INVALID)
    # YAML itself allows a BOM at the start of a stream: a doubled BOM still reads
    yield Case(
        "encoding-double-bom", {"p.yaml": b"\xef\xbb\xbf\xef\xbb\xbf" + HEADER}, "p.yaml", "valid"
    )


def _nul_bytes() -> Iterator[Case]:
    lines = BASE.split(b"\n")
    for n, index in enumerate((0, 7, 20, len(lines) // 2, len(lines) - 2)):
        data = b"\n".join(
            [*lines[:index], lines[index][:3] + b"\x00" + lines[index][3:], *lines[index + 1 :]]
        )
        yield Case(f"nul-in-line-{n}", _with_templates({"p.yaml": data}), "p.yaml", INVALID)
    yield Case("nul-only", {"p.yaml": b"\x00" * 100}, "p.yaml", INVALID)
    yield Case("nul-toml", {"p.toml": b'version = 1\x00\nname = "t"\n'}, "p.toml", INVALID)


def _sizes() -> Iterator[Case]:
    def layers(count: int) -> bytes:
        names = [f"l{i:05d}__context" for i in range(count)]
        order = "".join(f"  - {n}\n" for n in names)
        body = "".join(f"  {n}: {{collector: {{type: template, template: x}}}}\n" for n in names)
        return (
            HEADER.decode()
            + "order:\n  - system_prompt\n"
            + order
            + "  - checkpoint_messages\n  - query\nlayers:\n"
            + body
        ).encode()

    yield Case("10000-layers", {"p.yaml": layers(10_000)}, "p.yaml", "file.too-many-nodes")
    yield Case(
        "10000-order-entries",
        {
            "p.yaml": HEADER
            + b"order:\n  - system_prompt\n"
            + b"".join(b"  - l%05d__context\n" % i for i in range(10_000))
            + b"  - checkpoint_messages\n  - query\n"
        },
        "p.yaml",
        "valid",
    )  # 10,000 warnings
    yield Case(
        "10000-layers-toml",
        {
            "p.toml": b'version = 1\nname = "t"\n'
            + b"".join(
                b'[layers.l%05d__context.collector]\ntype = "template"\ntemplate = "x"\n' % i
                for i in range(10_000)
            )
        },
        "p.toml",
        "file.too-many-nodes",
    )
    yield Case(
        "200k-array-toml",
        {"p.toml": b'version = 1\nname = "t"\nvars = {a = [' + b"1," * 200_000 + b"1]}\n"},
        "p.toml",
        "file.too-many-nodes",
    )
    room = MAX_FILE_BYTES - len(HEADER) - len(b"description: \n")
    yield Case(
        "1mb-line-at-limit",
        {"p.yaml": HEADER + b"description: " + b"x" * room + b"\n"},
        "p.yaml",
        "valid",
    )
    yield Case(
        "1mb-line-over-limit",
        {"p.yaml": HEADER + b"description: " + b"x" * (room + 1) + b"\n"},
        "p.yaml",
        "file.too-large",
    )
    yield Case(
        "1mb-key",
        {"p.yaml": HEADER + b"vars:\n  " + b"k" * (room - 20) + b": 1\n"},
        "p.yaml",
        INVALID,
    )
    escapes = b"\\x41" * (room // 4 - 1)
    yield Case(
        "1mb-quoted-escapes",
        {"p.yaml": HEADER + b'description: "' + escapes + b'"\n'},
        "p.yaml",
        "valid",
    )
    yield Case(
        "1mb-toml-string",
        {
            "p.toml": b'version = 1\nname = "t"\ndescription = "'
            + b"y" * (MAX_FILE_BYTES - 60)
            + b'"\n'
        },
        "p.toml",
        "valid",
    )
    yield Case(
        "100k-digit-int",
        {"p.yaml": HEADER + b"vars: {n: " + b"9" * 100_000 + b"}\n"},
        "p.yaml",
        "value.too-long",
    )
    yield Case(
        "100k-digit-int-toml",
        {"p.toml": b'version = 1\nname = "t"\n[vars]\nn = ' + b"9" * 100_000 + b"\n"},
        "p.toml",
        "value.too-long",
    )
    yield Case("50k-line-comments", {"p.yaml": HEADER + b"# c\n" * 50_000}, "p.yaml", "valid")
    yield Case("100k-empty-lines-crlf", {"p.yaml": HEADER + b"\r\n" * 100_000}, "p.yaml", "valid")


def _nesting() -> Iterator[Case]:
    def block(depth: int) -> bytes:
        lines = [b"  " * (i + 1) + b"k:" for i in range(depth - 1)]
        return HEADER + b"vars:\n" + b"\n".join(lines) + b"\n" + b"  " * depth + b"v: 1\n"

    yield Case("nested-block-at-limit", {"p.yaml": block(MAX_DEPTH - 1)}, "p.yaml", "valid")
    yield Case(
        "nested-block-over-limit", {"p.yaml": block(MAX_DEPTH + 1)}, "p.yaml", "yaml.too-deep"
    )
    for depth in (1_000, 100_000):
        yield Case(
            f"nested-flow-seq-{depth}",
            {"p.yaml": HEADER + b"vars: {a: " + b"[" * depth + b"]" * depth + b"}\n"},
            "p.yaml",
            "yaml.too-deep",
        )
        yield Case(
            f"nested-flow-map-{depth}",
            {"p.yaml": HEADER + b"vars: " + b"{a: " * depth + b"1" + b"}" * depth + b"\n"},
            "p.yaml",
            "yaml.too-deep",
        )
        yield Case(
            f"unclosed-flow-{depth}",
            {"p.yaml": HEADER + b"vars: " + b"[" * depth},
            "p.yaml",
            INVALID,
        )
        yield Case(
            f"nested-toml-array-{depth}",
            {"p.toml": b'version = 1\nname = "t"\nv = ' + b"[" * depth + b"]" * depth + b"\n"},
            "p.toml",
            INVALID,
        )
        yield Case(
            f"nested-toml-inline-{depth}",
            {
                "p.toml": b'version = 1\nname = "t"\nv = '
                + b"{a = " * depth
                + b"1"
                + b"}" * depth
                + b"\n"
            },
            "p.toml",
            INVALID,
        )
    yield Case(
        "nested-toml-table-2000",
        {"p.toml": b'version = 1\nname = "t"\n[' + b".".join([b"a"] * 2000) + b"]\n"},
        "p.toml",
        INVALID,
    )
    # billion laughs with block collections and with anchors on mappings
    laughs = [b"a0: &a0 {x: 1, y: 2, z: 3, w: 4}"]
    laughs += [
        b"a%d: &a%d [" % (i, i) + b", ".join([b"*a%d" % (i - 1)] * 10) + b"]" for i in range(1, 9)
    ]
    yield Case(
        "alias-bomb-mappings",
        {"p.yaml": HEADER + b"vars:\n  " + b"\n  ".join(laughs) + b"\n"},
        "p.yaml",
        "yaml.alias-expansion",
    )


def _extends_chains() -> Iterator[Case]:
    for length, expected in ((8, "valid"), (12, "extends.depth")):
        files = {f"p{i}.yaml": HEADER + f"extends: p{i + 1}.yaml\n".encode() for i in range(length)}
        files[f"p{length}.yaml"] = HEADER
        yield Case(f"extends-chain-{length}", files, "p0.yaml", expected)
    # a wide diamond: 30 parents that all extend one grandparent
    files = {f"p{i}.yaml": HEADER + b"extends: g.yaml\n" for i in range(30)}
    files["g.yaml"] = HEADER
    files["main.yaml"] = (
        HEADER + b"extends: [" + b", ".join(f"p{i}.yaml".encode() for i in range(30)) + b"]\n"
    )
    yield Case("extends-wide-diamond", files, "main.yaml", "valid")
    # every file of a 6-level binary tree of parents extends two more: 2^6 reads, no cycle
    files = {}
    for level in range(6):
        for i in range(2**level):
            kids = [f"n{level + 1}_{2 * i + j}.yaml" for j in (0, 1)]
            files[f"n{level}_{i}.yaml"] = HEADER + f"extends: [{', '.join(kids)}]\n".encode()
    for i in range(2**6):
        files[f"n6_{i}.yaml"] = HEADER
    yield Case("extends-binary-tree", files, "n0_0.yaml", "valid")


def generated_cases(*, seed: int = 20261122) -> list[Case]:
    """The generated cases (deterministic for a seed)."""
    rnd = random.Random(seed)
    return [
        *_garbage(rnd, 40),
        *_truncations(40),
        *_mutations(rnd, 90),
        *_encodings(),
        *_nul_bytes(),
        *_sizes(),
        *_nesting(),
        *_extends_chains(),
    ]


def all_cases() -> list[Case]:
    """Committed and generated cases."""
    return [*committed_cases(), *generated_cases()]


__all__ = ["ANY", "INVALID", "Case", "all_cases", "committed_cases", "generated_cases"]
