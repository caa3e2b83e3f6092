"""``python -m sarathi_ext.sarathi.api_server <flags>``: Sarathi's API server with AGING_SARATHI
registered first. ``--openai`` (first argument) runs the OpenAI-compatible server
(sarathi.entrypoints.openai.api_server) instead of the plain one (sarathi.entrypoints.api_server).

Both upstream servers do their work under ``if __name__ == "__main__"``, so they are run as
``__main__`` with runpy, exactly as ``python -m`` would."""

import runpy
import sys

from . import register

PLAIN = "sarathi.entrypoints.api_server"
OPENAI = "sarathi.entrypoints.openai.api_server"


def main() -> None:
    register()
    module = PLAIN
    if len(sys.argv) > 1 and sys.argv[1] == "--openai":
        del sys.argv[1]
        module = OPENAI
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
