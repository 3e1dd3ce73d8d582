"""report.html from the page data: the template, the escaped JSON, the server-side parts (summary, curves)."""
from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

TEMPLATE = Path(__file__).with_name("page.html")


def script_json(data) -> str:
    """JSON safe inside ``<script type="application/json">``: ``<``, ``>`` and ``&`` become \\u escapes, so
    a text holding ``</script>`` or ``<!--`` cannot end or change the element; JSON.parse reads them back."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def summary_html(summary: dict) -> str:
    if not summary.get("rows"):
        return '<p class="note">No results recorded for this run.</p>'
    head = "".join(f"<th>{escape(str(c))}</th>" for c in summary["columns"])
    rows = "".join("<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in row) + "</tr>" for row in summary["rows"])
    return f'<table id="summary"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def headline(data: dict) -> str:
    if not data.get("points"):
        return "No clusters in this run (no predictions.csv): the summary and the training curves only."
    source = "the cluster head" if data["partition"] == "head" else "KMeans on the final embeddings"
    shown, total = data["num_shown"], data["num_texts"]
    return (f"{total:,} texts in {data['num_clusters']} clusters of {source}. Map: {data['projection']} of the "
            f"final evaluation embeddings, showing {shown:,} of {total:,} texts"
            + (" (a seeded random sample)." if shown < total else "."))


def render_page(data: dict, curves: list[str]) -> str:
    """The whole page as one string: no file or network resource besides itself."""
    values = {
        "TITLE": escape(data.get("title") or "Run report"),
        "HEADLINE": escape(headline(data)),
        "SUMMARY": summary_html(data.get("summary") or {}),
        "CURVES": "".join(curves) or '<p class="note">No training curves: the run has no csv/metrics.csv.</p>',
        "DATA": script_json(data),
    }
    # one pass: a placeholder-like string inside a value is never substituted again
    return re.sub(r"\{\{([A-Z]+)\}\}", lambda m: values[m.group(1)], TEMPLATE.read_text(encoding="utf-8"))
