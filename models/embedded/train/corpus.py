"""The training corpus: ten public-domain English novels that three Debian packages ship.

| Debian package (bookworm) | license of the package | file read | books |
|---|---|---|---|
| r-cran-janeaustenr 1.0.0-1 | MIT | janeaustenr/data/Rdata.rdb | Jane Austen's six novels |
| r-cran-tokenizers 0.3.0-1 | MIT | tokenizers/data/Rdata.rdb | Moby Dick (Melville) |
| r-cran-tidytext 0.4.1-1 | MIT | tidytext/extdata/books.rda | Great Expectations (Dickens), Twenty Thousand Leagues under the Sea (Verne, English translation), The War of the Worlds (Wells) |

The texts are Project Gutenberg transcriptions of works in the public domain; the Gutenberg
header and footer of Moby Dick are cut off, and tidytext's copy of Pride and Prejudice is
skipped (janeaustenr has it). Paths are under `/usr/lib/R/site-library/` of `root`: `/` when
the packages are installed, or a folder the .deb files were unpacked into with `dpkg-deb -x`.
"""

import pathlib
import re

import rdata

SITE = "usr/lib/R/site-library"
AUSTEN = [("sensesensibility", "Sense and Sensibility"), ("prideprejudice", "Pride and Prejudice"),
          ("mansfieldpark", "Mansfield Park"), ("emma", "Emma"),
          ("northangerabbey", "Northanger Abbey"), ("persuasion", "Persuasion")]
TIDYTEXT = ["Great Expectations", "Twenty Thousand Leagues under the Sea", "The War of the Worlds"]


def paragraphs(lines):
    """Hard-wrapped lines to paragraphs: blank lines separate them, inner line breaks and runs of
    spaces become one space, and the `_italics_` underscores go."""
    out, current = [], []
    for line in lines:
        line = (line or "").strip()
        if line:
            current.append(line)
        elif current:
            out.append(" ".join(current))
            current = []
    if current:
        out.append(" ".join(current))
    out = [re.sub(r"\s+", " ", p.replace("_", "")).strip() for p in out]
    return [p for p in out if "Gutenberg" not in p and "etext" not in p]


def moby_dick_lines(text):
    start = text.index("\n", text.index("*** START OF")) + 1
    end = text.index("End of Project Gutenberg")
    body = text[start:end].replace("\r\n", "\n")
    body = body[body.index("MOBY DICK; OR THE WHALE"):]  # after the "Produced by" credit
    return body.split("\n")


def books(root="/"):
    """[(title, [paragraph, ...])] in a fixed order."""
    site = pathlib.Path(root) / SITE
    austen = rdata.read_lazy_load(site / "janeaustenr" / "data" / "Rdata")
    out = [(title, paragraphs(rdata.plain(austen[name]))) for name, title in AUSTEN]
    tokenizers_data = rdata.read_lazy_load(site / "tokenizers" / "data" / "Rdata")
    (moby,) = rdata.plain(tokenizers_data["mobydick"])
    out.append(("Moby Dick", paragraphs(moby_dick_lines(moby))))
    frame = rdata.read_rda(site / "tidytext" / "extdata" / "books.rda")["books"]
    columns = dict(zip(frame.attrs["names"], frame.value))
    titles = rdata.plain(columns["title"])
    levels = columns["title"].attrs.get("levels") if isinstance(columns["title"],
                                                                 rdata.Attributed) else None
    text = rdata.plain(columns["text"])
    for title in TIDYTEXT:
        lines = [t for t, b in zip(text, titles) if (levels[b - 1] if levels else b) == title]
        if not lines:
            raise RuntimeError(f"tidytext books.rda has no '{title}'")
        out.append((title, paragraphs(lines)))
    return out


if __name__ == "__main__":
    import sys
    for title, paras in books(sys.argv[1] if len(sys.argv) > 1 else "/"):
        size = sum(len(p) + 2 for p in paras)
        print(f"{title}: {len(paras)} paragraphs, {size} characters; {paras[3][:60]!r}")
