"""Several sequences through the package: a batch over two sequences gives
each the logits it gets alone; prefix copies and the prefix cache."""
import pytest

import fish
from conftest import STORIES


def test_two_sequences_in_one_batch_equal_each_alone():
    np = pytest.importorskip("numpy")
    a = [1, 403, 407, 261, 378]
    b = [1, 346, 306]
    # On the CPU (gpu_layers=0): bit for bit there; a GPU plugin (FISH_GPU=cpu
    # in CI) runs a one-sequence model as a span and two sequences per matmul.
    with fish.Model(STORIES, n_threads=2, n_seq=2, gpu_layers=0) as m:
        m.decode(a + b, list(range(len(a))) + list(range(len(b))), [0] * len(a) + [1] * len(b),
                 [0] * (len(a) - 1) + [1] + [0] * (len(b) - 1) + [1])
        la, lb = m.logits_ith(len(a) - 1), m.logits_ith(len(a) + len(b) - 1)
        assert (m.seq_len(0), m.seq_len(1)) == (5, 3)
    with fish.Model(STORIES, n_threads=2, gpu_layers=0) as alone:
        alone.eval(a)
        assert np.array_equal(alone.logits(), la)
        alone.kv_truncate(0)
        alone.eval(b)
        assert np.array_equal(alone.logits(), lb)


def test_copy_truncate_release_reuse():
    with fish.Model(STORIES, n_threads=2, n_seq=3, gpu_layers=0) as m:
        ids = m.tokenize("Lily and Ben went to the park to play with a red ball.")
        m.decode(ids, list(range(len(ids))), [0] * len(ids))
        m.seq_copy(0, 1, 5)
        assert m.seq_len(1) == 5
        m.seq_truncate(1, 2)
        assert m.seq_len(1) == 2
        m.seq_release(0)
        assert m.seq_len(0) == 0
        assert m.seq_reuse(2, ids) == len(ids) - 1  # from the released sequence
        with pytest.raises(ValueError, match="no sequence 7"):
            m.seq_len(7)
        with pytest.raises(fish.FishError, match="decode"):
            m.decode([1], [5], [0])  # past the sequence's end
        with pytest.raises(ValueError, match="one entry per row"):
            m.decode([1, 2], [0], [0, 0])
