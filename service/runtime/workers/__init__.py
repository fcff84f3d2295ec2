"""Worker supervision: the processes that run guests, who may use them, and how they are confined.

``worker_process`` is one child process and its pipes; ``pool`` hands processes to cells and keeps
fresh ones ready; ``admission`` decides which tenant's leg gets a running slot; ``cpu_priority`` and
``worker_replacements`` are the pool's fairness levers; ``sandbox`` is the confinement status and
options the service reports.  Nothing here knows what a cell is beyond its id and a callback for
the loss of its process.
"""
