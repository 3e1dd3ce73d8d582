"""python tools.py download against a local HTTP server: download, checks, resume, offline, builds."""
from __future__ import annotations

import hashlib
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

from ctclust.commands import download as cli
from datamodules.download import build, catalogue, data_folder
from datamodules.download.catalogue import Item
from datamodules.download.fetch import DownloadError, Offline, download, part_path

BODY = bytes(range(256)) * 400  # 102,400 bytes: several progress updates, not one read


class Server:
    """Serves ``files`` (path -> bytes) with HTTP Range; ``broken`` paths stop after half their bytes."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.broken: set[str] = set()
        self.ranges: list[str | None] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest's output clean
                pass

            def do_GET(self):
                body = outer.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                asked = self.headers.get("Range")
                outer.ranges.append(asked)
                start = int(asked.split("=")[1].rstrip("-")) if asked else 0
                self.send_response(206 if asked else 200)
                if asked:
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                if self.path in outer.broken:
                    self.wfile.write(body[start:start + (len(body) - start) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(body[start:])

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def closed_port_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}/file.csv"


def test_download_writes_the_file_and_progress_lines(server, tmp_path):
    server.files["/a.bin"] = BODY
    lines: list[str] = []
    out = download(f"{server.url}/a.bin", tmp_path / "a.bin", hashlib.sha256(BODY).hexdigest(), log=lines.append,
                   every=0.0)
    assert out.read_bytes() == BODY
    assert not part_path(out).exists()
    progress = [line for line in lines if "%" in line]
    assert progress and progress[-1].startswith("a.bin: 102.4 KB / 102.4 KB (100 %)")
    assert "/s" in progress[-1]
    assert lines[-1] == "a.bin: sha256 checked"


def test_without_checksum_the_announced_size_is_checked_and_said(server, tmp_path):
    server.files["/a.bin"] = BODY
    lines: list[str] = []
    download(f"{server.url}/a.bin", tmp_path / "a.bin", None, log=lines.append)
    assert lines[-1] == f"a.bin: {len(BODY)} bytes, the size the server announced (no checksum is known for this file)"


def test_checksum_mismatch_is_one_message_and_the_bad_file_is_gone(server, tmp_path):
    server.files["/a.bin"] = BODY
    with pytest.raises(DownloadError, match=r"has sha256 [0-9a-f]{64}, not the expected 0{64}") as err:
        download(f"{server.url}/a.bin", tmp_path / "a.bin", "0" * 64, log=lambda _: None)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "a.bin").exists() and not part_path(tmp_path / "a.bin").exists()


def test_a_broken_download_resumes_from_its_part_file(server, tmp_path):
    server.files["/a.bin"] = BODY
    server.broken.add("/a.bin")
    dest = tmp_path / "a.bin"
    with pytest.raises(DownloadError, match=r"(received 51200 of the 102400 bytes the server announced|connection "
                                            r"broke).* run the command again to resume"):
        download(f"{server.url}/a.bin", dest, None, log=lambda _: None)
    kept = part_path(dest).stat().st_size
    assert 0 < kept < len(BODY) and not dest.exists()
    server.broken.clear()
    lines: list[str] = []
    download(f"{server.url}/a.bin", dest, hashlib.sha256(BODY).hexdigest(), log=lines.append)
    assert server.ranges[-1] == f"bytes={kept}-"
    assert dest.read_bytes() == BODY
    assert any(line.startswith("a.bin: resuming at") for line in lines)


def test_a_closed_port_is_offline(tmp_path):
    with pytest.raises(Offline):
        download(closed_port_url(), tmp_path / "x.csv", None, log=lambda _: None)


def test_offline_the_command_names_each_missing_file_and_exits_2(monkeypatch, tmp_path, capsys):
    url = closed_port_url()
    items = [Item(name="one", path="short_text/one.csv", what="one", url=url),
             Item(name="two", path="wiki/two.txt", what="two", url=url.replace("file.csv", "two.txt")),
             Item(name="made", path="wiki/made.txt", what="made", inputs=("two",), build="wiki_sample")]
    monkeypatch.setattr(cli, "select", lambda names: items)
    monkeypatch.setitem(catalogue.BY_NAME, "two", items[1])
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--output", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 3
    one = data_folder.relative_to_cwd(tmp_path / "short_text" / "one.csv")
    assert errors[0].startswith(f"error: missing {one}: no connection to 127.0.0.1")
    assert errors[0].endswith(f"download {url} and put it at {one}")
    assert "built from two, which is missing" in errors[2]
    assert "Traceback" not in err


def test_the_command_downloads_then_builds(monkeypatch, server, tmp_path, capsys):
    lines = [f"sentence {i}\n" for i in range(build.WIKI_SAMPLE_LINES + 5)]
    server.files["/wiki1m.txt"] = "".join(lines).encode()
    wiki = Item(name="wiki1m", path="wiki/wiki1m_for_simcse.txt", what="w", url=f"{server.url}/wiki1m.txt")
    sample = catalogue.BY_NAME["wiki_sample"]
    monkeypatch.setitem(catalogue.BY_NAME, "wiki1m", wiki)
    monkeypatch.setattr(cli, "select", lambda names: [wiki, sample])
    assert cli.main(["--output", str(tmp_path)]) == 0
    built = (tmp_path / "wiki" / "wiki_sample.txt").read_text().splitlines(keepends=True)
    assert built == lines[:build.WIKI_SAMPLE_LINES]
    assert cli.main(["--output", str(tmp_path)]) == 0  # a second call finds both and fetches nothing
    assert len(server.ranges) == 1
    assert "wiki/wiki_sample.txt: present" in capsys.readouterr().err


def test_select_puts_inputs_first_and_leaves_the_slow_views_out():
    names = [item.name for item in catalogue.select([])]
    assert names.index("nli_for_simcse") < names.index("nli_pairs") < names.index("nli_sample")
    assert names.index("googlenews_ts_authors") < names.index("googlenews_ts")
    assert not any(name.endswith("_views") for name in names)
    assert [i.name for i in catalogue.select(["tweet_views"])] == ["tweet", "tweet_views"]


def test_unknown_name_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["nope", "--output", "/nonexistent"])
    assert exit_info.value.code == 2
    assert "'nope' is not a data file or group" in capsys.readouterr().err


def test_nli_builds(tmp_path):
    (tmp_path / "nli").mkdir()
    triplets = pd.DataFrame({"sent0": [f"p{i}" for i in range(30)], "sent1": [f"e{i}" for i in range(30)],
                             "hard_neg": [f"c{i}" for i in range(30)]})
    triplets.to_csv(tmp_path / "nli" / "nli_for_simcse.csv", index=False)
    build.nli_pairs(catalogue.BY_NAME["nli_pairs"], tmp_path, print)
    pairs = pd.read_csv(tmp_path / "nli" / "nli_pairs.csv")
    assert len(pairs) == 60 and list(pairs.iloc[1]) == ["p0", "c0", "contradiction"]
    build.nli_sample(catalogue.BY_NAME["nli_sample"], tmp_path, print)
    sample = pd.read_csv(tmp_path / "nli" / "nli_sample.csv")
    assert len(sample) == 60 and set(map(tuple, sample.values)) == set(map(tuple, pairs.values))


def test_googlenews_ts_keeps_the_authors_eda_column(tmp_path):
    (tmp_path / "short_text").mkdir()
    pd.DataFrame({"label": [1, 2], "text0": ["a b", "c d"], "text1": ["b a", "d c"]}).to_csv(
        tmp_path / "short_text" / "googlenews_ts_authors.csv", index=False)
    build.googlenews_ts(catalogue.BY_NAME["googlenews_ts"], tmp_path, print)
    out = pd.read_csv(tmp_path / "short_text" / "googlenews_ts.csv")
    assert list(out.columns) == ["label", "text0", "text1"] and list(out["text1"]) == ["b a", "d c"]


def test_googlenews_ts_without_eda_column_gets_one_from_augment(tmp_path):
    (tmp_path / "short_text").mkdir()
    texts = ["the quick brown fox jumps over the lazy dog", "a small cat sat on the warm mat today"]
    pd.DataFrame({"label": [1, 2], "text": texts}).to_csv(tmp_path / "short_text" / "googlenews_ts_authors.csv",
                                                         index=False)
    build.googlenews_ts(catalogue.BY_NAME["googlenews_ts"], tmp_path, print)
    out = pd.read_csv(tmp_path / "short_text" / "googlenews_ts.csv")
    assert list(out.columns) == ["label", "text0", "text1"]
    assert list(out["text0"]) == texts
    assert all(sorted(a.split()) != [] for a in out["text1"]) and list(out["text1"]) != texts


def test_catalogue_checksums_match_the_test_data(shared_data):
    for item in catalogue.ITEMS:
        if item.sha256 and (shared_data / item.path).is_file():
            assert hashlib.sha256((shared_data / item.path).read_bytes()).hexdigest() == item.sha256, item.name


def test_for_file_finds_an_item_in_any_data_folder():
    assert catalogue.for_file(Path("/x/wiki/wiki1m_for_simcse.txt")).name == "wiki1m"
    assert catalogue.for_file(Path("/x/short_text/tweet_trans_subst_20.csv")).name == "tweet_views"
    assert catalogue.for_file(Path("/x/mine/tweet.csv")) is None
    assert catalogue.dest_of(Path("/x/short_text/tweet.csv"), catalogue.BY_NAME["tweet"]) == Path("/x")
