// @ts-check
// JSON serialisation of guest values, for output, return values and request arguments.

// One walker for two modes.  "emit" (return values, text/json, console) never throws and
// never runs user toJSON: it renders leftovers as placeholders.  "strict" (tool arguments,
// results.save, store) refuses anything that is not plain JSON, so the call rejects and
// nothing already saved changes.
// Most values are plain JSON data: a scan that allocates nothing proves it (in C where the engine
// module installed nativePlain, else isPlain below), and the engine's own JSON.stringify then
// does the work (a 5 MB array would not fit the heap otherwise); outside strict mode the C scan
// writes the text itself, as JSON.stringify would, in a tenth of its time.
// Accessors, toJSON, Promises, Errors, handles, BigInt and cycles take the slow path.
// Both paths count the values they visit in `valueCount` (an array's holes too, which become
// nulls): request() refuses arguments over `maxRequestValues` before they leave the guest.
let valueCount = 0;
// Stands for the arrays a value is serialised inside of (see `serialise`'s `depth`): counts
// towards the nesting cap, and is no value of the cell's, so no cycle check ever matches it.
const ENCLOSING = ObjectCreate(null);
// True when v's prototype chain holds neither Promise.prototype nor Error.prototype.  Most
// values' chain is Object.prototype, whose own prototype can never change, or an unchanged
// Array.prototype: those answer without walking the chain twice.
/** @param {object} v */
function hasPlainPrototype(v) {
  const proto = getPrototypeOf(v);
  if (proto === ObjectProto || proto === null) return true;
  if (proto === ArrayProto && getPrototypeOf(ArrayProto) === ObjectProto) return true;
  return !isPromise(v) && !isError(v);
}
/**
 * @param {unknown} v
 * @param {unknown[]} stack
 * @returns {boolean}
 */
function isPlain(v, stack) {
  valueCount++;
  const t = typeof v;
  if (t === "bigint") return false;
  if (t === "function") return !ReflectApply(weakMapHas, handles, [v]);
  if (t !== "object" || v === null) return true;
  const o = /** @type {object & {toJSON?: unknown}} */ (v);
  if (stack.length >= MAX_NESTING) return false;
  for (let i = 0; i < stack.length; i++) if (stack[i] === o) return false;
  if (!hasPlainPrototype(o) || typeof o.toJSON === "function") return false;
  stack[stack.length] = o;
  const keys = ObjectKeys(o);
  if (ArrayIsArray(o)) valueCount += o.length - keys.length;
  for (let i = 0; i < keys.length; i++) {
    const d = getOwnPropertyDescriptor(o, keys[i]);
    if (d === undefined || d.get !== undefined || d.set !== undefined) return false;
    if (!isPlain(d.value, stack)) return false;
  }
  stack.length = stack.length - 1;
  return true;
}

// `depth`: how many arrays the caller puts around the text, so the nesting cap counts them.
/** @param {number} depth */
function enclosing(depth) {
  /** @type {unknown[]} */
  const list = newList();
  for (let i = 0; i < depth; i++) list[i] = ENCLOSING;
  return list;
}

/**
 * @param {unknown} value
 * @param {boolean} strict
 * @param {number} depth
 * @returns {string}
 */
function serialise(value, strict, depth) {
  valueCount = 0;
  try {
    // The check in C, where it was built, answers at once for plain data; anything else it leaves to isPlain.
    // Where nothing counts the values (every mode but strict), it writes plain data's text itself too.
    if (!strict && nativePlain !== undefined) {
      const text = nativePlain(value, depth, ObjectProto, ArrayProto, MAX_NESTING, true);
      if (typeof text === "string") return text;
    }
    const visited = nativePlain === undefined ? -1 : nativePlain(value, depth, ObjectProto, ArrayProto, MAX_NESTING);
    if (visited >= 0) valueCount = visited;
    if (visited >= 0 || isPlain(value, enclosing(depth))) {
      const s = JSONStringify(value);
      return s === undefined ? "null" : s;
    }
  } catch (e) {
    // a proxy trap or an exotic object: the careful walker below decides
  }
  valueCount = 0;
  const seen = enclosing(depth);
  /**
   * @param {string} message
   * @returns {never}
   */
  function fail(message) {
    throw new TypeErrorCtor(message);
  }
  /**
   * @param {unknown} v
   * @param {boolean} inArray
   * @returns {string | undefined}
   */
  function walk(v, inArray) {
    valueCount++;
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
      return inArray ? "null" : undefined;
    }
    // objects
    const o = /** @type {object} */ (v);
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
    seen[seen.length] = o;
    try {
      if (isError(o)) return errorObject(o);
      if (ArrayIsArray(o)) {
        /** @type {(string | undefined)[]} */
        const parts = newList();
        const n = o.length;
        for (let i = 0; i < n; i++) parts[i] = walk(o[i], true);
        return "[" + ReflectApply(arrayJoin, parts, [","]) + "]";
      }
      const keys = ObjectKeys(o);
      /** @type {string[]} */
      const parts = newList();
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i];
        const s = walk((/** @type {Record<string, unknown>} */ (o))[k], false);
        if (s !== undefined) parts[parts.length] = JSONStringify(k) + ":" + s;
      }
      return "{" + ReflectApply(arrayJoin, parts, [","]) + "}";
    } finally {
      seen.length = seen.length - 1;
    }
  }
  /**
   * @param {Error} e
   * @returns {string}
   */
  function errorObject(e) {
    // name + message first, then JSON-compatible enumerable own fields; toJSON is not called.
    /** @type {string[]} */
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
      try { s = walk((/** @type {Record<string, unknown>} */ (/** @type {unknown} */ (e)))[k], false); } catch (x) { if (strict) throw x; s = undefined; }
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
      const error = /** @type {Error} */ (value);
      try { return JSONStringify({ name: StringCtor(error.name), message: StringCtor(error.message) }); } catch (x) {}
    }
    try { return JSONStringify("[Unserializable]"); } catch (x) { return '"[Unserializable]"'; }
  }
}
