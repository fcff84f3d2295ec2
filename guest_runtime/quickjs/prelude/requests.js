// @ts-check
// Bridge requests: queue a request for the host, settle it when the reply comes back.

// Bridge promises are native promises: `await p` then resolves in one job, where a subclass
// would cost two more (a thenable job and its reaction) per call.  Whether anybody handled a
// rejected one is the engine's own record (the driver's rejection tracker): a failure is settled
// in two hook calls, "fail" (builds the error; cell code can run there) and "reject" (runs no
// cell code), so the one rejection the tracker reports during "reject" is the bridge promise's.

/**
 * @param {Record<string, unknown> | null} err the host's ReplyError (bridge/messages.py)
 * @returns {Error}
 */
function makeError(err) {
  let e;
  const name = err && err.name;
  const message = err && typeof err.message === "string" ? err.message : "host request failed";
  if (name === "TypeError") e = new TypeErrorCtor(message);
  else if (name === "RangeError") e = new RangeErrorCtor(message);
  else e = new ErrorCtor(message);
  if (err && typeof err.code === "string") defineValue(e, "code", err.code);
  // The tool failure contract's fields of a tool_error (errorType, needParam, ...) travel the same way.
  const extra = ["effectStatus", "tool", "details", "data", "errorType", "needParam", "nonRetriable",
    "userMessage", "redirect", "upstream", "timeoutSeconds"];
  for (let i = 0; i < extra.length; i++) {
    if (err && err[extra[i]] !== undefined) defineValue(e, extra[i], err[extra[i]]);
  }
  ReflectApply(weakSetAdd, bridgeErrors, [e]);
  return e;
}

// Caps refuse a request before it exists, as a RangeError: setTimeout throws it, every other
// request returns it rejected.  The host enforces the same caps again (check_request,
// service/runtime/host_requests.py).
/**
 * @param {string} message
 * @param {boolean | undefined} timer
 * @returns {Promise<never>}
 */
function refuse(message, timer) {
  const refused = new RangeErrorCtor(message);
  if (timer === true) throw refused;
  return NativePromise.reject(refused);
}

/**
 * A timer's request: its id, for clearTimeout, and its promise.
 * @typedef {{id: number, promise: Promise<unknown>}} TimerRequest
 */
/**
 * @overload
 * @param {string} method
 * @param {unknown} args
 * @param {true} timer
 * @returns {TimerRequest}
 */
/**
 * @overload
 * @param {string} method
 * @param {unknown} args
 * @returns {Promise<any>} the reply: the host's JSON, typed as JSON.parse types it
 */
/**
 * @param {string} method
 * @param {unknown} args
 * @param {boolean} [timer]
 * @returns {TimerRequest | Promise<any>}
 */
function request(method, args, timer) {
  return send(method, null, 0, args, timer);
}

// A request whose arguments are an array ending in `last`: `head` is the JSON text of the array up
// to it (e.g. '["name",'), holding `headValues` JSON values, built once by the caller.  Only `last`
// is walked, one level down, so the caps and the nesting limit see exactly what serialising the
// whole array would.  With a null `head`, `last` is the whole argument value.
/**
 * @param {string} method
 * @param {string | null} head
 * @param {number} headValues
 * @param {unknown} last
 * @param {boolean | undefined} timer
 * @returns {TimerRequest | Promise<any>}
 */
function send(method, head, headValues, last, timer) {
  if (pendingCount >= config.maxPendingRequests) {
    return refuse("too many host requests pending (limit " + config.maxPendingRequests +
      ": tool calls, timers and yield_control all count); await some before starting more", timer);
  }
  if (queueLength >= config.maxQueuedRequests) {
    // One synchronous burst may not flood the host: the rest of the burst is refused here.
    return refuse("too many host requests queued at once (limit " + config.maxQueuedRequests +
      "); await some before starting more", timer);
  }
  let argsJson;
  try {
    argsJson = head === null ? serialise(last, true, 0) : head + serialise(last, true, 1) + "]";
  } catch (e) {
    return NativePromise.reject(e);
  }
  valueCount += headValues;
  if (argsJson.length > config.maxRequestBytes) {
    return NativePromise.reject(new RangeErrorCtor(
      "request arguments are " + argsJson.length + " characters, over the " + config.maxRequestBytes +
      "-character bridge frame cap; pass less data per call"));
  }
  if (valueCount > config.maxRequestValues) {
    // Parsed on the host, each value costs far more than its bytes (count_values, service/runtime/host_requests.py).
    return NativePromise.reject(new RangeErrorCtor(
      "request arguments hold more than " + config.maxRequestValues + " JSON values, over the " +
      "max_request_values cap; pass fewer, larger values (for example a table as one CSV or JSON string), " +
      "or split the data over several calls"));
  }
  if (queueLength > 0 && queuedBytes + argsJson.length > config.maxQueuedBytes) {
    // Requests of one synchronous burst travel in one frame and are copied once more on the
    // way out: their arguments together stay within one cap (a single request may use all of it).
    return refuse("host requests started in one synchronous burst would carry " + (queuedBytes + argsJson.length) +
      " characters of arguments, over the " + config.maxQueuedBytes + "-character cap; await some before starting more",
      timer);
  }
  queuedBytes += argsJson.length;
  const id = nextId++;
  /** @type {PendingEntry} */
  const entry = { resolve: unset, reject: unset, timer: timer === true, promise: null };
  const p = new NativePromise(function (res, rej) { entry.resolve = res; entry.reject = rej; });
  entry.promise = p;
  pending[id] = entry;
  pendingCount++;
  if (timer !== true) requiredCount++;
  // The arguments travel beside the request as their own text (inside take's, or hook "args"),
  // never parsed on the way.
  queueArgs[queueLength] = argsJson;
  queue[queueLength++] = '{"id":' + id + ',"method":' + JSONStringify(method) + "}";
  if (timer === true) return { id: id, promise: p };
  return p;
}

// What a pending entry holds until its promise's executor, which runs at once, replaces it.
function unset() {}

// Chain on a bridge promise inside the prelude: the derived promise now carries the outcome,
// so the bridge promise itself counts as handled.
/**
 * @param {Promise<unknown>} p
 * @param {(value: any) => unknown} onFulfilled
 * @param {(reason: unknown) => unknown} [onRejected]
 * @returns {Promise<unknown>}
 */
function chain(p, onFulfilled, onRejected) {
  return ReflectApply(promiseThen, p, [onFulfilled, onRejected]);
}

/** @param {number} id */
function forget(id) {
  const entry = pending[id];
  if (entry === undefined) return undefined;
  delete pending[id];
  pendingCount--;
  if (!entry.timer) requiredCount--;
  return entry;
}

/**
 * @param {number} id
 * @param {string | null} payload JSON text; null (the driver's None): the reply is null
 */
function settle(id, payload) {
  const entry = forget(id);
  if (entry === undefined) return false; // cancelled timer or unknown id: drop silently
  entry.resolve(payload === null ? null : JSONParse(payload));
  return true;
}

// A host failure, step one: the error (its construction may run the cell's prepareStackTrace).
// The entry (and so its promise) stays referenced for good: the engine's record of an unhandled
// rejection names the promise by address, which must not be reused by another promise.
/**
 * @param {number} id
 * @param {string} payload the host's ReplyError as JSON text
 */
function fail(id, payload) {
  const entry = forget(id);
  if (entry === undefined) return false;
  failedRequests[id] = { entry: entry, error: makeError(JSONParse(payload)) };
  return true;
}

// Step two: only the rejection, which runs no cell code before the engine's tracker sees it.
/** @param {number} id */
function rejectFailed(id) {
  const failed = failedRequests[id];
  if (failed !== undefined) failed.entry.reject(failed.error);
  return true;
}
