"""Print what this machine offers for the GPU run; exit 1 if torch or numpy is missing.

Nothing is installed: the lent GPU machines have no network, so the run uses what is there.
"""

import sys

try:
    import numpy
    import torch
except ImportError as e:
    sys.exit(f"ERROR: the GPU run needs torch and numpy preinstalled (nothing is installed from the network): {e}")

print("python", sys.version.split()[0], "| torch", torch.__version__, "| numpy", numpy.__version__,
      "| cuda", torch.version.cuda, "| cuda available", torch.cuda.is_available())
if torch.cuda.is_available():
    props = torch.cuda.get_device_properties(0)
    print("gpu", props.name, "| memory GiB", round(props.total_memory / 2**30, 1))
for mod in ("tqdm", "matplotlib", "sklearn", "transformers"):
    try:
        __import__(mod)
        print(mod, "present")
    except ImportError:
        print(mod, "absent")
