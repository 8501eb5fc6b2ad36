// The variables the Worker reads (wrangler.toml [vars], `wrangler dev --var`, secrets), in one
// list: worker/env.ts types `Env` from it, `npm start` (scripts/start.ts) passes every one that
// is set in its environment on to the edge, and a test keeps the README's configuration table
// naming each. A variable the Worker reads that is not here does not typecheck.

/** Each variable: whether it is a secret (then it reaches the edge in an env file, never on a command line). */
export const WORKER_VARIABLES = {
  /** `tenant:key` or `tenant:sha256:<hex>`, comma-separated. */
  API_KEYS: { secret: true },
  /** The shared secret any runner may present. */
  RUNNER_TOKEN: { secret: true },
  /** Signs per-runner credentials (docs/security.md); unset = only the shared RUNNER_TOKEN. */
  RUNNER_SECRET: { secret: true },
  /** HMAC key of session tokens. */
  TOKEN_SECRET: { secret: true },
  /** Authorizes the admin API (`/admin/v1/*`); unset: every admin path answers 404. */
  ADMIN_KEY: { secret: true },
  MAX_SESSIONS_PER_TENANT: { secret: false },
  MAX_CLIENTS_PER_SESSION: { secret: false },
  MAX_INPUT_BYTES: { secret: false },
  MAX_CLIENT_LAG_BYTES: { secret: false },
  MAX_CREATES_PER_MINUTE: { secret: false },
  /** How long `POST /v1/sessions` waits for the runner to start the process. */
  START_TIMEOUT_MS: { secret: false },
  /** How long a running session waits for its runner's link to come back before it is `lost`. */
  LINK_GRACE_MS: { secret: false },
  /** A framed client behind and silent (no ack, no frame) this long is cut (default 60 s). */
  CLIENT_STALL_MS: { secret: false },
  /** `GET .../output` reads in flight per session (429 beyond). */
  MAX_OUTPUT_READS: { secret: false },
  /** Defaults of the three session timers, in seconds (0 = off; docs/protocol.md §4, "Timers"). */
  SESSION_TIMEOUT_SEC: { secret: false },
  SESSION_IDLE_TIMEOUT_SEC: { secret: false },
  SESSION_DETACHED_TIMEOUT_SEC: { secret: false },
  /** How long an ended session's record and output stay before they are purged. */
  SESSION_RETAIN_SEC: { secret: false },
  /** Longest quiet time on an SSE stream before a keep-alive comment (default 15 s). */
  SSE_KEEPALIVE_MS: { secret: false },
  /** Origins whose pages may call the REST API from a browser: comma-separated, `*` for any; unset = none. */
  CORS_ORIGINS: { secret: false },
  /** `debug`, `info` (the default), `warn` or `error`. */
  LOG_LEVEL: { secret: false },
  /**
   * `1` lets webhooks point at this host and private networks (loopback, 10/8, 169.254/16, …);
   * unset, such URLs are refused with 400 (docs/security.md, "Webhooks"). For local receivers only.
   */
  WEBHOOK_ALLOW_PRIVATE: { secret: false },
  /** The first retry delay of a failed webhook delivery (default 30 s); it doubles each time. */
  WEBHOOK_RETRY_BASE_MS: { secret: false },
  /** The longest retry delay (default 1 h); retries stop 24 h after the event. */
  WEBHOOK_RETRY_CAP_MS: { secret: false },
  /** How long audit entries are kept, in days (default 90). */
  AUDIT_RETAIN_DAYS: { secret: false },
  /**
   * A name for this edge, answered by `/healthz` as `instance`: a local start (scripts/stack.ts)
   * sets a random one, so that its readiness check knows its own edge from another on the port.
   */
  EDGE_INSTANCE: { secret: false },
} as const satisfies Record<string, { secret: boolean }>;

export type WorkerVariable = keyof typeof WORKER_VARIABLES;

export const WORKER_VARIABLE_NAMES = Object.keys(WORKER_VARIABLES) as WorkerVariable[];
