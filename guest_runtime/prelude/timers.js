// Timers and control: setTimeout/clearTimeout and yield_control, all host requests.

const timers = ObjectCreate(null); // timer id -> bridge request id
let nextTimer = 1;
function setTimeout(callback, delay) {
  if (typeof callback !== "function") throw new TypeErrorCtor("setTimeout callback must be a function");
  let ms = +delay;
  if (!(ms > 0)) ms = 0;
  ms = MathFloor(ms);
  const extra = newList();
  for (let i = 2; i < arguments.length; i++) extra[extra.length] = arguments[i];
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
function clearTimeout(timerId) {
  const id = timers[timerId];
  if (id === undefined) return undefined;
  delete timers[timerId];
  if (forget(id) !== undefined) cancels[cancelLength++] = id;
  return undefined;
}
function yield_control(reason) {
  const r = reason === undefined ? null : StringCtor(reason);
  return request("yield", [r]);
}
