"""Chat templates (fish_chat.h) and a conversation's reply.

A ChatTemplate renders a conversation as Hugging Face's apply_chat_template
does, byte for byte. chat() renders with the model's template (or the ChatML
fallback when asked), tokenizes the text (special tokens written in it are
those tokens; BOS once) and generates on sequence 0, where the previous turn
of the same conversation is still cached: only the new part is evaluated.
"""
import ctypes as C
import json

from . import _lib
from .errors import FishError
from .generation import generate

OK, RAISED, ERROR, NO_TEMPLATE = 0, 1, 2, 3


class TemplateError(FishError):
    """The template refused the conversation (raise_exception): the message is the template's."""


class ChatTemplate:
    def __init__(self, handle):
        self._h = handle

    @classmethod
    def load(cls, path, fallback=False):
        """From a GGUF's tokenizer.chat_template (its BOS/EOS texts too) or a
        template file. fallback: a GGUF without one gets ChatML."""
        L = _lib.lib()
        out, err = C.c_void_p(), C.c_void_p()
        st = L.fish_chat_template_load(str(path).encode(), 1 if fallback else 0, C.byref(out), C.byref(err))
        if st != OK:
            raise FishError(_lib.take_error(err))
        return cls(out.value)

    @classmethod
    def parse(cls, source):
        """From the template's text."""
        L = _lib.lib()
        data = source.encode("utf-8")
        out, err = C.c_void_p(), C.c_void_p()
        if L.fish_chat_template_parse(data, len(data), C.byref(out), C.byref(err)) != OK:
            raise FishError(_lib.take_error(err))
        return cls(out.value)

    @property
    def is_fallback(self):
        return bool(_lib.lib().fish_chat_template_is_fallback(self._h))

    def render(self, messages, add_generation_prompt=True, tools=None, **variables):
        """The prompt text of messages ([{"role": ..., "content": ...}, ...]);
        tools and any other variables (bos_token, eos_token, now, ...) as
        fish_chat_template_render_json takes them."""
        L = _lib.lib()
        doc = dict(variables)
        doc["messages"] = list(messages)
        doc["add_generation_prompt"] = bool(add_generation_prompt)
        if tools is not None:
            doc["tools"] = tools
        data = json.dumps(doc).encode("utf-8")
        out, n, err = C.c_void_p(), C.c_size_t(), C.c_void_p()
        st = L.fish_chat_template_render_json(self._h, data, len(data), C.byref(out), C.byref(n), C.byref(err))
        if st == RAISED:
            raise TemplateError(_lib.take_error(err))
        if st != OK:
            raise FishError(_lib.take_error(err))
        text = C.string_at(out.value, n.value).decode("utf-8", "replace")
        L.fish_free(out)
        return text

    def close(self):
        if self._h:
            _lib.lib().fish_chat_template_free(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def chat(model, messages, *, template=None, fallback=False, stream=False, max_tokens=None, **sampling):
    """The assistant's reply to messages: a str, or with stream=True a
    Generation iterating over its pieces. template: a ChatTemplate (default:
    the model file's, ChatML when fallback and it has none)."""
    if template is None:
        template = getattr(model, "_chat_template", None)
        if template is None or getattr(model, "_chat_fallback", None) != fallback:
            template = ChatTemplate.load(model.path, fallback=fallback)
            model._chat_template, model._chat_fallback = template, fallback
    text = template.render(messages, add_generation_prompt=True)
    ids = model.tokenize(text, add_special=True, parse_special=True)
    if len(ids) >= 2 and ids[0] == ids[1] == model.info.bos:
        ids = ids[1:]  # the template wrote BOS itself
    return generate(model, ids, max_tokens=max_tokens, stream=stream, **sampling)
