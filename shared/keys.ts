// Tenants and keys as data (docs/protocol.md, "Tenants and keys"): the scopes a minted key may
// carry, what the edge shows of a key (never its text after the create), and a tenant's limits.
// Shared by the Worker (its checks and routes) and the SDK and CLI (their types).

/** What a key may do; a key minted with none has all of them. */
export const KEY_SCOPES = ["sessions:read", "sessions:write", "events:read", "webhooks:write"] as const;
export type KeyScope = (typeof KEY_SCOPES)[number];

/** A key as listed: its text is shown once, by the create, and stored only as a hash. */
export interface KeyInfo {
  keyId: string;
  name: string;
  /** The key's first, non-secret part (`ptyb.<tenant>.<keyId>`), to tell keys apart. */
  prefix: string;
  scopes: KeyScope[];
  createdAt: string;
  /** Kept to within a minute (the edge writes it at most once a minute per key). */
  lastUsedAt: string | null;
  expiresAt: string | null;
}

/** The create's answer: the key's text, this once. */
export interface MintedKey extends KeyInfo {
  key: string;
}

/**
 * A tenant's limits, each absent = the deployment's default (MAX_SESSIONS_PER_TENANT,
 * MAX_CREATES_PER_MINUTE, MAX_CLIENTS_PER_SESSION, SESSION_LIMITS_MAX; the runner's
 * TENANT_DISK_MIB and TENANT_LOG_BYTES).
 */
export interface TenantLimits {
  /** Sessions not yet ended. */
  sessions?: number;
  createsPerMinute?: number;
  clientsPerSession?: number;
  /** The most a create may ask for, and the most a session gets when it asks for nothing. */
  memoryMiB?: number;
  pids?: number;
  cpus?: number;
  /** The size of the tenant's workspace filesystem on each runner (ENOSPC beyond). */
  diskMiB?: number;
  /** The retained output of all the tenant's sessions together in the output log. */
  logBytes?: number;
}

/** The bounds of `diskMiB` and `logBytes`, here and in the runner's TENANT_DISK_MIB and TENANT_LOG_BYTES. */
export const TENANT_BOUNDS_MIN = { diskMiB: 16, logBytes: 1024 * 1024 } as const;
export const TENANT_BOUNDS_MAX = { diskMiB: 1024 * 1024, logBytes: 2 ** 40 } as const;

/** A tenant as the admin API shows it. */
export interface TenantInfo {
  id: string;
  limits: TenantLimits;
  createdAt: string;
}
