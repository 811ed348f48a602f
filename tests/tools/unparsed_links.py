"""Links markdown did not parse, in a built mkdocs site: `[`, `](` or `][` left as text outside code blocks
(`[<code>inventory/minimal/cluster.yaml</code>):` in getting-started.md, which `mkdocs build --strict` passed).
Prints each as PAGE: TEXT and exits 1 if there is any."""

from __future__ import annotations

import re
import sys
from pathlib import Path

UNPARSED = re.compile(r"\[<code>|\]\(|\]\[")


def unparsed(html: str) -> list[str]:
    text = re.sub(r"<(pre|script|style)\b.*?</\1>", "", html, flags=re.S)
    text = re.sub(r"<code\b[^>]*>.*?</code>", "<code>", text, flags=re.S)  # inline code: kept as a mark, no text
    text = re.sub(r"<(?!code>)[^>]*>", "", text)
    return [text[max(0, m.start() - 30):m.end() + 30].replace("\n", " ") for m in UNPARSED.finditer(text)]


def main(site: str) -> int:
    found = [(page, hit) for page in sorted(Path(site).rglob("*.html")) for hit in unparsed(page.read_text())]
    for page, hit in found:
        print(f"{page.relative_to(site)}: unparsed link: {hit}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
