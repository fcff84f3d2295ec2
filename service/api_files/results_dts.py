"""The `results.d.ts` declaration: saved results of this run and the per-session store."""

from __future__ import annotations

__all__ = ["RESULTS_DTS", "RESULTS_DTS_DESCRIPTION"]

RESULTS_DTS_DESCRIPTION = (
    "Saved results for this run (results.save/load/delete), the session store (store/load) and the "
    "fields of a failed tool call's Error."
)

RESULTS_DTS = """\
// Saved results and the session store. Values must be JSON: BigInt, cycles and throwing getters or
// toJSON hooks make the call reject (catchable) and leave everything already saved unchanged.

/** A bounded description of a saved value; the value itself stays on the host until loaded. */
interface ResultReference {
    /** Handle for results.load/delete, shaped "result_<uuid>". Valid only within this run. */
    readonly id: string;
    /** UTF-8 size of the saved value's compact JSON. */
    readonly bytes: number;
    /** Element count of a saved array or key count of a saved object; null for scalars. */
    readonly count: number | null;
    /** Short structural summary of the value (types, nested array sizes, sampling notes). */
    readonly shape: string;
    /** The whole value when its JSON is at most 256 bytes, else a sampled view. */
    readonly preview: unknown;
    /** True when `preview` is sampled rather than the whole value. */
    readonly previewTruncated: boolean;
}

/**
 * Results saved for the current run (the agent turn that started this cell).
 * At most 64 entries per run, and together no more than the cell's program-data allowance in bytes.
 * References expire when the run ends or after the results TTL; never reuse an id from an older run.
 */
interface CodemodeResults {
    /** Save a JSON value and get its reference; rejects when the run's entries or bytes are used up. */
    save(value: unknown): Promise<ResultReference>;
    /** A fresh copy of a saved value; rejects for unknown or expired ids. */
    load(id: string): Promise<unknown>;
    /** Forget a saved value; resolves false when the id was not saved. */
    delete(id: string): Promise<boolean>;
}

declare const results: CodemodeResults;

/**
 * Persist a small JSON value for this session; `store(key, undefined)` deletes the key.
 * Keys are 1-256 characters (else TypeError). A value may take at most 256 KiB of JSON and the whole
 * session store at most 1 MiB (else RangeError, nothing changes). Writes are visible to this cell at
 * once and committed only when the cell completes; a failed, timed-out, cancelled or expired cell
 * discards them. Needs a session_id, and is unavailable in restart-safe and headless cells.
 */
declare function store(key: string, value: unknown): Promise<void>;

/** A fresh copy of the value stored under `key` in this session, or undefined when there is none. */
declare function load(key: string): Promise<unknown>;

/**
 * What a rejected tool call carries (catch it as `e: ToolCallError`). `tool_error`: the tool failed.
 * A tool that failed 4 times in this run (or once with nonRetriable) rejects with `tool_blocked` without
 * running: use another tool or report the problem. After 8 failures in a run every tool call rejects
 * with `failure_budget_exhausted`: stop and report. Recoverable failures never count. `tool_timeout`:
 * the call ran past its wall clock (`timeoutSeconds`) and was cancelled; it counts as a failure.
 */
interface ToolCallError extends Error {
    readonly code: "tool_error" | "tool_blocked" | "failure_budget_exhausted" | "invalid_input" | "loop_guard"
        | "output_contract" | "call_budget_exceeded" | "tool_timeout" | string;
    readonly tool?: string;
    /** The tool's own failure object (tool_error), or validation details. */
    readonly details?: unknown;
    /** recoverable: fix the arguments (see needParam) and call again; config: a setup problem no
     * retry fixes; transient: jitter, the host already retried idempotent tools. */
    readonly errorType?: "recoverable" | "config" | "transient";
    /** The argument that is missing or malformed. */
    readonly needParam?: string;
    /** True: the same call can never succeed; the tool is blocked for this run. */
    readonly nonRetriable?: boolean;
    /** Text meant for the user, safe to pass on. */
    readonly userMessage?: string;
    /** Another tool or action to use instead. */
    readonly redirect?: unknown;
    /** The failing upstream service's own reply. */
    readonly upstream?: unknown;
    readonly effectStatus?: "not_started" | "unknown";
    /** tool_timeout: the call's wall clock, in seconds. */
    readonly timeoutSeconds?: number;
}
"""
