// CORS for the REST API (`/v1/*`, `/compat/*`, `/healthz`): pages on the origins in `CORS_ORIGINS`
// (comma-separated; `*` for any; default none) may call it from a browser with a session token
// or an API key in `Authorization`. Preflights from those origins are answered here, before
// authentication (a browser sends them without credentials). Requests from any other origin
// pass through untouched: no CORS header, so the browser keeps the answer from the page.
// WebSocket upgrades are left alone (browsers do not apply CORS to them; a WebSocket carries
// its credential explicitly, `?token=`, never a cookie).
import type { MiddlewareHandler } from "hono";
import { cors } from "hono/cors";
import { createMiddleware } from "hono/factory";
import { log } from "../../shared/log.js";
import type { Env } from "../env.js";

export const CORS_ALLOW_HEADERS = ["Authorization", "Content-Type", "Last-Event-ID", "Idempotency-Key"];
// PUT: OpenCode's compatibility surface retitles and resizes with it (docs/protocol.md, "Compatibility: OpenCode").
export const CORS_ALLOW_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"];
export const CORS_EXPOSE_HEADERS = ["X-Offset-From", "X-Offset-To", "X-Offset", "X-Cols", "X-Rows", "Retry-After"];
/** How long a browser may cache a preflight's answer. */
const PREFLIGHT_MAX_AGE_SEC = 600;

/** `*`, or the set of allowed origins (each as `new URL(entry).origin`). */
export type AllowedOrigins = "*" | ReadonlySet<string>;

/** Parses CORS_ORIGINS; entries that are not origins are logged and ignored. */
export function parseOrigins(raw: string | undefined): AllowedOrigins {
  const entries = (raw ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean);
  if (entries.includes("*")) return "*";
  const origins = new Set<string>();
  for (const entry of entries) {
    let origin: string | null = null;
    try {
      const url = new URL(entry);
      if ((url.protocol === "http:" || url.protocol === "https:") && (url.pathname === "/" || url.pathname === "")) {
        origin = url.origin;
      }
    } catch {
      // not a URL
    }
    if (origin) origins.add(origin);
    else log.warn("cors.config", { outcome: "bad_origin", entry });
  }
  return origins;
}

function allows(allowed: AllowedOrigins, origin: string): boolean {
  return allowed === "*" || allowed.has(origin);
}

/** Parsed settings and their middleware, per isolate, keyed by the raw CORS_ORIGINS text. */
const cache = new Map<string, { allowed: AllowedOrigins; handler: MiddlewareHandler }>();

function settings(raw: string | undefined) {
  const key = raw ?? "";
  let entry = cache.get(key);
  if (!entry) {
    const allowed = parseOrigins(raw);
    const handler = cors({
      // Called only for allowed origins (see below): `*` answers `*`, a list echoes the origin.
      origin: allowed === "*" ? "*" : (origin) => origin,
      allowMethods: CORS_ALLOW_METHODS,
      allowHeaders: CORS_ALLOW_HEADERS,
      exposeHeaders: CORS_EXPOSE_HEADERS,
      maxAge: PREFLIGHT_MAX_AGE_SEC,
    });
    entry = { allowed, handler };
    cache.set(key, entry);
  }
  return entry;
}

export const apiCors = createMiddleware<{ Bindings: Env }>(async (c, next) => {
  const origin = c.req.header("origin");
  if (!origin || c.req.header("upgrade")?.toLowerCase() === "websocket") return next();
  const { allowed, handler } = settings(c.env.CORS_ORIGINS);
  if (!allows(allowed, origin)) return next();
  return handler(c, next);
});
