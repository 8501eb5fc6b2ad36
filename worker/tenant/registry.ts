// TenantRegistry: one Durable Object for the whole edge, the admin API's list of tenants (id,
// creation time, and a copy of the limits the admin API last set). Only the admin routes call
// it: a tenant's own requests never do (its limits and keys are read from its own Tenant object),
// so it is no bottleneck of the hot path (docs/architecture.md, "Tenants and keys").
import { DurableObject } from "cloudflare:workers";
import { type Failure, fail } from "../../shared/errors.js";
import type { TenantInfo, TenantLimits } from "../../shared/keys.js";
import type { Env } from "../env.js";
import type { RegistryRpc } from "../rpc.js";

interface Row extends Record<string, SqlStorageValue> {
  id: string;
  created_at: string;
  limits: string;
}

function info(row: Row): TenantInfo {
  return { id: row.id, limits: JSON.parse(row.limits) as TenantLimits, createdAt: row.created_at };
}

export class TenantRegistry extends DurableObject<Env> implements RegistryRpc {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS tenants (
      id TEXT PRIMARY KEY,
      created_at TEXT NOT NULL,
      limits TEXT NOT NULL
    )`);
  }

  add(tenant: TenantInfo): TenantInfo | Failure {
    if (this.row(tenant.id)) return fail("CONFLICT", `tenant ${tenant.id} already exists`);
    this.sql.exec("INSERT INTO tenants (id, created_at, limits) VALUES (?, ?, ?)", tenant.id, tenant.createdAt, JSON.stringify(tenant.limits));
    return tenant;
  }

  update(id: string, limits: TenantLimits): TenantInfo | Failure {
    if (!this.row(id)) return fail("NOT_FOUND", `tenant ${id} not found`);
    this.sql.exec("UPDATE tenants SET limits = ? WHERE id = ?", JSON.stringify(limits), id);
    return info(this.row(id) as Row);
  }

  get(id: string): TenantInfo | Failure {
    const row = this.row(id);
    return row ? info(row) : fail("NOT_FOUND", `tenant ${id} not found`);
  }

  /** A page in id order; `nextCursor` is the last id of a full page. */
  list(after: string | null, limit: number): { tenants: TenantInfo[]; nextCursor: string | null } {
    const rows = this.sql.exec<Row>("SELECT * FROM tenants WHERE id > ? ORDER BY id LIMIT ?", after ?? "", limit + 1).toArray();
    const page = rows.slice(0, limit);
    return { tenants: page.map(info), nextCursor: rows.length > limit ? page[page.length - 1].id : null };
  }

  remove(id: string): void {
    this.sql.exec("DELETE FROM tenants WHERE id = ?", id);
  }

  private row(id: string): Row | undefined {
    return this.sql.exec<Row>("SELECT * FROM tenants WHERE id = ?", id).toArray()[0];
  }
}
