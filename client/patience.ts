// Requests the server may hold for minutes (`run` up to an hour, `expect` and `wait` up to five
// minutes) must outlast Node's fetch: undici gives up on an answer whose headers have not come
// within 300 s (`headersTimeout`), and a 10-minute `run` would fail with "fetch failed". Such
// requests go through an undici Agent of the same kind as Node's own, without that limit.

/** Where Node's bundled undici (and the `undici` package) keep the global dispatcher. */
const GLOBAL_DISPATCHER = Symbol.for("undici.globalDispatcher.1");
/** The longest a held request waits for its answer's headers: the longest `run`, and a margin. */
const PATIENT_HEADERS_MS = (3600 + 120) * 1000;
/** Holds longer than this use the patient dispatcher (undici's default limit is 300 s). */
export const PATIENCE_NEEDED_SEC = 240;

let patient: Promise<object | undefined> | undefined;

/**
 * An undici Agent without the 300 s header limit, to pass as fetch's `dispatcher`; undefined
 * outside Node (browsers have no such limit), or where the global dispatcher is not a plain
 * Agent (a proxy the application set up is never bypassed).
 */
export function patientDispatcher(): Promise<object | undefined> {
  return (patient ??= (async () => {
    if (typeof process === "undefined" || typeof process.versions?.node !== "string") return undefined;
    const global = globalThis as unknown as Record<symbol, unknown>;
    // Node creates its global Agent on its first fetch; a data: URL makes it without a request.
    if (!global[GLOBAL_DISPATCHER]) await fetch("data:,").then((res) => res.arrayBuffer()).catch(() => undefined);
    const Agent = (global[GLOBAL_DISPATCHER] as { constructor?: unknown } | undefined)?.constructor;
    if (typeof Agent !== "function" || Agent.name !== "Agent") return undefined;
    try {
      return new (Agent as new (options: object) => object)({ headersTimeout: PATIENT_HEADERS_MS });
    } catch {
      return undefined;
    }
  })());
}
