"""The docs cannot drift: README.md, CHANGELOG.md and docs/**/*.md checked
against the code and a real server.

- Every relative link resolves: the file exists, and a `#anchor` names a
  heading of the target page (GitHub's slug rules).
- Every fenced code block is one of three kinds:
  * a redis-cli transcript (its first line starts with the prompt
    `127.0.0.1:6379> `): each command is run through the real `redis-cli
    --no-raw` against a server with the module, on an empty keyspace, in one
    session, and its printed reply must be the lines that follow it;
  * a recipe: the block sits between `<!-- recipe: docs/recipes/<file> -->`
    and `<!-- /recipe -->` and is that file's text verbatim (the file is the
    one integration/test_docs_recipes.py imports and runs);
  * an instruction or a diagram: ```` ```sh ```` (commands that set a
    machine up: make, apt, tar) holding no RL command — an RL command is an
    example, so a transcript — or ```` ```text ```` (syntax diagrams,
    layouts) holding no prompt.
- Inline transcripts, `` `RL.THROTTLEPEEK k 1700000000000 1 1 1000 COST 0` →
  `0 1 1 1 -1 0` ``: every command of one paragraph (a table is one) runs in
  order on an empty keyspace through `redis-cli` (raw replies, one element a
  line), and the reply written after the arrow is those elements joined by
  spaces.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from servers import redis_cli

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "127.0.0.1:6379> "
SEP = "__rl_docs_separator__"


def pages() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    if (ROOT / "CHANGELOG.md").exists():
        found.append(ROOT / "CHANGELOG.md")
    return found


def rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


# --- Markdown, read just enough ---------------------------------------------------

FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)


def fenced_blocks(text: str):
    """(info string, body, start offset) of every fenced block."""
    return [(m.group(1).strip(), m.group(2), m.start()) for m in FENCE.finditer(text)]


def without_fences(text: str) -> str:
    """The text with fenced blocks blanked (links and arrows inside code are
    not links or transcripts)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation
    dropped (letters, digits, `-`, `_`, spaces kept), spaces to `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in without_fences(path.read_text()).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def links(path: Path) -> list[str]:
    body = without_fences(path.read_text())
    body = re.sub(r"`[^`\n]*`", "", body)  # inline code is not a link
    return LINK.findall(body)


# --- Links ----------------------------------------------------------------------


def test_docs_exist_and_readme_is_short():
    assert (ROOT / "docs" / "commands").is_dir() and (ROOT / "docs" / "guides").is_dir()
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 320, f"README.md has {lines} lines; it is the five-minute read, the rest goes in docs/"


@pytest.mark.parametrize("page", pages(), ids=rel)
def test_every_relative_link_resolves(page):
    bad = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            bad.append(f"{target}: no file {dest}")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading with anchor #{anchor} in {rel(dest)}")
    assert not bad, f"{rel(page)}:\n" + "\n".join(bad)


def test_the_slug_rules():
    assert slug("RL.CHECK key now count window [count window ...]") == "rlcheck-key-now-count-window-count-window-"
    assert slug("Which limiter do I pick?") == "which-limiter-do-i-pick"
    assert slug("`*` inside scripts") == "-inside-scripts"
    assert slug("From RL.DAYHOUR and seed 001") == "from-rldayhour-and-seed-001"


# --- Block kinds and recipes ------------------------------------------------------

RECIPE = re.compile(r"<!-- recipe: (\S+) -->\n(.*?)<!-- /recipe -->", re.S)


def recipe_spans(text: str):
    return [(m.start(2), m.end(2), m.group(1), m.group(2)) for m in RECIPE.finditer(text)]


def block_kind(info: str, body: str) -> str | None:
    if body.startswith(PROMPT):
        return "transcript"
    if info == "sh" and not re.search(r"\bRL\.", body, re.I):
        return "instruction"  # commands to set a machine up (make, apt, tar): no RL command
    if info == "text" and PROMPT not in body:
        return "diagram"
    return None


@pytest.mark.parametrize("page", pages(), ids=rel)
def test_every_example_is_a_transcript_or_a_recipe(page):
    text = page.read_text()
    spans = recipe_spans(text)
    bad = []
    for info, body, start in fenced_blocks(text):
        if any(a <= start < b for a, b, _, _ in spans):
            continue
        if block_kind(info, body) is None:
            line = text.count("\n", 0, start) + 1
            bad.append(f"line {line}: a ```{info} block that is neither a transcript, "
                       f"a recipe between <!-- recipe: ... --> markers, an sh instruction without RL commands nor a text diagram")
    assert not bad, f"{rel(page)}:\n" + "\n".join(bad)


@pytest.mark.parametrize("page", pages(), ids=rel)
def test_recipes_are_their_files_verbatim(page):
    bad = []
    for _, _, path, inner in recipe_spans(page.read_text()):
        src = ROOT / path
        if not path.startswith("docs/") or not src.is_file():
            bad.append(f"{path}: not a file under docs/")
            continue
        blocks = fenced_blocks(inner)
        if len(blocks) != 1:
            bad.append(f"{path}: {len(blocks)} code blocks between the markers (one expected)")
            continue
        if blocks[0][1] != src.read_text():
            bad.append(f"{path}: the page's copy differs from the file")
    assert not bad, f"{rel(page)}:\n" + "\n".join(bad)


def test_every_recipe_file_is_shown_somewhere():
    shown = {path for page in pages() for _, _, path, _ in recipe_spans(page.read_text())}
    files = {rel(p) for p in (ROOT / "docs" / "recipes").iterdir() if p.is_file()}
    assert files - shown == set(), "recipe files no page shows"


# --- Transcripts against a real server --------------------------------------------


def transcripts(page: Path):
    """[(line number, [(command, expected lines)])] of the page's transcripts."""
    text = page.read_text()
    spans = recipe_spans(text)
    out = []
    for info, body, start in fenced_blocks(text):
        if any(a <= start < b for a, b, _, _ in spans) or block_kind(info, body) != "transcript":
            continue
        steps: list[tuple[str, list[str]]] = []
        for line in body.splitlines():
            if line.startswith(PROMPT):
                steps.append((line[len(PROMPT):], []))
            else:
                steps[-1][1].append(line)
        out.append((text.count("\n", 0, start) + 1, steps))
    return out


ARROW = re.compile(r"`((?:RL\.|TIME|ZADD|HSET|SET |DEL )[^`]*)` → `([^`]*)`")


def inline_transcripts(page: Path):
    """[(line number, [(command, expected reply)])], one list per paragraph."""
    text = without_fences(page.read_text())
    out = []
    offset = 0
    for para in re.split(r"\n\s*\n", text):
        found = ARROW.findall(para)
        if found:
            out.append((text.count("\n", 0, text.index(para, offset)) + 1, found))
        offset = text.index(para, offset) + len(para)
    return out


def run_session(cli: str, port: int, commands: list[str], raw: bool) -> list[list[str]]:
    """Runs the commands in one redis-cli session (stdin, as typed at its
    prompt); the printed reply of each, as lines."""
    script = []
    for cmd in ["FLUSHALL", *commands]:
        script += [cmd, f"ECHO {SEP}"]
    args = [cli, "-p", str(port)] + ([] if raw else ["--no-raw"])
    out = subprocess.run(args, input="\n".join(script) + "\n", capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    marker = SEP if raw else f'"{SEP}"'
    replies, cur = [], []
    for line in out.stdout.splitlines():
        if line == marker:
            replies.append(cur)
            cur = []
        else:
            cur.append(line)
    return replies[1:]  # the FLUSHALL


def documented_transcripts():
    return [(page, line, steps) for page in pages() for line, steps in transcripts(page)]


def documented_inline():
    return [(page, line, steps) for page in pages() for line, steps in inline_transcripts(page)]


@pytest.fixture(scope="module")
def cli():
    path = redis_cli()
    if path is None:
        pytest.skip("redis-cli is needed to run the docs' transcripts")
    return path


@pytest.fixture(scope="module")
def docs_server():
    from servers import Server
    with Server() as s:
        yield s


def test_the_docs_have_transcripts():
    assert len(documented_transcripts()) >= 20
    assert len(documented_inline()) >= 3


@pytest.mark.parametrize(("page", "line", "steps"), documented_transcripts(),
                         ids=[f"{rel(p)}:{n}" for p, n, _ in documented_transcripts()])
def test_transcript_replies_are_what_redis_cli_prints(cli, docs_server, page, line, steps):
    for cmd, _ in steps:  # each line is what a user types: redis-cli's own quoting
        assert shlex.split(cmd), cmd
    got = run_session(cli, docs_server.port, [c for c, _ in steps], raw=False)
    for (cmd, want), have in zip(steps, got):
        assert have == want, f"{rel(page)}:{line}: {cmd}\nexpected:\n" + "\n".join(want) + \
            "\nredis-cli printed:\n" + "\n".join(have)
    assert len(got) == len(steps)


@pytest.mark.parametrize(("page", "line", "steps"), documented_inline(),
                         ids=[f"{rel(p)}:{n}" for p, n, _ in documented_inline()])
def test_inline_replies_are_what_the_server_answers(cli, docs_server, page, line, steps):
    got = run_session(cli, docs_server.port, [c for c, _ in steps], raw=True)
    for (cmd, want), have in zip(steps, got):
        if len(have) == 2 and have[1] == "" and re.match(r"^[A-Z]+ ", have[0]):
            have = have[:1]  # raw redis-cli ends an error reply with an empty line
        assert " ".join(have) == want, f"{rel(page)}:{line}: {cmd} answers {' '.join(have)!r}"
    assert len(got) == len(steps)
