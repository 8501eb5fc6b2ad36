// The public session API (docs/protocol.md §3). Handlers validate, then delegate to the session's
// Durable Object; failures are thrown and rendered by the app's single onError.
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { base64ToBytes } from "../../shared/base64.js";
import { ApiError, type ErrorBody, ErrorStatus, type Failure, unwrap } from "../../shared/errors.js";
import { type Access, type AuthVariables, type Principal, authenticate, checkAccess, requireScope } from "../auth/auth.js";
import { missingScope } from "../auth/keys.js";
import { mintToken } from "../auth/tokens.js";
import { wantsRaw, withoutSocketCompression } from "../io/sockets.js";
import { type Env, limits, sessionStub, tenantStub } from "../env.js";
import { createSession } from "./session-create.js";
import { type AuditWhat, actorOf, audit, audited } from "./audit.js";
import type { AuditAction } from "../../shared/webhooks.js";
import type { OutputRange } from "../rpc.js";
import type { ScreenSnapshot } from "../../shared/agent.js";
import { ExpectMatcher } from "../../shared/expect-matcher.js";
import {
  CommandsQuery,
  ConnectQuery,
  CreateSessionBody,
  ExpectBody,
  IDEMPOTENCY_KEY,
  DeleteQuery,
  InputBody,
  ListQuery,
  OutputQuery,
  PatchSessionBody,
  RecordingQuery,
  ResizeBody,
  RunBody,
  ScreenQuery,
  SESSION_ID,
  SignalBody,
  StreamQuery,
  TokenBody,
  WaitQuery,
} from "./schemas.js";
import { jsonBodies, validate } from "./validate.js";

type App = { Bindings: Env; Variables: AuthVariables };

function sessionId(raw: string): string {
  if (!SESSION_ID.test(raw)) throw new ApiError("NOT_FOUND", `session ${raw} not found`);
  return raw;
}

type Ctx = Context<App>;

/**
 * The session named in the path, once the caller may `access` it (null: the route checked): the
 * tenant's API key within its scopes (403 naming the one it lacks); a session token only acts on
 * its own session (another session's is 401, like a bad credential, and so is a token for an
 * earlier incarnation of the id) and only within its role (403).
 */
async function session(c: Ctx, rawId: string, access: Access | null) {
  const id = sessionId(rawId);
  const principal = c.get("principal");
  if (principal.role !== "owner" && principal.sessionId !== id) {
    throw new ApiError("UNAUTHORIZED", "this session token is for another session");
  }
  const stub = sessionStub(c.env, principal.tenant, id);
  if (principal.role !== "owner" && (await stub.incarnation()) !== principal.incarnation) {
    throw new ApiError("UNAUTHORIZED", "this session token's session no longer exists");
  }
  if (access !== null) checkAccess(principal, access);
  return { id, stub };
}

/**
 * How a client attaches (connect, stream): a key with `sessions:write` as the owner (it types), one
 * with only `sessions:read` as a viewer; a session token in its own role.
 */
function attachRole(principal: Principal): "owner" | "writer" | "viewer" {
  if (principal.role !== "owner") return principal.role;
  if (principal.scopes.includes("sessions:write")) return "owner";
  if (principal.scopes.includes("sessions:read")) return "viewer";
  throw missingScope("sessions:read");
}

/**
 * Headers only the route sets for the session's object (callers cannot reach it directly): the
 * role, the key a client came with (its sockets close when that key is revoked), and the
 * tenant's own clients-per-session limit where the admin API set one.
 */
async function clientHeaders(c: Ctx, headers: Headers, role: string): Promise<Headers> {
  const principal = c.get("principal");
  headers.set("x-ptyb-role", role);
  headers.delete("x-ptyb-key");
  headers.delete("x-ptyb-max-clients");
  if (principal.keyId !== undefined) headers.set("x-ptyb-key", principal.keyId);
  const own = await tenantStub(c.env, principal.tenant).settings();
  if (own.clientsPerSession !== undefined) headers.set("x-ptyb-max-clients", String(own.clientsPerSession));
  return headers;
}

/**
 * A client let in with a minted key (or a token it minted) whose key was revoked meanwhile: its
 * revoke may have reached this session before the client was there, so the key is asked again
 * once the client is, and the session closes what that key opened (4011). A revoke deletes the
 * key before it reaches the sessions, so either this check or the revoke's own closing sees the
 * client. `API_KEYS` keys are not revoked this way and are not asked.
 */
async function closeIfRevoked(c: Ctx, stub: ReturnType<typeof sessionStub>): Promise<void> {
  const { keyId, tenant } = c.get("principal");
  if (keyId === undefined || !keyId.startsWith("k")) return;
  const alive = await tenantStub(c.env, tenant).keyAlive(keyId);
  if (!alive.ok) await stub.closeKey(keyId);
}

/** What an audit entry about this session says of who acts (http/audit.ts). */
function auditOf(c: Ctx, action: AuditAction, sessionId: string): AuditWhat {
  const principal = c.get("principal");
  return { tenant: principal.tenant, actor: actorOf(principal), action, sessionId: sessionId.slice(0, 128) };
}

function decodeInput(data: string, encoding: "utf8" | "base64"): Uint8Array {
  if (encoding === "utf8") return new TextEncoder().encode(data);
  const bytes = base64ToBytes(data);
  if (!bytes) throw new ApiError("INVALID_REQUEST", "data: not valid base64");
  return bytes;
}

export const sessionRoutes = new Hono<App>();

sessionRoutes.use("*", authenticate);

sessionRoutes.use("*", jsonBodies);

// JSON bodies are small; input is the largest (base64 or escaped text of MAX_INPUT_BYTES).
sessionRoutes.use("*", async (c, next) =>
  bodyLimit({
    maxSize: limits(c.env).maxInputBytes * 6 + 4096,
    onError: () => {
      throw new ApiError("PAYLOAD_TOO_LARGE", "request body too large");
    },
  })(c, next),
);

sessionRoutes.post("/", validate("json", CreateSessionBody), async (c) => {
  const { timeoutSec, idleTimeoutSec, detachedTimeoutSec, ...body } = c.req.valid("json");
  const id = body.id ?? crypto.randomUUID();
  // A refusal (a key without sessions:write, the quota) is recorded too, with its code.
  const made = await audited(c, auditOf(c, "session.create", id), () => {
    const tenant = requireScope(c.get("principal"), "sessions:write");
    return createSession(c.env, tenant, { ...body, id, timers: { timeoutSec, idleTimeoutSec, detachedTimeoutSec } });
  });
  return c.json(made, 201);
});

// Served from the tenant's index: one call, whatever the number of sessions.
sessionRoutes.get("/", validate("query", ListQuery), async (c) => {
  const { status, tag, limit, cursor } = c.req.valid("query");
  const tenant = requireScope(c.get("principal"), "sessions:read");
  return c.json(await tenantStub(c.env, tenant).list({ status: status ?? null, tag: tag ?? null, limit, after: cursor ?? null }));
});

sessionRoutes.get("/:id", async (c) => {
  const { stub } = await session(c, c.req.param("id"), "read");
  return c.json(unwrap(await stub.get()));
});

sessionRoutes.patch("/:id", validate("json", PatchSessionBody), async (c) => {
  const patch = c.req.valid("json");
  const what = auditOf(c, "session.patch", c.req.param("id"));
  const fields = Object.keys(patch).sort().join(",");
  return c.json(
    await audited(c, { ...what, detail: { fields } }, async () => {
      const { stub } = await session(c, c.req.param("id"), "owner");
      return unwrap(await stub.patch(patch));
    }),
  );
});

sessionRoutes.post("/:id/input", validate("json", InputBody), async (c) => {
  const { data, encoding, eof } = c.req.valid("json");
  const bytes = decodeInput(data, encoding);
  const max = limits(c.env).maxInputBytes;
  if (bytes.byteLength > max) {
    throw new ApiError("PAYLOAD_TOO_LARGE", `input is ${bytes.byteLength} bytes; at most ${max}`);
  }
  const key = c.req.header("idempotency-key");
  if (key !== undefined && !IDEMPOTENCY_KEY.test(key)) {
    throw new ApiError("INVALID_REQUEST", "Idempotency-Key is 1 to 128 visible ASCII characters");
  }
  // The audit entry counts the bytes; what they were is never recorded.
  const what = { ...auditOf(c, "session.input", c.req.param("id")), detail: { bytes: bytes.byteLength, ...(eof ? { eof: true } : {}) } };
  const answer = await audited(c, what, async () => {
    const { stub } = await session(c, c.req.param("id"), "write");
    const idempotency = key === undefined ? undefined : { key, bodyHash: (await sha256Hex(bytes)) + (eof ? ":eof" : "") };
    return unwrap(await stub.input(bytes, idempotency, eof));
  });
  return c.json(answer, 202);
});

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new Uint8Array(bytes)));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

// The agent layer (docs/protocol.md §3, "Agents").

sessionRoutes.post("/:id/expect", validate("json", ExpectBody), async (c) => {
  const { pattern, literal, flags, from, timeoutSec } = c.req.valid("json");
  const invalid = ExpectMatcher.validate(pattern, literal, flags);
  if (invalid) throw new ApiError("INVALID_REQUEST", invalid);
  const { stub } = await session(c, c.req.param("id"), "read");
  return c.json(unwrap(await stub.expect({ pattern, literal, flags, from, timeoutMs: Math.round(timeoutSec * 1000) })));
});

sessionRoutes.post("/:id/run", validate("json", RunBody), async (c) => {
  const { command, timeoutSec } = c.req.valid("json");
  const { stub } = await session(c, c.req.param("id"), "write");
  return c.json(unwrap(await stub.run(command, Math.round(timeoutSec * 1000))));
});

sessionRoutes.get("/:id/commands", validate("query", CommandsQuery), async (c) => {
  const { limit } = c.req.valid("query");
  const { stub } = await session(c, c.req.param("id"), "read");
  return c.json(unwrap(await stub.commandList(limit)));
});

sessionRoutes.get("/:id/screen", validate("query", ScreenQuery), async (c) => {
  const { format } = c.req.valid("query");
  const { stub } = await session(c, c.req.param("id"), "read");
  // RPC typing wraps results as Disposable; the value is the object's own ScreenSnapshot or Failure.
  const { ansi, ...state } = unwrap((await stub.screen()) as ScreenSnapshot | Failure);
  if (format === "json") return c.json(state);
  const headers = { "x-offset": String(state.offset), "x-cols": String(state.cols), "x-rows": String(state.rows) };
  if (format === "text") return c.text(state.lines.join("\n"), 200, headers);
  return c.body(new Uint8Array(new TextEncoder().encode(ansi)), 200, { ...headers, "content-type": "application/octet-stream" });
});

sessionRoutes.post("/:id/resize", validate("json", ResizeBody), async (c) => {
  const { cols, rows } = c.req.valid("json");
  const { stub } = await session(c, c.req.param("id"), "write");
  return c.json(unwrap(await stub.resize(cols, rows)));
});

sessionRoutes.post("/:id/signal", validate("json", SignalBody), async (c) => {
  const { signal } = c.req.valid("json");
  const what = { ...auditOf(c, "session.signal", c.req.param("id")), detail: { signal } };
  const answer = await audited(c, what, async () => {
    const { stub } = await session(c, c.req.param("id"), "write");
    return unwrap(await stub.signal(signal));
  });
  return c.json(answer, 202);
});

sessionRoutes.get("/:id/wait", validate("query", WaitQuery), async (c) => {
  const { timeoutSec } = c.req.valid("query");
  const { stub } = await session(c, c.req.param("id"), "read");
  return c.json(unwrap(await stub.wait(timeoutSec * 1000)));
});

sessionRoutes.delete("/:id", validate("query", DeleteQuery), async (c) => {
  const { purge } = c.req.valid("query");
  const purgeNow = purge === "true" || purge === "1";
  const what = { ...auditOf(c, "session.delete", c.req.param("id")), detail: { purge: purgeNow } };
  const answer = await audited(c, what, async () => {
    const { id, stub } = await session(c, c.req.param("id"), "owner");
    const ended = await stub.terminate(purgeNow);
    // An index row whose session never came to be (a create cut short) goes with DELETE too.
    if ("failure" in ended && ended.failure.code === "NOT_FOUND") await tenantStub(c.env, c.get("tenant")).forget(id, null);
    return unwrap(ended);
  });
  return c.json(answer);
});

sessionRoutes.get("/:id/output", validate("query", OutputQuery), async (c) => {
  const { from, to, stream } = c.req.valid("query");
  if (from !== undefined && to !== undefined && to < from) throw new ApiError("INVALID_REQUEST", "to is before from");
  const { stub } = await session(c, c.req.param("id"), "read");
  // RPC typing wraps results as Disposable; the value is the object's own OutputRange or Failure.
  const range = unwrap((await stub.output(from, to, stream)) as OutputRange | Failure);
  return c.body(range.bytes, 200, {
    "content-type": "application/octet-stream",
    "x-offset-from": String(range.from),
    "x-offset-to": String(range.to),
  });
});

sessionRoutes.get("/:id/stream", validate("query", StreamQuery), async (c) => {
  const lastEventId = c.req.header("last-event-id");
  if (lastEventId !== undefined && !/^\d{1,15}$/.test(lastEventId)) {
    throw new ApiError("INVALID_REQUEST", "Last-Event-ID is an offset");
  }
  const from = lastEventId ?? c.req.valid("query").from;
  const role = attachRole(c.get("principal"));
  const { stub } = await session(c, c.req.param("id"), null);
  // The object reads where to start from this header; callers cannot reach it directly.
  const headers = await clientHeaders(c, new Headers(), role);
  if (from !== undefined) headers.set("x-ptyb-from", from);
  const res = await stub.fetch(new Request("https://session/stream", { headers }));
  await closeIfRevoked(c, stub);
  // A refusal comes back as the object's error body (not found, a start past the end, no slot).
  if (!res.ok) throw await refusal(res);
  return res;
});

/** The ApiError an object's refused stream stands for: the code and message of its error body. */
async function refusal(res: Response): Promise<ApiError> {
  const body = (await res.json().catch(() => null)) as Partial<ErrorBody> | null;
  const code = body?.error?.code;
  if (code && code in ErrorStatus) return new ApiError(code, body.error?.message ?? "cannot stream this session");
  return new ApiError(res.status === 404 ? "NOT_FOUND" : "QUOTA_EXCEEDED", "cannot stream this session");
}

// asciicast v2 of the retained output (docs/protocol.md §3, "Recordings"), streamed by the
// session's object.
sessionRoutes.get("/:id/recording", validate("query", RecordingQuery), async (c) => {
  const { from, to } = c.req.valid("query");
  if (from !== undefined && to !== undefined && to < from) throw new ApiError("INVALID_REQUEST", "to is before from");
  const { stub } = await session(c, c.req.param("id"), "read");
  const url = new URL("https://session/recording");
  if (from !== undefined) url.searchParams.set("from", String(from));
  if (to !== undefined) url.searchParams.set("to", String(to));
  const res = await stub.fetch(new Request(url));
  if (res.status === 404) throw new ApiError("NOT_FOUND", "session not found");
  if (!res.ok) throw await refusal(res);
  return res;
});

sessionRoutes.post("/:id/tokens", validate("json", TokenBody), async (c) => {
  const { role, ttlSec } = c.req.valid("json");
  const minted = await audited(c, { ...auditOf(c, "token.mint", c.req.param("id")), detail: { role, ttlSec } }, async (detail) => {
    const { id, stub } = await session(c, c.req.param("id"), "owner");
    const incarnation = await stub.incarnation();
    if (incarnation === null) throw new ApiError("NOT_FOUND", `session ${id} not found`);
    const secret = c.env.TOKEN_SECRET;
    if (!secret) throw new ApiError("INTERNAL", "session tokens are disabled: TOKEN_SECRET is not set");
    // The token names the key that minted it, and dies with it (auth/auth.ts, tokenPrincipal).
    const keyId = c.get("principal").keyId;
    const { tokenId, ...token } = await mintToken(secret, { tenant: c.get("tenant"), sessionId: id, incarnation, role, keyId }, ttlSec);
    // The token's own id: the audit log names what it does later as `tok:<tokenId>`.
    detail.tokenId = `tok:${tokenId}`;
    return token;
  });
  return c.json(minted, 201);
});

sessionRoutes.get("/:id/connect", validate("query", ConnectQuery), async (c) => {
  if (c.req.header("upgrade")?.toLowerCase() !== "websocket") {
    throw new ApiError("INVALID_REQUEST", "connect expects a WebSocket upgrade");
  }
  const { from, onLag, compress, writer, inputFrom } = c.req.valid("query");
  const { raw } = wantsRaw(c.req.raw);
  const role = attachRole(c.get("principal"));
  const { stub } = await session(c, c.req.param("id"), null);
  // The object reads how the client connects from these headers; callers cannot reach it directly.
  const headers = await clientHeaders(c, new Headers(c.req.raw.headers), role);
  headers.set("x-ptyb-mode", raw ? "raw" : "framed");
  headers.delete("x-ptyb-from");
  headers.delete("x-ptyb-onlag");
  headers.delete("x-ptyb-compress");
  headers.delete("x-ptyb-writer");
  headers.delete("x-ptyb-actor");
  headers.delete("x-ptyb-writer-from");
  if (from !== undefined) headers.set("x-ptyb-from", from);
  if (onLag !== undefined) headers.set("x-ptyb-onlag", onLag);
  // A writer's input is counted under the key behind its credential (the key itself, or the one
  // that minted its token: a page mints one per socket), so another key's socket cannot speak for it.
  if (writer !== undefined && !raw && role !== "viewer") {
    const principal = c.get("principal");
    headers.set("x-ptyb-writer", writer);
    headers.set("x-ptyb-actor", principal.keyId ?? actorOf(principal).id ?? "token");
    headers.set("x-ptyb-writer-from", String(inputFrom ?? 0));
  }
  if (compress === "deflate" && !raw) {
    // Output comes compressed once per chunk (0x06): the object sees no offer of
    // permessage-deflate, and the answer declines it (withoutSocketCompression).
    headers.set("x-ptyb-compress", "deflate");
    headers.delete("sec-websocket-extensions");
  }
  const res = await stub.fetch(new Request("https://session/connect", { headers }));
  await closeIfRevoked(c, stub);
  // A client that may type is recorded when it attaches (viewers are not: they only read).
  if (role !== "viewer") {
    const attached = res.status === 101 ? "ok" : res.status === 404 ? "NOT_FOUND" : res.status === 429 ? "QUOTA_EXCEEDED" : `HTTP_${res.status}`;
    audit(c, { ...auditOf(c, "session.attach", c.req.param("id")), detail: { role, via: "websocket" } }, attached);
  }
  return compress === "deflate" && !raw ? withoutSocketCompression(res) : res;
});
