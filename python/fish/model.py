"""A loaded GGUF model: tokens, evaluation, logits and sequences (fish.h).

A Model is used by one thread at a time (as a fish_model); several models
may run in parallel threads.
"""
import ctypes as C
from dataclasses import dataclass

from . import _lib
from ._structs import Batch, ModelInfo, Stats
from .errors import FishError

try:  # logits as numpy arrays where numpy is installed, else lists
    import numpy as _np
except ImportError:  # pragma: no cover - exercised only without numpy
    _np = None


def _s(b):
    return b.decode("utf-8", "replace") if b else ""


@dataclass(frozen=True)
class Info:
    """What fish_model_get_info reports."""

    arch: str
    name: str
    tokenizer: str
    n_vocab: int
    n_ctx_train: int
    n_ctx: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_params: int
    file_bytes: int
    bos: int
    eos: int
    n_threads: int
    gpu_layers: int
    backend: str
    cpu_kernels: str


def _ints(values, what):
    try:
        seq = [int(v) for v in values]
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a sequence of integers") from None
    for v in seq:
        if not -(2**31) <= v < 2**31:
            raise ValueError(f"{what}: {v} is outside the 32-bit range")
    return (C.c_int32 * len(seq))(*seq)


class Model:
    """Loads a GGUF model (fish_model_load).

    n_ctx: positions per sequence (0: the model's); n_threads (0: one per
    physical core); gpu_layers (-1: as many as fit, 0: CPU only); n_seq:
    sequences held at once (decode); prefix_cache_mb: the bound of released
    sequences kept for reuse (None: libfish's default); vocab_only: the
    tokenizer alone; config: "NAME=VALUE ..." engine variables for this load.
    """

    def __init__(self, path, *, n_ctx=0, n_threads=0, gpu_layers=-1, n_seq=1, prefix_cache_mb=None,
                 vocab_only=False, verbose=False, config=None, gpu_requant=-1):
        L = _lib.lib()
        self._h = None
        self.path = str(path)
        p = L.fish_model_default_params()
        p.n_ctx = int(n_ctx)
        p.n_threads = int(n_threads)
        p.gpu_layers = int(gpu_layers)
        p.n_seq = int(n_seq)
        if prefix_cache_mb is not None:
            p.prefix_cache_mb = int(prefix_cache_mb)
        p.vocab_only = 1 if vocab_only else 0
        p.verbose = 1 if verbose else 0
        p.gpu_requant = int(gpu_requant)
        self._config = config.encode() if config else None  # kept alive for the call
        p.config = self._config
        err = C.c_void_p()
        h = L.fish_model_load(self.path.encode(), C.byref(p), C.byref(err))
        if not h:
            raise FishError(_lib.take_error(err))
        self._h = h
        raw = ModelInfo()
        raw.struct_size = C.sizeof(ModelInfo)
        L.fish_model_get_info(h, C.byref(raw))
        self.info = Info(
            _s(raw.arch), _s(raw.name), _s(raw.tokenizer), raw.n_vocab, raw.n_ctx_train, raw.n_ctx, raw.n_embd,
            raw.n_layer, raw.n_head, raw.n_head_kv, raw.head_dim, raw.n_ff, raw.n_params, raw.file_bytes, raw.bos,
            raw.eos, raw.n_threads, raw.gpu_layers, _s(raw.backend), _s(raw.cpu_kernels))

    # ---- lifetime ---------------------------------------------------------
    def close(self):
        if self._h:
            _lib.lib().fish_model_free(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    @property
    def handle(self):
        if not self._h:
            raise FishError("the model is closed")
        return self._h

    def _check(self, status, what):
        if status != 0:
            raise FishError(f"{what}: {_s(_lib.lib().fish_last_error(self.handle))}")

    @property
    def n_vocab(self):
        return self.info.n_vocab

    @property
    def n_ctx(self):
        return self.info.n_ctx

    # ---- tokens -----------------------------------------------------------
    def tokenize(self, text, add_special=True, parse_special=False):
        """Token ids of text (BOS first when the model adds one and add_special)."""
        L = _lib.lib()
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        cap = len(data) + 16
        for _ in range(2):
            out = (C.c_int32 * cap)()
            n = L.fish_tokenize(self.handle, data, len(data), int(add_special), int(parse_special), out, cap)
            if n == -(2**31 - 1):
                raise FishError("tokenize: " + _s(L.fish_last_error(self.handle)))
            if n >= 0:
                return list(out[:n])
            cap = -n
        raise FishError("tokenize: the token count changed between two calls")

    def token_to_piece(self, token, special=False):
        """The bytes of one token (a piece of a UTF-8 character possibly)."""
        L = _lib.lib()
        cap = 64
        for _ in range(2):
            buf = C.create_string_buffer(cap)
            n = L.fish_token_to_piece(self.handle, int(token), buf, cap, int(special))
            if n >= 0:
                return buf.raw[:n]
            cap = -n
        raise FishError("token_to_piece: no room")

    def detokenize(self, tokens, special=False):
        """The text of token ids (invalid UTF-8 replaced)."""
        L = _lib.lib()
        ids = _ints(tokens, "tokens")
        cap = 16 * len(ids) + 16
        for _ in range(2):
            buf = C.create_string_buffer(cap)
            n = L.fish_detokenize(self.handle, ids, len(ids), buf, cap, int(special))
            if n >= 0:
                return buf.raw[:n].decode("utf-8", "replace")
            cap = -n
        raise FishError("detokenize: no room")

    def is_eog(self, token):
        return bool(_lib.lib().fish_token_is_eog(self.handle, int(token)))

    # ---- evaluation (sequence 0) -------------------------------------------
    def eval(self, tokens, pos=None, all_logits=False):
        """Evaluates tokens at positions pos.. (default: after what sequence 0 holds)."""
        ids = _ints(tokens, "tokens")
        if not len(ids):
            raise ValueError("eval: no tokens")
        if pos is None:
            pos = self.kv_len()
        self._check(_lib.lib().fish_eval(self.handle, ids, len(ids), int(pos), int(all_logits)), "eval")

    def _logits_view(self, ptr, what):
        if not ptr:
            raise FishError(f"{what}: no logits for that row")
        return ptr

    def logits(self, i=-1):
        """A copy of the logits [n_vocab] of token i of the last eval (-1: the last):
        a numpy float32 array where numpy is installed, else a list."""
        return self._copy(self._logits_view(_lib.lib().fish_get_logits(self.handle, int(i)), "logits"))

    def logits_ith(self, i):
        """A copy of the logits of row i of the last decode."""
        return self._copy(self._logits_view(_lib.lib().fish_get_logits_ith(self.handle, int(i)), "logits_ith"))

    def _copy(self, ptr):
        n = self.n_vocab
        if _np is not None:
            return _np.ctypeslib.as_array(ptr, shape=(n,)).copy()
        return list(ptr[:n])

    def kv_len(self):
        return _lib.lib().fish_kv_len(self.handle)

    def kv_truncate(self, n):
        self._check(_lib.lib().fish_kv_truncate(self.handle, int(n)), "kv_truncate")

    # ---- several sequences -------------------------------------------------
    def decode(self, tokens, pos, seq_ids=None, logits=None):
        """One forward over rows (tokens[i] of sequence seq_ids[i] at pos[i]);
        logits[i] true keeps row i's logits (None: the last row's)."""
        n = len(tokens)
        if n == 0:
            raise ValueError("decode: no rows")
        if len(pos) != n or (seq_ids is not None and len(seq_ids) != n) or (logits is not None and len(logits) != n):
            raise ValueError("decode: tokens, pos, seq_ids and logits must have one entry per row")
        b = Batch()
        b.struct_size = C.sizeof(Batch)
        b.n_tokens = n
        i32p = C.POINTER(C.c_int32)
        keep = [_ints(tokens, "tokens"), _ints(pos, "pos")]  # alive until the call returns
        b.token, b.pos = C.cast(keep[0], i32p), C.cast(keep[1], i32p)
        if seq_ids is not None:
            keep.append(_ints(seq_ids, "seq_ids"))
            b.seq_id = C.cast(keep[-1], i32p)
        if logits is not None:
            keep.append((C.c_int8 * n)(*[1 if x else 0 for x in logits]))
            b.logits = C.cast(keep[-1], C.POINTER(C.c_int8))
        self._check(_lib.lib().fish_decode(self.handle, C.byref(b)), "decode")

    def n_seq(self):
        return _lib.lib().fish_n_seq(self.handle)

    # ---- embeddings ----------------------------------------------------------
    _POOLING = {"mean": 0, "last": 1, "first": 2, "cls": 2}

    @property
    def n_embd(self):
        return _lib.lib().fish_n_embd(self.handle)

    def embed(self, texts, pooling="mean", normalize=True, seq=0, n_seq=1):
        """Embedding vectors (fish_embed_tokens): the final hidden state after
        the output norm, pooled ("mean", "last", or "first" / "cls") over each
        input's tokens, unit length when normalize. texts: a string, a list of
        token ids, or a list of those (strings tokenized with BOS). Each input
        is evaluated on a sequence of its own: up to n_seq at a time on
        sequences seq .. seq + n_seq - 1 (the model needs that many: Model(...,
        n_seq=)), their rows in the same forwards, each vector the one it gets
        alone. The sequences used are left empty afterwards; the others keep
        their KV (the default n_seq=1 touches seq alone). Returns a numpy
        float32 array [n_embd] for one input, [n_inputs, n_embd] for a list
        (lists without numpy)."""
        if pooling not in self._POOLING:
            raise ValueError(f"embed: pooling {pooling!r} is not 'mean', 'last' or 'first'")
        single = isinstance(texts, (str, bytes)) or (
            isinstance(texts, (list, tuple)) and len(texts) > 0 and all(isinstance(t, int) for t in texts))
        inputs = [texts] if single else list(texts)
        if not inputs:
            raise ValueError("embed: no inputs")
        ids = []
        for i, x in enumerate(inputs):
            if isinstance(x, (str, bytes)):
                t = self.tokenize(x, add_special=True)
            elif isinstance(x, (list, tuple)) or (_np is not None and isinstance(x, _np.ndarray)):
                t = [int(v) for v in x]
            else:
                raise TypeError(f"embed: input {i} is a {type(x).__name__}, not a string or a list of token ids")
            if not t:
                raise ValueError(f"embed: input {i} has no tokens")
            ids.append(_ints(t, f"input {i}"))
        L = _lib.lib()
        p = L.fish_embed_default_params()
        p.pooling, p.normalize, p.seq, p.n_seq = self._POOLING[pooling], int(bool(normalize)), int(seq), int(n_seq)
        n, dim = len(ids), self.n_embd
        i32p = C.POINTER(C.c_int32)
        ptrs = (i32p * n)(*[C.cast(a, i32p) for a in ids])
        lens = (C.c_int32 * n)(*[len(a) for a in ids])
        out = (C.c_float * (n * dim))()
        self._check(L.fish_embed_tokens(self.handle, ptrs, lens, n, C.byref(p), out), "embed")
        if _np is not None:
            arr = _np.ctypeslib.as_array(out).reshape(n, dim).copy()
            return arr[0] if single else arr
        rows = [list(out[k * dim:(k + 1) * dim]) for k in range(n)]
        return rows[0] if single else rows

    def seq_len(self, seq):
        n = _lib.lib().fish_seq_len(self.handle, int(seq))
        if n < 0:
            raise ValueError(f"seq_len: no sequence {seq} (0..{self.n_seq() - 1})")
        return n

    def seq_truncate(self, seq, n):
        self._check(_lib.lib().fish_seq_truncate(self.handle, int(seq), int(n)), "seq_truncate")

    def seq_copy(self, src, dst, n):
        self._check(_lib.lib().fish_seq_copy(self.handle, int(src), int(dst), int(n)), "seq_copy")

    def seq_release(self, seq):
        self._check(_lib.lib().fish_seq_release(self.handle, int(seq)), "seq_release")

    def seq_reuse(self, seq, tokens):
        """Makes seq the longest prefix of tokens some sequence holds; its length."""
        ids = _ints(tokens, "tokens")
        n = _lib.lib().fish_seq_reuse(self.handle, int(seq), ids, len(ids))
        if n < 0:
            raise FishError("seq_reuse: " + _s(_lib.lib().fish_last_error(self.handle)))
        return n

    def stats(self):
        s = Stats()
        s.struct_size = C.sizeof(Stats)
        _lib.lib().fish_get_stats(self.handle, C.byref(s))
        return {k: getattr(s, k) for k, _ in Stats._fields_ if k != "struct_size"}

    # ---- generation (generation.py, chat.py) ---------------------------------
    def generate(self, prompt, **kw):
        """Streams the continuation of prompt (text or token ids): see fish.generation.generate."""
        from .generation import generate

        return generate(self, prompt, **kw)

    def chat(self, messages, **kw):
        """The reply to a conversation: see fish.chat.chat."""
        from .chat import chat

        return chat(self, messages, **kw)
