"""A griffe extension for the API reference: Sphinx roles as links, field descriptions.

mkdocs.yml loads it into mkdocstrings' Python handler; mkdocs does not publish it
(``exclude_docs``). The docstrings name other objects with Sphinx roles
(``:class:`GraphState```, ``:meth:`~selectgraph.CompiledGraph.astream```), which
Markdown would show as they are: each becomes the name in code, linked to the
object's entry when the reference renders it. ``>>>`` examples render as code: an
``Example:`` section is read as ``Examples:``, and examples outside any section are
fenced. A field documented only with ``Field(description=...)`` (the supervisor's
structured answers) gets that description as its docstring, so the reference shows it.
"""

from __future__ import annotations

import ast
import re
from html import escape
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|meth|func|data|attr|exc|mod|obj):`(?P<short>~?)(?P<target>[^`]+)`")
"""A Sphinx cross-reference role: ``:class:`Name```, ``:meth:`~module.Class.method```."""

EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.M)
"""Google style's singular heading, which griffe would render as a plain admonition."""

DOCTEST = re.compile(r"^>>> .*(?:\n(?![ \t]*$).*)*", re.M)
"""``>>>`` lines outside any section, up to a blank line: Markdown would quote them."""

TOP_LEVEL = "selectgraph"


class SphinxRolesAndFieldDescriptions(griffe.Extension):
    """Rewrites Sphinx roles in every docstring; documents fields from their description."""

    def on_object(self, *, obj: griffe.Object, loader: Any, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring, once the tree is complete and names can be found."""
        if obj.docstring is not None:
            value = ROLE.sub(lambda match: _link(match, obj), obj.docstring.value)
            value = EXAMPLE.sub(r"\1Examples:", value)  # whose >>> lines griffe shows as code
            obj.docstring.value = DOCTEST.sub(lambda match: f"```pycon\n{match[0]}\n```", value)

    def on_attribute_instance(
        self, *, node: Any, attr: griffe.Attribute, agent: Any, **kwargs: Any
    ) -> None:
        """Give an undocumented ``x: T = Field(description="...")`` its description."""
        if attr.docstring is not None or not isinstance(node, ast.Assign | ast.AnnAssign):
            return
        if isinstance(node.value, ast.Call):
            for keyword in node.value.keywords:
                if keyword.arg == "description" and isinstance(keyword.value, ast.Constant):
                    attr.docstring = griffe.Docstring(str(keyword.value.value), parent=attr)


def _link(match: re.Match[str], obj: griffe.Object) -> str:
    """The role as ``<code>`` in an autorefs link that is dropped when nothing matches."""
    target = match["target"].removesuffix("()")
    title = target.rsplit(".", 1)[-1] if match["short"] else target
    identifier = target if target.startswith(f"{TOP_LEVEL}.") else _qualify(target, obj)
    return (
        f'<autoref identifier="{escape(identifier)}" optional>'
        f"<code>{escape(title)}</code></autoref>"
    )


def _qualify(target: str, obj: griffe.Object) -> str:
    """A short name's path: a member of its class, a name of its module, or a top-level name."""
    head, _, rest = target.partition(".")
    scopes = [obj, obj.parent] if obj.is_class else [obj.parent]
    for scope in [*scopes, obj.module]:
        if scope is None or head not in scope.all_members:
            continue
        member = scope.all_members[head]
        path = member.target_path if isinstance(member, griffe.Alias) else member.path
        return f"{path}.{rest}" if rest else path
    return f"{TOP_LEVEL}.{target}"
