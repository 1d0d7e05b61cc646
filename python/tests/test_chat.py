"""Chat through templates: the model's own (a GGUF without one needs the
ChatML fallback), a template's text, its refusal, and the same replies as
`fish chat`."""
import pytest

import fish
from conftest import STORIES, run_fish


def test_no_template_without_fallback(stories):
    with pytest.raises(fish.FishError, match="no chat template"):
        stories.chat([{"role": "user", "content": "Hello"}])
    with pytest.raises(fish.FishError, match="no chat template"):
        fish.ChatTemplate.load(STORIES)
    assert fish.ChatTemplate.load(STORIES, fallback=True).is_fallback


def test_replies_equal_fish_chat(stories):
    out = run_fish("chat", "-m", STORIES, "--fallback", "--temp", "0", "-n", "12", "-t", "2", "-ngl", "0", input="Hello\nHow are you\n")
    msgs = [{"role": "user", "content": "Hello"}]
    r1 = stories.chat(msgs, fallback=True, max_tokens=12, temperature=0)
    msgs += [{"role": "assistant", "content": r1}, {"role": "user", "content": "How are you"}]
    g = stories.chat(msgs, fallback=True, max_tokens=12, temperature=0, stream=True)
    r2 = "".join(g)
    assert out == r1 + "\n" + r2 + "\n"
    assert g.reused_tokens > g.prompt_tokens // 2  # turn 1 stayed in the cache


def test_template_text_render_and_refusal():
    t = fish.ChatTemplate.parse("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                                "{% if add_generation_prompt %}<assistant>{% endif %}")
    assert t.render([{"role": "user", "content": "Hi"}]) == "<user>Hi<assistant>"
    assert t.render([{"role": "user", "content": "Hi"}], add_generation_prompt=False) == "<user>Hi"
    r = fish.ChatTemplate.parse("{{ raise_exception('no system role here') }}")
    with pytest.raises(fish.TemplateError, match="^no system role here$"):
        r.render([{"role": "system", "content": "x"}])
    with pytest.raises(fish.FishError, match="line 1"):
        fish.ChatTemplate.parse("{% for %}")


def test_a_given_template_is_used(stories):
    t = fish.ChatTemplate.parse("{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}")
    # The template writes no BOS text here (bos_token is "" for a text template): BOS is added once.
    reply = stories.chat([{"role": "user", "content": "Once upon a time"}], template=t, max_tokens=20, temperature=0)
    assert reply == stories.generate("Once upon a time", max_tokens=20, temperature=0, stream=False)
