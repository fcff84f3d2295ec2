// @ts-check
// Output: text(), json() and the bounded console, one ordered stream of entries.

// Every entry costs the host work however small it is, so a cell emits at most MAX_OUTPUT_ENTRIES
// (guest_config.js; bridge/output.py re-checks it); console output past it is dropped.
let outputCount = 0;
function refuseOverEntryCap() {
  if (outputCount >= MAX_OUTPUT_ENTRIES) {
    throw new RangeErrorCtor("too many output entries (limit " + MAX_OUTPUT_ENTRIES + " per cell): " +
      "join text into one string and emit it with fewer text()/json() calls");
  }
}
/** @param {string} entryJson */
function emit(entryJson) {
  refuseOverEntryCap();
  outputCount++;
  output[outputLength++] = entryJson;
}
/** @param {unknown} v */
function text(v) {
  refuseOverEntryCap(); // before serialising: a refused entry costs nothing
  const s = typeof v === "string" ? v : serialise(v, false, 0);
  emit('{"type":"text","text":' + JSONStringify(s) + "}");
}
/** @param {unknown} v */
function json(v) {
  refuseOverEntryCap();
  emit('{"type":"json","value":' + serialise(v, false, 0) + "}");
}

// Bounded console: the same ordered stream as text(); reference limits per call and in total
// (CONSOLE_TOTAL: guest_config.js).
const CONSOLE_MAX_MESSAGE = 4096;
let consoleUsed = 0;
let consoleClosed = false;
/**
 * @param {string} s
 * @param {number} n
 */
function clip(s, n) {
  if (s.length <= n) return s;
  let end = n;
  const c = ReflectApply(stringCharCodeAt, s, [end - 1]);
  if (c >= 0xd800 && c <= 0xdbff) end -= 1; // never split a surrogate pair
  return ReflectApply(stringSlice, s, [0, end]) + "…";
}
/**
 * @param {unknown} v
 * @param {number} depth
 * @param {unknown[]} seen
 * @returns {string}
 */
function inspect(v, depth, seen) {
  if (v === null) return "null";
  const t = typeof v;
  // Quoted strings are JSON inside the console text: make them well-formed first, or a lone
  // surrogate would survive as a "\udXXX" escape that the host cannot see.
  if (typeof v === "string") return depth === 0 ? clip(v, 512) : JSONStringify(ReflectApply(stringToWellFormed, clip(v, 512), []));
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
        /** @type {string[]} */
        const parts = newList();
        for (let i = 0; i < n && i < 50; i++) parts[i] = inspect(v[i], depth + 1, seen);
        if (n > 50) parts[parts.length] = "… " + (n - 50) + " more";
        return "[" + ReflectApply(arrayJoin, parts, [", "]) + "]";
      }
      const keys = ObjectKeys(/** @type {object} */ (v)); // every other type answered above
      /** @type {string[]} */
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
/**
 * @param {string} prefix
 * @returns {(...values: unknown[]) => undefined}
 */
function consoleMethod(prefix) {
  return function () {
    if (consoleClosed) return undefined;
    try {
      /** @type {string[]} */
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
