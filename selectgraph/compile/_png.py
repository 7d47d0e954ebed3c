"""PNG pictures of a graph: its Mermaid diagram drawn by Mermaid itself in a headless Chromium.

Offline: the Mermaid script is the copy the studio ships, and the browser is a
local Chromium driven by Playwright (the ``png`` extra). Mermaid's own layout is
what the studio shows, so the picture matches the page.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Final

from selectgraph.core._errors import SelectGraphError

__all__ = ["PngUnavailable", "render_png"]

MERMAID_JS: Final = Path(__file__).resolve().parents[1] / "studio/static/vendor/mermaid.min.js"
_ARGS: Final = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"]
_PAGE: Final = "<!doctype html><html><body style='margin:0;background:white'></body></html>"
_DRAW: Final = """async (text) => {
  mermaid.initialize({startOnLoad: false, securityLevel: "strict"});
  const {svg} = await mermaid.render("graph", text);
  document.body.innerHTML = svg;
}"""


class PngUnavailable(SelectGraphError, RuntimeError):
    """No way to draw a PNG here: Playwright or a Chromium is missing."""


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def render_png(mermaid: str, path: Path) -> Path:
    """Draw ``mermaid`` (a flowchart's text) to the PNG file ``path``.

    Raises:
        PngUnavailable: Playwright is not installed, or no Chromium can be started.
    """
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        raise PngUnavailable(
            'visualize("png") draws the graph with Mermaid in a headless Chromium: '
            'pip install "selectgraph[png]" and install Chromium (apt install chromium, '
            "or playwright install chromium); visualize('mermaid') needs neither"
        ) from None
    with sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(executable_path=_chromium(), args=_ARGS)
        except Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise PngUnavailable(
                f"no Chromium to draw the PNG with ({first}); install one "
                "(apt install chromium, or playwright install chromium)"
            ) from None
        try:
            page = browser.new_page(device_scale_factor=2)
            page.set_content(_PAGE)
            page.add_script_tag(path=str(MERMAID_JS))
            page.evaluate(_DRAW, mermaid)
            path.write_bytes(page.locator("svg").first.screenshot(type="png"))
        finally:
            browser.close()
    return path
