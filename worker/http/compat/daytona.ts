// Daytona's toolbox PTY API under `/compat/daytona/:sandbox` (docs/protocol.md,
// "Compatibility: Daytona"): a thin translation onto the same session objects, tenant index and
// limits as `/v1`. `:sandbox` is accepted and ignored; the tenant comes from the API key
// (`Authorization: Bearer`). Daytona's PTY id is the ptybroker session id of the caller's tenant,
// as it is (the objects are named tenant/id, so another tenant's same id is another session).
// Shapes are in compat/daytona/shapes.ts, the WebSocket in compat/daytona/socket.ts.
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import { ApiError, type Failure, unwrap } from "../../../shared/errors.js";
import { log } from "../../../shared/log.js";
import { type Session, isTerminal } from "../../../shared/session.js";
import { type AuthVariables, bearer, hasScope, keyPrincipal, requireScope } from "../../auth/auth.js";
import { type Env, sessionStub, tenantStub } from "../../env.js";
import type { SessionAsked } from "../../rpc.js";
import type { KeyScope } from "../../../shared/keys.js";
import { CreateSessionBody } from "../schemas.js";
import { createSession } from "../session-create.js";
import { jsonBodies, validate } from "../validate.js";
import { daytonaSocket, refusedSocket } from "./daytona/socket.js";
import {
  DAYTONA_ID,
  PtyConnectQuery,
  PtyCreateBody,
  PtyResizeBody,
  SANDBOX,
  daytonaErrorBody,
  ptyInfo,
  shown,
  workspaceCwd,
} from "./daytona/shapes.js";

type App = { Bindings: Env; Variables: AuthVariables };
type Ctx = Context<App>;

/** Most a Daytona request body may be (a create's envs are the largest part). */
const MAX_BODY_BYTES = 256 * 1024;

export const daytonaRoutes = new Hono<App>();

// Errors in Daytona's shape, with the status ptybroker's code has (Retry-After kept).
daytonaRoutes.onError((err, c) => {
  const error = toApiError(err, c);
  const headers: Record<string, string> = {};
  if (error.retryAfterSec !== undefined) headers["retry-after"] = String(error.retryAfterSec);
  return c.json(daytonaErrorBody(error.status, error.message, c.req.path, c.req.method), error.status as 400, headers);
});

// The tenant's API key as Bearer, and nothing else: Daytona's surface is the owner's.
daytonaRoutes.use("/:sandbox/*", async (c, next) => {
  if (!SANDBOX.test(c.req.param("sandbox"))) throw new ApiError("NOT_FOUND", "no such sandbox");
  const key = bearer(c.req.header("authorization"));
  if (!key) throw new ApiError("UNAUTHORIZED", "missing credentials: send Authorization: Bearer <api key>");
  const owner = await keyPrincipal(c.env, key);
  if (!owner) throw new ApiError("UNAUTHORIZED", "invalid API key");
  c.set("principal", owner);
  c.set("tenant", owner.tenant);
  await next();
});

daytonaRoutes.use("/:sandbox/*", jsonBodies);
daytonaRoutes.use("/:sandbox/*", bodyLimit({ maxSize: MAX_BODY_BYTES, onError: () => {
  throw new ApiError("PAYLOAD_TOO_LARGE", "request body too large");
} }));

function toApiError(err: unknown, c: Ctx): ApiError {
  if (err instanceof ApiError) return err;
  // Hono's own refusals (a body that is not JSON, ...).
  if (err instanceof HTTPException && err.status < 500) return new ApiError("INVALID_REQUEST", err.message || "invalid request");
  log.error("http.error", { method: c.req.method, path: c.req.path, error: err });
  return new ApiError("INTERNAL", "internal error");
}

/** The path's PTY id, or 404 as for an id no session has. */
function ptyId(c: Ctx): string {
  const id = c.req.param("id") ?? "";
  if (!DAYTONA_ID.test(id)) throw new ApiError("NOT_FOUND", "PTY session not found");
  return id;
}

/**
 * The tenant's session named in the path, as Daytona sees it: a terminal not yet ended, else
 * 404; once the key carries `scope` (403 naming it otherwise).
 */
async function shownSession(c: Ctx, scope: KeyScope) {
  const id = ptyId(c);
  const stub = sessionStub(c.env, requireScope(c.get("principal"), scope), id);
  const found = await stub.get();
  if ("failure" in found || !shown(found)) throw new ApiError("NOT_FOUND", "PTY session not found");
  return { id, stub, session: found };
}

async function info(stub: ReturnType<typeof sessionStub>, session: Session) {
  // RPC typing wraps results as Disposable; the value is the object's own SessionAsked or Failure.
  return ptyInfo(session, unwrap((await stub.asked()) as SessionAsked | Failure));
}

daytonaRoutes.post("/:sandbox/process/pty", validate("json", PtyCreateBody), async (c) => {
  const tenant = requireScope(c.get("principal"), "sessions:write");
  const body = c.req.valid("json");
  const asked = CreateSessionBody.safeParse({ id: body.id, cwd: workspaceCwd(body.cwd), env: body.envs, cols: body.cols, rows: body.rows });
  if (!asked.success) {
    const issue = asked.error.issues[0];
    const field = { env: "envs" }[String(issue?.path[0])] ?? issue?.path.join(".");
    throw new ApiError("INVALID_REQUEST", `${field ? `${field}: ` : ""}${issue?.message ?? "invalid request"}`);
  }
  const create = async () => {
    try {
      return await createSession(c.env, tenant, { ...asked.data, lazy: body.lazyStart === true });
    } catch (error) {
      if (error instanceof ApiError && error.code === "CONFLICT") throw new ApiError("CONFLICT", `PTY session with ID '${body.id}' already exists`);
      throw error;
    }
  };
  let session: Session;
  try {
    session = await create();
  } catch (error) {
    // Daytona forgets a PTY once it ended, so its id may be used again: an ended session of
    // this tenant with the id is purged (its record and output go) and the create goes ahead.
    if (!(error instanceof ApiError) || error.code !== "CONFLICT") throw error;
    const stub = sessionStub(c.env, tenant, body.id);
    const existing = await stub.get();
    if ("failure" in existing || !isTerminal(existing.status)) throw error;
    await stub.terminate(true);
    session = await create();
  }
  if (session.status === "failed" || session.status === "lost") {
    throw new ApiError("INTERNAL", `failed to start PTY session: ${session.error ?? session.status}`);
  }
  return c.json({ sessionId: session.id }, 201);
});

// The tenant's terminals not yet ended, oldest first, from its index (one call per page).
daytonaRoutes.get("/:sandbox/process/pty", async (c) => {
  const tenant = requireScope(c.get("principal"), "sessions:read");
  const index = tenantStub(c.env, tenant);
  const sessions: Session[] = [];
  for (const status of ["starting", "running"] as const) {
    let after: number | null = null;
    for (;;) {
      const page = await index.list({ status, tag: null, limit: 1000, after });
      sessions.push(...page.sessions.filter(shown));
      if (page.nextCursor === null) break;
      after = Number(page.nextCursor);
    }
  }
  sessions.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  const infos = await Promise.all(
    sessions.map(async (s) => {
      const asked = await sessionStub(c.env, tenant, s.id).asked();
      // Ended or purged since the index row was read: no longer Daytona's.
      return "failure" in asked ? null : ptyInfo(s, asked);
    }),
  );
  return c.json({ sessions: infos.filter((i) => i !== null) });
});

daytonaRoutes.get("/:sandbox/process/pty/:id", async (c) => {
  const { stub, session } = await shownSession(c, "sessions:read");
  return c.json(await info(stub, session));
});

// Ends the process as /v1's DELETE does (SIGHUP, SIGKILL after the grace); the record and the
// output stay for /v1 (SESSION_RETAIN_SEC), while Daytona's surface forgets the PTY.
daytonaRoutes.delete("/:sandbox/process/pty/:id", async (c) => {
  const { stub } = await shownSession(c, "sessions:write");
  unwrap(await stub.terminate(false));
  return c.json({ message: "PTY session deleted" });
});

daytonaRoutes.post("/:sandbox/process/pty/:id/resize", validate("json", PtyResizeBody), async (c) => {
  const { cols, rows } = c.req.valid("json");
  const id = ptyId(c);
  const stub = sessionStub(c.env, requireScope(c.get("principal"), "sessions:write"), id);
  const found = await stub.get();
  if ("failure" in found || !found.pty) throw new ApiError("NOT_FOUND", "PTY session not found");
  // Daytona answers 410 for a PTY that has ended.
  if (!shown(found)) return c.json(daytonaErrorBody(410, `PTY session '${id}' has terminated and cannot be resized`, c.req.path, c.req.method), 410);
  return c.json(await info(stub, unwrap((await stub.resize(cols, rows)) as Session | Failure)));
});

// Any session of the tenant may be connected, an ended one too (its output, then its exit).
daytonaRoutes.get("/:sandbox/process/pty/:id/connect", validate("query", PtyConnectQuery), async (c) => {
  if (c.req.header("upgrade")?.toLowerCase() !== "websocket") {
    throw new ApiError("INVALID_REQUEST", "connect expects a WebSocket upgrade");
  }
  const id = ptyId(c);
  const principal = c.get("principal");
  // A key attaches as the owner with sessions:write, as a viewer with only sessions:read.
  const writer = hasScope(principal, "sessions:write");
  const stub = sessionStub(c.env, requireScope(principal, writer ? "sessions:write" : "sessions:read"), id);
  const found = await stub.get();
  if ("failure" in found || !found.pty) return refusedSocket(c.req.raw, `Failed to connect to PTY session: PTY session ${id} not found`);
  return daytonaSocket(c.req.raw, stub, c.req.valid("query").from, { role: writer ? "owner" : "viewer", keyId: principal.keyId });
});

// Anything else under a sandbox: Daytona's 404.
daytonaRoutes.all("/:sandbox/*", () => {
  throw new ApiError("NOT_FOUND", "not found");
});
