// Request validation for the admin API and `/v1/keys` (docs/protocol.md, "Tenants and keys"):
// tenants' limits, and the keys a tenant holds.
import { z } from "zod";
import { KEY_SCOPES } from "../../shared/keys.js";
import { LIMITS_ASKED, TENANT_BOUNDS } from "../../shared/protocol.js";
import { TENANT_PATTERN } from "../auth/auth.js";
import { KEY_ID } from "../auth/keys.js";

/** A tenant's limits; each absent = the deployment's default. */
const limitFields = {
  sessions: z.number().int().min(1).max(100_000),
  createsPerMinute: z.number().int().min(1).max(100_000),
  // One slot of a session's clients is kept for the tenant's own key: at least two.
  clientsPerSession: z.number().int().min(2).max(1024),
  memoryMiB: LIMITS_ASKED.memoryMiB.unwrap(),
  pids: LIMITS_ASKED.pids.unwrap(),
  cpus: LIMITS_ASKED.cpus.unwrap(),
  // Within the bounds of the runner's TENANT_DISK_MIB and TENANT_LOG_BYTES.
  diskMiB: TENANT_BOUNDS.diskMiB.unwrap(),
  logBytes: TENANT_BOUNDS.logBytes.unwrap(),
};

export const TenantLimitsBody = z.strictObject({
  sessions: limitFields.sessions.optional(),
  createsPerMinute: limitFields.createsPerMinute.optional(),
  clientsPerSession: limitFields.clientsPerSession.optional(),
  memoryMiB: limitFields.memoryMiB.optional(),
  pids: limitFields.pids.optional(),
  cpus: limitFields.cpus.optional(),
  diskMiB: limitFields.diskMiB.optional(),
  logBytes: limitFields.logBytes.optional(),
});

export const TENANT_ID = TENANT_PATTERN;

export const CreateTenantBody = z.strictObject({
  id: z.string().regex(TENANT_PATTERN, "a tenant id is 1 to 64 letters, digits, _ and -"),
  limits: TenantLimitsBody.optional(),
});

/** PATCH: each limit given replaces the tenant's; `null` sets it back to the deployment's default. */
export const PatchTenantBody = z.strictObject({
  limits: z.strictObject({
    sessions: limitFields.sessions.nullable().optional(),
    createsPerMinute: limitFields.createsPerMinute.nullable().optional(),
    clientsPerSession: limitFields.clientsPerSession.nullable().optional(),
    memoryMiB: limitFields.memoryMiB.nullable().optional(),
    pids: limitFields.pids.nullable().optional(),
    cpus: limitFields.cpus.nullable().optional(),
    diskMiB: limitFields.diskMiB.nullable().optional(),
    logBytes: limitFields.logBytes.nullable().optional(),
  }),
});

export const TenantListQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  cursor: z.string().regex(TENANT_PATTERN, "cursor: a nextCursor from a previous page").optional(),
});

export const CreateKeyBody = z.strictObject({
  name: z.string().min(1).max(128),
  scopes: z
    .array(z.enum(KEY_SCOPES, { error: `a scope is one of ${KEY_SCOPES.join(", ")}` }))
    .max(KEY_SCOPES.length)
    .optional(),
  expiresAt: z.iso
    .datetime({ offset: true, error: "expiresAt: an ISO 8601 time, e.g. 2030-01-01T00:00:00Z" })
    .refine((at) => Date.parse(at) > Date.now(), "expiresAt: must be in the future")
    .optional(),
});

export function keyIdParam(raw: string): string | null {
  return KEY_ID.test(raw) ? raw : null;
}
