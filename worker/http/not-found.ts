// What a request no route answers gets (docs/protocol.md §2): when its path is a route's under
// other methods, 405 METHOD_NOT_ALLOWED naming them in `Allow`; otherwise 404 NOT_FOUND. The
// routes are read from the app itself (`app.routes`) at the first miss, so none is listed twice.
import type { NotFoundHandler } from "hono";
import type { RouterRoute } from "hono/types";
import { METHOD_NAME_ALL } from "hono/router";
import { TrieRouter } from "hono/router/trie-router";
import { ApiError } from "../../shared/errors.js";

/** The methods `Allow` lists, in this order; HEAD wherever GET is (Hono answers it with the GET route). */
const METHOD_ORDER = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/** 405: the path exists, the method does not; rendered with `Allow` (http/errors.ts). */
export class MethodNotAllowed extends ApiError {
  readonly allow: readonly string[];

  constructor(method: string, allow: readonly string[]) {
    super("METHOD_NOT_ALLOWED", `${method} is not allowed here; allowed: ${allow.join(", ")}`);
    this.allow = allow;
  }
}

/**
 * The app's notFound handler. `routes` is called once, at the first request that misses, when
 * every route is in place. Middleware (`use`, method ALL) is not a route and is left out.
 */
export function routeNotFound(routes: () => readonly RouterRoute[]): NotFoundHandler {
  let byPath: TrieRouter<string> | undefined;
  return (c) => {
    byPath ??= pathRouter(routes());
    const allow = allowedMethods(byPath, c.req.path);
    if (allow.length) throw new MethodNotAllowed(c.req.method, allow);
    throw new ApiError("NOT_FOUND", "no such route");
  };
}

/** Every route's pattern under one key, carrying its method: a match by path alone gives the methods. */
function pathRouter(routes: readonly RouterRoute[]): TrieRouter<string> {
  const router = new TrieRouter<string>();
  for (const { method, path } of routes) if (method !== METHOD_NAME_ALL) router.add("PATH", path, method);
  return router;
}

function allowedMethods(router: TrieRouter<string>, path: string): string[] {
  const methods = new Set(router.match("PATH", path)[0].map(([method]) => method));
  if (methods.has("GET")) methods.add("HEAD");
  return METHOD_ORDER.filter((method) => methods.has(method));
}
