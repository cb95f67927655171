"""Rewrite the relative links of a package's README (the copy make release
builds from, never the checkout) into links to the release's tag in the
source repository: PyPI shows a README's relative links as dead ones, npm
resolves them against the repository root (not the package's directory),
and an unpacked package holds none of their targets.

    absolute_links.py <tree root> <repository URL> <tag> <README>...

A link such as ../../docs/guides/faults.md#x in clients/python/README.md
becomes <URL>/blob/<tag>/docs/guides/faults.md#x (tree/ for a directory);
#anchors, absolute URLs and text in code are left alone. A relative link to
a path the tree does not hold fails the release."""
from __future__ import annotations

import re
import sys
from pathlib import Path

FENCE = re.compile(r"^```.*?^```[ \t]*$", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
TARGET = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?(\s+\"[^\"]*\")?\)")


def rewrite(text: str, readme: Path, root: Path, base: str, tag: str) -> str:
    def absolute(m: re.Match) -> str:
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            return m.group(0)
        dest = (readme.parent / target).resolve()
        if not dest.is_relative_to(root) or not dest.exists():
            sys.exit(f"absolute_links: {readme}: {target} is not in the tree")
        kind = "tree" if dest.is_dir() else "blob"
        path = dest.relative_to(root).as_posix()
        return f"]({base}/{kind}/{tag}/{path}{m.group(2) or ''}{m.group(3) or ''})"

    def outside_code(part: str) -> str:  # inline code spans kept verbatim
        pieces = CODE.split(part)
        spans = CODE.findall(part) + [""]
        return "".join(TARGET.sub(absolute, p) + s for p, s in zip(pieces, spans))

    out, last = [], 0
    for m in FENCE.finditer(text):
        out += [outside_code(text[last:m.start()]), m.group(0)]
        last = m.end()
    out.append(outside_code(text[last:]))
    return "".join(out)


def main() -> None:
    root, url, tag, *readmes = sys.argv[1:]
    for name in readmes:
        readme = Path(name).resolve()
        readme.write_text(rewrite(readme.read_text(), readme, Path(root).resolve(), url.rstrip("/"), tag))

if __name__ == "__main__":
    main()
