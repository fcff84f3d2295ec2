"""``codemode serve`` whose every worker runs the attacker's ``hijack`` payload: the two-keys attack, by hand.

    python -m tests.support.serve_hijacked TOOL [serve arguments...]

Each worker process answers cells with its pid until a cell whose code holds ``/* exploit */`` owns it;
from then on every cell it receives calls ``TOOL`` (with ``{}``) in that cell's name and answers what the
host replied (``tests/support/compromised_worker.py``).  Run from a development checkout only: a worker
started outside one refuses the payload.  See docs/operations/security.md, "Who shares a worker process".
"""

from __future__ import annotations

import functools
import json
import sys

from service.cli import main
from service.runtime.workers import supply, worker_process

if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    plan = {"hijack": {"tool": sys.argv[1], "trigger": "/* exploit */", "args": {}}}
    supply.start_worker = functools.partial(worker_process.start_worker, test_payload=json.dumps(plan))
    raise SystemExit(main(["serve", *sys.argv[2:]]))
