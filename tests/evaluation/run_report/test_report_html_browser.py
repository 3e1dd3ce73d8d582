"""report.html in a real headless Chromium: the map draws every point without a JavaScript error, a
hovered text shows as text (its markup never runs), and a screenshot is written.

Skipped when no ``chromium`` is on PATH (Debian: ``apt-get install -y chromium``; .ci/run installs it)."""
import re
import shutil
import subprocess
from html import unescape

import pytest

from evaluation.run_report.html.data import page_data
from evaluation.run_report.html.page import render_page
from tests.evaluation.run_report.test_report_html import PAYLOADS, page_json, synthetic_200k, tiny_run  # noqa: F401 - the fixture

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")


def chromium(tmp_path, url: str, *args: str) -> str:
    """Run headless Chromium offline on ``url``; returns its stdout."""
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,1700",
               *args, url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def attribute(dom: str, tag: str, name: str) -> str | None:
    found = re.search(rf"<{tag}\b[^>]*\b{name}=\"([^\"]*)\"", dom)
    return unescape(found.group(1)) if found else None


def test_map_draws_every_point_and_hovered_markup_stays_text(tiny_run, tmp_path):  # noqa: F811
    out, _ = tiny_run
    page = out / "report.html"
    data = page_json(page.read_text(encoding="utf-8"))
    hovered = data["points"]["text"].index(PAYLOADS[1])  # the text with </script><img onerror=...>
    dom = chromium(tmp_path, f"{page.as_uri()}#hover={hovered}&cluster={data['points']['cluster'][hovered]}",
                   "--dump-dom")
    assert attribute(dom, "html", "data-js-errors") is None, attribute(dom, "html", "data-js-errors")
    assert attribute(dom, "body", "data-drawn") == str(data["num_shown"]) == "41"
    assert attribute(dom, "body", "data-pwned") is None and "<img" not in dom  # the onerror never ran
    tip = re.search(r'<div id="tip"[^>]*>(.*?)</div></div>', dom, re.S)
    assert tip and unescape(re.sub(r"<[^>]+>", " ", tip.group(1))).split() == (
        f"cluster {data['points']['cluster'][hovered]} · label {data['classes'][data['points']['label'][hovered]]} · "
        f"row {data['points']['row'][hovered]} {PAYLOADS[1]}").split()
    assert len(re.findall(r'<li data-key="\d+"', dom)) == len(data["clusters"]) == 3
    assert len(re.findall(r'<div class="card[^"]*" id="cluster-\d+"', dom)) == 3
    assert len(re.findall(r'class="card active"', dom)) == 1  # the #cluster= highlight


def test_screenshot_of_the_page(tiny_run, tmp_path):  # noqa: F811
    out, _ = tiny_run
    shot = tmp_path / "report.png"
    chromium(tmp_path, (out / "report.html").as_uri() + "#hover=0", f"--screenshot={shot}")
    content = shot.read_bytes()
    assert content[:8] == b"\x89PNG\r\n\x1a\n" and len(content) > 20_000
    print(f"screenshot: {shot}")


def test_sampled_page_of_200k_texts_draws_its_sample(tmp_path):
    texts, clusters, embeddings, report = synthetic_200k()
    data = page_data(texts, clusters, embeddings, report, projection="pca", max_points=5000, seed=0)
    page = tmp_path / "report.html"
    page.write_text(render_page(data, []), encoding="utf-8")
    dom = chromium(tmp_path, page.as_uri() + "#cluster=7", "--dump-dom")
    assert attribute(dom, "html", "data-js-errors") is None, attribute(dom, "html", "data-js-errors")
    assert attribute(dom, "body", "data-drawn") == "5000"
    assert "showing 5,000 of 200,000 texts (a seeded random sample)" in unescape(dom)
    assert len(re.findall(r'<li data-key="\d+"', dom)) == 30
