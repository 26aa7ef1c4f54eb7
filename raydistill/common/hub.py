"""Fast check that the Hugging Face hub can be reached, so offline runs fail in seconds, not minutes."""

from __future__ import annotations

import functools
import os
import socket
from urllib.parse import urlparse


@functools.lru_cache(maxsize=1)
def hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.getaddrinfo(host, 443)
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def is_local(name_or_dir: str) -> bool:
    return os.path.exists(name_or_dir) or name_or_dir.startswith((".", "/", "~"))
