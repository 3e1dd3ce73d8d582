"""report.html: one self-contained page to look at a run's clusters, opened offline in any browser.

A 2-D map of the texts (the run's projection, ``evaluation.run_report.plots.project_2d``; at most ``max_points``
texts, a seeded sample) coloured by cluster or true label, the text of a point on hover, a cluster
highlighted from the legend; per cluster its size, c-TF-IDF terms, representative texts, majority label
and purity (labels known) and the label-free silhouette and cohesion; the run's summary table (the
numbers of results.json, as the end-of-run table prints them) and its training curves as inline SVG.

The data sits in a ``<script type="application/json">`` element with ``<``, ``>`` and ``&`` escaped,
and the page's script puts every text into the DOM with ``textContent``: a text is never markup. When
the map is drawn the page sets ``<body data-drawn="n">``; a JavaScript error lands in
``<html data-js-errors>`` (what the browser test reads).

Written at the end of every run by ``callbacks.report`` and by
``python tools.py describe --run <run> --html``.
"""
from evaluation.run_report.html.run_folder import write_run_page

__all__ = ["write_run_page"]
