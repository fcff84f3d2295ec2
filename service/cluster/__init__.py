"""Replicas of one service sharing a ``redis://`` store: who holds a cell, who is alive, and how a
request for a cell held elsewhere reaches its holder.

A cell is held by the replica that started it, for its whole life: its worker holds the guest's
heap, which cannot move.  That replica's id is written into the cell id (``identity``), so finding
the holder needs no per-cell bookkeeping; each replica renews a Redis key with its address while it
runs (``membership``), and a request for another replica's cell is relayed there (``peers``).
"""
