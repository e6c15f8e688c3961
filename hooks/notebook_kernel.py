"""MkDocs hook: the notebook pages' kernel talks to the build over local sockets.

mkdocs-jupyter runs each notebook in a Jupyter kernel, which by default listens on TCP ports
of 127.0.0.1 and warns on every start that "Kernel is running over TCP without encryption".
The kernel and the build are two processes of one machine: on_config gives mkdocs-jupyter's
nbconvert a configuration (read from JUPYTER_CONFIG_PATH, as nbconvert reads a user's) that
uses IPC sockets instead, files under .cache/jupyter/ that only this user can open, removed
when the kernel stops.
"""

import json
import os

from lab.shared.common import CACHE

FOLDER = CACHE / "jupyter"


def on_config(config):
    FOLDER.mkdir(parents=True, exist_ok=True, mode=0o700)
    settings = {"KernelManager": {"transport": "ipc", "ip": str(FOLDER / "kernel")}}
    (FOLDER / "jupyter_nbconvert_config.json").write_text(json.dumps(settings, indent=1) + "\n")
    paths = os.environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep)
    if str(FOLDER) not in paths:
        os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(FOLDER), *filter(None, paths)])
    return config
