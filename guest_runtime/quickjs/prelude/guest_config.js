// @ts-check
// Generated from guest_runtime/guest_config.py by `python scripts/check_prelude.py --write-config`: edit that file, not this one.
// The guest config's caps (the keys state.js's readCaps reads) and the defaults of those a config
// may leave out; maxQueuedBytes left out is maxRequestBytes, which must be given.  Then the
// guest's fixed limits.

/** @typedef {Readonly<{maxRequestBytes: number, maxQueuedRequests: number, maxPendingRequests: number, maxQueuedBytes: number, maxRequestValues: number}>} GuestCaps */

const CAP_DEFAULTS = { maxQueuedRequests: 1024, maxPendingRequests: 128, maxRequestValues: 1000000 };
const MAX_NESTING = 200;
const MAX_OUTPUT_ENTRIES = 10000;
const CONSOLE_TOTAL = 16384;
