// `/compat/opencode`: OpenCode's PTY API (its `/pty` routes, its PTY WebSocket and its event
// stream) over ptybroker's sessions, so that `@opencode-ai/sdk` and OpenCode's web terminal work
// with only their base URL changed (docs/protocol.md, "Compatibility: OpenCode").
// A thin translation: sessions are made by `createSession` and reached through the same objects
// as `/v1`, so a PTY made here is a session there and the reverse.
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ApiError, CloseCode, type Failure, unwrap } from "../../../shared/errors.js";
import { log } from "../../../shared/log.js";
import type { Session } from "../../../shared/session.js";
import type { KeyScope } from "../../../shared/keys.js";
import { type OwnerPrincipal, tokenPrincipal } from "../../auth/auth.js";
import { missingScope } from "../../auth/keys.js";
import { type TokenRole, mintToken } from "../../auth/tokens.js";
import { type Env, sessionStub, tenantStub } from "../../env.js";
import { apiCors } from "../cors.js";
import { createSession } from "../session-create.js";
import { jsonBodies, validate } from "../validate.js";
import { PTY_GONE, bridge, closedSocket } from "./opencode/bridge.js";
import { translateStream } from "./opencode/events.js";
import {
  ConnectQuery,
  LocationQuery,
  PtyCreateBody,
  PtyUpdateBody,
  errorBody,
  loginArgs,
  ptyId,
  ownerOf,
  statusOf,
  toPty,
} from "./opencode/pty.js";

type App = { Bindings: Env; Variables: { tenant: string; owner: OwnerPrincipal } };
type Ctx = Context<App>;

/** How long a connect ticket lasts, in seconds (OpenCode's own: 60). */
export const TICKET_TTL_SEC = 60;

/** Sessions listed at most (the tenant's quota bounds the live ones far below this). */
const LIST_PAGE = 1000;

export const openCodeRoutes = new Hono<App>();

function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  // Hono's own refusals (a body that is not JSON, say) keep their status.
  if (err instanceof HTTPException && err.status === 400) return new ApiError("INVALID_REQUEST", err.message || "bad request");
  if (err instanceof HTTPException && err.status === 413) return new ApiError("PAYLOAD_TOO_LARGE", "request body too large");
  return new ApiError("INTERNAL", "internal error");
}

// Errors in OpenCode's shapes, with ptybroker's statuses; a 401 asks for Basic, as OpenCode does.
openCodeRoutes.onError((err, c) => {
  const error = toApiError(err);
  if (error.code === "INTERNAL") log.error("http.error", { method: c.req.method, path: c.req.path, error: err });
  const headers: Record<string, string> = {};
  if (error.code === "UNAUTHORIZED") headers["www-authenticate"] = 'Basic realm="ptybroker", charset="UTF-8"';
  if (error.retryAfterSec !== undefined) headers["retry-after"] = String(error.retryAfterSec);
  const id = c.req.param("id");
  return c.json(errorBody(error, id), statusOf(error.code) as ContentfulStatusCode, headers);
});

// Before authentication: preflights from allowed origins (CORS_ORIGINS) are answered without credentials.
openCodeRoutes.use("*", apiCors);
openCodeRoutes.use("*", jsonBodies);
openCodeRoutes.use(
  "*",
  bodyLimit({
    maxSize: 1 << 20,
    onError: () => {
      throw new ApiError("PAYLOAD_TOO_LARGE", "request body too large");
    },
  }),
);

// The tenant's API key, except on connect, which also takes a ticket (a browser cannot set
// headers) and refuses as a socket that closes with 4001.
openCodeRoutes.use("*", async (c, next) => {
  const connect = c.req.path.endsWith("/connect");
  let owner: OwnerPrincipal | null;
  try {
    owner = await ownerOf(c.env, c.req.header("authorization"));
  } catch (error) {
    if (connect && error instanceof ApiError) return closedSocket(4001, error.message);
    throw error;
  }
  if (owner) {
    c.set("owner", owner);
    c.set("tenant", owner.tenant);
  } else if (!connect) {
    throw new ApiError("UNAUTHORIZED", "missing credentials: send the API key as Authorization: Bearer, or as the password of Basic auth");
  }
  await next();
});

/** The tenant, once the caller's key carries `scope` (403 naming it otherwise). */
function scoped(c: Ctx, scope: KeyScope): string {
  if (!c.get("owner").scopes.includes(scope)) throw missingScope(scope);
  return c.get("tenant");
}

/** RPC typing wraps answers as Disposable; the value is the object's own Session or Failure. */
function sessionFrom(answer: unknown): Session {
  return unwrap(answer as Session | Failure);
}

async function sessionOf(c: Ctx, id: string, scope: KeyScope = "sessions:read"): Promise<Session> {
  return sessionFrom(await sessionStub(c.env, scoped(c, scope), id).get());
}

openCodeRoutes.get("/pty", validate("query", LocationQuery), async (c) => {
  // OpenCode lists the PTYs that run (an exited one is gone from its list): starting and running sessions.
  const index = tenantStub(c.env, scoped(c, "sessions:read"));
  const pages = await Promise.all(
    (["starting", "running"] as const).map((status) => index.list({ status, tag: null, limit: LIST_PAGE, after: null })),
  );
  const sessions = pages.flatMap((page) => page.sessions).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  return c.json(sessions.map(toPty));
});

openCodeRoutes.post("/pty", validate("query", LocationQuery), validate("json", PtyCreateBody), async (c) => {
  const { command, args, cwd, title, env } = c.req.valid("json");
  const session = await createSession(c.env, scoped(c, "sessions:write"), {
    command,
    args: loginArgs(command, args),
    cwd,
    env,
    label: title || undefined,
  });
  return c.json(toPty(session));
});

openCodeRoutes.get("/pty/:id", validate("query", LocationQuery), async (c) => {
  return c.json(toPty(await sessionOf(c, ptyId(c.req.param("id")))));
});

openCodeRoutes.put("/pty/:id", validate("query", LocationQuery), validate("json", PtyUpdateBody), async (c) => {
  const { title, size } = c.req.valid("json");
  const id = ptyId(c.req.param("id"));
  const stub = sessionStub(c.env, scoped(c, "sessions:write"), id);
  let session = await sessionOf(c, id, "sessions:write");
  if (title) session = sessionFrom(await stub.patch({ label: title }));
  if (size) session = sessionFrom(await stub.resize(size.cols, size.rows));
  return c.json(toPty(session));
});

// OpenCode's remove ends the PTY and forgets it: the session ends and is purged (pty.exited, then pty.deleted).
openCodeRoutes.delete("/pty/:id", validate("query", LocationQuery), async (c) => {
  const id = ptyId(c.req.param("id"));
  const ended = await sessionStub(c.env, scoped(c, "sessions:write"), id).terminate(true);
  if ("failure" in ended && ended.failure.code === "NOT_FOUND") await tenantStub(c.env, c.get("tenant")).forget(id, null);
  unwrap(ended);
  return c.json(true);
});

// A short-lived ticket for the WebSocket: a writer session token for this session.
openCodeRoutes.post("/pty/:id/connect-token", validate("query", LocationQuery), async (c) => {
  const id = ptyId(c.req.param("id"));
  const tenant = scoped(c, "sessions:write");
  const incarnation = await sessionStub(c.env, tenant, id).incarnation();
  if (incarnation === null) throw new ApiError("NOT_FOUND", `pty ${id} not found`);
  const secret = c.env.TOKEN_SECRET;
  if (!secret) throw new ApiError("INTERNAL", "connect tickets are disabled: TOKEN_SECRET is not set");
  const keyId = c.get("owner").keyId;
  const { token } = await mintToken(secret, { tenant, sessionId: id, incarnation, role: "writer", keyId }, TICKET_TTL_SEC);
  return c.json({ ticket: token, expires_in: TICKET_TTL_SEC });
});

openCodeRoutes.get("/pty/:id/connect", async (c) => {
  if (c.req.header("upgrade")?.toLowerCase() !== "websocket") {
    throw new ApiError("INVALID_REQUEST", "connect expects a WebSocket upgrade");
  }
  // A refusal after the upgrade is a socket that closes with a code: browsers see no status.
  const query = ConnectQuery.safeParse(c.req.query());
  if (!query.success) return closedSocket(1008, query.error.issues[0]?.message ?? "invalid query");
  const raw = c.req.param("id");
  const owner: OwnerPrincipal | undefined = c.get("owner");
  let tenant = owner?.tenant;
  let keyId: string | undefined = owner?.keyId;
  // A key attaches as the owner with sessions:write, as a viewer with only sessions:read.
  let role: "owner" | TokenRole = "owner";
  if (owner && !owner.scopes.includes("sessions:write")) {
    if (!owner.scopes.includes("sessions:read")) return closedSocket(CloseCode.Forbidden, missingScope("sessions:read").message);
    role = "viewer";
  }
  const ticket = query.data.ticket;
  if (!tenant && ticket) {
    let claims: Awaited<ReturnType<typeof tokenPrincipal>>;
    try {
      claims = await tokenPrincipal(c.env, ticket);
    } catch (error) {
      return closedSocket(4001, error instanceof ApiError ? error.message : "invalid or expired ticket");
    }
    if (!claims || claims.sessionId !== raw) return closedSocket(4001, "invalid or expired ticket");
    if ((await sessionStub(c.env, claims.tenant, raw).incarnation()) !== claims.incarnation) {
      return closedSocket(PTY_GONE, "pty not found");
    }
    tenant = claims.tenant;
    keyId = claims.keyId;
    // The ticket's own role: a /v1 viewer link stays a viewer here (it reads, never types).
    role = claims.role;
  }
  if (!tenant) return closedSocket(4001, "missing credentials: an API key in Authorization, or ?ticket= from connect-token");
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(raw)) return closedSocket(PTY_GONE, "pty not found");
  const found = await sessionStub(c.env, tenant, raw).get();
  if ("failure" in found) return closedSocket(PTY_GONE, "pty not found");
  const cursor = query.data.cursor;
  // OpenCode: -1 is live output only; any other negative is 0; absent is everything from 0.
  const from = cursor === -1 ? "live" : Math.max(0, cursor ?? 0);
  return bridge(c.env, { tenant, id: raw, role, from, keyId });
});

openCodeRoutes.get("/event", validate("query", LocationQuery), async (c) => {
  const lastEventId = c.req.header("last-event-id");
  const headers = new Headers();
  if (lastEventId !== undefined && /^\d{1,15}$/.test(lastEventId)) headers.set("x-ptyb-after", lastEventId);
  headers.set("x-ptyb-key", c.get("owner").keyId);
  const res = await tenantStub(c.env, scoped(c, "events:read")).fetch(new Request("https://tenant/events", { headers }));
  if (res.status === 429) throw new ApiError("QUOTA_EXCEEDED", "too many event streams are open for this tenant", 5);
  if (!res.ok || !res.body) throw new ApiError("INTERNAL", "the tenant's events are unavailable");
  return new Response(translateStream(res.body), {
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no" },
  });
});
