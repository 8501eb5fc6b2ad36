import { describe, expect, it } from "vitest";
import { ApiError, CloseCode, type ErrorCode, ErrorStatus, type Failure, fail, isFailure, unwrap } from "./errors.js";

const EXPECTED_STATUS: Record<ErrorCode, number> = {
  INVALID_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  SESSION_EXITED: 409,
  BUSY: 409,
  NOT_A_TTY: 409,
  NO_SHELL_INTEGRATION: 409,
  PAYLOAD_TOO_LARGE: 413,
  INVALID_OFFSET: 416,
  QUOTA_EXCEEDED: 429,
  INTERNAL: 500,
  NO_RUNNER: 503,
};
const CODES = Object.keys(EXPECTED_STATUS) as ErrorCode[];

describe("ErrorStatus", () => {
  it("lists exactly the documented codes", () => {
    expect(Object.keys(ErrorStatus).sort()).toEqual([...CODES].sort());
  });
});

describe("ApiError", () => {
  it.each(CODES)("%s renders with its HTTP status", (code) => {
    const error = new ApiError(code, "boom");
    expect(error.status).toBe(EXPECTED_STATUS[code]);
    expect(error.status).toBe(ErrorStatus[code]);
  });

  it("is an Error with name, code and message", () => {
    const error = new ApiError("NOT_FOUND", "no such session");
    expect(error).toBeInstanceOf(Error);
    expect(error).toBeInstanceOf(ApiError);
    expect(error.name).toBe("ApiError");
    expect(error.code).toBe("NOT_FOUND");
    expect(error.message).toBe("no such session");
    expect(error.retryAfterSec).toBeUndefined();
    expect(typeof error.stack).toBe("string");
  });

  it("keeps retryAfterSec", () => {
    const error = new ApiError("QUOTA_EXCEEDED", "too many sessions", 30);
    expect(error.retryAfterSec).toBe(30);
    expect(error.status).toBe(429);
  });

  it("toBody has exactly { error: { code, message } }", () => {
    const body = new ApiError("QUOTA_EXCEEDED", "too many sessions", 30).toBody();
    expect(body).toStrictEqual({ error: { code: "QUOTA_EXCEEDED", message: "too many sessions" } });
    expect(Object.keys(body)).toEqual(["error"]);
    expect(Object.keys(body.error).sort()).toEqual(["code", "message"]);
    expect(JSON.parse(JSON.stringify(body))).toEqual(body);
  });
});

describe("fail / isFailure / unwrap", () => {
  it("fail builds a Failure", () => {
    expect(fail("CONFLICT", "already exited")).toEqual({
      failure: { code: "CONFLICT", message: "already exited", retryAfterSec: undefined },
    });
    expect(fail("NO_RUNNER", "no runner", 5)).toEqual({
      failure: { code: "NO_RUNNER", message: "no runner", retryAfterSec: 5 },
    });
  });

  it("a Failure survives structured cloning (DO RPC) and is still recognised", () => {
    const cloned = structuredClone(fail("NO_RUNNER", "no runner", 5));
    expect(isFailure(cloned)).toBe(true);
  });

  it("isFailure recognises Failures only", () => {
    expect(isFailure(fail("INTERNAL", "x"))).toBe(true);
    for (const value of [null, undefined, 0, 1, "", "failure", true, [], {}, { ok: true }, { error: "x" }]) {
      expect(isFailure(value), JSON.stringify(value) ?? String(value)).toBe(false);
    }
  });

  it("unwrap returns non-Failure values unchanged", () => {
    const session = { id: "s1", status: "running" };
    expect(unwrap(session)).toBe(session);
    expect(unwrap(42)).toBe(42);
    expect(unwrap(null)).toBeNull();
    expect(unwrap(undefined)).toBeUndefined();
    expect(unwrap("text")).toBe("text");
  });

  it("unwrap throws the ApiError a Failure stands for", () => {
    const failure: Failure = fail("QUOTA_EXCEEDED", "too many sessions", 12);
    let thrown: unknown;
    try {
      unwrap<{ id: string }>(failure);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ApiError);
    if (!(thrown instanceof ApiError)) return;
    expect(thrown.code).toBe("QUOTA_EXCEEDED");
    expect(thrown.message).toBe("too many sessions");
    expect(thrown.retryAfterSec).toBe(12);
    expect(thrown.status).toBe(429);
  });

  it.each(CODES)("unwrap(fail(%s)) throws with the matching status", (code) => {
    expect(() => unwrap(fail(code, "m"))).toThrow(ApiError);
    try {
      unwrap(fail(code, "m"));
    } catch (error) {
      expect(error instanceof ApiError && error.status).toBe(EXPECTED_STATUS[code]);
    }
  });
});

describe("CloseCode", () => {
  it("matches docs/protocol.md §5 (and the runner link's resync)", () => {
    expect(CloseCode).toEqual({
      GoingAway: 1001,
      Unauthorized: 4001,
      Forbidden: 4003,
      NotFound: 4004,
      SlowConsumer: 4008,
      SessionEnded: 4010,
      KeyRevoked: 4011,
      Resync: 4409,
    });
  });
});
