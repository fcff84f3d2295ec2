// What tsc (jsconfig.json) needs beyond the prelude's files to check them as the one scope
// guest_runtime/quickjs/prelude_source.py joins them into: the wrapper function's parameter, what the engine
// (QuickJS-ng, as guest_runtime/quickjs/engine.py drives it) has beyond ES2024, and the hook's operations.
// The files are checked as scripts sharing one global scope, in the order prelude_source.FILES runs
// them, so a name used before the file that declares it has run is an error here too.

/** The wrapper's parameter: the global the driver reads the hook from; the hook's first call deletes it. */
declare let hookSlot: string | null;

/**
 * The plain-data check in C (quickjs/plain_data.c): how many values `value` holds, counted as isPlain
 * counts them, when it is plain data; -1 when the prelude's own walk must decide.  Asked to write
 * (`write` true): the value's JSON text as JSON.stringify writes it ("null" for undefined), or -1.
 */
interface NativePlainCheck {
  (value: unknown, depth: number, objectProto: object, arrayProto: object, maxNesting: number): number;
  (value: unknown, depth: number, objectProto: object, arrayProto: object, maxNesting: number, write: true):
    string | number;
}
/** The wrapper's second parameter: the check, or undefined where its extension was not built. */
declare let nativePlain: NativePlainCheck | undefined;

/** A stack frame as QuickJS-ng hands it to Error.prepareStackTrace (V8's call site API). */
interface CallSite {
  getFileName(): string | undefined;
  getFunctionName(): string | null;
  getLineNumber(): number | null;
  getColumnNumber(): number | null;
  isNative(): boolean;
  isConstructor(): boolean;
  getFunction(): Function | undefined;
  getThis(): unknown;
  getTypeName(): string | null;
}

interface ErrorConstructor {
  /** QuickJS-ng's accessor (stack_traces.js replaces it): called with each new error's call sites. */
  prepareStackTrace: unknown;
}

/** The operations quickjs/engine.py calls the hook with (hook.js has a case for each; a test reads its calls). */
type HostHookOp =
  | "configure"
  | "compile"
  | "start"
  | "take"
  | "args"
  | "value"
  | "settle"
  | "fail"
  | "reject"
  | "cancelTimers"
  | "unhandledBridge";
