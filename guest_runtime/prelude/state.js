// The guest side of the host queue, shared by requests, output and the hook.

const UNAWAITED =
  "[Unawaited Promise: use await or Promise.all(...) before emitting or returning values.]";

// ---- host queue state (all containers have no prototype, so no setter can intercept) ----
const pending = ObjectCreate(null); // id -> {resolve, reject, timer, promise}
let pendingCount = 0;
let requiredCount = 0; // pending requests that are not timers
let nextId = 1;
// The queue and its arguments are filled densely by index: lists (arrays without a prototype)
// keep a burst of a thousand requests in the engine's fast array form, not in a growing object.
let queue = newList();
let queueArgs = newList(); // index in queue -> the request's JSON argument text
let takenArgs = ObjectCreate(null); // the same, for the requests of the last take, until the worker reads them
let queueLength = 0;
let cancels = ObjectCreate(null);
let cancelLength = 0;
let output = ObjectCreate(null);
let outputLength = 0;
let done = null; // JSON text of the final outcome once the cell's main promise settled
let doneValue = null; // the cell's return value, until the worker asks for its JSON text
let config = { maxRequestBytes: 8388608, maxQueuedRequests: 1024, maxPendingRequests: 128, maxQueuedBytes: 10485760,
  maxRequestValues: 1000000 };
let queuedBytes = 0; // argument characters of the requests queued since the last take

const bridgeErrors = new WeakSetCtor(); // Error objects created from host failures
const handles = new WeakMapCtor(); // handle function -> metadata
const failedRequests = ObjectCreate(null); // request id -> {entry, error} of a host failure

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
