// The REST half of the SDK: one authenticated `fetch` per call, answers turned into values or
// PtyBrokerErrors carrying the API's code.
import type { ErrorBody } from "../shared/errors.js";
import { PtyBrokerError } from "./errors.js";
import { patientDispatcher } from "./patience.js";

export interface Credentials {
  /** The tenant's API key: may do everything. */
  apiKey?: string | undefined;
  /** A session token (`viewer` or `writer`) bound to one session. */
  token?: string | undefined;
}

export class Http {
  readonly base: string;

  constructor(
    url: string,
    readonly credentials: Credentials,
    private readonly fetchImpl: typeof fetch = (...args) => fetch(...args),
  ) {
    if (!credentials.apiKey && !credentials.token) throw new TypeError("PtyBroker needs an apiKey or a token");
    this.base = url.replace(/\/+$/, "");
  }

  /** The Authorization header's value. */
  get bearer(): string {
    return `Bearer ${this.credentials.apiKey ?? this.credentials.token}`;
  }

  /** A JSON call; resolves with the parsed body of a 2xx answer. */
  async json<T>(method: string, path: string, body?: unknown, options: Parameters<Http["send"]>[3] = {}): Promise<T> {
    const res = await this.send(method, path, body, options);
    return (await res.json()) as T;
  }

  /** A call whose answer is read by the caller (2xx only; anything else throws). */
  async send(
    method: string,
    path: string,
    body?: unknown,
    options: {
      signal?: AbortSignal | undefined;
      headers?: Record<string, string> | undefined;
      /** The server may hold the answer for minutes (`run`, `expect`): outlast Node's 300 s limit. */
      patient?: boolean | undefined;
    } = {},
  ): Promise<Response> {
    const { signal } = options;
    const headers: Record<string, string> = { ...options.headers, authorization: this.bearer };
    if (body !== undefined) headers["content-type"] = "application/json";
    const dispatcher = options.patient ? await patientDispatcher() : undefined;
    let res: Response;
    try {
      res = await this.fetchImpl(`${this.base}${path}`, {
        method,
        headers,
        body: body === undefined ? null : JSON.stringify(body),
        signal: signal ?? null,
        // Node's fetch (undici) takes its dispatcher here; other fetches ignore the key.
        ...(dispatcher ? ({ dispatcher } as RequestInit) : {}),
      });
    } catch (error) {
      // The caller's own abort is theirs to see as such, not a network failure.
      if (signal?.aborted) throw signal.reason;
      throw new PtyBrokerError("NETWORK", `${method} ${path}: ${(error as Error).message}`);
    }
    if (res.ok) return res;
    throw await errorFrom(res, `${method} ${path}`);
  }
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
