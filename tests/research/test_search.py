"""LocalCorpusSearch: an offline FTS5 index over a folder, safe for any query text."""

from __future__ import annotations

from pathlib import Path

import pytest

from selectgraph.research import LocalCorpusSearch, SearchTool, fts_query

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "research_corpus"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "tides.md").write_text(
        "# Tides and the Moon\nSource: Notes\nDate: 2020\n\nThe moon pulls the oceans twice a day."
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "sun.txt").write_text("The sun also raises tides, about half as much.")
    (tmp_path / "README.md").write_text("<!-- corpus readme: not a document -->\nmoon moon moon")
    (tmp_path / "image.png").write_bytes(b"\x89PNG moon")
    return tmp_path


async def test_search_finds_ranks_and_quotes(folder: Path) -> None:
    search = LocalCorpusSearch(folder)
    assert isinstance(search, SearchTool)
    assert search.size == 2  # the README and the image are not documents

    hits = await search.search("moon")
    assert [h.source_id for h in hits] == ["tides.md"]
    [hit] = hits
    assert hit.title == "Tides and the Moon"
    assert "pulls the oceans" in hit.snippet
    assert "Source:" not in hit.snippet  # metadata lines are not indexed
    assert hit.score > 0

    hits = await search.search("tides")
    assert {h.source_id for h in hits} == {"tides.md", "sub/sun.txt"}
    assert hits[0].source_id == "tides.md"  # a title match weighs double
    [sun] = [h for h in hits if h.source_id == "sub/sun.txt"]
    assert sun.title == "Sun"  # no heading: the file name


@pytest.mark.parametrize(
    "query",
    ['moon" OR title:*', "NEAR(moon sun)", "moon AND", '"unbalanced', "title: moon", "-moon", "*"],
)
async def test_query_syntax_in_the_text_is_never_an_error(folder: Path, query: str) -> None:
    hits = await LocalCorpusSearch(folder).search(query)
    assert all(h.source_id.endswith((".md", ".txt")) for h in hits)


async def test_empty_queries_and_limits(folder: Path) -> None:
    search = LocalCorpusSearch(folder)
    assert await search.search("") == []
    assert await search.search("?! ...") == []
    assert await search.search("tides", limit=0) == []
    assert len(await search.search("tides", limit=1)) == 1


def test_documents_and_errors(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    search = LocalCorpusSearch(folder)
    assert search.document("tides.md").startswith("The moon pulls")
    with pytest.raises(KeyError, match=r"no document 'nope\.md'"):
        search.document("nope.md")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        LocalCorpusSearch(folder / "missing")
    with pytest.raises(ValueError, match=r"has no \.md or \.txt documents"):
        LocalCorpusSearch(tmp_path_factory.mktemp("empty"))
    search.close()


def test_an_index_file_is_rebuilt_not_duplicated(folder: Path, tmp_path: Path) -> None:
    index = tmp_path / "index.db"
    LocalCorpusSearch(folder, index_path=index).close()
    again = LocalCorpusSearch(folder, index_path=index)
    assert again.size == 2
    assert repr(again).endswith("2 documents)")


def test_fts_query_quotes_words_and_drops_stopwords() -> None:
    assert fts_query("How do batteries compare with pumped hydro?") == (
        '"batteries" OR "pumped" OR "hydro"'
    )
    assert fts_query('say "what" AND') == '"say"'
    assert fts_query("the of") == '"the" OR "of"'  # only stopwords: keep them
    assert fts_query("") == ""


async def test_the_example_corpus_answers_the_example_question() -> None:
    search = LocalCorpusSearch(CORPUS)
    assert search.size >= 14
    hits = await search.search("grid-scale batteries pumped hydro long-duration storage")
    assert hits[0].source_id == "batteries-vs-pumped-hydro.md"
    assert len(hits) == 5


async def test_a_query_whose_words_match_nothing_finds_nothing() -> None:
    search = LocalCorpusSearch(CORPUS)
    assert await search.search("zebra quagga") == []  # no document, and no crash
    hits = await search.search("zebra batteries")
    assert hits
    assert all("batter" in (h.title + h.snippet).lower() for h in hits)
