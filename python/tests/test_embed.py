"""Model.embed: numpy vectors equal to `fish embed`, unit length, a batch equal
to each input alone, packed over several sequences (n_seq) equal to one at a
time, pooling modes, token-id inputs, refusals."""
import json

import numpy as np
import pytest

import fish
from conftest import STORIES, run_fish

TEXTS = ["Once upon a time, there was a little cat.", "The dog ran to the park", "Lily had a big red ball"]


def test_embed_one_text_is_fish_embeds_unit_vector(stories):
    v = stories.embed(TEXTS[0])
    assert isinstance(v, np.ndarray) and v.dtype == np.float32
    assert v.shape == (stories.n_embd,) == (64,)
    assert abs(float(np.linalg.norm(v.astype(np.float64))) - 1.0) < 1e-6
    cli = json.loads(run_fish("embed", "-m", STORIES, "-p", TEXTS[0], "-t", "2", "-ngl", "0").splitlines()[0])
    assert cli["dim"] == 64
    assert np.array_equal(v, np.array(cli["embedding"], dtype=np.float32))


def test_embed_batch_equals_each_alone_and_token_ids(stories):
    m = stories.embed(TEXTS)
    assert m.shape == (3, 64)
    for i, t in enumerate(TEXTS):
        assert np.array_equal(m[i], stories.embed(t))
    ids = stories.tokenize(TEXTS[1])
    assert np.array_equal(stories.embed(ids), m[1])
    assert np.array_equal(stories.embed([ids, ids])[1], m[1])


def test_embed_pooling_and_normalize(stories):
    raw = stories.embed(TEXTS[2], normalize=False)
    unit = stories.embed(TEXTS[2])
    assert np.allclose(unit, raw / np.linalg.norm(raw), atol=1e-6)
    last = stories.embed(TEXTS[2], pooling="last")
    first = stories.embed(TEXTS[2], pooling="first")
    assert not np.array_equal(unit, last) and not np.array_equal(last, first)
    # BOS first: the first token's vector is the same for every text.
    assert np.array_equal(first, stories.embed(TEXTS[0], pooling="cls"))


def test_embed_keeps_other_sequences(stories):
    ids = stories.tokenize("Once upon")
    stories.seq_truncate(0, 0)
    stories.decode(ids, list(range(len(ids))), [0] * len(ids))
    stories.embed(TEXTS[0], seq=3)
    assert stories.seq_len(0) == len(ids)
    assert stories.seq_len(3) == 0
    stories.seq_truncate(0, 0)


def test_embed_refusals(stories):
    with pytest.raises(ValueError, match="pooling"):
        stories.embed("a", pooling="max")
    with pytest.raises(ValueError, match="no inputs"):
        stories.embed([])
    with pytest.raises(ValueError, match="input 1 has no tokens"):
        stories.embed(["a", []])
    with pytest.raises(TypeError):
        stories.embed(["a", 3.5])
    with pytest.raises(fish.FishError, match="outside the vocabulary"):
        stories.embed([1, 100000])
    with pytest.raises(fish.FishError, match="context length"):
        stories.embed([5] * (stories.n_ctx + 1))


def test_embed_packed_over_sequences_equals_one_at_a_time(stories):
    # 1 token, short texts, and one longer than a 512-row piece.
    inputs = [[1]] + TEXTS + [" ".join(TEXTS * 20)]
    assert len(stories.tokenize(inputs[-1])) > 512
    kept = stories.tokenize("Once upon")
    stories.decode(kept, list(range(len(kept))), [0] * len(kept))
    for pooling in ("mean", "last"):
        alone = stories.embed(inputs, pooling=pooling, seq=1)
        packed = stories.embed(inputs, pooling=pooling, seq=1, n_seq=3)
        assert np.array_equal(packed, alone)
    assert [stories.seq_len(s) for s in range(4)] == [len(kept), 0, 0, 0]
    stories.seq_truncate(0, 0)


def test_embed_n_seq_refused_naming_it(stories):
    for seq, n_seq in ((0, 0), (0, 5), (2, 3)):
        with pytest.raises(fish.FishError, match=f"params.n_seq {n_seq} is outside 1..{4 - seq}"):
            stories.embed(TEXTS, seq=seq, n_seq=n_seq)
