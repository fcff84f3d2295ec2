"""Helper processes: pure-Python work on caller data (large request bodies, client tool schemas) off the loop.

Building Python objects from a large body, or walking a caller's schema, holds the GIL for its whole
length, so a thread would not free the event loop; a process does.  Such a process reads hostile
bytes, so it is treated like a worker: started the same way (``service.process_launch``), confined
before its first job, spoken to in length-prefixed JSON frames whose answers are checked and counted
before they are decoded, and never shared by two principals.

Two sides, kept apart so the helper process imports only light code:

* in the helper (``python -I -m service.helpers.process``): ``process`` (its entry point and frame
  loop) and ``jobs`` (the fixed table of what it can be asked to do);
* in the service: ``helper`` (one helper process and one job's round trip), ``job`` (what a job sends
  and how its answer is checked) and ``pool`` (spares, a helper per principal, fair turns);
* both: ``protocol`` (the frames' fields and caps).
"""
