# The fish Python package: ctypes over libfish's C API, pure Python (no
# compiler). A setup.py alone (no pyproject.toml) so that `pip install
# ./python` builds with the setuptools already installed (Debian 12:
# python3-setuptools) and needs no network.
from setuptools import setup

setup(
    name="fish",
    version="0.1.0",
    description="Python bindings (ctypes) for libfish, the fish GGUF LLM engine",
    packages=["fish"],
    python_requires=">=3.9",
    extras_require={"numpy": ["numpy"]},
)
