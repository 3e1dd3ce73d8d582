"""Unit tests of the pieces of exact resume: the resumable sampler, the streaming skips (also with
DataLoader workers), the training position and the repair of Lightning's loop state."""
from __future__ import annotations

import copy

import pytest
import torch
from torch.utils.data import DataLoader

from callbacks.safety.checkpointing import normalize_loop_state
from datamodules.resume import ResumableSampler, StreamSkip, training_position, worker_batches_done


def test_sampler_permutation_depends_on_seed_and_epoch_only():
    a, b = ResumableSampler(20, seed=3), ResumableSampler(20, seed=3)
    assert list(a) == list(b) and sorted(a) == list(range(20))
    a.set_epoch(1)
    assert list(a) != list(b)
    assert list(a) == torch.randperm(20, generator=torch.Generator().manual_seed(4)).tolist()


def test_sampler_shards_like_distributed_sampler_and_every_row_is_used():
    shards = [list(ResumableSampler(10, seed=0, rank=r, world_size=3)) for r in range(3)]
    assert [len(s) for s in shards] == [4, 4, 4]  # padded to 12 by wrapping around
    assert set(sum(shards, [])) == set(range(10))
    assert sum(len(set(s) & set(t)) for i, s in enumerate(shards) for t in shards[i + 1:]) <= 2


def test_sampler_resume_skips_the_trained_part_of_its_epoch_only():
    full = ResumableSampler(20, seed=1)
    full.set_epoch(2)
    resumed = ResumableSampler(20, seed=1)
    resumed.resume(2, 8)
    assert list(resumed) == list(full)[8:] and len(resumed) == 20  # Lightning counts the skipped batches
    resumed.set_epoch(3)
    full.set_epoch(3)
    assert list(resumed) == list(full)


@pytest.mark.parametrize("workers", [0, 2])
def test_stream_skip_resumes_a_multi_worker_stream_at_the_next_batch(workers, tmp_path):
    from datamodules.streaming import EpochAwareLoader
    from datamodules.streaming_text import StreamingTextDataset

    def loader(path, skip=None):
        dataset = StreamingTextDataset(path, buffer_size=8, seed=5)
        dataset.set_epoch(1)
        if skip is not None:
            dataset.resume_skip = skip
        return EpochAwareLoader(dataset, batch_size=4, num_workers=workers, collate_fn=list)

    path = tmp_path / "lines.txt"
    path.write_text("\n".join(f"sentence {i}" for i in range(37)) + "\n")
    full = list(loader(path))
    for done in (1, 3, 4):
        assert list(loader(path, StreamSkip(1, done, 4))) == full[done:], done
    assert list(loader(path, StreamSkip(0, 3, 4))) == full  # another epoch's skip does nothing


@pytest.mark.parametrize("workers", [0, 2])
def test_streaming_nli_skip_resumes_at_the_next_batch(tmp_path, workers):
    from datamodules.nli import StreamingNLIDataset
    from tests.helpers.data_files import write_csv

    rows = [[f"premise {i}", f"hypothesis {i}", "entailment" if i % 3 else "contradiction"] for i in range(30)]
    path = write_csv(tmp_path / "nli.csv", ["sentence1", "sentence2", "gold_label"], rows)

    def batches(skip=None):
        dataset = StreamingNLIDataset(path, buffer_size=6, seed=2, rank=0, world_size=1)
        dataset.set_epoch(2)
        dataset.resume_skip = skip
        return list(DataLoader(dataset, batch_size=4, num_workers=workers, collate_fn=list))

    full = batches()
    assert list(batches(StreamSkip(2, 2, 4))) == full[2:]


def test_worker_batches_done_counts_round_robin_batches():
    assert [worker_batches_done(5, w, 2) for w in range(2)] == [3, 2]
    assert [worker_batches_done(1, w, 3) for w in range(3)] == [1, 0, 0]
    with pytest.raises(ValueError):
        worker_batches_done(1, 2, 2)



def _trainer(epoch_started, ready, last, per_epoch=5):
    from types import SimpleNamespace

    batch = SimpleNamespace(current=SimpleNamespace(ready=ready), is_last_batch=last)
    fit_loop = SimpleNamespace(epoch_progress=SimpleNamespace(current=SimpleNamespace(started=epoch_started)),
                               epoch_loop=SimpleNamespace(batch_progress=batch))
    return SimpleNamespace(fit_loop=fit_loop, num_training_batches=per_epoch)


def test_training_position_counts_the_epoch_whose_batches_were_last_started():
    assert training_position(_trainer(2, 3, False)) == (1, 3)  # epoch 1, 3 batches done
    assert training_position(_trainer(2, 5, True)) == (2, 0)  # epoch 1 finished: the start of epoch 2
    assert training_position(_trainer(0, 0, False)) == (0, 0)


def _loops(batch_current, batch_total, epoch, stepped, last):
    progress = ("ready", "started", "processed", "completed")
    return {"loops": {"fit_loop": {
        "epoch_loop.state_dict": {"_batches_that_stepped": stepped},
        "epoch_loop.batch_progress": {"current": dict(zip(progress, batch_current)),
                                      "total": dict(zip(progress, batch_total)), "is_last_batch": last},
        "epoch_progress": {"current": dict(zip(progress, epoch)), "total": dict(zip(progress, epoch))},
    }}}


def test_loop_state_saved_inside_an_epoch_is_left_alone():
    saved = _loops((3, 3, 3, 2), (8, 8, 8, 7), (2, 2, 1, 1), 7, False)
    assert normalize_loop_state(copy.deepcopy(saved)) is None


def test_end_of_training_in_the_middle_of_an_epoch_becomes_the_end_of_its_last_batch():
    # Lightning 2.6 at on_train_end after max_steps=7 (epoch 1, batch 2): batch and epoch counted done
    saved = _loops((2, 2, 2, 2), (7, 7, 7, 7), (2, 2, 2, 2), 7, False)
    assert normalize_loop_state(saved) == "end of the last batch"
    assert saved == _loops((2, 2, 2, 1), (7, 7, 7, 6), (2, 2, 1, 1), 6, False)  # what on_train_batch_end saves


@pytest.mark.parametrize("form", ["after_last_batch", "epoch_end", "train_end"])
def test_a_finished_epoch_becomes_a_clean_epoch_boundary(form):
    saved = {  # epoch 0 of 5 batches just finished, at the three moments Lightning 2.6 resumes wrongly
        "after_last_batch": _loops((5, 5, 5, 4), (5, 5, 5, 4), (1, 1, 0, 0), 4, True),
        "epoch_end": _loops((5, 5, 5, 5), (5, 5, 5, 5), (1, 1, 1, 0), 5, True),
        "train_end": _loops((5, 5, 5, 5), (5, 5, 5, 5), (1, 1, 1, 1), 5, True),
    }[form]
    assert normalize_loop_state(saved) == "epoch boundary"
    assert saved == _loops((0, 0, 0, 0), (5, 5, 5, 5), (1, 1, 1, 1), 5, False)


def test_resume_position_converts_another_batch_size_and_restarts_for_another_world_size():
    from types import SimpleNamespace

    from datamodules.resume import ResumableData

    class Base:
        def load_state_dict(self, state_dict):
            pass

    class Data(ResumableData, Base):
        def __init__(self, batch_size, world):
            self.batch_size = batch_size
            self.trainer = SimpleNamespace(world_size=world)

    data = Data(batch_size=8, world=1)
    data.load_state_dict({"training_position": {"epoch": 2, "batches": 3, "world_size": 1, "batch_size": 8}})
    assert data.resume_position() == (2, 3)
    data.batch_size = 16
    with pytest.warns(UserWarning, match="batch_size=16"):
        assert data.resume_position() == (2, 1)  # 24 texts done: the 2nd batch of 16 holds the 25th
    data.trainer.world_size = 2
    with pytest.warns(UserWarning, match="2 processes"):
        assert data.resume_position() == (2, 0)
