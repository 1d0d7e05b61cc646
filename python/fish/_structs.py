"""ctypes mirrors of the structs of fish.h and fish_chat.h, field for field
(each begins with struct_size; libfish reads no further than the size it is
given, so these may lag behind a newer libfish but never run ahead of it)."""
import ctypes as C

PROGRESS_FN = C.CFUNCTYPE(None, C.c_void_p, C.c_char_p, C.c_float)


class ModelParams(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("n_threads", C.c_int32),
        ("n_ctx", C.c_int32),
        ("gpu_layers", C.c_int32),
        ("gpu_span", C.c_int32),
        ("verbose", C.c_int32),
        ("vocab_only", C.c_int32),
        ("progress", PROGRESS_FN),
        ("progress_user", C.c_void_p),
        ("config", C.c_char_p),
        ("gpu_requant", C.c_int32),
        ("n_seq", C.c_int32),
        ("prefix_cache_mb", C.c_int32),
        ("n_cpu_moe", C.c_int32),
        ("gpu_devices", C.c_char_p),
        ("tensor_split", C.c_char_p),
    ]


class ModelInfo(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("arch", C.c_char_p),
        ("name", C.c_char_p),
        ("tokenizer", C.c_char_p),
        ("n_vocab", C.c_int32),
        ("n_ctx_train", C.c_int32),
        ("n_ctx", C.c_int32),
        ("n_embd", C.c_int32),
        ("n_layer", C.c_int32),
        ("n_head", C.c_int32),
        ("n_head_kv", C.c_int32),
        ("head_dim", C.c_int32),
        ("n_ff", C.c_int32),
        ("n_params", C.c_int64),
        ("file_bytes", C.c_uint64),
        ("bos", C.c_int32),
        ("eos", C.c_int32),
        ("n_threads", C.c_int32),
        ("gpu_layers", C.c_int32),
        ("gpu_output", C.c_int32),
        ("gpu_span", C.c_int32),
        ("backend", C.c_char_p),
        ("gpu_detail", C.c_char_p),
        ("cpu_kernels", C.c_char_p),
        ("gpu_requant", C.c_char_p),
        ("requant_detail", C.c_char_p),
        ("requant_converted", C.c_int32),
        ("requant_cached", C.c_int32),
        ("requant_rejected", C.c_int32),
        ("requant_seconds", C.c_double),
        ("requant_ns_per_weight", C.c_double),
    ]


class Batch(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("n_tokens", C.c_int32),
        ("token", C.POINTER(C.c_int32)),
        ("pos", C.POINTER(C.c_int32)),
        ("seq_id", C.POINTER(C.c_int32)),
        ("logits", C.POINTER(C.c_int8)),
    ]


class EmbedParams(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("pooling", C.c_int32),
        ("normalize", C.c_int32),
        ("seq", C.c_int32),
        ("n_seq", C.c_int32),  # fish.h's trailing field: returned by value, the sizes must agree
    ]


class Stats(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("n_prompt_tokens", C.c_int64),
        ("n_gen_tokens", C.c_int64),
        ("prompt_seconds", C.c_double),
        ("gen_seconds", C.c_double),
        ("gpu_submits", C.c_int64),
        ("gpu_fallbacks", C.c_int64),
    ]


class SamplerParams(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("temp", C.c_float),
        ("top_k", C.c_int32),
        ("top_p", C.c_float),
        ("min_p", C.c_float),
        ("repeat_penalty", C.c_float),
        ("repeat_last_n", C.c_int32),
        ("seed", C.c_uint64),
        ("presence_penalty", C.c_float),
        ("frequency_penalty", C.c_float),
    ]


class ChatMessage(C.Structure):
    _fields_ = [("role", C.c_char_p), ("content", C.c_char_p)]
