// What the CLI's commands share: the broker from the environment (with a fetch that remembers
// which URL could not be reached, for the error main.ts prints), how main.ts prints an SDK error,
// argument checks that fail as usage errors, the local terminal's size, and stdout writes that
// wait for a full pipe.
import { PtyBroker, type PtyBrokerError } from "../index.js";

export class UsageError extends Error {}

/** The last request that got no answer at all: its URL (no query: it may hold a token) and why. */
let unreachable: { url: string; reason: string } | undefined;

/** The last request that got no answer at all, if any (main.ts names it in the error it prints). */
export function lastUnreachable(): { url: string; reason: string } | undefined {
  return unreachable;
}

/** Why a fetch got no answer, from undici's `fetch failed` and its cause: `connect ECONNREFUSED 127.0.0.1:1`. */
export function networkReason(error: unknown): string {
  const cause = (error as { cause?: unknown }).cause ?? error;
  const { message, code, errors } = cause as { message?: string; code?: string; errors?: unknown[] };
  // Several addresses tried (localhost: ::1 and 127.0.0.1) come as an AggregateError without a message.
  const each = Array.isArray(errors) ? errors.map((e) => (e as Error)?.message).filter(Boolean) : [];
  return message || each.join("; ") || code || String(cause);
}

/** fetch, remembering which URL could not be reached and why, so the CLI's error can name both. */
const fetchNamingUrl: typeof fetch = async (input, init) => {
  try {
    return await fetch(input, init);
  } catch (error) {
    if ((error as Error)?.name !== "AbortError") {
      const tried = new URL(input instanceof Request ? input.url : String(input));
      unreachable = { url: `${tried.origin}${tried.pathname}`, reason: networkReason(error) };
      throw new Error(`cannot reach ${unreachable.url}: ${unreachable.reason}`);
    }
    throw error;
  }
};

export function broker(): PtyBroker {
  const url = brokerUrl(process.env.PTYBROKER_URL);
  const apiKey = process.env.PTYBROKER_API_KEY;
  const token = process.env.PTYBROKER_TOKEN;
  if (!apiKey && !token) throw new UsageError("set PTYBROKER_API_KEY (or PTYBROKER_TOKEN)");
  return new PtyBroker({ url, apiKey, token, fetch: fetchNamingUrl });
}

/**
 * PTYBROKER_URL as the SDK takes it: the edge's http(s) URL, without a trailing slash. A `/v1` at
 * its end is the API's prefix, which the SDK adds itself, and is dropped. Anything else that is
 * not such a URL is a usage error saying what is wrong, with `http://…` suggested when the
 * scheme is missing (`127.0.0.1:8877`, `localhost:8877`).
 */
export function brokerUrl(raw: string | undefined): string {
  if (raw === undefined || raw === "") return "http://127.0.0.1:8787";
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
    const hint = /^[a-z][a-z\d+.-]*:\/\//i.test(raw) ? "" : `; did you mean http://${raw}?`;
    throw new UsageError(`PTYBROKER_URL=${raw} is not an http:// or https:// URL${hint}`);
  }
  if (url.search || url.hash || url.username || url.password) {
    throw new UsageError(`PTYBROKER_URL=${raw}: give the edge's URL alone, without credentials, a query or a fragment`);
  }
  const path = url.pathname.replace(/\/+$/, "").replace(/\/v1$/, "");
  return `${url.origin}${path}`;
}

/** How main.ts prints an SDK error: its code and message, and how long to wait when the answer said (429s). */
export function errorLine(error: PtyBrokerError): string {
  const wait = error.retryAfterSec === undefined ? "" : ` (retry after ${error.retryAfterSec} s)`;
  return `${error.code}: ${error.message}${wait}`;
}

export function one(positionals: string[], what: string): string {
  if (positionals.length !== 1) throw new UsageError(`expected exactly one ${what}`);
  return positionals[0];
}

/** A byte offset (or count) given as `--<flag> N`. */
export function offset(value: string | undefined, flag = "from"): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,15}$/.test(value)) throw new UsageError(`--${flag} takes a byte ${flag === "max-output" ? "count" : "offset"}, got ${JSON.stringify(value)}`);
  return Number(value);
}

export function terminalSize(): { cols?: number; rows?: number } {
  const { columns, rows } = process.stdout;
  return process.stdout.isTTY && columns && rows ? { cols: columns, rows } : {};
}

/** Writes to stdout, waiting when the pipe is full (or until it fails or closes). */
export function write(bytes: Uint8Array): Promise<void> {
  if (process.stdout.write(bytes)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      for (const event of ["drain", "error", "close"]) process.stdout.off(event, done);
      resolve();
    };
    for (const event of ["drain", "error", "close"]) process.stdout.once(event, done);
  });
}
