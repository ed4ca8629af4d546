"""The study report: one self-contained HTML file with the analyses' plots and tables.

:func:`build_report` returns the HTML; :func:`write_report` writes it atomically. Figures are
drawn with matplotlib (Agg) and embedded as base64 PNG, so the file opens anywhere offline.
"""

from __future__ import annotations

from embstab.report.builder import build_report, write_report

__all__ = ["build_report", "write_report"]
