// @ts-check
// The guest's global surface, the cell's outcome, and the host hook (the value the joined body returns).

function installGlobals() {
  /** @type {Record<string, unknown>} */
  const fixed = { text: text, json: json, setTimeout: setTimeout, clearTimeout: clearTimeout, yield_control: yield_control,
    TextEncoder: TextEncoder, TextDecoder: TextDecoder };
  const names = ObjectKeys(fixed);
  for (let i = 0; i < names.length; i++) {
    defineProperty(G, names[i], { value: fixed[names[i]], writable: true, enumerable: false, configurable: true });
  }
  const consoleObj = ObjectCreate(null);
  consoleObj.log = consoleMethod("");
  consoleObj.info = consoleMethod("");
  consoleObj.debug = consoleMethod("[debug] ");
  consoleObj.warn = consoleMethod("[warn] ");
  consoleObj.error = consoleMethod("[error] ");
  defineProperty(G, "console", { value: ObjectFreeze(consoleObj), writable: true, enumerable: false, configurable: true });
  // Host-only or timing surfaces the engine ships but a sandboxed cell should not have.
  const removed = ["performance", "print", "gc", "scriptArgs", "os", "std"];
  for (let i = 0; i < removed.length; i++) delete G[removed[i]];
}

// ---- the cell's outcome ------------------------------------------------------------
/**
 * @param {boolean} ok
 * @param {unknown} v the cell's value, or what it threw
 */
function finish(ok, v) {
  if (done !== null) return;
  if (ok) {
    // Serialised later, by the "value" hook, once the worker has made room for the copy.
    doneValue = v;
    done = '{"ok":true}';
    return;
  }
  const bridge = v !== null && typeof v === "object" && ReflectApply(weakSetHas, bridgeErrors, [v]);
  done = '{"ok":false,"bridge":' + (bridge ? "true" : "false") + ',"error":' + JSONStringify(describeThrown(v)) +
    ',"code":' + JSONStringify(bridge ? bridgeCode(/** @type {Error} */ (v)) : "") +
    ',"oom":' + (v === null || isOom(v) ? "true" : "false") + "}";
}
/** @param {unknown} v */
function isOom(v) {
  try { return isError(v) && v.name === "InternalError" && v.message === "out of memory"; } catch (e) { return false; }
}
/**
 * @param {Error} e an error made by makeError
 * @returns {string}
 */
function bridgeCode(e) {
  const code = /** @type {Error & {code?: unknown}} */ (e).code;
  return typeof code === "string" ? code : "";
}
/**
 * @param {unknown} v
 * @returns {string}
 */
function describeThrown(v) {
  // "Name: message" first, then the stack frames (mapped to cell lines by the driver).
  try {
    if (isError(v)) {
      let head;
      try { head = StringCtor(v.name) + ": " + StringCtor(v.message); } catch (e) { head = "Error"; }
      let stack = "";
      try { stack = typeof v.stack === "string" ? v.stack : ""; } catch (e) {}
      return stack ? head + "\n" + stack : head;
    }
    if (v === null) return "InternalError: out of memory";
    if (typeof v === "string") return "Uncaught: " + v;
    return "Uncaught: " + serialise(v, false, 0);
  } catch (e) {
    return "Uncaught: [Unserializable]";
  }
}

// The binding cannot convert the engine's rope strings (long "+" chains); join flattens.
/** @param {string} str */
function flat(str) {
  return ReflectApply(arrayJoin, [str, ""], [""]);
}

// Argument characters of one take up to which they travel inside its text.
const INLINE_ARGS_CHARS = 65536;
/** @returns {string} */
function take() {
  // The driver takes once the job queue drained, when zero-delay timers the worker keeps are due:
  // fired, their callbacks are jobs, and "" tells the driver to run them before it takes again.
  if (fireTimers() > 0) return "";
  // Built with join: a long "+" chain makes a rope string, which the binding cannot convert.
  /** @type {string[]} */
  const parts = newList();
  parts[0] = '{"requests":[';
  for (let i = 0; i < queueLength; i++) parts[parts.length] = (i ? "," : "") + queue[i];
  parts[parts.length] = '],"cancels":[';
  for (let i = 0; i < cancelLength; i++) parts[parts.length] = (i ? "," : "") + cancels[i];
  parts[parts.length] = '],"output":[';
  for (let i = 0; i < outputLength; i++) parts[parts.length] = (i ? "," : "") + JSONStringify(output[i]);
  parts[parts.length] = '],"outstanding":' + pendingCount + ',"required":' + requiredCount + ',"done":';
  parts[parts.length] = done === null ? "null" : done;
  parts[parts.length] = "}";
  if (queuedBytes <= INLINE_ARGS_CHARS) {
    // Small arguments ride along, each after a newline (no JSON text holds a raw one): the
    // worker then needs no "args" call per request.  Large ones are copied one at a time.
    for (let i = 0; i < queueLength; i++) parts[parts.length] = "\n" + queueArgs[i];
    takenArgs = ObjectCreate(null);
  } else {
    takenArgs = queueArgs;
  }
  queueArgs = newList();
  queue = newList(); queueLength = 0; queuedBytes = 0;
  cancels = ObjectCreate(null); cancelLength = 0;
  output = ObjectCreate(null); outputLength = 0;
  return ReflectApply(arrayJoin, parts, [""]);
}

// ---- the hook: the only way in for the host ----------------------------------------
// The globals that do not depend on a cell's configuration are made with the engine, which the
// worker builds while it waits for the next cell: "configure" adds only the tools and servers.
installGlobals();
installData();
let configured = false;
/**
 * The host hook: quickjs/engine.py calls it with an operation and its arguments, whose types per operation
 * engine.py's calls fix (hence the casts below).  The joined body returns it (prelude_source.py).
 * @param {HostHookOp} op
 * @param {unknown} [a]
 * @param {unknown} [b]
 * @returns {unknown}
 */
function codemodeHostHook(op, a, b) {
  if (hookSlot !== null) {
    // The host read this hook from the global hookSlot names: gone at its first call, whatever
    // the operation, so before any cell code can run ("start" is never the first).
    delete G[hookSlot];
    hookSlot = null;
  }
  switch (op) {
    case "configure": {
      if (configured) throw new TypeErrorCtor("the guest is configured once");
      configured = true;
      const cfg = JSONParse(/** @type {string} */ (a));
      config = readCaps(cfg);
      installTools(cfg.tools || []);
      installMcp(cfg.mcp || [], cfg.mcpUnavailable || []);
      return true;
    }
    case "compile":
      // The Function constructor parses the cell as a function body: no way to break out
      // of the wrapper, and nothing runs until "start".
      return AsyncFunction(/** @type {string} */ (a));
    case "start": {
      let p;
      try {
        p = ReflectApply(/** @type {Function} */ (a), undefined, []);
      } catch (e) {
        finish(false, e);
        return true;
      }
      ReflectApply(promiseThen, p, [/** @param {unknown} v */ function (v) { finish(true, v); }, /** @param {unknown} e */ function (e) { finish(false, e); }]);
      return true;
    }
    case "take":
      return take();
    case "args": {
      // The JSON arguments of request `a` of the last take, once.
      const index = /** @type {number} */ (a);
      const text = takenArgs[index];
      delete takenArgs[index];
      return typeof text === "string" ? flat(text) : "[]";
    }
    case "value": {
      const v = doneValue;
      doneValue = null;
      return flat(serialise(v, false, 0));
    }
    case "settle":
      return settle(/** @type {number} */ (a), /** @type {string | null} */ (b));
    case "fail":
      return fail(/** @type {number} */ (a), /** @type {string} */ (b));
    case "reject":
      return rejectFailed(/** @type {number} */ (a));
    case "cancelTimers": {
      // The cell finished: timers nobody waits for are dropped, their callbacks never run.
      const ids = ObjectKeys(timers);
      for (let i = 0; i < ids.length; i++) clearTimeout(+ids[i]);
      const local = ObjectKeys(localTimers);
      for (let i = 0; i < local.length; i++) clearTimeout(+local[i]);
      return true;
    }
    case "unhandledBridge": {
      // The error of failed request `a`, which the engine says nobody handled.
      const failed = failedRequests[/** @type {number} */ (a)];
      if (failed === undefined) return null;
      const e = failed.error;
      return JSONStringify({ error: describeThrown(e), code: bridgeCode(e) });
    }
    default: {
      /** @type {never} */
      const unhandled = op; // every operation of HostHookOp has its case
      throw new TypeErrorCtor("unknown host hook operation " + StringCtor(unhandled));
    }
  }
}
