"""Streaming generation on a model's sequence 0: the prompt is evaluated from
the longest prefix the KV cache already holds (fish_seq_reuse), then tokens
are sampled one at a time and their text is yielded as it becomes whole
(UTF-8 characters split over tokens are held back) and final (text that may
begin a stop string is held back until it is known not to)."""
import codecs

from .sampler import Sampler


class _Text:
    """The reply's text as it may go out: stop strings cut it."""

    def __init__(self, stop):
        self.stop = [s for s in (stop or []) if s]
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.held = ""
        self.stopped = False

    def push(self, piece: bytes) -> str:
        if self.stopped:
            return ""
        self.held += self.decoder.decode(piece)
        cuts = [i for i in (self.held.find(s) for s in self.stop) if i >= 0]
        if cuts:
            self.stopped = True
            out, self.held = self.held[: min(cuts)], ""
            return out
        keep = 0
        for s in self.stop:
            for k in range(min(len(s) - 1, len(self.held)), keep, -1):
                if self.held.endswith(s[:k]):
                    keep = k
                    break
        out = self.held[: len(self.held) - keep]
        self.held = self.held[len(self.held) - keep:]
        return out

    def flush(self) -> str:
        if self.stopped:
            return ""
        out = self.held + self.decoder.decode(b"", final=True)
        self.held = ""
        return out


class Generation:
    """An iterator of text pieces; after it ends, finish_reason is "stop"
    (an end-of-generation token or a stop string) or "length", and
    prompt_tokens, reused_tokens, tokens (the generated ids) are set."""

    def __init__(self, model, prompt_ids, max_tokens, sampler, stop, ignore_eos):
        self.model = model
        self.prompt_ids = list(prompt_ids)
        self.max_tokens = max_tokens
        self.sampler = sampler
        self.text = _Text(stop)
        self.ignore_eos = ignore_eos
        self.finish_reason = None
        self.prompt_tokens = len(self.prompt_ids)
        self.reused_tokens = 0
        self.tokens = []
        self._it = self._run()

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._it)

    def _run(self):
        m = self.model
        ids = self.prompt_ids
        if not ids:
            raise ValueError("the prompt has no tokens (and the model adds no BOS)")
        if len(ids) >= m.n_ctx:
            raise ValueError(f"the prompt ({len(ids)} tokens) does not fit the context ({m.n_ctx})")
        self.reused_tokens = m.seq_reuse(0, ids)
        m.eval(ids[self.reused_tokens:], pos=self.reused_tokens)
        for t in ids:
            self.sampler.accept(t)
        pos = len(ids)
        eog = None
        while True:
            if self.ignore_eos:
                if eog is None:
                    eog = [v for v in range(m.n_vocab) if m.is_eog(v)]
                logits = m.logits()
                for v in eog:
                    logits[v] = float("-inf")
                tok = self.sampler.sample_logits(logits)
            else:
                tok = self.sampler.sample(m)
            if not self.ignore_eos and m.is_eog(tok):
                self.finish_reason = "stop"
                break
            self.sampler.accept(tok)
            self.tokens.append(tok)
            out = self.text.push(m.token_to_piece(tok))
            if out:
                yield out
            if self.text.stopped:
                self.finish_reason = "stop"
                break
            if self.max_tokens is not None and len(self.tokens) >= self.max_tokens:
                self.finish_reason = "length"
                break
            if pos >= m.n_ctx:
                self.finish_reason = "length"
                break
            m.eval([tok], pos=pos)
            pos += 1
        rest = self.text.flush()
        if rest:
            yield rest


def generate(model, prompt, *, max_tokens=128, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05,
             repeat_penalty=1.0, repeat_last_n=64, presence_penalty=0.0, frequency_penalty=0.0, seed=None, stop=None,
             ignore_eos=False, add_special=True, parse_special=False, stream=True, json=False, json_schema=None):
    """The continuation of prompt (a str, or token ids) on the model's sequence 0.

    stream=True: a Generation, iterating over text pieces as they come;
    stream=False: the whole text. max_tokens=None: until the end of
    generation or the context's end. temperature 0 is greedy; seed makes
    sampling repeatable. stop: strings that end the text (not included).
    json=True: JSON mode, the text is one JSON object (generation ends when
    it closes, whatever ignore_eos says). json_schema (a dict or the
    schema's JSON text): the text is one JSON value valid under it (ends
    when complete; Sampler.constrain_json_schema says what is enforced, and
    raises ValueError for what is not).
    """
    if json and json_schema is not None:
        raise ValueError("json=True and json_schema: choose one")
    ids = model.tokenize(prompt, add_special, parse_special) if isinstance(prompt, (str, bytes)) else list(prompt)
    sampler = Sampler(temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed, presence_penalty,
                      frequency_penalty)
    if json:
        sampler.constrain_json(model)
        ignore_eos = False
    elif json_schema is not None:
        sampler.constrain_json_schema(model, json_schema)
        ignore_eos = False
    g = Generation(model, ids, max_tokens, sampler, stop, ignore_eos)
    return g if stream else "".join(g)
