// codemode guest prelude: evaluated first in every fresh QuickJS context.
//
// The whole prelude is one expression whose value is the host hook.  The driver keeps that
// function object and never puts it on globalThis, so guest code cannot reach it: there is no
// bridge name to find, and no Python callable is registered in the guest at all.  Guest
// requests are queued here and pumped by the worker loop ("take"); replies come back through
// "settle", in any order.  Everything the prelude relies on after user code starts running is
// captured up front, so a cell that patches built-ins can only confuse itself.
(function () {
  "use strict";
  const G = globalThis;
  const ObjectCreate = Object.create;
  const ObjectKeys = Object.keys;
  const ObjectFreeze = Object.freeze;
  const defineProperty = Object.defineProperty;
  const getPrototypeOf = Object.getPrototypeOf;
  const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const ReflectApply = Reflect.apply;
  const JSONStringify = JSON.stringify;
  const JSONParse = JSON.parse;
  const NativePromise = Promise;
  const promiseThen = Promise.prototype.then;
  const ArrayIsArray = Array.isArray;
  const StringCtor = String;
  const NumberIsFinite = Number.isFinite;
  const MathFloor = Math.floor;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const RangeErrorCtor = RangeError;
  const WeakSetCtor = WeakSet;
  const WeakMapCtor = WeakMap;
  const weakSetAdd = WeakSet.prototype.add;
  const weakSetHas = WeakSet.prototype.has;
  const weakMapGet = WeakMap.prototype.get;
  const weakMapSet = WeakMap.prototype.set;
  const weakMapHas = WeakMap.prototype.has;
  const ErrorProto = Error.prototype;
  const PromiseProto = Promise.prototype;
  const stringSlice = String.prototype.slice;
  const stringReplace = String.prototype.replace;
  const stringCharCodeAt = String.prototype.charCodeAt;
  const stringToWellFormed = String.prototype.toWellFormed;
  const arrayJoin = Array.prototype.join;
  const AsyncFunction = (async function () {}).constructor;
  const setPrototypeOf = Object.setPrototypeOf;
  const arraySlice = Array.prototype.slice;

  // Arrays the prelude fills by index have no prototype: an index setter a cell puts on
  // Array.prototype (or Object.prototype) can neither see nor swallow what the prelude stores.
  function newList() {
    return setPrototypeOf([], null);
  }
  // A plain Array copy of a list, for values handed to the cell (slice defines, never sets).
  function toArray(l) {
    return ReflectApply(arraySlice, l, []);
  }
  function defineValue(o, k, v) {
    defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
  }

  // Arrays/objects a value crossing the bridge may nest (bridge.jsoncodec.MAX_NESTING).
  const MAX_NESTING = 200;
  const TOO_DEEP = "[Nested too deep: values may nest at most " + MAX_NESTING + " levels of arrays/objects]";

  // ---- stack traces without functions ---------------------------------------------------
  // The engine hands Error.prepareStackTrace raw call sites whose getFunction() returns the
  // function of every frame, the host hook included.  The engine's own slot only ever holds
  // prepareWithSafeSites below: the cell's function gets frozen call sites that carry names and
  // positions but no function, and no frame of the prelude at all.  The
  // accessor is not configurable, so a cell cannot put the engine's setter back.
  const prepareAccessor = getOwnPropertyDescriptor(ErrorCtor, "prepareStackTrace");
  const enginePrepareSet = prepareAccessor.set;
  let probeSites = null;
  ReflectApply(enginePrepareSet, ErrorCtor, [function (e, sites) { probeSites = sites; return ""; }]);
  new ErrorCtor("call site probe");
  ReflectApply(enginePrepareSet, ErrorCtor, [undefined]);
  const engineSite = getPrototypeOf(probeSites[0]);
  probeSites = null;
  const siteFields = ObjectCreate(null);
  siteFields.getFileName = engineSite.getFileName;
  siteFields.getFunctionName = engineSite.getFunctionName;
  siteFields.getLineNumber = engineSite.getLineNumber;
  siteFields.getColumnNumber = engineSite.getColumnNumber;
  siteFields.isNative = engineSite.isNative;
  siteFields.isConstructor = engineSite.isConstructor;
  const siteFieldNames = ObjectKeys(siteFields);
  const siteData = new WeakMapCtor(); // safe call site -> its fields
  function siteField(site, name) {
    const data = ReflectApply(weakMapGet, siteData, [site]);
    return data === undefined ? undefined : data[name];
  }
  const safeSiteProto = ObjectCreate(null);
  for (let i = 0; i < siteFieldNames.length; i++) {
    const name = siteFieldNames[i];
    safeSiteProto[name] = function () { return siteField(this, name); };
  }
  safeSiteProto.getFunction = function getFunction() { return undefined; };
  safeSiteProto.getThis = function getThis() { return undefined; };
  safeSiteProto.getTypeName = function getTypeName() { return null; };
  safeSiteProto.toString = function toString() {
    const name = siteField(this, "getFunctionName");
    const where = siteField(this, "isNative") ? "native" :
      siteField(this, "getFileName") + ":" + siteField(this, "getLineNumber") + ":" + siteField(this, "getColumnNumber");
    return name ? name + " (" + where + ")" : where;
  };
  ObjectFreeze(safeSiteProto);
  let cellPrepare; // what the cell assigned to Error.prepareStackTrace
  function prepareWithSafeSites(error, sites) {
    const out = newList();
    for (let i = 0; i < sites.length; i++) {
      const site = sites[i];
      // Prelude frames have an empty file name: its bytecode is stored without debug info.
      if (ReflectApply(siteFields.getFileName, site, []) === "") continue;
      const data = ObjectCreate(null);
      for (let j = 0; j < siteFieldNames.length; j++) data[siteFieldNames[j]] = ReflectApply(siteFields[siteFieldNames[j]], site, []);
      const safe = ObjectFreeze(ObjectCreate(safeSiteProto));
      ReflectApply(weakMapSet, siteData, [safe, data]);
      out[out.length] = safe;
    }
    return ReflectApply(cellPrepare, ErrorCtor, [error, ObjectFreeze(toArray(out))]);
  }
  defineProperty(ErrorCtor, "prepareStackTrace", {
    get: function () { return cellPrepare; },
    set: function (v) {
      cellPrepare = v;
      ReflectApply(enginePrepareSet, ErrorCtor, [typeof v === "function" ? prepareWithSafeSites : undefined]);
    },
    enumerable: false,
    configurable: false,
  });

  const UNAWAITED =
    "[Unawaited Promise: use await or Promise.all(...) before emitting or returning values.]";

  // ---- host queue state (all containers have no prototype, so no setter can intercept) ----
  const pending = ObjectCreate(null); // id -> {resolve, reject, timer, required}
  let pendingCount = 0;
  let requiredCount = 0; // pending requests that are not timers
  let nextId = 1;
  let queue = ObjectCreate(null);
  let queueLength = 0;
  let cancels = ObjectCreate(null);
  let cancelLength = 0;
  let output = ObjectCreate(null);
  let outputLength = 0;
  let done = null; // JSON text of the final outcome once the cell's main promise settled
  let doneValue = null; // the cell's return value, until the worker asks for its JSON text
  let config = { maxRequestBytes: 8388608, maxQueuedRequests: 1024, maxPendingRequests: 128, maxQueuedBytes: 10485760 };
  let queuedBytes = 0; // argument characters of the requests queued since the last take

  const bridgeErrors = new WeakSetCtor(); // Error objects created from host failures
  const handles = new WeakMapCtor(); // handle function -> metadata
  const bridgePromises = ObjectCreate(null); // id -> tracked bridge promise state
  let unhandledBridge = null; // first bridge rejection nobody handled

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

  // ---- JSON serialisation --------------------------------------------------------------
  // One walker for two modes.  "emit" (return values, text/json, console) never throws and
  // never runs user toJSON: it renders leftovers as placeholders.  "strict" (tool arguments,
  // results.save, store) refuses anything that is not plain JSON, so the call rejects and
  // nothing already saved changes.
  // Most values are plain JSON data: a scan that allocates nothing proves it, and the engine's
  // own JSON.stringify then does the work (a 5 MB array would not fit the heap otherwise).
  // Accessors, toJSON, Promises, Errors, handles, BigInt and cycles take the slow path.
  function isPlain(v, stack) {
    const t = typeof v;
    if (t === "bigint") return false;
    if (t === "function") return !ReflectApply(weakMapHas, handles, [v]);
    if (t !== "object" || v === null) return true;
    if (stack.length >= MAX_NESTING) return false;
    for (let i = 0; i < stack.length; i++) if (stack[i] === v) return false;
    if (isPromise(v) || isError(v) || typeof v.toJSON === "function") return false;
    stack[stack.length] = v;
    const keys = ObjectKeys(v);
    for (let i = 0; i < keys.length; i++) {
      const d = getOwnPropertyDescriptor(v, keys[i]);
      if (d === undefined || d.get !== undefined || d.set !== undefined) return false;
      if (!isPlain(d.value, stack)) return false;
    }
    stack.length = stack.length - 1;
    return true;
  }

  function serialise(value, strict) {
    try {
      if (isPlain(value, newList())) {
        const s = JSONStringify(value);
        return s === undefined ? "null" : s;
      }
    } catch (e) {
      // a proxy trap or an exotic object: the careful walker below decides
    }
    const seen = newList();
    function fail(message) {
      throw new TypeErrorCtor(message);
    }
    function walk(v, inArray) {
      if (v === null) return "null";
      const t = typeof v;
      if (t === "string") return JSONStringify(v);
      if (t === "number") return NumberIsFinite(v) ? JSONStringify(v) : "null";
      if (t === "boolean") return v ? "true" : "false";
      if (t === "undefined") return inArray ? "null" : undefined;
      if (t === "bigint") {
        if (strict) fail("BigInt values are not JSON; convert them with String(value) first");
        return JSONStringify(StringCtor(v));
      }
      if (t === "symbol") {
        if (strict) fail("Symbol values are not JSON");
        return inArray ? "null" : undefined;
      }
      if (t === "function") {
        if (ReflectApply(weakMapHas, handles, [v])) return walk(ReflectApply(weakMapGet, handles, [v]), inArray);
        if (strict) return inArray ? "null" : undefined;
        return inArray ? "null" : undefined;
      }
      // objects
      for (let i = 0; i < seen.length; i++) {
        if (seen[i] === v) {
          if (strict) fail("cyclic structures are not JSON");
          return JSONStringify("[Circular]");
        }
      }
      if (isPromise(v)) {
        if (strict) fail("an unawaited Promise is not JSON; await it first");
        return JSONStringify(UNAWAITED);
      }
      if (seen.length >= MAX_NESTING) {
        if (strict) fail("value is nested more than " + MAX_NESTING + " levels deep; the bridge accepts at most " +
          MAX_NESTING + " levels of arrays/objects: flatten it or pass less at once");
        return JSONStringify(TOO_DEEP);
      }
      seen[seen.length] = v;
      try {
        if (isError(v)) return errorObject(v);
        if (ArrayIsArray(v)) {
          const parts = newList();
          const n = v.length;
          for (let i = 0; i < n; i++) parts[i] = walk(v[i], true);
          return "[" + ReflectApply(arrayJoin, parts, [","]) + "]";
        }
        const keys = ObjectKeys(v);
        const parts = newList();
        for (let i = 0; i < keys.length; i++) {
          const k = keys[i];
          const s = walk(v[k], false);
          if (s !== undefined) parts[parts.length] = JSONStringify(k) + ":" + s;
        }
        return "{" + ReflectApply(arrayJoin, parts, [","]) + "}";
      } finally {
        seen.length = seen.length - 1;
      }
    }
    function errorObject(e) {
      // name + message first, then JSON-compatible enumerable own fields; toJSON is not called.
      const parts = newList();
      let name = "Error";
      let message = "";
      try { name = StringCtor(e.name); } catch (x) { if (strict) throw x; }
      try { message = StringCtor(e.message); } catch (x) { if (strict) throw x; }
      parts[0] = '"name":' + JSONStringify(name);
      parts[1] = '"message":' + JSONStringify(message);
      const keys = ObjectKeys(e);
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i];
        if (k === "name" || k === "message" || k === "stack") continue;
        let s;
        try { s = walk(e[k], false); } catch (x) { if (strict) throw x; s = undefined; }
        if (s !== undefined) parts[parts.length] = JSONStringify(k) + ":" + s;
      }
      return "{" + ReflectApply(arrayJoin, parts, [","]) + "}";
    }
    if (strict) {
      const s = walk(value, false);
      return s === undefined ? "null" : s;
    }
    try {
      const s = walk(value, false);
      return s === undefined ? "null" : s;
    } catch (e) {
      // A throwing getter, a hostile proxy or a stack overflow: keep the cell alive.
      if (isError(value)) {
        try { return JSONStringify({ name: StringCtor(value.name), message: StringCtor(value.message) }); } catch (x) {}
      }
      try { return JSONStringify("[Unserializable]"); } catch (x) { return '"[Unserializable]"'; }
    }
  }

  // ---- output ------------------------------------------------------------------------
  // Every entry costs the host work however small it is, so a cell emits at most this many
  // (bridge/output.py MAX_OUTPUT_ENTRIES re-checks it); console output past it is dropped.
  const MAX_OUTPUT_ENTRIES = 10000;
  let outputCount = 0;
  function refuseOverEntryCap() {
    if (outputCount >= MAX_OUTPUT_ENTRIES) {
      throw new RangeErrorCtor("too many output entries (limit " + MAX_OUTPUT_ENTRIES + " per cell): " +
        "join text into one string and emit it with fewer text()/json() calls");
    }
  }
  function emit(entryJson) {
    refuseOverEntryCap();
    outputCount++;
    output[outputLength++] = entryJson;
  }
  function text(v) {
    refuseOverEntryCap(); // before serialising: a refused entry costs nothing
    const s = typeof v === "string" ? v : serialise(v, false);
    emit('{"type":"text","text":' + JSONStringify(s) + "}");
  }
  function json(v) {
    refuseOverEntryCap();
    emit('{"type":"json","value":' + serialise(v, false) + "}");
  }

  // Bounded console: the same ordered stream as text(); reference limits per call and in total.
  const CONSOLE_TOTAL = 16384;
  const CONSOLE_MAX_MESSAGE = 4096;
  let consoleUsed = 0;
  let consoleClosed = false;
  function clip(s, n) {
    if (s.length <= n) return s;
    let end = n;
    const c = ReflectApply(stringCharCodeAt, s, [end - 1]);
    if (c >= 0xd800 && c <= 0xdbff) end -= 1; // never split a surrogate pair
    return ReflectApply(stringSlice, s, [0, end]) + "…";
  }
  function inspect(v, depth, seen) {
    if (v === null) return "null";
    const t = typeof v;
    // Quoted strings are JSON inside the console text: make them well-formed first, or a lone
    // surrogate would survive as a "\udXXX" escape that the host cannot see.
    if (t === "string") return depth === 0 ? clip(v, 512) : JSONStringify(ReflectApply(stringToWellFormed, clip(v, 512), []));
    if (t === "number" || t === "boolean" || t === "undefined") return StringCtor(v);
    if (t === "bigint") return StringCtor(v) + "n";
    if (t === "symbol") { try { return StringCtor(v); } catch (e) { return "Symbol()"; } }
    if (t === "function") return ReflectApply(weakMapHas, handles, [v]) ? "[Function: " + ReflectApply(weakMapGet, handles, [v]).callableName + "]" : "[Function]";
    try {
      for (let i = 0; i < seen.length; i++) if (seen[i] === v) return "[Circular]";
      if (isPromise(v)) return UNAWAITED;
      if (isError(v)) {
        let s = StringCtor(v.name) + ": " + StringCtor(v.message);
        return clip(s, 512);
      }
      if (depth >= 4) return ArrayIsArray(v) ? "[Array]" : "[Object]";
      seen[seen.length] = v;
      try {
        if (ArrayIsArray(v)) {
          const n = v.length;
          const parts = newList();
          for (let i = 0; i < n && i < 50; i++) parts[i] = inspect(v[i], depth + 1, seen);
          if (n > 50) parts[parts.length] = "… " + (n - 50) + " more";
          return "[" + ReflectApply(arrayJoin, parts, [", "]) + "]";
        }
        const keys = ObjectKeys(v);
        const parts = newList();
        for (let i = 0; i < keys.length && i < 50; i++) {
          const k = keys[i];
          const d = getOwnPropertyDescriptor(v, k);
          const shown = d && ("get" in d || "set" in d) ? "[Getter/Setter]" : inspect(d ? d.value : undefined, depth + 1, seen);
          parts[parts.length] = clip(k, 512) + ": " + shown;
        }
        if (keys.length > 50) parts[parts.length] = "… " + (keys.length - 50) + " more";
        return "{" + ReflectApply(arrayJoin, parts, [", "]) + "}";
      } finally {
        seen.length = seen.length - 1;
      }
    } catch (e) {
      return "[Unserializable]";
    }
  }
  function consoleMethod(prefix) {
    return function () {
      if (consoleClosed) return undefined;
      try {
        const parts = newList();
        const n = arguments.length < 100 ? arguments.length : 100;
        for (let i = 0; i < n; i++) parts[i] = inspect(arguments[i], 0, newList());
        let message = prefix + ReflectApply(arrayJoin, parts, [" "]);
        message = clip(message, CONSOLE_MAX_MESSAGE);
        const entry = '{"type":"text","text":' + JSONStringify(message) + "}";
        if (consoleUsed + entry.length > CONSOLE_TOTAL) {
          consoleClosed = true;
          emit('{"type":"text","text":"[console output truncated]"}');
          return undefined;
        }
        consoleUsed += entry.length;
        emit(entry);
      } catch (e) {
        // console must never throw into the cell
      }
      return undefined;
    };
  }

  // ---- bridge requests ---------------------------------------------------------------
  // Bridge promises use a private subclass so the prelude can tell whether anybody ever
  // attached a handler: `void tool()` that rejects must fail the cell.
  // `await p` and Promise.all call `then` on a subclass instance, which marks it handled.
  const promiseStates = new WeakMapCtor();
  class BridgePromise extends NativePromise {
    then(onFulfilled, onRejected) {
      const state = ReflectApply(weakMapGet, promiseStates, [this]);
      if (state !== undefined) state.handled = true;
      return ReflectApply(promiseThen, this, [onFulfilled, onRejected]);
    }
  }

  function makeError(err) {
    let e;
    const name = err && err.name;
    const message = err && typeof err.message === "string" ? err.message : "host request failed";
    if (name === "TypeError") e = new TypeErrorCtor(message);
    else if (name === "RangeError") e = new RangeErrorCtor(message);
    else e = new ErrorCtor(message);
    if (err && typeof err.code === "string") defineValue(e, "code", err.code);
    const extra = ["effectStatus", "tool", "details", "data"];
    for (let i = 0; i < extra.length; i++) {
      if (err && err[extra[i]] !== undefined) defineValue(e, extra[i], err[extra[i]]);
    }
    ReflectApply(weakSetAdd, bridgeErrors, [e]);
    return e;
  }

  // Caps refuse a request before it exists, as a RangeError: setTimeout throws it, every other
  // request returns it rejected.  The host enforces the same caps again (service/request_caps.py).
  function refuse(message, timer) {
    const refused = new RangeErrorCtor(message);
    if (timer === true) throw refused;
    return NativePromise.reject(refused);
  }

  function request(method, args, timer) {
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
      argsJson = serialise(args, true);
    } catch (e) {
      return NativePromise.reject(e);
    }
    if (argsJson.length > config.maxRequestBytes) {
      return NativePromise.reject(new RangeErrorCtor(
        "request arguments are " + argsJson.length + " characters, over the " + config.maxRequestBytes +
        "-character bridge frame cap; pass less data per call"));
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
    let resolveFn, rejectFn;
    const p = new BridgePromise(function (res, rej) { resolveFn = res; rejectFn = rej; });
    const state = { handled: false, rejected: null };
    ReflectApply(weakMapSet, promiseStates, [p, state]);
    pending[id] = { resolve: resolveFn, reject: rejectFn, timer: timer === true, state: state };
    pendingCount++;
    if (timer !== true) requiredCount++;
    queue[queueLength++] = '{"id":' + id + ',"method":' + JSONStringify(method) + ',"args":' + argsJson + "}";
    if (timer === true) return { id: id, promise: p };
    return p;
  }

  // Chain on a bridge promise inside the prelude: the derived promise now carries the outcome,
  // so the bridge promise itself counts as handled.
  function chain(p, onFulfilled, onRejected) {
    const state = ReflectApply(weakMapGet, promiseStates, [p]);
    if (state !== undefined) state.handled = true;
    return ReflectApply(promiseThen, p, [onFulfilled, onRejected]);
  }

  function forget(id) {
    const entry = pending[id];
    if (entry === undefined) return undefined;
    delete pending[id];
    pendingCount--;
    if (!entry.timer) requiredCount--;
    return entry;
  }

  function settle(id, ok, payload) {
    const entry = forget(id);
    if (entry === undefined) return false; // cancelled timer or unknown id: drop silently
    if (ok) {
      entry.resolve(payload === undefined ? undefined : JSONParse(payload));
    } else {
      const e = makeError(JSONParse(payload));
      entry.state.rejected = e;
      bridgePromises[id] = entry.state;
      entry.reject(e);
    }
    return true;
  }

  // ---- timers and control -----------------------------------------------------------
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

  // ---- tools, catalog, MCP, API, results, store ---------------------------------------
  function freezeDeep(o) {
    if (o !== null && typeof o === "object") {
      const keys = ObjectKeys(o);
      for (let i = 0; i < keys.length; i++) freezeDeep(o[keys[i]]);
      ObjectFreeze(o);
    }
    return o;
  }
  function makeHandle(meta) {
    const callable = meta.callableName;
    let fn;
    if (meta.source === "mcp") {
      const parts = meta.mcp; // [server identifier, tool identifier]
      fn = function (input) { return request("mcp.call", [parts[0], parts[1], input, mcpArgc(input, arguments.length)]); };
    } else {
      fn = function (input) { return request("tool", [callable, input === undefined ? {} : input]); };
    }
    const metaCopy = freezeDeep(JSONParse(JSONStringify(meta)));
    const visible = ObjectCreate(null);
    const keys = ObjectKeys(metaCopy);
    for (let i = 0; i < keys.length; i++) {
      if (keys[i] === "mcp") continue;
      visible[keys[i]] = metaCopy[keys[i]];
      defineProperty(fn, keys[i], { value: metaCopy[keys[i]], enumerable: true });
    }
    ObjectFreeze(visible);
    defineProperty(fn, "describe", { value: function describe() { return request("describe", [meta.source === "mcp" ? callable : callable]); } });
    defineProperty(fn, "toJSON", { value: function toJSON() { return visible; } });
    ReflectApply(weakMapSet, handles, [fn, visible]);
    return ObjectFreeze(fn);
  }

  function installTools(list) {
    const all = [];
    for (let i = 0; i < list.length; i++) {
      const h = makeHandle(list[i]);
      all[all.length] = h;
      defineProperty(G, list[i].callableName, { value: h, writable: false, enumerable: false, configurable: false });
    }
    ObjectFreeze(all);
    const catalog = ObjectFreeze({
      all: function all_() { return all; },
      search: function search(query, options) {
        if (typeof query !== "string") return NativePromise.reject(new TypeErrorCtor("catalog.search(query) needs a string query"));
        let limit = null;
        if (options !== undefined && options !== null && options.limit !== undefined) limit = options.limit;
        return chain(request("search", [query, limit]), function (metas) {
          const out = newList();
          for (let i = 0; i < metas.length; i++) out[i] = makeHandle(metas[i]);
          return ObjectFreeze(toArray(out));
        });
      },
    });
    defineProperty(G, "catalog", { value: catalog, enumerable: false });
  }

  // `MCP.s.t()` and `MCP.s.t(undefined)` both mean the empty input.
  function mcpArgc(input, count) {
    return input === undefined && count <= 1 ? 0 : count;
  }

  // A configured server that is down still has a namespace: every call on it rejects with an
  // error naming the server, instead of a TypeError about an undefined property.
  function unavailableServer(name) {
    function refuse() {
      return NativePromise.reject(makeError({
        name: "Error", code: "mcp_unavailable",
        message: "MCP server '" + name + "' is unavailable: it could not be reached when this cell started; retry in a later cell",
      }));
    }
    refuse.list = refuse;
    refuse.read = refuse;
    refuse.get = refuse;
    return new Proxy(ObjectCreate(null), {
      get: function (target, key) { return typeof key === "string" ? refuse : undefined; },
    });
  }

  function installMcp(servers, down) {
    const root = ObjectCreate(null);
    for (let i = 0; i < down.length; i++) root[down[i].identifier] = unavailableServer(down[i].serverName);
    defineProperty(root, "$api", { value: function $api() { return request("mcp.api", [null, null, null]); }, enumerable: false });
    for (let i = 0; i < servers.length; i++) {
      const s = servers[i];
      const ns = ObjectCreate(null);
      const sid = s.identifier;
      defineProperty(ns, "$api", { value: function $api(tool, options) {
        return request("mcp.api", [sid, tool === undefined ? null : tool, options === undefined ? null : options]);
      } });
      for (let j = 0; j < s.tools.length; j++) {
        const tid = s.tools[j];
        ns[tid] = function (input) {
          return request("mcp.call", [sid, tid, input, mcpArgc(input, arguments.length)]);
        };
      }
      ns.resources = ObjectFreeze({
        list: function list() { return request("mcp.resources.list", [sid]); },
        read: function read(uri) {
          const u = uri !== null && typeof uri === "object" ? uri.uri : uri;
          return request("mcp.resources.read", [sid, u]);
        },
      });
      ns.prompts = ObjectFreeze({
        list: function list() { return request("mcp.prompts.list", [sid]); },
        get: function get(name, args) {
          if (name !== null && typeof name === "object") return request("mcp.prompts.get", [sid, name.name, name.arguments === undefined ? {} : name.arguments]);
          return request("mcp.prompts.get", [sid, name, args === undefined ? {} : args]);
        },
      });
      root[sid] = ObjectFreeze(ns);
    }
    defineProperty(G, "MCP", { value: ObjectFreeze(root), enumerable: false });
  }

  function installData() {
    defineProperty(G, "API", { value: ObjectFreeze({
      list: function list(prefix) { return request("api.list", [prefix === undefined ? null : prefix]); },
      read: function read(path) { return request("api.read", [path]); },
    }), enumerable: false });
    defineProperty(G, "results", { value: ObjectFreeze({
      save: function save(value) { return request("results.save", [value]); },
      load: function load(id) { return request("results.load", [id]); },
      delete: function delete_(id) { return request("results.delete", [id]); },
    }), enumerable: false });
    defineProperty(G, "store", { value: function store(key, value) {
      if (typeof key !== "string" || key.length < 1 || key.length > 256) {
        return NativePromise.reject(new TypeErrorCtor("store key must be a string of 1-256 characters"));
      }
      if (value === undefined) return request("store.delete", [key]);
      return request("store.set", [key, value]);
    }, enumerable: false });
    defineProperty(G, "load", { value: function load(key) {
      if (typeof key !== "string" || key.length < 1 || key.length > 256) {
        return NativePromise.reject(new TypeErrorCtor("store key must be a string of 1-256 characters"));
      }
      return chain(request("store.get", [key]), function (r) {
        return r === null ? undefined : r.value;
      });
    }, enumerable: false });
  }

  // ---- TextEncoder / TextDecoder (UTF-8 only; the engine ships neither) -----------------
  const Uint8ArrayCtor = Uint8Array;
  const fromCharCode = String.fromCharCode;
  class TextEncoder {
    get encoding() { return "utf-8"; }
    encode(input) {
      const str = input === undefined ? "" : StringCtor(input);
      const out = new Uint8ArrayCtor(str.length * 3);
      const r = this.encodeInto(str, out);
      return out.slice(0, r.written);
    }
    encodeInto(input, dest) {
      const str = StringCtor(input);
      let read = 0;
      let w = 0;
      const n = dest.length;
      for (let i = 0; i < str.length; i++) {
        let c = ReflectApply(stringCharCodeAt, str, [i]);
        let units = 1;
        if (c >= 0xd800 && c <= 0xdbff && i + 1 < str.length) {
          const d = ReflectApply(stringCharCodeAt, str, [i + 1]);
          if (d >= 0xdc00 && d <= 0xdfff) { c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00); units = 2; }
        }
        if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
        const size = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
        if (w + size > n) break;
        if (size === 1) dest[w++] = c;
        else if (size === 2) { dest[w++] = 0xc0 | (c >> 6); dest[w++] = 0x80 | (c & 63); }
        else if (size === 3) { dest[w++] = 0xe0 | (c >> 12); dest[w++] = 0x80 | ((c >> 6) & 63); dest[w++] = 0x80 | (c & 63); }
        else { dest[w++] = 0xf0 | (c >> 18); dest[w++] = 0x80 | ((c >> 12) & 63); dest[w++] = 0x80 | ((c >> 6) & 63); dest[w++] = 0x80 | (c & 63); }
        read += units;
        if (units === 2) i++;
      }
      return { read: read, written: w };
    }
  }
  class TextDecoder {
    constructor(label, options) {
      const l = label === undefined ? "utf-8" : StringCtor(label).toLowerCase().trim();
      if (l !== "utf-8" && l !== "utf8" && l !== "unicode-1-1-utf-8") throw new RangeErrorCtor("TextDecoder supports only utf-8, not " + l);
      this._fatal = !!(options && options.fatal);
      this._ignoreBOM = !!(options && options.ignoreBOM);
    }
    get encoding() { return "utf-8"; }
    get fatal() { return this._fatal; }
    get ignoreBOM() { return this._ignoreBOM; }
    decode(input) {
      if (input === undefined) return "";
      let bytes;
      if (input instanceof ArrayBuffer) bytes = new Uint8ArrayCtor(input);
      else if (ArrayBuffer.isView(input)) bytes = new Uint8ArrayCtor(input.buffer, input.byteOffset, input.byteLength);
      else throw new TypeErrorCtor("TextDecoder.decode needs an ArrayBuffer or a typed array");
      const parts = newList();
      let chunk = newList();
      const fatal = this._fatal;
      let i = 0;
      if (!this._ignoreBOM && bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) i = 3;
      const n = bytes.length;
      function bad() {
        if (fatal) throw new TypeErrorCtor("The encoded data was not valid utf-8");
        chunk[chunk.length] = 0xfffd;
      }
      while (i < n) {
        const b = bytes[i];
        let cp = -1;
        let need = 0;
        if (b < 0x80) { cp = b; need = 0; }
        else if (b >= 0xc2 && b <= 0xdf) { cp = b & 31; need = 1; }
        else if (b >= 0xe0 && b <= 0xef) { cp = b & 15; need = 2; }
        else if (b >= 0xf0 && b <= 0xf4) { cp = b & 7; need = 3; }
        else { bad(); i++; continue; }
        let j = 1;
        for (; j <= need; j++) {
          const c = bytes[i + j];
          if (i + j >= n || (c & 0xc0) !== 0x80) break;
          if (j === 1 && ((b === 0xe0 && c < 0xa0) || (b === 0xed && c > 0x9f) || (b === 0xf0 && c < 0x90) || (b === 0xf4 && c > 0x8f))) break;
          cp = (cp << 6) | (c & 63);
        }
        if (j <= need) { bad(); i += j; continue; }
        i += need + 1;
        if (cp >= 0x10000) {
          cp -= 0x10000;
          chunk[chunk.length] = 0xd800 + (cp >> 10);
          chunk[chunk.length] = 0xdc00 + (cp & 1023);
        } else chunk[chunk.length] = cp;
        if (chunk.length >= 4096) { parts[parts.length] = ReflectApply(fromCharCode, undefined, chunk); chunk = newList(); }
      }
      if (chunk.length) parts[parts.length] = ReflectApply(fromCharCode, undefined, chunk);
      return ReflectApply(arrayJoin, parts, [""]);
    }
  }

  // ---- the guest's global surface ----------------------------------------------------
  function installGlobals() {
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
      ',"code":' + JSONStringify(bridge && typeof v.code === "string" ? v.code : "") +
      ',"oom":' + (v === null || isOom(v) ? "true" : "false") + "}";
  }
  function isOom(v) {
    try { return isError(v) && v.name === "InternalError" && v.message === "out of memory"; } catch (e) { return false; }
  }
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
      return "Uncaught: " + serialise(v, false);
    } catch (e) {
      return "Uncaught: [Unserializable]";
    }
  }

  function unhandledBridgeError() {
    const ids = ObjectKeys(bridgePromises);
    for (let i = 0; i < ids.length; i++) {
      const st = bridgePromises[ids[i]];
      if (!st.handled) return st.rejected;
    }
    return null;
  }

  // The binding cannot convert the engine's rope strings (long "+" chains); join flattens.
  function flat(str) {
    return ReflectApply(arrayJoin, [str, ""], [""]);
  }

  function take() {
    // Built with join: a long "+" chain makes a rope string, which the binding cannot convert.
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
    queue = ObjectCreate(null); queueLength = 0; queuedBytes = 0;
    cancels = ObjectCreate(null); cancelLength = 0;
    output = ObjectCreate(null); outputLength = 0;
    return ReflectApply(arrayJoin, parts, [""]);
  }

  // ---- the hook: the only way in for the host ----------------------------------------
  let configured = false;
  return function codemodeHostHook(op, a, b, c) {
    switch (op) {
      case "configure": {
        if (configured) throw new TypeErrorCtor("the guest is configured once");
        configured = true;
        const cfg = JSONParse(a);
        config = {
          maxRequestBytes: cfg.maxRequestBytes,
          maxQueuedRequests: cfg.maxQueuedRequests || 1024,
          maxPendingRequests: cfg.maxPendingRequests || 128,
          maxQueuedBytes: cfg.maxQueuedBytes || cfg.maxRequestBytes,
        };
        installGlobals();
        installTools(cfg.tools || []);
        installMcp(cfg.mcp || [], cfg.mcpUnavailable || []);
        installData();
        return true;
      }
      case "compile":
        // The Function constructor parses the cell as a function body: no way to break out
        // of the wrapper, and nothing runs until "start".
        return AsyncFunction(a);
      case "start": {
        let p;
        try {
          p = ReflectApply(a, undefined, []);
        } catch (e) {
          finish(false, e);
          return true;
        }
        ReflectApply(promiseThen, p, [function (v) { finish(true, v); }, function (e) { finish(false, e); }]);
        return true;
      }
      case "take":
        return take();
      case "value": {
        const v = doneValue;
        doneValue = null;
        return flat(serialise(v, false));
      }
      case "settle":
        return settle(a, b, c);
      case "cancelTimers": {
        // The cell finished: timers nobody waits for are dropped, their callbacks never run.
        const ids = ObjectKeys(timers);
        for (let i = 0; i < ids.length; i++) clearTimeout(+ids[i]);
        return true;
      }
      case "unhandledBridge": {
        const e = unhandledBridgeError();
        if (e === null) return null;
        return JSONStringify({ error: describeThrown(e), code: typeof e.code === "string" ? e.code : "" });
      }
      default:
        throw new TypeErrorCtor("unknown host hook operation");
    }
  };
})()
