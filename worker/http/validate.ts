// Request validation with zod through @hono/zod-validator: a failure becomes INVALID_REQUEST
// with the first issue's path and message, thrown to the app's one onError.
import { zValidator } from "@hono/zod-validator";
import { createMiddleware } from "hono/factory";
import type { z } from "zod";
import { ApiError } from "../../shared/errors.js";

export function validate<T extends z.ZodType, Target extends "json" | "query">(target: Target, schema: T) {
  return zValidator(target, schema, (result) => {
    if (!result.success) {
      const issue = result.error.issues[0];
      const where = issue?.path.length ? `${issue.path.join(".")}: ` : "";
      throw new ApiError("INVALID_REQUEST", `${where}${issue?.message ?? "invalid request"}`);
    }
  });
}

/** A body sent as anything but JSON would otherwise be read as `{}` and silently ignored. */
export const jsonBodies = createMiddleware(async (c, next) => {
  const hasBody = c.req.header("content-length") !== undefined && c.req.header("content-length") !== "0";
  const type = c.req.header("content-type") ?? "";
  if ((hasBody || c.req.header("transfer-encoding")) && !/^application\/json\b/i.test(type)) {
    throw new ApiError("INVALID_REQUEST", "send the body as JSON with Content-Type: application/json");
  }
  await next();
});
