// @ts-check
// The guest side of the host queue, shared by requests, output and the hook.

const UNAWAITED =
  "[Unawaited Promise: use await or Promise.all(...) before emitting or returning values.]";

/**
 * A host request the cell has made and the host not yet settled.
 * @typedef {{resolve: (value: unknown) => void, reject: (reason: unknown) => void, timer: boolean, promise: Promise<unknown> | null}} PendingEntry
 */

// ---- host queue state (all containers have no prototype, so no setter can intercept) ----
/** @type {Record<number, PendingEntry>} */
const pending = ObjectCreate(null); // id -> {resolve, reject, timer, promise}
let pendingCount = 0;
let requiredCount = 0; // pending requests that are not timers
let nextId = 1;
// The queue and its arguments are filled densely by index: lists (arrays without a prototype)
// keep a burst of a thousand requests in the engine's fast array form, not in a growing object.
/** @type {string[]} */
let queue = newList();
/** @type {string[]} */
let queueArgs = newList(); // index in queue -> the request's JSON argument text
/** @type {Record<number, string>} */
let takenArgs = ObjectCreate(null); // the same, for the requests of the last take, until the worker reads them
let queueLength = 0;
/** @type {Record<number, number>} */
let cancels = ObjectCreate(null);
let cancelLength = 0;
/** @type {Record<number, string>} */
let output = ObjectCreate(null);
let outputLength = 0;
/** @type {string | null} */
let done = null; // JSON text of the final outcome once the cell's main promise settled
/** @type {unknown} */
let doneValue = null; // the cell's return value, until the worker asks for its JSON text
/** @type {GuestCaps} */
let config = { maxRequestBytes: 0, maxQueuedRequests: 0, maxPendingRequests: 0, maxQueuedBytes: 0,
  maxRequestValues: 0 }; // every request refused until "configure" sets the cell's caps
let queuedBytes = 0; // argument characters of the requests queued since the last take

/** @type {WeakSet<Error>} */
const bridgeErrors = new WeakSetCtor(); // Error objects created from host failures
/** @type {WeakMap<Function, Record<string, unknown>>} */
const handles = new WeakMapCtor(); // handle function -> metadata
/** @type {Record<number, {entry: PendingEntry, error: Error}>} */
const failedRequests = ObjectCreate(null); // request id -> {entry, error} of a host failure

// The caps of a configuration by the rule of guest_runtime/guest_config.py (read_caps), with the
// defaults it generates into guest_config.js.
/**
 * @param {Record<string, unknown>} cfg
 * @returns {GuestCaps}
 */
function readCaps(cfg) {
  const requestBytes = readCap(cfg, "maxRequestBytes", 0);
  return {
    maxRequestBytes: requestBytes,
    maxQueuedRequests: readCap(cfg, "maxQueuedRequests", CAP_DEFAULTS.maxQueuedRequests),
    maxPendingRequests: readCap(cfg, "maxPendingRequests", CAP_DEFAULTS.maxPendingRequests),
    maxQueuedBytes: readCap(cfg, "maxQueuedBytes", requestBytes),
    maxRequestValues: readCap(cfg, "maxRequestValues", CAP_DEFAULTS.maxRequestValues),
  };
}
/**
 * @param {Record<string, unknown>} cfg
 * @param {string} key
 * @param {number} fallback its value when left out; 0: it must be given
 * @returns {number}
 */
function readCap(cfg, key, fallback) {
  const v = cfg[key];
  if (v === undefined && fallback > 0) return fallback;
  if (typeof v === "number" && v > 0 && NumberIsFinite(v) && MathFloor(v) === v) return v;
  throw new TypeErrorCtor("guest config " + key + " must be a positive integer, not " +
    (v === undefined ? "missing" : JSONStringify(v)));
}

/**
 * @param {unknown} v
 * @returns {v is Error}
 */
function isError(v) {
  try {
    let p = getPrototypeOf(v);
    while (p !== null) {
      if (p === ErrorProto) return true;
      p = getPrototypeOf(p);
    }
  } catch (e) {}
  return false;
}

/**
 * @param {unknown} v
 * @returns {v is Promise<unknown>}
 */
function isPromise(v) {
  try {
    let p = getPrototypeOf(v);
    while (p !== null) {
      if (p === PromiseProto) return true;
      p = getPrototypeOf(p);
    }
  } catch (e) {}
  return false;
}
