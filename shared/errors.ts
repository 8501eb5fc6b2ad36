// The one list of API error codes and the HTTP status each renders as (docs/protocol.md §2).

export const ErrorStatus = {
  INVALID_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  /** a route's path under a method it does not take; the answer's `Allow` lists those it does */
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  SESSION_EXITED: 409,
  /** `run`: the shell is not at its prompt (a command or program is running) */
  BUSY: 409,
  /** resize of a session without a terminal (`pty: false`) */
  NOT_A_TTY: 409,
  /** `run`: the session's program is not a shell with integration */
  NO_SHELL_INTEGRATION: 409,
  PAYLOAD_TOO_LARGE: 413,
  /** a `from` (or `Last-Event-ID`) past the session's offset: output there was never sent */
  INVALID_OFFSET: 416,
  QUOTA_EXCEEDED: 429,
  INTERNAL: 500,
  NO_RUNNER: 503,
} as const;

export type ErrorCode = keyof typeof ErrorStatus;

export interface ErrorBody {
  error: { code: ErrorCode; message: string };
}

/** Thrown by route handlers; rendered by the Worker's single `onError`. */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly retryAfterSec?: number;

  constructor(code: ErrorCode, message: string, retryAfterSec?: number) {
    super(message);
    this.name = "ApiError";
    this.code = code;
    this.retryAfterSec = retryAfterSec;
  }

  get status(): number {
    return ErrorStatus[this.code];
  }

  toBody(): ErrorBody {
    return { error: { code: this.code, message: this.message } };
  }
}

/**
 * Errors do not keep their class across Durable Object RPC, so DO methods return
 * `Failure` values and the route turns them back into an ApiError.
 */
export interface Failure {
  failure: { code: ErrorCode; message: string; retryAfterSec?: number };
}

export function fail(code: ErrorCode, message: string, retryAfterSec?: number): Failure {
  return { failure: { code, message, retryAfterSec } };
}

export function isFailure(value: unknown): value is Failure {
  return typeof value === "object" && value !== null && "failure" in value;
}

/** Unwraps a DO result, throwing the ApiError a Failure stands for. */
export function unwrap<T>(value: T | Failure): T {
  if (isFailure(value)) {
    const { code, message, retryAfterSec } = value.failure;
    throw new ApiError(code, message, retryAfterSec);
  }
  return value;
}

/** WebSocket close codes (docs/protocol.md §5, "Refusals and close codes"). */
export const CloseCode = {
  GoingAway: 1001,
  Unauthorized: 4001,
  Forbidden: 4003,
  NotFound: 4004,
  SlowConsumer: 4008,
  SessionEnded: 4010,
  /** the API key the client connected with (or that minted its session token) was revoked */
  KeyRevoked: 4011,
  /** edge → runner link: output skipped ahead of what the edge holds; redial and resume */
  Resync: 4409,
} as const;
