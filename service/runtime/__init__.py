"""One cell's life: spec, worker pool, guest requests and their dispatch, parking, envelopes, the registry of live cells."""
