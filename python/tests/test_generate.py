"""Generation: greedy text against the reference and `fish run`, streaming
pieces, stop strings, seeds, sampling errors, and the KV prefix kept between
calls."""
import pytest

import fish
from conftest import STORIES, STORIES_FROM_BOS, run_fish


def test_greedy_from_bos_is_the_reference(stories):
    g = stories.generate("", max_tokens=48, temperature=0)
    pieces = list(g)
    assert "".join(pieces) == STORIES_FROM_BOS
    assert len(pieces) > 10  # it streamed
    assert g.finish_reason == "length"
    assert len(g.tokens) == 48
    assert g.tokens[:5] == [403, 407, 261, 378, 432]  # SOURCES.md's ids


def test_equal_to_fish_run(stories):
    ref = run_fish("run", "-m", STORIES, "-p", "Once upon a time", "-n", "40", "--temp", "0", "-t", "2", "-ngl", "0")
    assert stories.generate("Once upon a time", max_tokens=40, temperature=0, stream=False) == ref[:-1]


def test_the_prompt_prefix_stays_cached(stories):
    a = stories.generate("Lily went to the park and", max_tokens=8, temperature=0)
    text = "".join(a)
    b = stories.generate("Lily went to the park and", max_tokens=8, temperature=0)
    assert "".join(b) == text
    assert b.reused_tokens == b.prompt_tokens - 1


def test_stop_strings(stories):
    cut = STORIES_FROM_BOS.index("Lily")
    g = stories.generate("", max_tokens=48, temperature=0, stop=["Lily", "never"])
    assert "".join(g) == STORIES_FROM_BOS[:cut]
    assert g.finish_reason == "stop"
    # A stop string spread over several tokens.
    cut2 = STORIES_FROM_BOS.index("loved to")
    assert stories.generate("", max_tokens=48, temperature=0, stop=["loved to"], stream=False) == STORIES_FROM_BOS[:cut2]


def test_seeded_sampling_repeats_and_bad_parameters_are_refused(stories):
    kw = dict(max_tokens=24, temperature=1.0, top_k=40, top_p=0.9, min_p=0.02, seed=11, stream=False)
    assert stories.generate("Once", **kw) == stories.generate("Once", **kw)
    with pytest.raises(ValueError, match="top_p"):
        stories.generate("Once", top_p=2.0, stream=False)
    with pytest.raises(ValueError, match="does not fit"):
        stories.generate(list(range(3, 3 + 100)) * 30, stream=False)


def test_ignore_eos_runs_to_max_tokens(stories):
    g = stories.generate("", max_tokens=300, temperature=0, ignore_eos=True)
    "".join(g)
    assert len(g.tokens) == 300 and 2 not in g.tokens


def test_sampler_alone(stories):
    s = fish.Sampler(temperature=0)
    stories.kv_truncate(0)
    stories.eval([1])
    assert s.sample(stories) == 403
    assert s.sample_logits([0.0, 5.0, 1.0]) == 1
    with pytest.raises(ValueError):
        fish.Sampler(temperature=-1)


def test_presence_and_frequency_penalties_as_fish_run(stories):
    # The same penalties through the Python package and the CLI flags give the
    # same greedy text, and it differs from the text without them.
    kw = dict(max_tokens=40, temperature=0, presence_penalty=0.6, frequency_penalty=0.4, repeat_last_n=32, stream=False)
    ref = run_fish("run", "-m", STORIES, "-p", "Once upon a time", "-n", "40", "--temp", "0", "-t", "2", "-ngl", "0",
                   "--presence-penalty", "0.6", "--frequency-penalty", "0.4", "--repeat-last-n", "32")
    text = stories.generate("Once upon a time", **kw)
    assert text == ref[:-1]
    assert text != stories.generate("Once upon a time", max_tokens=40, temperature=0, stream=False)
    s = fish.Sampler(temperature=0, presence_penalty=2.0)
    s.accept(1)
    assert s.sample_logits([0.0, 1.5, 0.2]) == 2  # 1.5 - 2 < 0.2
    with pytest.raises(ValueError, match="frequency_penalty"):
        fish.Sampler(frequency_penalty=2.5)


def test_json_mode_gives_one_object():
    # JSON mode on the random-weight synth-tiny (it closes objects soon): the
    # Python API and `fish run --json` both give text that Python's own json
    # module reads as one object.
    import json
    import os
    from conftest import MODELS

    path = os.path.join(MODELS, "synth-tiny-Q4_K_M.gguf")
    if not os.path.exists(path):
        pytest.skip(f"no {path}")
    m = fish.Model(path, n_threads=2, gpu_layers=0)
    try:
        for seed in range(6):
            g = m.generate("Once upon a time", max_tokens=300, temperature=1.0, seed=seed, json=True)
            text = "".join(g)
            assert g.finish_reason == "stop", text
            assert isinstance(json.loads(text), dict), text
        s = fish.Sampler(temperature=0)
        s.constrain_json(m)
        m.kv_truncate(0)
        m.eval([1])
        assert m.token_to_piece(s.sample(m)).strip() in (b"", b"{")  # whitespace or the object's start
    finally:
        m.close()
    out = run_fish("run", "-m", path, "-p", "Once upon a time", "-n", "300", "--temp", "1", "--seed", "3", "--json",
                   "-t", "2", "-ngl", "0")
    assert isinstance(json.loads(out[:-1]), dict)


def test_json_schema_gives_a_valid_value():
    # A schema on stories260K (which writes no JSON of its own): generate()
    # with a dict or the schema's text, chat() and the Sampler method give
    # text that json.loads reads and that follows the schema; what fish does
    # not enforce is a ValueError naming the keyword.
    import json
    import os
    from conftest import MODELS

    path = os.path.join(MODELS, "stories260K.gguf")
    if not os.path.exists(path):
        pytest.skip(f"no {path}")
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 10},
            "age": {"type": "integer"},
            "pets": {"type": "array", "items": {"enum": ["cat", "dog"]}, "maxItems": 2},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    }

    def check(text):
        v = json.loads(text)
        assert isinstance(v, dict), text
        assert set(v) <= {"name", "age", "pets"} and {"name", "age"} <= set(v), text
        assert isinstance(v["name"], str) and len(v["name"]) <= 10, text
        assert isinstance(v["age"], int), text
        assert all(p in ("cat", "dog") for p in v.get("pets", [])) and len(v.get("pets", [])) <= 2, text

    m = fish.Model(path, n_threads=2, gpu_layers=0)
    try:
        for seed in range(4):
            g = m.generate("A person:", max_tokens=450, temperature=1.0, seed=seed,
                           json_schema=schema if seed % 2 else json.dumps(schema))
            text = "".join(g)
            assert g.finish_reason == "stop", text
            check(text)
        check(m.chat([{"role": "user", "content": "Who?"}], fallback=True, max_tokens=450, temperature=0,
                     json_schema=schema))
        s = fish.Sampler(temperature=0)
        s.constrain_json_schema(m, {"enum": ["yes", "no"]})
        m.kv_truncate(0)
        m.eval([1])
        assert m.token_to_piece(s.sample(m)).strip() in (b"", b'"', b'"yes"', b'"no"')
        with pytest.raises(ValueError, match="keyword 'pattern' at /properties/name/pattern is not supported"):
            m.generate("x", json_schema={"properties": {"name": {"type": "string", "pattern": "a"}}})
        with pytest.raises(ValueError, match="choose one"):
            m.generate("x", json=True, json_schema={})
        with pytest.raises(TypeError):
            m.generate("x", json_schema=3)
    finally:
        m.close()
