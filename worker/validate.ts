// Request validation with zod through @hono/zod-validator: a failure becomes INVALID_REQUEST
// with the first issue's path and message, thrown to the app's one onError.
import { zValidator } from "@hono/zod-validator";
import type { z } from "zod";
import { ApiError } from "../shared/errors.js";

export function validate<T extends z.ZodType, Target extends "json" | "query">(target: Target, schema: T) {
  return zValidator(target, schema, (result) => {
    if (!result.success) {
      const issue = result.error.issues[0];
      const where = issue?.path.length ? `${issue.path.join(".")}: ` : "";
      throw new ApiError("INVALID_REQUEST", `${where}${issue?.message ?? "invalid request"}`);
    }
  });
}
