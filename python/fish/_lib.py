"""Finding libfish and declaring the C functions the package calls.

libfish is looked for, in order: the path in the FISH_LIBRARY environment
variable (e.g. build/bin/libfish.so of a build tree); libfish.so beside this
package; the system's library path (an installed fish). Its GPU plugins are
found beside it, as for the fish command line.
"""
import ctypes as C
import ctypes.util
import os
import threading

from ._structs import Batch, ChatMessage, EmbedParams, ModelInfo, ModelParams, SamplerParams, Stats
from .errors import FishError

_lock = threading.Lock()
_lib = None

i32, u32, i64, u64, f32, f64 = C.c_int32, C.c_uint32, C.c_int64, C.c_uint64, C.c_float, C.c_double
vp, cp, sz = C.c_void_p, C.c_char_p, C.c_size_t
P = C.POINTER

# name: (restype, argtypes)
_PROTOTYPES = {
    "fish_version": (cp, []),
    "fish_error_message": (cp, [vp]),
    "fish_error_free": (None, [vp]),
    "fish_free": (None, [vp]),
    "fish_model_default_params": (ModelParams, []),
    "fish_model_load": (vp, [cp, P(ModelParams), P(vp)]),
    "fish_model_free": (None, [vp]),
    "fish_last_error": (cp, [vp]),
    "fish_model_get_info": (None, [vp, P(ModelInfo)]),
    "fish_tokenize": (i32, [vp, cp, sz, C.c_int, C.c_int, P(i32), i32]),
    "fish_token_to_piece": (i32, [vp, i32, C.c_char_p, i32, C.c_int]),
    "fish_detokenize": (i32, [vp, P(i32), i32, C.c_char_p, i32, C.c_int]),
    "fish_token_is_eog": (C.c_int, [vp, i32]),
    "fish_eval": (C.c_int, [vp, P(i32), i32, i32, C.c_int]),
    "fish_get_logits": (P(f32), [vp, i32]),
    "fish_kv_len": (i32, [vp]),
    "fish_kv_truncate": (C.c_int, [vp, i32]),
    "fish_decode": (C.c_int, [vp, P(Batch)]),
    "fish_get_logits_ith": (P(f32), [vp, i32]),
    "fish_embed_default_params": (EmbedParams, []),
    "fish_n_embd": (i32, [vp]),
    "fish_embed_tokens": (C.c_int, [vp, P(P(i32)), P(i32), i32, P(EmbedParams), P(f32)]),
    "fish_n_seq": (i32, [vp]),
    "fish_seq_len": (i32, [vp, i32]),
    "fish_seq_truncate": (C.c_int, [vp, i32, i32]),
    "fish_seq_copy": (C.c_int, [vp, i32, i32, i32]),
    "fish_seq_release": (C.c_int, [vp, i32]),
    "fish_seq_reuse": (i32, [vp, i32, P(i32), i32]),
    "fish_get_stats": (None, [vp, P(Stats)]),
    "fish_reset_stats": (None, [vp]),
    "fish_sampler_default_params": (SamplerParams, []),
    "fish_sampler_params_check": (cp, [P(SamplerParams)]),
    "fish_sampler_new": (vp, [P(SamplerParams)]),
    "fish_sampler_sample": (i32, [vp, P(f32), i32]),
    "fish_sampler_accept": (None, [vp, i32]),
    "fish_sampler_free": (None, [vp]),
    "fish_sampler_constrain_json": (C.c_int, [vp, vp, P(vp)]),
    "fish_sampler_constrain_json_schema": (C.c_int, [vp, vp, cp, P(vp)]),
    "fish_json_schema_check": (C.c_int, [cp, P(vp)]),
    "fish_chat_template_load": (C.c_int, [cp, u32, P(vp), P(vp)]),
    "fish_chat_template_parse": (C.c_int, [cp, sz, P(vp), P(vp)]),
    "fish_chat_template_render_json": (C.c_int, [vp, cp, sz, P(vp), P(sz), P(vp)]),
    "fish_chat_template_render": (C.c_int, [vp, P(ChatMessage), sz, C.c_int, cp, P(vp), P(sz), P(vp)]),
    "fish_chat_template_is_fallback": (C.c_int, [vp]),
    "fish_chat_template_free": (None, [vp]),
}


def _candidates():
    env = os.environ.get("FISH_LIBRARY")
    if env:
        yield env
        return
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libfish.so")
    if os.path.exists(here):
        yield here
    found = ctypes.util.find_library("fish")
    if found:
        yield found
    yield "libfish.so"


def lib():
    """The loaded libfish (loaded on first use), its functions declared."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        errors = []
        for path in _candidates():
            try:
                handle = C.CDLL(path)
            except OSError as e:
                errors.append(f"{path}: {e}")
                continue
            for name, (restype, argtypes) in _PROTOTYPES.items():
                try:
                    fn = getattr(handle, name)
                except AttributeError:
                    raise FishError(f"{path} has no {name}: an older libfish than this package") from None
                fn.restype = restype
                fn.argtypes = argtypes
            _lib = handle
            return _lib
        raise FishError(
            "cannot load libfish (set FISH_LIBRARY to its path, e.g. build/bin/libfish.so): " + "; ".join(errors)
        )


def take_error(err):
    """The message of a fish_error* (freed), for constructors that report one."""
    L = lib()
    if not err:
        return "unknown error"
    msg = L.fish_error_message(err).decode("utf-8", "replace")
    L.fish_error_free(err)
    return msg
