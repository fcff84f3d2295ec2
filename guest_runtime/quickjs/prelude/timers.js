// @ts-check
// Timers and control: setTimeout/clearTimeout and yield_control.
//
// A timer is a host request ("sleep"), with one exception: a zero-delay timer set while the cell has
// no host request in flight or queued runs in the worker itself, once the job queue has drained
// (the driver's "take" fires them). Nothing could arrive from the host in between, so the
// round trip would only add latency. As soon as the cell waits for host work, timers go to the host
// again: a chain of zero-delay timers can never hold back a request the cell has already made.

/** @type {Record<number, number>} */
const timers = ObjectCreate(null); // timer id -> bridge request id
/** @type {Record<number, [Function, unknown[]]>} */
const localTimers = ObjectCreate(null); // timer id -> [callback, extra] of a worker-kept timer
/** @type {number[]} */
let localQueue = newList(); // worker-kept timer ids, in the order they were set
let localCount = 0;
let nextTimer = 1;
/**
 * @param {unknown} callback
 * @param {unknown} [delay]
 * @param {...unknown} extraArgs
 * @returns {number}
 */
function setTimeout(callback, delay) {
  if (typeof callback !== "function") throw new TypeErrorCtor("setTimeout callback must be a function");
  let ms = +(/** @type {number} */ (delay)); // whatever the cell passes, converted as the web's setTimeout does
  if (!(ms > 0)) ms = 0;
  ms = MathFloor(ms);
  /** @type {unknown[]} */
  const extra = newList();
  for (let i = 2; i < arguments.length; i++) extra[extra.length] = arguments[i];
  if (ms === 0 && pendingCount === 0 && queueLength === 0) return localTimer(callback, extra);
  const req = request("sleep", [ms], true); // throws a RangeError over a cap: never a lost callback
  const timerId = nextTimer++;
  timers[timerId] = req.id;
  // No rejection handler: a timer the host refuses becomes an unhandled rejection, which fails
  // the cell, instead of a callback that silently never runs.
  chain(req.promise, function () {
    delete timers[timerId];
    ReflectApply(callback, undefined, extra);
  });
  return timerId;
}
/**
 * @param {Function} callback
 * @param {unknown[]} extra
 */
function localTimer(callback, extra) {
  if (localCount >= config.maxPendingRequests) {
    throw new RangeErrorCtor("too many timers pending (limit " + config.maxPendingRequests +
      "); await some before starting more");
  }
  const timerId = nextTimer++;
  localTimers[timerId] = [callback, extra];
  localQueue[localQueue.length] = timerId;
  localCount++;
  return timerId;
}
// Queue the callbacks of the worker-kept timers set so far as jobs (timers they set wait for the
// next round, as macrotasks do); answers how many were queued. A finished cell runs none: its
// timers are dropped as host timers are.
function fireTimers() {
  if (localCount === 0 || done !== null) return 0;
  const due = localQueue;
  localQueue = newList();
  let fired = 0;
  for (let i = 0; i < due.length; i++) {
    const entry = localTimers[due[i]];
    if (entry === undefined) continue; // cleared
    delete localTimers[due[i]];
    localCount--;
    fired++;
    // A job of its own, like a host timer's callback: a throw becomes an unhandled rejection.
    ReflectApply(promiseThen, new NativePromise(resolveNow), [function () { ReflectApply(entry[0], undefined, entry[1]); }]);
  }
  return fired;
}
/** @param {(value: undefined) => void} resolve */
function resolveNow(resolve) {
  resolve(undefined);
}
/** @param {unknown} timerId whatever the cell passes, looked up as the property key it converts to */
function clearTimeout(timerId) {
  const key = /** @type {number} */ (timerId);
  if (localTimers[key] !== undefined) {
    delete localTimers[key];
    localCount--;
    return undefined;
  }
  const id = timers[key];
  if (id === undefined) return undefined;
  delete timers[key];
  if (forget(id) !== undefined) cancels[cancelLength++] = id;
  return undefined;
}
/** @param {unknown} [reason] */
function yield_control(reason) {
  const r = reason === undefined ? null : StringCtor(reason);
  return request("yield", [r]);
}
