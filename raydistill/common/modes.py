"""Files the product writes for the user are readable like the user's other files: the mode their umask gives a new
file. safetensors' ``save_file`` (every ``save_pretrained``) and ``tempfile.mkstemp``/``mkdtemp`` create files and
folders readable by their owner only (0600/0700), and renames and ``shutil.copy2`` (MLflow's local artifact store) keep
that mode; so a saved model folder is given its umask's modes once it is written."""

from __future__ import annotations

import os
import stat


def umask() -> int:
    """This process's umask, read without changing it (Linux: /proc; elsewhere set and restored at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def as_umask(root: str) -> str:
    """Give ``root`` (a file, or a folder and everything in it) the modes a new file or folder gets under the umask:
    0666 and 0777 less the umask (0644 and 0755 under the usual 022); executable bits a file already has are kept.
    Returns ``root``."""
    mask = umask()
    if os.path.isfile(root):
        _set(root, mask, folder=False)
        return root
    for d, _, names in os.walk(root):
        _set(d, mask, folder=True)
        for n in names:
            p = os.path.join(d, n)
            if not os.path.islink(p):
                _set(p, mask, folder=False)
    return root


def _set(path: str, mask: int, folder: bool) -> None:
    mode = stat.S_IMODE(os.lstat(path).st_mode)
    base = 0o777 if folder or mode & 0o100 else 0o666
    want = base & ~mask
    if mode != want:
        os.chmod(path, want)
