"""The fish package on the shared stories260K model: loading and its errors,
tokens against `fish tokenize`, logits as numpy arrays, evaluation."""
import os

import pytest

import fish
from conftest import STORIES, run_fish


def test_version_and_info(stories):
    assert fish.version() == run_fish("--version").split()[1]
    i = stories.info
    assert (i.arch, i.tokenizer, i.n_vocab, i.n_layer, i.n_embd, i.bos, i.eos) == ("llama", "spm", 512, 5, 64, 1, 2)
    assert i.n_ctx == 2048
    assert stories.n_seq() == 4


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(fish.FishError, match="no-such.gguf"):
        fish.Model(str(tmp_path / "no-such.gguf"))
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 20)
    with pytest.raises(fish.FishError, match="bad.gguf"):
        fish.Model(str(bad))
    with pytest.raises(fish.FishError, match="n_seq"):
        fish.Model(STORIES, n_seq=100000)


def test_tokens_match_the_cli(stories):
    text = "Lily and Ben went to the park. They saw a big dog!"
    ids = [int(x) for x in run_fish("tokenize", "-m", STORIES, "-p", text).split()]
    assert stories.tokenize(text) == ids
    assert stories.tokenize(text, add_special=False) == ids[1:]
    assert stories.detokenize(ids) == text
    assert b"".join(stories.token_to_piece(t) for t in ids[1:]) == (" " + text).encode()
    assert stories.is_eog(2) and not stories.is_eog(1)
    assert stories.tokenize("") == [1]
    with pytest.raises(TypeError):
        stories.detokenize(["a"])


def test_logits_are_numpy_and_greedy_follows_them(stories):
    np = pytest.importorskip("numpy")
    stories.kv_truncate(0)
    stories.eval([1])
    lg = stories.logits()
    assert isinstance(lg, np.ndarray) and lg.dtype == np.float32 and lg.shape == (512,)
    assert int(lg.argmax()) == 403  # " Once": the reference's first token (SOURCES.md)
    stories.eval([403])
    assert int(stories.logits().argmax()) == 407
    assert stories.kv_len() == 2
    stories.eval([1, 403, 407], pos=0, all_logits=True)
    assert int(stories.logits(0).argmax()) == 403
    assert int(stories.logits(1).argmax()) == 407
    stats = stories.stats()
    assert stats["n_prompt_tokens"] >= 3


def test_closed_model_is_an_error():
    m = fish.Model(STORIES, n_threads=1, vocab_only=True)
    assert m.tokenize("Hi")
    m.close()
    with pytest.raises(fish.FishError, match="closed"):
        m.tokenize("Hi")


def test_the_library_is_found_through_fish_library():
    assert os.environ.get("FISH_LIBRARY", "").endswith("libfish.so")
