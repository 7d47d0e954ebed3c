"""Search tools: the protocol a research loop calls, and an offline full-text index over a folder.

``LocalCorpusSearch`` indexes the Markdown and text files of a folder in SQLite's
FTS5 (part of Python's sqlite3), ranks with BM25 and returns a highlighted
excerpt of each hit. It needs no network and no key, so research runs out of the
box; a web search is another class with the same two attributes and one method
(docs/howto/research.md shows one).
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = ["LocalCorpusSearch", "SearchHit", "SearchTool", "fts_query"]


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result."""

    source_id: str
    """Stable identity of the source: a path in the corpus, or a URL."""
    title: str
    """The source's title."""
    snippet: str
    """The passage that matched (what the writer may quote)."""
    score: float = 0.0
    """Relevance, higher is better (comparable within one tool's results only)."""
    url: str = ""
    """Where a reader can find the source, when it has an address."""


@runtime_checkable
class SearchTool(Protocol):
    """What a research loop calls to find evidence."""

    name: str
    """How the tool selector names the tool (letters, digits, ``_``)."""
    description: str
    """What the tool searches, told to the tool selector."""

    async def search(self, query: str, *, limit: int = 5) -> list[SearchHit]:
        """The best ``limit`` hits for ``query``, best first."""
        ...


_TOKENIZER = "'porter unicode61'"
_TITLE_WEIGHT = 2
_K1 = 1.2
_B = 0.75

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORDS = frozenset(
    (
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from",
        "has", "have", "how", "in", "into", "is", "it", "its", "of", "on", "or", "than",
        "that", "the", "their", "there", "these", "this", "to", "was", "were", "what", "when",
        "where", "which", "who", "why", "will", "with", "would", "about", "between", "compare",
        "versus", "vs",
    )
)  # fmt: skip


def fts_query(text: str) -> str:
    """An FTS5 MATCH expression for free text: its words, any of them, each quoted.

    Quoting every word keeps FTS5's own syntax (``AND``, ``NEAR``, ``*``, ``"``,
    column filters) out of a model-written query, so no query is a syntax error.
    Returns "" when the text has no searchable word.
    """
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]
    if not words:
        words = _WORD.findall(text.lower())
    return " OR ".join(f'"{word}"' for word in dict.fromkeys(words))


class LocalCorpusSearch:
    r"""Full-text search over the ``.md`` and ``.txt`` files of a folder (SQLite FTS5).

    A document's title is its first ``# `` heading (else its file name); its
    ``source_id`` is its path relative to the folder. The index is built when the
    tool is made, in memory unless ``index_path`` names a file.

    Example:
        >>> import asyncio, pathlib, tempfile
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "tides.md").write_text("# Tides\nThe moon pulls the oceans.")
        >>> search = LocalCorpusSearch(folder)
        >>> [hit.source_id for hit in asyncio.run(search.search("moon"))]
        ['tides.md']
    """

    def __init__(
        self,
        folder: str | Path,
        *,
        name: str = "search_corpus",
        description: str = "",
        index_path: str | Path | None = None,
        snippet_tokens: int = 48,
    ) -> None:
        """Index ``folder``.

        Args:
            folder: The documents: every ``.md`` and ``.txt`` file in it and below.
            name: The tool's name, as the tool selector sees it.
            description: What it searches (default: says it is this folder).
            index_path: Keep the index in this SQLite file (rebuilt on every start).
            snippet_tokens: Words in each hit's passage.

        Raises:
            FileNotFoundError: the folder does not exist.
            ValueError: it holds no ``.md`` or ``.txt`` file.
        """
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise FileNotFoundError(f"LocalCorpusSearch: {self.folder} is not a folder")
        self.name = name
        self.description = description or (
            f"Full-text search over {self.folder.name}, a local collection of documents; "
            "give it a few keywords."
        )
        self.snippet_tokens = snippet_tokens
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(index_path or ":memory:"), check_same_thread=False)
        for table in ("docs", "docs_terms", "docs_instances", "query", "query_terms"):
            self._db.execute(f"DROP TABLE IF EXISTS {table}")
        self._db.executescript(
            f"""
            CREATE VIRTUAL TABLE docs USING fts5(source_id UNINDEXED, title, body,
                tokenize={_TOKENIZER});
            CREATE VIRTUAL TABLE docs_terms USING fts5vocab(docs, row);
            CREATE VIRTUAL TABLE docs_instances USING fts5vocab(docs, instance);
            CREATE VIRTUAL TABLE query USING fts5(text, tokenize={_TOKENIZER});
            CREATE VIRTUAL TABLE query_terms USING fts5vocab(query, row);
            """
        )
        count = self._index(self._documents())
        if count == 0:
            raise ValueError(f"LocalCorpusSearch: {self.folder} has no .md or .txt documents")
        self.size = count
        """Documents indexed."""
        self._lengths: dict[int, int] = dict(
            self._db.execute(
                "SELECT doc, sum(CASE col WHEN 'title' THEN ? ELSE 1 END) FROM docs_instances "
                "GROUP BY doc",
                (_TITLE_WEIGHT,),
            )
        )
        self._average = sum(self._lengths.values()) / max(1, len(self._lengths))

    def _documents(self) -> Iterable[tuple[str, str, str]]:
        for path in sorted(self.folder.rglob("*")):
            if path.suffix.lower() not in (".md", ".txt") or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if text.startswith("<!-- corpus readme"):
                continue  # a folder's own README is not a document
            title, body = _split_title(text, path.stem)
            yield path.relative_to(self.folder).as_posix(), title, body

    def _index(self, documents: Iterable[tuple[str, str, str]]) -> int:
        rows = list(documents)
        with self._lock, self._db:
            self._db.executemany("INSERT INTO docs VALUES (?, ?, ?)", rows)
        return len(rows)

    async def search(self, query: str, *, limit: int = 5) -> list[SearchHit]:
        """The ``limit`` best documents for ``query``, best first, each with a passage."""
        match = fts_query(query)
        if not match or limit < 1:
            return []
        with self._lock:
            hits = []
            for rowid, score in self._rank(match):
                row = self._db.execute(
                    "SELECT source_id, title, snippet(docs, 2, '', '', ' … ', ?) FROM docs "
                    "WHERE docs MATCH ? AND rowid = ?",
                    (self.snippet_tokens, match, rowid),
                ).fetchone()
                if row is None:  # ranked on a term the MATCH did not keep
                    continue
                source_id, title, passage = row
                hits.append(SearchHit(source_id, title, _tidy(passage), round(score, 4)))
                if len(hits) == limit:
                    break
        return hits

    def _rank(self, match: str) -> list[tuple[int, float]]:
        """Documents matching ``match``, scored by BM25 with an IDF that stays positive.

        FTS5's own ``bm25()`` floors the IDF of a term found in half the documents or
        more at a tiny constant, so in a small collection (where most words are that
        common) every query term counts the same. Here the IDF is Lucene's,
        ``ln(1 + (N - df + 0.5) / (df + 0.5))``, and a title match counts double.
        """
        # The query's words (not the OR operators), stemmed by the index's own tokenizer.
        words = " ".join(part.strip('"') for part in match.split(" OR "))
        self._db.execute("INSERT INTO query VALUES (?)", (words,))
        terms = [row[0] for row in self._db.execute("SELECT term FROM query_terms")]
        self._db.execute("DELETE FROM query")
        if not terms:
            return []
        marks = ",".join("?" * len(terms))
        frequency = dict(
            self._db.execute(f"SELECT term, doc FROM docs_terms WHERE term IN ({marks})", terms)
        )
        counts: dict[int, dict[str, float]] = {}
        for term, doc, column, n in self._db.execute(
            f"SELECT term, doc, col, count(*) FROM docs_instances WHERE term IN ({marks}) "
            "GROUP BY term, doc, col",
            terms,
        ):
            weight = _TITLE_WEIGHT if column == "title" else 1
            per_doc = counts.setdefault(doc, {})
            per_doc[term] = per_doc.get(term, 0.0) + n * weight
        scored = []
        for doc, tfs in counts.items():
            norm = _K1 * (1 - _B + _B * self._lengths.get(doc, 0) / (self._average or 1))
            score = 0.0
            for term, tf in tfs.items():
                df = frequency.get(term, 0)
                idf = math.log(1 + (self.size - df + 0.5) / (df + 0.5))
                score += idf * tf * (_K1 + 1) / (tf + norm)
            scored.append((doc, score))
        scored.sort(key=lambda item: (-item[1], item[0]))
        return scored

    def document(self, source_id: str) -> str:
        """The full text of a document, by its ``source_id``.

        Raises:
            KeyError: no document has that id.
        """
        with self._lock:
            row = self._db.execute(
                "SELECT body FROM docs WHERE source_id = ?", (source_id,)
            ).fetchone()
        if row is None:
            raise KeyError(f"no document {source_id!r} in {self.folder}")
        return str(row[0])

    def close(self) -> None:
        """Close the index."""
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"LocalCorpusSearch({str(self.folder)!r}, {self.size} documents)"


_METADATA = re.compile(r"^[A-Z][A-Za-z ]{0,30}: \S")


def _split_title(text: str, fallback: str) -> tuple[str, str]:
    """The title (the first heading, else the file name) and the body.

    The body leaves out the ``Key: value`` metadata lines that follow the title
    (``Source:``, ``Date:``...).
    """
    lines = text.splitlines()
    title = fallback.replace("-", " ").replace("_", " ").capitalize()
    start = 0
    for index, line in enumerate(lines):
        if line.startswith("# "):
            title, start = line[2:].strip(), index + 1
            break
        if line.strip():
            break
    while start < len(lines) and _METADATA.match(lines[start]):
        start += 1
    return title, "\n".join(lines[start:]).strip()


def _tidy(snippet: str) -> str:
    return " ".join(snippet.split())
