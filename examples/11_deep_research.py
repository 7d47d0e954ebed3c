"""Deep research over a folder of documents: an outline, parallel research loops, a cited report.

Offline (no API key) the agents run the embedded SmolLM2 model in-process, and the
run ends within --max-seconds (180 by default) with a report citing documents of the
example corpus, marked degraded with its reasons when the small model fell short.
With OPENAI_API_KEY or ANTHROPIC_API_KEY set, the same code asks a hosted model;
SELECTGRAPH_PROVIDER=local gives the echo test double (placeholder answers, real
searches).
The live progress goes to stderr; the report to stdout (or --out).

Run: python examples/11_deep_research.py "How do grid-scale batteries compare with pumped hydro?"
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from rich.console import Console

from selectgraph.research import (
    DeepResearch,
    LocalCorpusSearch,
    ResearchBudget,
    ResearchProgress,
    ResearchResult,
)

CORPUS = Path(__file__).resolve().parent / "research_corpus"
QUESTION = "How do grid-scale batteries compare with pumped hydro for long-duration storage?"


# What `selectgraph run/studio examples/11_deep_research.py` load: a research app loads
# like a graph, and text given to it is the question.
graph = DeepResearch(
    tools=[LocalCorpusSearch(CORPUS)],
    budget=ResearchBudget(max_iterations=3, max_seconds=180.0),
    max_sections=3,
)


async def research(args: argparse.Namespace) -> ResearchResult:
    deep = DeepResearch(
        tools=[LocalCorpusSearch(args.corpus)],
        budget=ResearchBudget(
            max_iterations=args.iterations, max_tokens=args.max_tokens, max_seconds=args.max_seconds
        ),
        max_sections=args.sections,
    )
    progress = ResearchProgress(Console(stderr=True), title="Deep research")
    with progress:
        return await deep.arun(args.question, observers=[progress])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("question", nargs="?", default=QUESTION)
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="a folder of .md/.txt files")
    parser.add_argument("--sections", type=int, default=3, help="sections at most")
    parser.add_argument("--iterations", type=int, default=3, help="research iterations a section")
    parser.add_argument("--max-tokens", type=int, default=None, help="token budget of the run")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=180.0,
        help="time limit of the run, seconds (a deadline: the report is written by then)",
    )
    parser.add_argument("--out", type=Path, default=None, help="write the report here")
    args = parser.parse_args()

    result = asyncio.run(research(args))
    if args.out is not None:
        args.out.write_text(result.markdown)
        print(f"report written to {args.out}")
    else:
        print(result.markdown)
    usage = result.total_usage
    print(
        f"{len(result.sections)} section(s), {len(result.sources)} source(s), "
        f"{usage.calls} model calls, {usage.total_tokens} tokens, quality {result.quality}"
    )
    for reason in result.degraded_reasons:
        print(f"  degraded: {reason}")


if __name__ == "__main__":
    main()
