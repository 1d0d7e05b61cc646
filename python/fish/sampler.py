"""Token sampling (fish_sampler_*): temperature, top-k, top-p, min-p, a
repetition penalty and OpenAI's presence / frequency penalties (a token seen c
times in the last repeat_last_n loses c * frequency_penalty + presence_penalty
from its logit); temperature 0 is greedy."""
import ctypes as C
import json
import random

from . import _lib
from .errors import FishError


class Sampler:
    def __init__(self, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0, repeat_last_n=64,
                 seed=None, presence_penalty=0.0, frequency_penalty=0.0):
        L = _lib.lib()
        p = L.fish_sampler_default_params()
        p.temp = float(temperature)
        p.top_k = int(top_k)
        p.top_p = float(top_p)
        p.min_p = float(min_p)
        p.repeat_penalty = float(repeat_penalty)
        p.repeat_last_n = int(repeat_last_n)
        p.presence_penalty = float(presence_penalty)
        p.frequency_penalty = float(frequency_penalty)
        p.seed = random.getrandbits(64) if seed is None else int(seed) & (2**64 - 1)
        why = L.fish_sampler_params_check(C.byref(p))
        if why:
            raise ValueError(why.decode())
        self._h = L.fish_sampler_new(C.byref(p))
        if not self._h:
            raise FishError("fish_sampler_new failed")

    def sample(self, model, i=-1):
        """A token from the logits of token i of the model's last eval."""
        ptr = _lib.lib().fish_get_logits(model.handle, int(i))
        return self._sample_ptr(ptr, model.n_vocab)

    def sample_ith(self, model, row):
        """A token from the logits of row `row` of the model's last decode."""
        ptr = _lib.lib().fish_get_logits_ith(model.handle, int(row))
        return self._sample_ptr(ptr, model.n_vocab)

    def sample_logits(self, logits):
        """A token from a sequence of floats (a numpy array or a list)."""
        arr = (C.c_float * len(logits))(*[float(x) for x in logits])
        return self._sample_ptr(arr, len(logits))

    def _sample_ptr(self, ptr, n):
        if not ptr:
            raise FishError("no logits for that row")
        t = _lib.lib().fish_sampler_sample(self._h, C.cast(ptr, C.POINTER(C.c_float)), int(n))
        if t < 0:
            raise FishError("sampling failed")
        return t

    def constrain_json(self, model):
        """JSON mode: from now on the sampler returns only tokens that keep its
        output one JSON object (model gives the tokens' texts), then an end of
        generation. Every token it returns must be taken."""
        err = C.c_void_p()
        if _lib.lib().fish_sampler_constrain_json(self._h, model.handle, C.byref(err)) != 0:
            raise FishError(_lib.take_error(err))

    def constrain_json_schema(self, model, schema):
        """Structured output: from now on the sampler returns only tokens that
        keep its output one JSON value valid under schema (a dict, True, or
        the schema's JSON text), then an end of generation. Enforced: type,
        properties, required, additionalProperties, items, minItems,
        maxItems, minLength, maxLength, enum, const, anyOf, oneOf, $ref
        inside the schema; annotations (title, description, format, ...)
        ignored. Any other keyword (pattern, minimum, allOf, ...) raises
        ValueError naming it and its JSON pointer, the sampler left as it
        was. Every token it returns must be taken."""
        text = _schema_text(schema)
        err = C.c_void_p()
        if _lib.lib().fish_sampler_constrain_json_schema(self._h, model.handle, text, C.byref(err)) != 0:
            raise ValueError("json_schema: " + _lib.take_error(err))

    def accept(self, token):
        """Records a token of the context (for the repetition penalty)."""
        _lib.lib().fish_sampler_accept(self._h, int(token))

    def close(self):
        if self._h:
            _lib.lib().fish_sampler_free(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _schema_text(schema):
    """A schema as the UTF-8 JSON text libfish reads."""
    if isinstance(schema, (dict, bool)):
        return json.dumps(schema).encode("utf-8")
    if isinstance(schema, str):
        return schema.encode("utf-8")
    if isinstance(schema, bytes):
        return schema
    raise TypeError("json_schema must be a dict, a bool or the schema's JSON text, not " + type(schema).__name__)
