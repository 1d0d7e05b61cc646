"""Where the tests find the shared models and the fish command (CTest sets
FISH_MODELS, FISH_BIN and FISH_LIBRARY; by hand, from the project root:
FISH_LIBRARY=build/bin/libfish.so FISH_BIN=build/bin/fish python3 -m pytest python/tests)."""
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.environ.get("FISH_MODELS", os.path.join(ROOT, "..", "shared", "models"))
FISH_BIN = os.environ.get("FISH_BIN", os.path.join(ROOT, "build", "bin", "fish"))
STORIES = os.path.join(MODELS, "stories260K.gguf")

# stories260K's greedy text after BOS alone (48 tokens): the llama2.c README's
# reference, as ../shared/models/SOURCES.md gives it.
STORIES_FROM_BOS = (" Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
                    " One day, she saw a big, red ball. She wanted to")


def run_fish(*args, input=""):
    r = subprocess.run([FISH_BIN, *args], input=input, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def stories():
    if not os.path.exists(STORIES):
        pytest.skip(f"no {STORIES}")
    import fish

    m = fish.Model(STORIES, n_threads=2, n_seq=4, gpu_layers=0)
    yield m
    m.close()
