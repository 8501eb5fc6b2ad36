// What each Durable Object answers over RPC: the methods the Worker's routes and the other
// objects call on its stub, and the types those calls take and give. env.ts types the bindings
// with these interfaces and each object's class implements its own, so a call on a stub is
// type-checked while neither this file nor env.ts imports an object's module (they all import
// env.ts). Sockets and streams are not RPC: they reach an object by `fetch`.
import type { CommandRecord, ExpectResult, RunResult, ScreenSnapshot } from "../shared/agent.js";
import type { Failure } from "../shared/errors.js";
import type { KeyInfo, KeyScope, TenantInfo, TenantLimits } from "../shared/keys.js";
import type { OutputStream, PoolMessage } from "../shared/protocol.js";
import type { AuditEntry, AuditPage, WebhookDelivery, WebhookInfo } from "../shared/webhooks.js";
import type {
  EndReason,
  Session,
  SessionPage,
  SessionLimits,
  SessionSandbox,
  SessionStatus,
  SessionTimers as TimerSettings,
  SignalName,
  SpawnSpec,
  TenantEventType,
} from "../shared/session.js";

// ---- PtySession (session/pty-session.ts): one per tenant and session id ----

export interface SessionRpc extends Rpc.DurableObjectBranded {
  create(request: CreateRequest): Promise<Session | Failure>;
  get(): Session | Failure;
  /** Which incarnation of the id this is (session tokens name it), or null when there is none. */
  incarnation(): string | null;
  /** What the session was created with (env included): for the owner's routes only. */
  asked(): SessionAsked | Failure;
  input(bytes: Uint8Array, idempotency?: { key: string; bodyHash: string }, eof?: boolean): InputAnswer | Failure;
  expect(request: ExpectQuery): Promise<ExpectResult | Failure>;
  run(command: string, timeoutMs: number): Promise<RunResult | Failure>;
  commandList(limit: number): { commands: CommandRecord[] } | Failure;
  screen(): Promise<ScreenSnapshot | Failure>;
  resize(cols: number, rows: number): Promise<Session | Failure>;
  signal(signal: SignalName): { signal: string } | Failure;
  wait(timeoutMs: number): Promise<Session | Failure>;
  terminate(purge: boolean, reason?: EndReason): Promise<Session | Failure>;
  patch(patch: SessionPatch): Session | Failure;
  /** The pool found this session's runner silent (pool/runner-pool.ts). */
  runnerSilent(): Promise<void>;
  /**
   * A runner trimmed this incarnation's log (the tenant bound) while no host link could say so:
   * the log now starts at `from` (docs/protocol.md §7a).
   */
  logTrimmed(incarnation: string, from: number): void;
  output(from: number | undefined, to: number | undefined, stream?: OutputStream): Promise<OutputRange | Failure>;
  outputStreams(maxBytes: number): Promise<StreamsRange | Failure>;
  /** The key was revoked: every client socket and stream opened with it goes (4011); answers how many. */
  closeKey(keyId: string): number;
}

export interface CreateRequest {
  tenant: string;
  id: string;
  createdAt: string;
  tags: string[];
  label: string | null;
  spec: SpawnSpec;
  timers: TimerSettings;
  /** What a `timeoutSec` that passes sends first: SIGHUP when absent, SIGKILL for exec. */
  timeoutSignal?: "SIGKILL";
  /** exec: keep the first this many output bytes in memory for its answer (session/output-capture.ts). */
  captureBytes?: number;
  /** Held: placed on a runner only when its first client connects (Daytona's `lazyStart`). */
  lazy?: boolean;
}

/** What a session was created with (the compatibility routes show it): its spawn spec and whether it was held. */
export interface SessionAsked {
  spec: SpawnSpec;
  lazy: boolean;
}

/** PATCH: the timers (seconds, 0 = off), label and tags. */
export type SessionPatch = Partial<TimerSettings> & { label?: string | null; tags?: string[] };

/** What REST input answers (docs/protocol.md §3). */
export interface InputAnswer {
  bytes: number;
  offset: number;
}

/** `POST .../expect`: a pattern to wait for in the output from `from` (default: now). */
export interface ExpectQuery {
  pattern: string;
  literal: boolean;
  flags: string;
  from: number | undefined;
  timeoutMs: number;
}

/** `GET .../output`: the bytes of [from, to). */
export interface OutputRange {
  from: number;
  to: number;
  bytes: Uint8Array<ArrayBuffer>;
}

/** The output of [from, to), stdout and stderr apart. */
export interface StreamsRange {
  from: number;
  to: number;
  stdout: Uint8Array<ArrayBuffer>;
  stderr: Uint8Array<ArrayBuffer>;
}

// ---- Tenant (tenant/tenant.ts): one per tenant ----

export interface TenantRpc extends Rpc.DurableObjectBranded {
  reserve(request: ReserveRequest): Promise<Reserved | Failure>;
  record(session: Session, event: TenantEventType | null): void;
  forget(id: string, session: Session | null): void;
  list(options: ListOptions): SessionPage;
  /** The tenant's limits as data (each absent = the deployment's default). */
  settings(): TenantLimits;
  /** Sets the tenant's limits (admin API); they hold from its next request. */
  configure(tenant: string, limits: TenantLimits): void;
  /** Ends and purges every session, revokes every key, forgets the limits (admin DELETE). */
  dissolve(tenant: string): Promise<{ sessions: number; keys: number }>;
  /** A minted key's check on the hot path: its hash, expiry and scopes. */
  checkKey(keyId: string, hash: string): KeyCheck;
  /** Whether a key still stands (a session token it minted is checked by this). */
  keyAlive(keyId: string): KeyCheck;
  addKey(tenant: string, key: NewKeyRow): KeyInfo | Failure;
  listKeys(tenant: string): KeyInfo[];
  /** Deletes the key and closes what was opened with it; NOT_FOUND for an unknown id. */
  revokeKey(keyId: string): Promise<{ keyId: string; closed: number } | Failure>;
  /** A new webhook (CONFLICT beyond the tenant's cap); the URL was checked by the route. */
  addHook(tenant: string, hook: NewWebhook): Promise<WebhookInfo | Failure>;
  listHooks(): WebhookInfo[];
  getHook(id: string): WebhookInfo | Failure;
  /** Deletes the hook and its deliveries: nothing more is sent to it. */
  removeHook(id: string): Promise<{ id: string } | Failure>;
  hookDeliveries(id: string): { deliveries: WebhookDelivery[] } | Failure;
  /** Appends to the audit log (the Worker's routes, once an action's outcome is known). */
  audit(entry: NewAuditEntry): void;
  auditPage(after: number, limit: number): AuditPage;
}

/** A webhook to store: its signing secret is kept (the edge signs with it), shown only by the create. */
export interface NewWebhook {
  id: string;
  url: string;
  events: TenantEventType[];
  secret: string;
}

/** An audit entry as a route writes it: the tenant numbers it. */
export type NewAuditEntry = Omit<AuditEntry, "id">;

/** What a minted key's check found. */
export type KeyCheck = { ok: true; scopes: KeyScope[] } | { ok: false; expiredAt: string | null };

/** A key to store: the hash of its secret, never its text. */
export interface NewKeyRow {
  keyId: string;
  name: string;
  hash: string;
  scopes: KeyScope[];
  expiresAt: string | null;
}

/**
 * A reserve's answer: the most a session may get of each sandbox limit (the tenant's maxima), and
 * the tenant's own workspace size and log bound (absent: the runner's defaults).
 */
export interface Reserved {
  ok: true;
  max: Partial<SessionLimits> & Pick<TenantLimits, "diskMiB" | "logBytes">;
}

export interface ReserveRequest {
  tenant: string;
  id: string;
  createdAt: string;
  tags: string[];
  maxActive: number;
  maxPerMinute?: number;
  /** The sandbox limits the create asks for: each at most the tenant's maximum (400 beyond). */
  asked?: Partial<SessionLimits>;
}

export interface ListOptions {
  status: SessionStatus | null;
  tag: string | null;
  limit: number;
  /** The seq after which to continue (from `nextCursor`), or null for the start. */
  after: number | null;
}

// ---- TenantRegistry (tenant/registry.ts): one for the whole edge, admin API only ----

export interface RegistryRpc extends Rpc.DurableObjectBranded {
  add(tenant: TenantInfo): TenantInfo | Failure;
  update(id: string, limits: TenantLimits): TenantInfo | Failure;
  get(id: string): TenantInfo | Failure;
  list(after: string | null, limit: number): { tenants: TenantInfo[]; nextCursor: string | null };
  remove(id: string): void;
}

// ---- RunnerPool (pool/runner-pool.ts): one for the whole edge ----

export interface PoolRpc extends Rpc.DurableObjectBranded {
  place(order: Extract<PoolMessage, { type: "spawn" }>): { runnerId: string } | Failure;
  dispatch(
    order: Extract<PoolMessage, { type: "serve" | "purge" }>,
    tenant: string,
    preferred: string | null,
  ): { runnerId: string } | Failure;
  runners(): RunnerInfo[];
}

export interface RunnerInfo {
  runnerId: string;
  capacity: number;
  sessions: number;
  draining: boolean;
  /** How the runner said it contains sessions (its `register`); null when it did not say. */
  sandbox: SessionSandbox | null;
}
