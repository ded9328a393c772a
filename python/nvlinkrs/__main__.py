"""`python -m nvlinkrs`: `preload` prints the drop-in libnvJitLink's path (for
LD_PRELOAD), `program` the nvlinkrs program's; anything else runs nvlinkrs with it."""

import os
import sys

from . import drop_in, program

USAGE = """usage: python -m nvlinkrs preload     the drop-in libnvJitLink's path, for LD_PRELOAD
       python -m nvlinkrs program     the nvlinkrs program's path
       python -m nvlinkrs ARGS...     runs nvlinkrs ARGS (nvlink's command line)"""


def main(argv):
    if argv in (["preload"], ["program"]):
        path = drop_in() if argv == ["preload"] else program()
        if not path or not os.path.isfile(path):
            print(f"nvlinkrs: {argv[0]}: not installed with this package ({path})", file=sys.stderr)
            return 1
        print(path)
        return 0
    if argv in ([], ["-h"]):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        return 0 if argv else 2
    exe = program()
    if not exe:
        print("nvlinkrs: the nvlinkrs program is not installed with this package", file=sys.stderr)
        return 1
    os.execv(exe, [exe, *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
