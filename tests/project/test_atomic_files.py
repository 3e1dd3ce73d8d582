"""atomic_files: the one temporary-file-and-rename writer (checkpoints, results, augmented tables)."""
import errno

import pytest

from textcore.atomic_files import atomic_write, atomic_write_text
from textcore.errors import ENVIRONMENT_ERRNOS, output_error


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "results.json"
    atomic_write_text(path, "old")

    def half_then_fail(handle):
        handle.write(b"new, but only ha")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError):
        atomic_write(path, half_then_fail)
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_text_is_utf8_with_the_newline_asked_for_and_the_folder_is_made(tmp_path):
    path = tmp_path / "new" / "table.csv"
    atomic_write_text(path, "é\n", newline="")
    assert path.read_bytes() == "é\n".encode()


def test_one_errno_table_words_every_environment_error():
    message = str(output_error(OSError(errno.EFBIG, "File too large", "out.csv")))
    assert ENVIRONMENT_ERRNOS[errno.EFBIG] in message and "'out.csv'" in message and "\n" not in message
