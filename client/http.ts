// The REST half of the SDK: one authenticated `fetch` per call, answers turned into values or
// PtyBrokerErrors carrying the API's code. Every call has a deadline (`timeoutMs`, default 10 s:
// an answer and its body, or for `send` its headers) unless the server is meant to hold it
// (`holds`: run, expect, wait, exec, the event stream), so a request caught on a dead connection
// fails as NETWORK instead of hanging the reconnect that made it (docs/protocol.md §5).
import type { ErrorBody } from "../shared/errors.js";
import { PtyBrokerError } from "./errors.js";
import { patientDispatcher } from "./patience.js";

export interface Credentials {
  /** The tenant's API key: may do everything. */
  apiKey?: string | undefined;
  /** A session token (`viewer` or `writer`) bound to one session. */
  token?: string | undefined;
}

/** The default deadline of a call the server answers at once. */
export const REQUEST_TIMEOUT_MS = 10_000;

export interface SendOptions {
  signal?: AbortSignal | undefined;
  headers?: Record<string, string> | undefined;
  /** The server may hold the answer for minutes (`run`, `expect`): outlast Node's 300 s limit. */
  patient?: boolean | undefined;
  /**
   * The server holds the answer on purpose (run, expect, wait, exec, the event stream): no
   * deadline of the SDK's own; the server's `timeoutSec` and the caller's `signal` bound it.
   */
  holds?: boolean | undefined;
}

export class Http {
  readonly base: string;

  constructor(
    url: string,
    readonly credentials: Credentials,
    private readonly fetchImpl: typeof fetch = (...args) => fetch(...args),
    /** Deadline of each call that is not held (`holds`), in ms. */
    readonly timeoutMs: number = REQUEST_TIMEOUT_MS,
  ) {
    if (!credentials.apiKey && !credentials.token) throw new TypeError("PtyBroker needs an apiKey or a token");
    if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) throw new TypeError(`timeoutMs is a positive number of ms, got ${timeoutMs}`);
    this.base = url.replace(/\/+$/, "");
  }

  /** The Authorization header's value. */
  get bearer(): string {
    return `Bearer ${this.credentials.apiKey ?? this.credentials.token}`;
  }

  /** A JSON call; resolves with the parsed body of a 2xx answer (the deadline covers the body too). */
  json<T>(method: string, path: string, body?: unknown, options: SendOptions = {}): Promise<T> {
    return this.request(method, path, body, options, async (res) => (await res.json()) as T);
  }

  /** A call whose answer is read by the caller (2xx only; anything else throws); the deadline covers its headers. */
  send(method: string, path: string, body?: unknown, options: SendOptions = {}): Promise<Response> {
    return this.request(method, path, body, options, async (res) => res);
  }

  private async request<T>(
    method: string,
    path: string,
    body: unknown,
    options: SendOptions,
    read: (res: Response) => Promise<T>,
  ): Promise<T> {
    const { signal } = options;
    const url = `${this.base}${path}`;
    const what = `${method} ${url}`;
    const headers: Record<string, string> = { ...options.headers, authorization: this.bearer };
    if (body !== undefined) headers["content-type"] = "application/json";
    const dispatcher = options.patient ? await patientDispatcher() : undefined;
    // A timer of our own rather than AbortSignal.timeout: it is cleared once the answer is read,
    // so a body the caller streams afterwards (`send`) is not cut at the deadline.
    const deadline = options.holds || options.patient ? undefined : new AbortController();
    const timer = deadline && setTimeout(() => deadline.abort(), this.timeoutMs);
    const signals = [signal, deadline?.signal].filter((s): s is AbortSignal => s !== undefined);
    const timedOut = () => deadline?.signal.aborted === true && !signal?.aborted;
    const failure = (error: unknown) => {
      // The caller's own abort is theirs to see as such, not a network failure.
      if (signal?.aborted) return signal.reason as unknown;
      if (timedOut()) return new PtyBrokerError("NETWORK", `${what}: no answer within ${this.timeoutMs} ms (timeout)`, 0, undefined, { cause: error });
      return new PtyBrokerError("NETWORK", `${what}: ${describeFailure(error)}`, 0, undefined, { cause: error });
    };
    try {
      let res: Response;
      try {
        res = await this.fetchImpl(url, {
          method,
          headers,
          body: body === undefined ? null : JSON.stringify(body),
          signal: anySignal(signals),
          // Node's fetch (undici) takes its dispatcher here; other fetches ignore the key.
          ...(dispatcher ? ({ dispatcher } as RequestInit) : {}),
        });
      } catch (error) {
        throw failure(error);
      }
      if (!res.ok) {
        const error = await errorFrom(res, what);
        if (timedOut()) throw failure(error);
        throw error;
      }
      try {
        return await read(res);
      } catch (error) {
        // A body cut by the deadline or the network is a network failure; a bad body is not.
        if (signal?.aborted || timedOut() || (error as Error)?.name !== "SyntaxError") throw failure(error);
        throw error;
      }
    } finally {
      clearTimeout(timer);
    }
  }
}

/** One signal that aborts when any of `signals` does (AbortSignal.any, where the runtime has it). */
function anySignal(signals: AbortSignal[]): AbortSignal | null {
  if (signals.length < 2) return signals[0] ?? null;
  if (typeof AbortSignal.any === "function") return AbortSignal.any(signals);
  const joined = new AbortController();
  for (const s of signals) {
    if (s.aborted) joined.abort(s.reason);
    else s.addEventListener("abort", () => joined.abort(s.reason), { once: true });
  }
  return joined.signal;
}

/**
 * Why a fetch got no answer, with its cause: Node's fetch says only "fetch failed" and keeps the
 * reason (`ECONNREFUSED`, `ENOTFOUND`, a reset...) in `cause`, itself sometimes an AggregateError
 * of one error per address tried.
 */
export function describeFailure(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const cause = (error as { cause?: unknown } | undefined)?.cause;
  if (typeof cause !== "object" || cause === null) return message;
  const code = (cause as { code?: unknown }).code;
  const each = cause instanceof AggregateError ? cause.errors.map((e) => (e as Error)?.message).filter(Boolean) : [];
  const text = (cause as { message?: unknown }).message || each.join("; ");
  const parts: string[] = [];
  if (typeof code === "string" && !(typeof text === "string" && text.includes(code))) parts.push(code);
  if (typeof text === "string" && text) parts.push(text);
  return parts.length ? `${message} (${parts.join(": ")})` : message;
}

async function errorFrom(res: Response, what: string): Promise<PtyBrokerError> {
  const text = await res.text().catch(() => "");
  const retryAfter = Number(res.headers.get("retry-after") ?? NaN);
  try {
    const { error } = JSON.parse(text) as ErrorBody;
    if (error?.code) {
      return new PtyBrokerError(error.code, error.message, res.status, Number.isFinite(retryAfter) ? retryAfter : undefined);
    }
  } catch {
    // not the API's JSON error (a proxy's page, say): fall through
  }
  return new PtyBrokerError("INTERNAL", `${what}: HTTP ${res.status} ${text.slice(0, 200)}`, res.status);
}
