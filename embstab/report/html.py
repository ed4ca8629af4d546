"""Minimal self-contained HTML: escaped text, tables from DataFrames and inline PNG images."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

__all__ = ["Section", "image", "page", "paragraph", "table"]

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; color: #222; line-height: 1.45; overflow-wrap: break-word; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
.table-box { max-width: 100%; overflow-x: auto; margin: 0.8em 0; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
table.long-text-last td:last-child { min-width: 14em; max-width: 32em; }
table.long-text-last td:last-child, table.long-text-last th:last-child { text-align: left; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; height: auto; display: block; margin: 0.8em 0; }
.note { color: #555; font-size: 0.9em; }
nav ul { columns: 2; }
"""

#: Characters from which a last column's text counts as long (a note that should wrap, not squeeze).
_LONG_TEXT = 40


class Section:
    """A titled part of the report: an ``<h2>`` with an anchor and a list of HTML fragments.

    Parameters
    ----------
    title : str
        The heading (escaped when rendered).
    anchor : str
        The ``id`` the table of contents links to.
    """

    def __init__(self, title: str, anchor: str):
        self.title = title
        self.anchor = anchor
        self.parts: list[str] = []

    def add(self, fragment: str) -> "Section":
        """Append an HTML fragment to the section.

        Parameters
        ----------
        fragment : str
            An HTML fragment (already escaped).

        Returns
        -------
        Section
            This section, so calls can be chained.
        """
        self.parts.append(fragment)
        return self

    def render(self) -> str:
        """The section as HTML.

        Returns
        -------
        str
            A ``<section>`` with the escaped title as ``<h2>`` and the fragments in order.
        """
        return (f'<section id="{html.escape(self.anchor)}"><h2>{html.escape(self.title)}</h2>\n'
                + "\n".join(self.parts) + "</section>")


def paragraph(text: str, css_class: str | None = None) -> str:
    """An escaped ``<p>``.

    Parameters
    ----------
    text : str
        Plain text (escaped here).
    css_class : str, optional
        A ``class`` attribute for the paragraph.

    Returns
    -------
    str
        The ``<p>`` element.
    """
    cls = f' class="{css_class}"' if css_class else ""
    return f"<p{cls}>{html.escape(text)}</p>"


def table(df: pd.DataFrame, digits: int | dict[str, int] = 2, index: bool = True) -> str:
    """A DataFrame as an HTML table, inside a box that scrolls sideways when the table is wider than the page.

    Floats are rounded to ``digits`` decimals (or per column, with a dict whose missing columns
    get 2); NaN shows as an en dash. A last column of long text (a note) wraps inside a readable width
    instead of being squeezed to its longest word.

    Parameters
    ----------
    df : pandas.DataFrame
        The table.
    digits : int or dict of str to int, default 2
        Decimals of float columns, for all of them or per column.
    index : bool, default True
        Whether to show the index.

    Returns
    -------
    str
        A ``<div class="table-box">`` holding the ``<table>`` element, cells escaped.
    """
    def fmt(n: int):
        return lambda v: "–" if not np.isfinite(v) else f"{v:.{n}f}"

    per_column = digits if isinstance(digits, dict) else {}
    default = 2 if isinstance(digits, dict) else digits
    formatters = {c: fmt(per_column.get(c, default)) for c in df.columns
                  if pd.api.types.is_float_dtype(df[c])}
    last = df.iloc[:, -1] if df.shape[1] else None
    long_text = (last is not None and not pd.api.types.is_numeric_dtype(last)
                 and last.astype(str).str.len().max() > _LONG_TEXT)
    # the box keeps a wide table from widening the page: it scrolls inside its own width instead
    return ('<div class="table-box">'
            + df.to_html(index=index, escape=True, na_rep="–", formatters=formatters, float_format=fmt(default),
                         border=0, classes="long-text-last" if long_text else None)
            + "</div>")


def image(b64_png: str, alt: str) -> str:
    """An ``<img>`` with the PNG embedded as a data URI (no external file).

    Parameters
    ----------
    b64_png : str
        The PNG, base64-encoded (:func:`embstab.report.plots.to_base64_png`).
    alt : str
        Alternative text (escaped here).

    Returns
    -------
    str
        The ``<img>`` element.
    """
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{b64_png}">'


def page(title: str, intro: list[str], sections: list[Section]) -> str:
    """The complete HTML document, with a table of contents.

    Parameters
    ----------
    title : str
        Page title and ``<h1>`` (escaped here).
    intro : list of str
        HTML fragments shown before the table of contents.
    sections : list of Section
        The sections, in order; each gets an entry in the table of contents.

    Returns
    -------
    str
        The HTML document, styles inlined.
    """
    toc = "".join(f'<li><a href="#{html.escape(s.anchor)}">{html.escape(s.title)}</a></li>'
                  for s in sections)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            f"<h1>{html.escape(title)}</h1>\n" + "\n".join(intro)
            + f"\n<nav><ul>{toc}</ul></nav>\n" + "\n".join(s.render() for s in sections)
            + "\n</body>\n</html>\n")
