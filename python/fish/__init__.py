"""fish: Python bindings for libfish (a GGUF LLM engine) over its C API with
ctypes; no compiler needed. libfish is found through FISH_LIBRARY, beside
the package, or on the system's library path.

    import fish
    m = fish.Model("model.gguf", n_ctx=2048)
    for piece in m.generate("Once upon a time", max_tokens=32, temperature=0):
        print(piece, end="", flush=True)
    print(m.chat([{"role": "user", "content": "Hi"}], max_tokens=64))
"""
from . import _lib
from .chat import ChatTemplate, TemplateError, chat
from .errors import FishError
from .generation import Generation, generate
from .model import Info, Model
from .sampler import Sampler

__all__ = ["ChatTemplate", "FishError", "Generation", "Info", "Model", "Sampler", "TemplateError", "chat", "generate",
           "version"]


def version():
    """libfish's version string."""
    return _lib.lib().fish_version().decode()
