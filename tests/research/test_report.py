"""Citations and report assembly: one numbering of sources, key evidence, missing sections."""

from __future__ import annotations

from selectgraph.research import Evidence, cited_numbers, render_report, renumber
from selectgraph.research._report import section_report


def ev(source: str, score: float = 1.0) -> Evidence:
    return Evidence(
        source_id=source, title=source.upper(), snippet=f"text of {source}", score=score
    )


def test_cited_numbers_in_order_of_first_use() -> None:
    assert cited_numbers("A [2]. B [1, 3]. C [2].") == [2, 1, 3]
    assert cited_numbers("no citations, [x] or [] here") == []


def test_renumber_maps_and_drops_unknown_numbers() -> None:
    assert renumber("A [2]. B [1, 3]. C [9].", {1: 5, 2: 4}) == "A [4]. B [5]. C ."


def test_sections_share_one_numbering_of_sources() -> None:
    first = section_report(
        title="Batteries",
        question="q1",
        text="Cheap [2]. Fast [1]. Invented [7].",
        shown=[ev("a.md", 1), ev("b.md", 3)],
        index=0,
    )
    second = section_report(
        title="Hydro",
        question="q2",
        text="Old [1]; shared [2].",
        shown=[ev("c.md", 2), ev("a.md", 1)],
        index=1,
    )
    rendered = render_report(
        title="Storage",
        sections=[first, second],
        introduction="Intro.",
        conclusion="Done.",
        missing=["The section 'Flow' could not be researched (ProviderError: down)."],
    )
    assert [s.source_id for s in rendered.sources] == ["b.md", "a.md", "c.md"]
    md = rendered.markdown
    assert md.startswith("# Storage\n\nIntro.\n\n## Batteries\n\nCheap [1]. Fast [2]. Invented .")
    assert "## Hydro\n\nOld [3]; shared [2]." in md
    assert '- "text of b.md" [1]' in md  # key evidence, best score first, cited
    assert "> The section 'Flow' could not be researched (ProviderError: down)." in md
    assert "## Conclusion\n\nDone." in md
    assert md.endswith("## Sources\n\n[1] B.MD, b.md\n[2] A.MD, a.md\n[3] C.MD, c.md\n")


def test_a_section_without_evidence_says_so() -> None:
    empty = section_report(title="T", question="q", text="Nothing known.", shown=[])
    md = render_report(title="R", sections=[empty], single=True).markdown
    assert "_No evidence was found for this section._" in md
    assert "## T" not in md  # a single-section report has no section heading
    assert "## Sources" not in md


def test_urls_are_listed_when_sources_have_them() -> None:
    web = Evidence(source_id="w1", title="Page", snippet="s", url="https://example.org/p")
    report = section_report(title="T", question="q", text="Said [1].", shown=[web])
    assert "[1] Page, https://example.org/p" in render_report(title="R", sections=[report]).markdown


def test_years_in_brackets_are_not_citations() -> None:
    assert renumber("Built in [2019], see [1].", {1: 4}) == "Built in [2019], see [4]."
    assert cited_numbers("In [1999] and [2].") == [2]


def test_key_evidence_past_the_sources_is_ignored() -> None:
    section = section_report(title="T", question="q", text="x", shown=[ev("a.md")])
    broken = section.model_copy(update={"key_evidence": [1, 2, 7]})
    md = render_report(title="R", sections=[broken]).markdown
    assert md.count('- "text of a.md"') == 1
